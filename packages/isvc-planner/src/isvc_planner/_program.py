"""Orders waiting together as the solver's program, written from the ledger as it stands.

The bins are a shared device each (what each order takes of each of its capacities, what is left) or a
stock of alike devices taken whole; a device not held yet that draws on a pool's shared counters (a MIG
partition) draws on them once taken. The search's packing is offered as the first solution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import attrs
from isvc_api import DeviceKey
from isvc_ledger import UNITS, Capacity, Device, View, fits

from isvc_planner._joint import Joint, Kind, loss
from isvc_planner._solver import Bin, Option, Problem
from isvc_planner._stock import Stock

__all__ = ["MAX_OPTIONS", "program"]

# The most (order, device) pairs the solver is given: alike devices beyond that are left out of the program.
MAX_OPTIONS = 50_000


def program(
    view: View,
    orders: int,
    kinds: list[Kind],
    devices: list[list[Device]],
    frees: list[list[int]],
    found: Joint,
) -> tuple[Problem, list[list[Device]], list[int | None]]:
    """The batch as the solver's program, from the ledger as it stands: the bins (a shared device each,
    or a stock of alike devices taken whole), what each order takes of each, the counters left; the
    devices of each bin; and the search's packing as a first solution."""
    chosen = _search_packing(view, kinds, devices, frees, found)
    fitting = [[j for j in range(orders) if kind.fits[j] is not None] for kind in kinds]
    units = [{j: fit[1] for j, fit in enumerate(kind.fits) if fit is not None} for kind in kinds]
    shelves = _shelves(kinds, devices, frees, fitting, {d.key for d in chosen.values()})
    cap = _cap(kinds, shelves, units, orders)
    counters = _Counters(view)
    built = _Built()
    for k, free, members in shelves:
        kind = kinds[k]
        fit_here = [j for j in fitting[k] if units[k][j] <= free]
        if not fit_here:
            continue
        if not kind.shareable:
            built.add_whole(kind, fit_here, members, orders, counters)
            continue
        for device in members[: min(len(members), cap, len(fit_here))]:
            built.add_shared(view, kind, free, device, fit_here, counters)
    where = {d.key: b for b, group in enumerate(built.slots) for d in group}
    start = [where.get(chosen[j].key) if j in chosen else None for j in range(orders)]
    problem = Problem(orders, tuple(built.bins), built.costed(), tuple(counters.left))
    return problem, built.slots, start


def _search_packing(
    view: View, kinds: list[Kind], devices: list[list[Device]], frees: list[list[int]], found: Joint
) -> dict[int, Device]:
    """The device each order of the search's packing would take, in its order, on a copy of the ledger."""
    sim: dict[DeviceKey, int] = {}
    shelf = Stock(devices, frees, lambda d: sim.get(d.key, view.ledger.room(d.key)))
    chosen: dict[int, Device] = {}
    for j in found.order:
        choice = found.choices[j]
        fit = kinds[choice[0]].fits[j] if choice is not None else None
        if choice is None or fit is None:
            continue
        device = shelf.take(*choice)
        if device is not None:
            chosen[j] = device
            sim[device.key] = choice[1] - fit[1] if kinds[choice[0]].shareable else 0
            shelf.put(choice[0], device)
    return chosen


def _shelves(
    kinds: list[Kind],
    devices: list[list[Device]],
    frees: list[list[int]],
    fitting: list[list[int]],
    starting: set[DeviceKey],
) -> list[tuple[int, int, list[Device]]]:
    """Per kind, devices by free units: (kind, free units, devices), of each the search's first, then by
    name."""
    shelves: list[tuple[int, int, list[Device]]] = []
    for k, kind in enumerate(kinds):
        by_free: dict[int, list[Device]] = {}
        for device, free in zip(devices[k], frees[k], strict=True):
            if fitting[k] and free > 0 and (kind.shareable or free == UNITS):
                by_free.setdefault(free, []).append(device)
        for free, members in sorted(by_free.items()):
            members.sort(key=lambda d: (d.key not in starting, d.sort_key()))
            shelves.append((k, free, members))
    return shelves


