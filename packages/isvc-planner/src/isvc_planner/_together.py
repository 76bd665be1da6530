"""Orders that wait together placed jointly: the most of them that fit, by the bounded search of `_joint`,
then the solver (`_solver`) within its budget, outside the books' lock; each order on a device its class and
policy admit (first classes tried first)."""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from typing import Protocol

from isvc_api import DeviceKey, OrderKey, PlacementMode, SharingMode
from isvc_ledger import Device, View
from isvc_planner_client import PlanResponse

from isvc_planner._inventory import Inventory
from isvc_planner._joint import Joint, Kind, most_placed
from isvc_planner._order import Candidate, Order
from isvc_planner._program import program
from isvc_planner._search import fit, passes
from isvc_planner._solver import Problem, Solution, solve
from isvc_planner._stock import Kinds, Stock

__all__ = ["Placer", "place_together"]

log = logging.getLogger("isvc_planner")
Answers = list[PlanResponse | None]


class Placer(Protocol):
    """What joint placement needs of the planner: its one-order answer and its solver settings."""

    inventory: Inventory
    solver_seconds: float
    on_solver: Callable[[str], None] | None
    said: set[str]

    def place(self, view: View, o: Order) -> PlanResponse:
        """One order on the books as they stand (a refusal, or preemption)."""

    def answer(self, view: View, o: Order, found: Candidate, victims: list[OrderKey]) -> PlanResponse:
        """The answer of a placement found, reserved."""


def place_together(
    placer: Placer,
    batch: list[Order],
    where: list[int],
    answers: Answers,
    budget: int,
    ends: float,
    known: Kinds | None,
) -> None:
    """The most orders of a batch placed together: the search, then the solver if time is left and the
    search did not prove its packing the best; answers[where[j]] is batch[j]'s, None if left out.
    `known`: the batch's kinds, when the books have not changed since they were made."""
    needs = [o.need.required for o in batch]
    with placer.inventory.reading() as view:
        kinds, devices, frees, stock = known or kinds_of(view, batch)
        found = most_placed(needs, kinds, stock, budget)
        seconds = ends - time.monotonic()
        if found.complete or seconds <= 0:
            _take_found(placer, view, batch, where, answers, kinds, devices, frees, found)
            return
        problem, slots, start = program(view, len(batch), kinds, devices, frees, found)
        version = view.version
    solution = solve(problem, seconds, start)
    with placer.inventory.reading() as view:
        taken = solution.placed > found.placed and _take_solved(
            placer, view, batch, where, answers, problem, slots, solution
        )
        if not taken:
            if view.version != version:  # the books moved while the solver ran: search them again
                kinds, devices, frees, stock = kinds_of(view, batch)
                found = most_placed(needs, kinds, stock, budget)
            _take_found(placer, view, batch, where, answers, kinds, devices, frees, found)
        _solved(placer, solution, found.placed, len(batch), taken)


def _solved(placer: Placer, solution: Solution, floor: int, orders: int, taken: bool) -> None:
    """Count the solver's outcome; a failure, a budget spent for nothing or a packing the books no longer
    admit is logged the first time (then at debug level: the count says how often)."""
    if taken:
        outcome = "optimal" if solution.status == "optimal" else "better"
    elif solution.status == "failed":
        outcome = "failed"
    elif solution.placed > floor:
        outcome = "stale"  # more orders, but the books changed under it: the search's packing instead
    else:
        outcome = "optimal" if solution.status == "optimal" else "limit"
    if placer.on_solver is not None:
        placer.on_solver(outcome)
    words = {
        "failed": f"the solver failed ({solution.detail})",
        "limit": f"the solver found no packing better than the search's within its {placer.solver_seconds:g} s",
        "stale": "the solver's packing no longer fitted the ledger when it was done (it changed meanwhile)",
    }.get(outcome)
    if words is None:
        log.debug(
            "the solver placed %d of %d orders (%s); the search %d", solution.placed, orders, outcome, floor
        )
        return
    level = logging.WARNING if outcome not in placer.said else logging.DEBUG
    placer.said.add(outcome)
    log.log(
        level,
        "%s: %d of %d waiting orders placed together by the search instead (bound %d, %.1f s); "
        "logged once, counted in isvc_planner_solver_runs_total",
        words,
        floor,
        orders,
        solution.bound,
        solution.seconds,
    )


def _take_solved(
    placer: Placer,
    view: View,
    orders: list[Order],
    where: list[int],
    answers: Answers,
    problem: Problem,
    slots: list[list[Device]],
    solution: Solution,
) -> bool:
    """Reserve the solver's packing if the books, as they are now, admit all of it; False if not."""
    stocks = {b: iter(group) for b, group in enumerate(slots)}
    takes: list[tuple[int, Device, tuple[int, PlacementMode, SharingMode], int]] = []
    for j, b in enumerate(solution.bins):
        if b is None:
            continue
        # a device shared by capacity holds each order sent there; a stock gives one device to each
        device = slots[b][0] if problem.bins[b].left else next(stocks[b], None)
        found = fit(device, orders[j].ask) if device is not None else None
        rank = next((r for r, c in enumerate(orders[j].classes) if device and c in device.classes), None)
        if device is None or found is None or rank is None:
            return False
        takes.append((j, device, found, rank))
    asked = [(d.key, d.share_request(f[0]) if f[2] == SharingMode.SHARES else None) for _, d, f, _ in takes]
    if not view.ledger.admits(asked):
        return False
    for j, device, (units, mode, sharing), rank in takes:
        o = orders[j]
        answers[where[j]] = placer.answer(
            view, o, Candidate(o.classes[rank], (device,), units, mode, sharing, ()), []
        )
    return True


