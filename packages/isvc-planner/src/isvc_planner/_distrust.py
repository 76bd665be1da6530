"""Refusals by kube-scheduler where the ledger saw room: no claim of that size or larger is offered there
until the cluster changes there.

A refusal stands while nobody else's holding on the device (or on the partitions sharing its counters) went
or shrank, the pool was not published again and its time is not up. The refused order's own moves there do
not end it: the order moving away is not the cluster changing (`Ledger.quiet`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from isvc_api import DeviceKey, OrderKey
from isvc_ledger import Fleet, Ledger

__all__ = ["Distrust"]

# device -> (until, refused units or None for whole, the order, others' releases then, the device then)
_Known = tuple[float, int | None, OrderKey | None, int, int]


class Distrust:
    """The scheduler's refusals that stand, by device."""

    def __init__(self, fleet: Fleet, ledger: Ledger) -> None:
        self.fleet = fleet
        self.ledger = ledger
        self._known: dict[DeviceKey, _Known] = {}
        ledger.quiet = self.refused_near

    def learn(self, keys: Iterable[DeviceKey], units: int | None, ttl: float, order: OrderKey | None) -> bool:
        """The scheduler refused a claim of `order` for `units` shares (None: whole devices) on these devices
        while the ledger saw room: no claim of that size or larger is offered on them until a holding of
        someone else there is released or shrinks, the pool is published again, or `ttl` passes.
        True when this is news (not already known for as much or less)."""
        until = time.monotonic() + ttl
        news = False
        for key in keys:
            device = self.fleet.devices.get(key)
            if device is None:
                continue
            known = self._known.get(key)
            standing = known is not None and self._stands(key, known)
            if not standing or not _at_most(known[1] if known else None, units):
                news = True
                self._known[key] = (until, units, order, self._releases(key), id(device))
            else:
                assert known is not None
                self._known[key] = (until, *known[1:])
        return news

    def standing(self) -> dict[DeviceKey, int | None]:
        """Devices a refusal still stands on: the smallest share refused (None: whole devices)."""
        for key, known in list(self._known.items()):
            if not self._stands(key, known):
                del self._known[key]
        return {key: known[1] for key, known in self._known.items()}

    def refused_order(self, key: DeviceKey) -> OrderKey | None:
        """The order whose claim the scheduler refused on a distrusted device."""
        known = self._known.get(key)
        return known[2] if known is not None else None

    def _stands(self, key: DeviceKey, known: _Known) -> bool:
        until, _, _, releases, ident = known
        device = self.fleet.devices.get(key)
        return (
            until > time.monotonic()
            and device is not None
            and id(device) == ident
            and self._releases(key) == releases
        )

    def refused_near(self, key: DeviceKey, order: OrderKey | None) -> bool:
        """Whether a refusal on the device or its counter siblings names `order` (its own releases there do
        not end the refusal)."""
        return order is not None and any(
            (r := self._known.get(k)) is not None and r[2] == order for k in self.fleet.near(key)
        )

    def _releases(self, key: DeviceKey) -> int:
        """How many holdings went or changed on a device and its counter siblings, the refused order's own
        left out (`Ledger.quiet`): a refusal stands while none did."""
        return sum(self.ledger.released.get(k, 0) for k in self.fleet.near(key))

    def freed_at(self, key: DeviceKey) -> float:
        """When (seconds since the epoch) a holding of someone else on a device or its counter siblings last
        went or changed (0: never since the planner started): room newer than a refusal was not refused."""
        return max((self.ledger.freed.get(k, 0.0) for k in self.fleet.near(key)), default=0.0)


def _at_most(known: int | None, units: int | None) -> bool:
    """Whether a refusal already known for `known` units covers one for `units` (None: whole devices)."""
    if known is None:
        return units is None
    return units is None or known <= units