def _cap(
    kinds: list[Kind], shelves: list[tuple[int, int, list[Device]]], units: list[dict[int, int]], orders: int
) -> int:
    """How many shared devices of one shelf go into the program: at most as many as orders could go
    there, fewer (halved) while the program would hold more than MAX_OPTIONS options."""

    def room_for(k: int, free: int) -> int:
        return sum(1 for u in units[k].values() if u <= free)

    cap = orders
    while cap > 1 and (
        sum(min(len(m), cap, room_for(k, f)) * room_for(k, f) for k, f, m in shelves if kinds[k].shareable)
        > MAX_OPTIONS
    ):
        cap = max(1, cap // 2)
    return cap


class _Counters:
    """The pools' shared counters the program's devices draw on, numbered as first met, and what is left."""

    def __init__(self, view: View) -> None:
        self._ledger = view.ledger
        self._index: dict[tuple[str, str, str, str], int] = {}  # (driver, pool, set, counter) -> index
        self.left: list[int] = []

    def draws(self, device: Device) -> tuple[tuple[int, int], ...]:
        """(counter, amount) the device draws once taken; nothing when someone holds it already."""
        if not device.consumes or self._ledger.held(device.key):
            return ()
        pool = (device.driver, device.pool)
        out = []
        for counter_set, counter, amount in device.consumes:
            name = (*pool, counter_set, counter)
            if name not in self._index:
                self._index[name] = len(self.left)
                self.left.append(self._ledger.counters_left(pool).get((counter_set, counter), 0))
            out.append((self._index[name], amount))
        return tuple(out)


@dataclass
class _Built:
    """The bins written so far, the devices of each, the options and their (class rank, loss)."""

    bins: list[Bin] = field(default_factory=list)
    slots: list[list[Device]] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    losses: list[tuple[int, int, float]] = field(default_factory=list)  # (option, class rank, loss)

    def add_whole(
        self, kind: Kind, fit_here: list[int], members: list[Device], orders: int, counters: _Counters
    ) -> None:
        """Whole devices: one stock, or one bin each when they draw on counters."""
        groups = [[d] for d in members] if any(d.consumes for d in members) else [members[:orders]]
        for group in groups:
            b = len(self.bins)
            self.bins.append(Bin(count=len(group), draws=counters.draws(group[0])))
            self.slots.append(group)
            for j in fit_here:
                fit = kind.fits[j]
                assert fit is not None
                self.losses.append((len(self.options), fit[0], float(loss(kind, UNITS, UNITS))))
                self.options.append(Option(j, b))

    def add_shared(
        self, view: View, kind: Kind, free: int, device: Device, fit_here: list[int], counters: _Counters
    ) -> None:
        """A device shared by capacity: a bin of what is left of each capacity, and what each order takes."""
        left = view.ledger.left(device.key)
        if left is None:
            return
        names = sorted(left)
        b = len(self.bins)
        self.bins.append(Bin(1, tuple(Fraction(left[c]) for c in names), counters.draws(device)))
        self.slots.append([device])
        capacities = {c: Capacity(left[c]) for c in names}
        for j in fit_here:
            fit = kind.fits[j]
            assert fit is not None
            take = view.ledger.share_take(device, fit[1])
            if take is None or not fits({}, take, capacities):
                continue
            self.losses.append((len(self.options), fit[0], float(loss(kind, free, fit[1]))))
            self.options.append(Option(j, b, tuple(Fraction(take[c]) for c in names)))

    def costed(self) -> tuple[Option, ...]:
        """The options with their tie-breaking cost in [0, 1): class rank first, then loss."""
        options = list(self.options)
        top_rank = max((r for _, r, _ in self.losses), default=0) + 1
        top_loss = max((x for _, _, x in self.losses), default=0.0) + 1.0
        for c, rank, lost in self.losses:
            options[c] = attrs.evolve(options[c], cost=(rank + lost / top_loss) / top_rank)
        return tuple(options)