def _take_found(
    placer: Placer,
    view: View,
    orders: list[Order],
    where: list[int],
    answers: Answers,
    kinds: list[Kind],
    devices: list[list[Device]],
    frees: list[list[int]],
    found: Joint,
) -> None:
    """Reserve the search's packing, in its order: each order on the first device of its kind with that
    many units free. Partitions of one GPU draw on shared counters, so an earlier choice of the batch can
    leave none of the kind with that room: then the one-order answer."""
    shelf = Stock(devices, frees, lambda d: view.ledger.room(d.key))
    for j in found.order:
        choice = found.choices[j]
        if choice is None:
            continue
        o = orders[j]
        k, free = choice
        rank = kinds[k].fits[j]
        assert rank is not None
        device = shelf.take(k, free)
        if device is None:
            answers[where[j]] = placer.place(view, o)
            continue
        placed = fit(device, o.ask)
        assert placed is not None
        units, mode, sharing = placed
        candidate = Candidate(o.classes[rank[0]], (device,), units, mode, sharing, ())
        answers[where[j]] = placer.answer(view, o, candidate, [])
        shelf.put(k, device)


def kinds_of(view: View, orders: list[Order]) -> Kinds:
    """The devices with room these orders could take one of, grouped into kinds, with free units per kind
    (the class index gives the devices with room; full ones could take none of them)."""
    found: dict[DeviceKey, tuple[Device, int]] = {}
    for cls in dict.fromkeys(c for o in orders for c in o.classes):
        for gkey, group in view.index.groups(cls).items():
            if gkey[0] < 0:
                continue  # no memory published: never placed alone
            entries = group.entries
            for free, sk in entries[bisect.bisect_left(entries, (1,)) :]:
                device = group.devices[sk]
                found.setdefault(device.key, (device, free))
    selectors = sorted({o.ask.selector for o in orders if o.ask.selector})
    distrusted = set().union(*(o.ask.distrust for o in orders)) if orders else set()
    kept = set().union(*(o.ask.kept for o in orders)) if orders else set()
    sorter = _Sorter(view, orders)
    for device, free in sorted(found.values(), key=lambda pair: pair[0].sort_key()):
        # Devices alike in every respect the orders' filters read give the same fits: computed once.
        profile = (
            device.memory,
            device.shareable,
            device.type,
            device.classes,
            device.compute_capability,
            tuple(view.classes.selects(e, device) is True for e in selectors) if selectors else (),
            device.group[4],
            device.key in distrusted,
            device.key in kept,
        )
        sorter.file(profile, device, free)
    return sorter.kinds, sorter.devices, sorter.frees, sorter.stock


class _Sorter:
    """Devices filed into kinds by what they give each order (`kinds_of`)."""

    def __init__(self, view: View, orders: list[Order]) -> None:
        self.view, self.orders = view, orders
        self.index: dict[tuple[object, ...], int] = {}
        self.profiles: dict[tuple[object, ...], int | None] = {}  # profile -> its kind (None: fits none)
        self.kinds: list[Kind] = []
        self.devices: list[list[Device]] = []
        self.frees: list[list[int]] = []
        self.stock: list[dict[int, int]] = []

    def file(self, profile: tuple[object, ...], device: Device, free: int) -> None:
        if profile in self.profiles:
            k = self.profiles[profile]
        else:
            k = self.profiles[profile] = self._kind(device)
        if k is None:
            return
        self.devices[k].append(device)
        self.frees[k].append(free)
        self.stock[k][free] = self.stock[k].get(free, 0) + 1

    def _kind(self, device: Device) -> int | None:
        fits = tuple(fits_one(self.view, o, device) for o in self.orders)
        if all(f is None for f in fits):
            return None
        sig = (device.memory, device.shareable, device.type, device.group[4], fits)
        k = self.index.get(sig)
        if k is None:
            k = self.index[sig] = len(self.kinds)
            assert device.memory is not None
            self.kinds.append(Kind(memory=device.memory, shareable=device.shareable, fits=fits))
            self.devices.append([])
            self.frees.append([])
            self.stock.append({})
        return k


def fits_one(view: View, o: Order, device: Device) -> tuple[int, int] | None:
    """(index of the order's first class admitting the device, units it takes there), or None."""
    for rank, cls in enumerate(o.classes):
        if cls in device.classes:
            if not passes(view, device, o.ask):
                return None
            found = fit(device, o.ask)
            return None if found is None else (rank, found[0])
    return None
