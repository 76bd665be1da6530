"""Devices with room, by class and group, sorted by free units: what a placement search walks.

Devices of one group are interchangeable for placement (`Device.group`); within a group, devices are kept
sorted by their free units, and those fully free are listed per pool (tensor parallel takes devices of one
node). Devices out of service are not indexed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from isvc_api import DeviceKey

from isvc_ledger._device import UNITS, Device, GroupKey

__all__ = ["Group", "RoomIndex"]


class Group:
    """Devices of one group admitted by one class, sorted by free units; fully free ones per pool."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, str]] = []
        self.devices: dict[str, Device] = {}
        self.full_free: dict[str, set[str]] = {}

    def add(self, device: Device, free: int) -> None:
        """Index one device at its free units."""
        sk = device.sort_key()
        self.devices[sk] = device
        bisect.insort(self.entries, (free, sk))
        if free == UNITS:
            self.full_free.setdefault(device.pool, set()).add(sk)

    def replace(self, gone: set[str], added: list[tuple[Device, int]]) -> None:
        """Take the devices of `gone` (sort keys) out and put `added` in, sorting once."""
        if gone:
            self.entries = [e for e in self.entries if e[1] not in gone]
            for pool in list(self.full_free):
                self.full_free[pool] -= gone
                if not self.full_free[pool]:
                    del self.full_free[pool]
            for sk in gone:
                self.devices.pop(sk, None)
        entries = []
        for device, free in added:
            sk = device.sort_key()
            self.devices[sk] = device
            entries.append((free, sk))
            if free == UNITS:
                self.full_free.setdefault(device.pool, set()).add(sk)
        entries.sort()
        self.entries += entries
        self.entries.sort()  # two sorted runs: one merge

    def remove(self, device: Device, free: int) -> None:
        """Take one device out (indexed at `free`)."""
        sk = device.sort_key()
        self.devices.pop(sk, None)
        i = bisect.bisect_left(self.entries, (free, sk))
        if i < len(self.entries) and self.entries[i] == (free, sk):
            del self.entries[i]
        pool = self.full_free.get(device.pool)
        if pool is not None:
            pool.discard(sk)
            if not pool:
                del self.full_free[device.pool]


class RoomIndex:
    """Each class's groups of devices in service, by free units (kept as room changes)."""

    def __init__(self) -> None:
        self._index: dict[str, dict[GroupKey, Group]] = {}
        self.indexed: dict[DeviceKey, int] = {}  # free units a device was indexed with

    def groups(self, device_class: str) -> dict[GroupKey, Group]:
        """The placement index of one class (not to be changed by the caller)."""
        return self._index.get(device_class, {})

    def _group(self, device_class: str, key: GroupKey) -> Group:
        groups = self._index.setdefault(device_class, {})
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group()
        return group

    def add(self, device: Device, free: int) -> None:
        """Index a device in service at its free units."""
        if device.tainted:
            return
        self.indexed[device.key] = free
        for name in device.classes:
            self._group(name, device.group).add(device, free)

    def remove(self, device: Device) -> None:
        """Take a device out of the index, if it is in."""
        free = self.indexed.pop(device.key, None)
        if free is None:
            return
        for name in device.classes:
            group = self._index.get(name, {}).get(device.group)
            if group is not None:
                group.remove(device, free)

    def readd_many(self, devices: list[Device], count: Callable[[Device], int]) -> bool:
        """Index many devices at their room counted anew (a listing applied): each group sorted once.
        Whether any indexed before has more room now."""
        # By the devices' set of classes (one object for devices alike) and group: expanded to classes after.
        changes: dict[tuple[frozenset[str], GroupKey], tuple[set[str], list[tuple[Device, int]]]] = {}
        grew = False
        indexed = self.indexed
        for device in devices:
            key = device.key
            free = count(device)
            old = indexed.pop(key, None)
            new = None if device.tainted else free
            if new is not None:
                indexed[key] = new
            if old == new:
                continue
            grew = grew or (old is not None and new is not None and new > old)
            slot = (device.classes, device.group)
            change = changes.get(slot)
            if change is None:
                change = changes[slot] = (set(), [])
            if old is not None:
                change[0].add(device.sort_key())
            if new is not None:
                change[1].append((device, new))
        for (classes, gkey), (gone, added) in changes.items():
            for name in classes:
                self._group(name, gkey).replace(gone, added)
        return grew
