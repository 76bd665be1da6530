"""Devices of each kind by the units they have free: the shelf a packing's choices are taken from."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from isvc_ledger import Device

from isvc_planner._joint import Kind

__all__ = ["Kinds", "Stock"]

# Kinds, their devices (by name), each device's free units then, and how many devices have how many free.
Kinds = tuple[list[Kind], list[list[Device]], list[list[int]], list[dict[int, int]]]


class Stock:
    """Devices of each kind by the units they have free, the first by name first. A device found with
    other room than it was filed under (taken meanwhile, or a partition whose counters a sibling took) is
    filed again where it belongs."""

    def __init__(
        self,
        devices: Sequence[Sequence[Device]],
        frees: Sequence[Sequence[int]],
        room: Callable[[Device], int],
    ) -> None:
        self.room = room
        self._by: dict[tuple[int, int], list[tuple[str, Device]]] = {}
        for kind, members in enumerate(devices):  # listed by name: each list is a heap already
            for device, free in zip(members, frees[kind], strict=True):
                self._by.setdefault((kind, free), []).append((device.sort_key(), device))

    def take(self, kind: int, free: int) -> Device | None:
        """The first device of `kind` with `free` units free, taken off the shelf; None when there is none."""
        heap = self._by.get((kind, free))
        while heap:
            _, device = heapq.heappop(heap)
            now = self.room(device)
            if now == free:
                return device
            self.put(kind, device)
        return None

    def put(self, kind: int, device: Device) -> None:
        """File a device again under the room it has now."""
        heapq.heappush(self._by.setdefault((kind, self.room(device)), []), (device.sort_key(), device))
