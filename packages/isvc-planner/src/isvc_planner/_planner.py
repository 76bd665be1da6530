"""Placement of orders on the ledger: best fit, classes in policy order, preemption by priority.

Policy (least fragmentation): a model that fits one device never spans several. Free memory is seen
as pieces (a shareable device's free shares, an untaken whole device); the placement chosen is the one
that lowers the sum of squared free pieces least. On shareable devices that is best fit (the device
with the least free memory that still holds the order), so partially used devices fill first and
large empty ones stay whole; a whole device (or MIG partition) is taken only when that costs less
than a share, as for an order that nearly fills it. Ties go to partially used devices, then to the
smaller device, then to node/pool/device name. Devices the order already holds win over all others,
so a replan does not move a running order. Tensor parallel (2, 4, 8 devices of one node) is tried only
when no device of the class is large enough; it takes the smallest device size and count that hold
the model, on the node with the fewest free devices that suffice.

Orders that wait together (`plan_many`) are placed jointly: the most of them that fit, by the bounded
search of `_joint`, each on a device its class and policy admit (first classes tried first).
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from isvc_api import (
    AcceleratorPolicy,
    Fit,
    MemoryRuntime,
    Placement,
    PlacementMode,
    Reason,
    Refusal,
    RuntimeRequirements,
    SharingMode,
    share_in_range,
)
from isvc_planner_client import (
    GIB,
    OrderRef,
    PlanRequest,
    PlanResponse,
    QuantityError,
    Reservation,
    Reservations,
    ReservedDevice,
    SchedulerRefusal,
    SelectorError,
    Victim,
    gib,
    parse_quantity,
)

from isvc_planner._capacity import quantity_text
from isvc_planner._estimate import MemoryNeed, estimate, memory_need
from isvc_planner._inventory import UNITS, Device, DeviceKey, GroupKey, Inventory, OrderKey, _Group
from isvc_planner._joint import Joint, Kind, most_placed
from isvc_planner._order import Ask, Candidate, Order
from isvc_planner._program import program
from isvc_planner._refusals import Findings, Survey, observe_survey, refusal_for
from isvc_planner._solver import Problem, Solution, solve
from isvc_planner._stock import Kinds, Stock

__all__ = ["ClaimShape", "Planner", "judge_plan"]

_POLICY = "accelerator policy"
_EVERY_SHARE = tuple(s for s in range(1, UNITS + 1) if share_in_range(s))  # what a policy naming none permits
log = logging.getLogger("isvc_planner")


@dataclass(frozen=True)
class ClaimShape:
    """One kind of device claim the order could be given: a class, devices of one profile, units.

    Built for asking the scheduler directly whether a refusal is true: where the planner said no,
    a claim of each shape should find no room either.
    """

    device_class_name: str
    selectors: tuple[str, ...]
    count: int
    shares: int | None  # None: whole devices

    def claim_spec(self) -> dict[str, object]:
        """The resource.k8s.io/v1 ResourceClaimSpec of one request named `gpu`."""
        exactly: dict[str, object] = {
            "deviceClassName": self.device_class_name,
            "allocationMode": "ExactCount",
            "count": self.count,
            "selectors": [{"cel": {"expression": e}} for e in self.selectors],
        }
        if self.shares is not None:
            exactly["capacity"] = {"requests": {"shares": str(self.shares)}}
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _profile_selector(device: Device) -> str:
    """CEL admitting the devices of `device`'s profile: driver, type, product, memory, sharing."""
    d = device.driver
    caps, attrs = f"device.capacity['{d}']", f"device.attributes['{d}']"
    parts = [
        f"device.driver == '{d}'",
        f"'memory' in {caps}",
        f"{caps}.memory.compareTo(quantity('{device.memory}')) == 0",
        f"{'' if device.shareable else '!'}('shares' in {caps})",
    ]
    if device.type is not None:
        parts.append(f"'type' in {attrs} && {attrs}.type == '{device.type}'")
    if device.product is not None:
        parts.append(f"'productName' in {attrs} && {attrs}.productName == '{device.product}'")
    return " && ".join(parts)


# How long room the ledger saw appear after a refusal may go untried by kube-scheduler: it retries an
# unschedulable pod at once on a change that may make room, after its backoff otherwise (podMaxBackoffSeconds,
# 10 by default: kubernetes v1.36.3 pkg/scheduler/apis/config/v1/defaults.go), and a loaded control plane
# shows the pod's binding later still (measured: over 10 s at load 10 on 2 cores). Room that appeared less than
# this long ago, after the refusal, is room the scheduler may not have tried yet: its refusal predates it.
SCHEDULER_RETRY = 30.0
# The most orders of one priority placed together at once (the joint search's depth is the number of
# orders); more waiting ones are placed together in further batches of this many, in the order they came.
MAX_JOINT = 200
# Seconds the solver may take for one pass of orders waiting together (`plan_many`), every priority
# together: the controller's client waits 10 s for an answer (isvc_planner_client.PlannerClient), and on
# the large packing instances of `nox -s bench` this reaches the acceptance figures (packages/isvc-planner
# README, "Packing quality").
SOLVER_SECONDS = 2.0


def _semver(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in str(text).split(".")[:3])


class Planner:
    """Plans orders against one Inventory; remembers plans briefly as reservations."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        reservation_ttl: float = 120.0,
        context: int | None = None,
        distrust_ttl: float = 600.0,
        on_disagreement: Callable[[], None] | None = None,
        solver_seconds: float = SOLVER_SECONDS,
        on_solver: Callable[[str], None] | None = None,
    ) -> None:
        self.inventory = inventory
        self.reservation_ttl = reservation_ttl
        self.context = context
        self.distrust_ttl = distrust_ttl
        self.on_disagreement = on_disagreement
        self.solver_seconds = solver_seconds  # 0: orders waiting together get the search's packing only
        # Told each solver run's outcome: optimal (proven), better (more orders than the search, not proven),
        # limit (no better packing within the budget), failed, or stale (the ledger changed meanwhile).
        self.on_solver = on_solver
        self._said: set[str] = set()  # solver outcomes logged already
        self._surveys: dict[tuple[str, str | None, str | None], Survey] = {}
        # order -> (devices refused, units asked (UNITS: whole), where, the scheduler's words): the last
        # refusal while it stands.
        self._refused: dict[OrderKey, tuple[list[DeviceKey], int, str, str]] = {}
        # order -> (the refusal last reported: its condition's time and words, when it was first reported here).
        self._heard: dict[OrderKey, tuple[tuple[float | None, str], float]] = {}

    # ------------------------------------------------------------------ entry point

    def plan(self, request: PlanRequest) -> PlanResponse:
        """A placement with estimates, a refusal, and the orders to release first (if any)."""
        inv = self.inventory
        with inv.lock:
            inv.expire()
            prepared = self._prepare(request)
            return prepared if isinstance(prepared, PlanResponse) else self._place(prepared)

    def plan_many(self, requests: Sequence[PlanRequest], budget: int = 20_000) -> list[PlanResponse]:
        """Answers for orders that wait together, placed jointly so that the most of them fit.

        Higher priorities go first. Within one priority, orders holding devices are replanned one by one
        (they keep what they hold), then orders that need several devices; the rest are placed together:
        the greedy floor and the bounded search of `most_placed` (`budget` nodes), then, unless that
        search proved its packing the best, the solver (`_solver`) within what is left of
        `solver_seconds`, outside the ledger's lock. The solver's packing is taken only when it places
        more orders and the ledger, as it is then, admits all of it; orders left out get the one-order
        answer (a refusal, or preemption).
        """
        inv = self.inventory
        answers: list[PlanResponse | None] = [None] * len(requests)
        ends = time.monotonic() + self.solver_seconds
        prepared: dict[int, Order] = {}
        first: dict[OrderKey, int] = {}
        with inv.lock:
            inv.expire()
            for i, request in enumerate(requests):
                if first.setdefault((request.order.namespace, request.order.name), i) != i:
                    continue  # an order named twice is planned once; later copies get the same answer
                p = self._prepare(request)
                if isinstance(p, PlanResponse):
                    answers[i] = p
                else:
                    prepared[i] = p
        for priority in sorted({o.priority for o in prepared.values()}, reverse=True):
            level = [i for i, o in prepared.items() if o.priority == priority]
            self._plan_level([prepared[i] for i in level], level, answers, budget, ends)
        for i, request in enumerate(requests):
            answers[i] = answers[first[(request.order.namespace, request.order.name)]]
        return [a if a is not None else PlanResponse() for a in answers]

    def _plan_level(
        self,
        orders: list[Order],
        where: list[int],
        answers: list[PlanResponse | None],
        budget: int,
        ends: float,
    ) -> None:
        """Place the orders of one priority together (`plan_many`); answers[where[j]] is orders[j]'s."""
        inv = self.inventory
        with inv.lock:
            alone = [
                j for j, o in enumerate(orders) if o.ask.prefer or o.ask.refused or self._undecidable_any(o)
            ]
            rest = [j for j in range(len(orders)) if j not in set(alone)]
            several: list[int] = []
            kinds: Kinds | None = None
            if len(rest) > 1:  # one order alone keeps the one-order path
                kinds = self._kinds([orders[j] for j in rest])
                several = [j for n, j in enumerate(rest) if all(k.fits[n] is None for k in kinds[0])]
            for j in alone + several:
                answers[where[j]] = self._place(orders[j])
        joint = [j for j in rest if j not in set(several)] if kinds is not None else []
        if alone or several or len(joint) > MAX_JOINT:
            kinds = None  # placements changed the stock, or the batches are not these orders
        for at in range(0, len(joint), MAX_JOINT):  # batches as they came, each on what the last left
            batch = joint[at : at + MAX_JOINT]
            if len(batch) > 1:
                self._place_together(
                    [orders[j] for j in batch], [where[j] for j in batch], answers, budget, ends, kinds
                )
        with inv.lock:  # left out of every packing: the one-order answer (a refusal, or preemption)
            for j in rest:
                if answers[where[j]] is None:
                    answers[where[j]] = self._place(orders[j])

    def _place_together(
        self,
        batch: list[Order],
        where: list[int],
        answers: list[PlanResponse | None],
        budget: int,
        ends: float,
        known: Kinds | None = None,
    ) -> None:
        """The most orders of a batch placed together: the search, then the solver if time is left and the
        search did not prove its packing the best; answers[where[j]] is batch[j]'s, None if left out.
        `known`: the batch's kinds, when the ledger has not changed since they were made."""
        inv = self.inventory
        needs = [o.need.required for o in batch]
        with inv.lock:
            kinds, devices, frees, stock = known or self._kinds(batch)
            found = most_placed(needs, kinds, stock, budget)
            seconds = ends - time.monotonic()
            if found.complete or seconds <= 0:
                self._take_found(batch, where, answers, kinds, devices, frees, found)
                return
            problem, slots, start = program(inv, len(batch), kinds, devices, frees, found)
            version = inv.version
        solution = solve(problem, seconds, start)
        with inv.lock:
            taken = solution.placed > found.placed and self._take_solved(
                batch, where, answers, problem, slots, solution
            )
            if not taken:
                if inv.version != version:  # the ledger moved while the solver ran: search it again
                    kinds, devices, frees, stock = self._kinds(batch)
                    found = most_placed(needs, kinds, stock, budget)
                self._take_found(batch, where, answers, kinds, devices, frees, found)
            self._solved(solution, found.placed, len(batch), taken)

    def _solved(self, solution: Solution, floor: int, orders: int, taken: bool) -> None:
        """Count the solver's outcome; a failure, a budget spent for nothing or a packing the ledger no
        longer admits is logged the first time (then at debug level: the count says how often)."""
        if taken:
            outcome = "optimal" if solution.status == "optimal" else "better"
        elif solution.status == "failed":
            outcome = "failed"
        elif solution.placed > floor:
            outcome = "stale"  # more orders, but the ledger changed under it: the search's packing instead
        else:
            outcome = "optimal" if solution.status == "optimal" else "limit"
        if self.on_solver is not None:
            self.on_solver(outcome)
        words = {
            "failed": f"the solver failed ({solution.detail})",
            "limit": f"the solver found no packing better than the search's within its {self.solver_seconds:g} s",
            "stale": "the solver's packing no longer fitted the ledger when it was done (it changed meanwhile)",
        }.get(outcome)
        if words is None:
            log.debug(
                "the solver placed %d of %d orders (%s); the search %d",
                solution.placed,
                orders,
                outcome,
                floor,
            )
            return
        level = logging.WARNING if outcome not in self._said else logging.DEBUG
        self._said.add(outcome)
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
        self,
        orders: list[Order],
        where: list[int],
        answers: list[PlanResponse | None],
        problem: Problem,
        slots: list[list[Device]],
        solution: Solution,
    ) -> bool:
        """Reserve the solver's packing if the ledger, as it is now, admits all of it; False if not."""
        inv = self.inventory
        stocks = {b: iter(group) for b, group in enumerate(slots)}
        takes: list[tuple[int, Device, tuple[int, PlacementMode, SharingMode], int]] = []
        for j, b in enumerate(solution.bins):
            if b is None:
                continue
            # a device shared by capacity holds each order sent there; a stock gives one device to each
            device = slots[b][0] if problem.bins[b].left else next(stocks[b], None)
            found = self._fit(device, orders[j].ask) if device is not None else None
            rank = next((r for r, c in enumerate(orders[j].classes) if device and c in device.classes), None)
            if device is None or found is None or rank is None:
                return False
            takes.append((j, device, found, rank))
        asked = [
            (d.key, d.share_request(f[0]) if f[2] == SharingMode.SHARES else None) for _, d, f, _ in takes
        ]
        if not inv.admits(asked):
            return False
        for j, device, (units, mode, sharing), rank in takes:
            o = orders[j]
            candidate = Candidate(o.classes[rank], (device,), units, mode, sharing, ())
            answers[where[j]] = self._answer(o.request, o.key, o.priority, o.need, candidate, [])
        return True

    def _take_found(
        self,
        orders: list[Order],
        where: list[int],
        answers: list[PlanResponse | None],
        kinds: list[Kind],
        devices: list[list[Device]],
        frees: list[list[int]],
        found: Joint,
    ) -> None:
        """Reserve the search's packing, in its order."""
        shelf = Stock(devices, frees, lambda d: self.inventory.room(d.key))
        for j in found.order:
            choice = found.choices[j]
            if choice is not None:
                answers[where[j]] = self._take(orders[j], j, kinds, shelf, choice)

    def shapes(self, request: PlanRequest) -> list[ClaimShape]:
        """Every claim shape the order could take on an empty fleet: per allowed class and device profile,
        the share or whole devices (tensor parallel: the count) the planner would give it there."""
        inv = self.inventory
        with inv.lock:
            prepared = self._prepare(request)
            if isinstance(prepared, PlanResponse):
                return []
            ask = prepared.ask
            out: dict[tuple[str, str, int, int | None], ClaimShape] = {}
            for cls in prepared.classes:
                alone = ask.holds(max(0, self._largest(inv.groups(cls), ask)))
                for device in inv.class_devices(cls):
                    if device.tainted or device.memory is None or not self._passes(device, ask):
                        continue
                    selector = _profile_selector(device)
                    fit = self._fit(device, ask)
                    if fit is not None:
                        shares = fit[0] if fit[2] == SharingMode.SHARES else None
                        extra = (ask.selector,) if ask.selector else ()
                        out.setdefault(
                            (cls, selector, 1, shares), ClaimShape(cls, (selector, *extra), 1, shares)
                        )
                        continue
                    if alone:  # a model one device of the class holds never spans several
                        continue
                    usable = ask.usable(device.memory)
                    for count in (2, 4, 8):
                        if count <= ask.max_devices and ask.need.per_device(count) <= usable:
                            mode_sharing = SharingMode.SHARES if device.shareable else SharingMode.NONE
                            if ask.allows(PlacementMode.MULTI_DEVICE, mode_sharing):
                                shares = UNITS if device.shareable else None
                                extra = (ask.selector,) if ask.selector else ()
                                out.setdefault(
                                    (cls, selector, count, shares),
                                    ClaimShape(cls, (selector, *extra), count, shares),
                                )
                            break
            return list(out.values())

    def gone(self, namespace: str, name: str, placement: Placement) -> list[str]:
        """Devices of the order's plan out of service for it (node deleted, closed, device withdrawn), each
        with why: an inventory change, not a disagreement; the plan is to be made anew."""
        if not (placement.driver and placement.pool and placement.devices):
            return []
        return self.inventory.gone(
            (namespace, name), placement.driver, placement.pool, placement.devices, placement.node_name
        )

    def outranked(self, namespace: str, name: str, placement: Placement) -> list[str]:
        """Devices of the order's plan where orders of higher priority hold the room it needs (for its plan
        where it lost them: preemption; for one more replica where it stands: growth blocked by priority)."""
        units = placement.share_percent if placement.placement_mode == PlacementMode.SHARED else None
        inv = self.inventory
        with inv.lock:
            inv.expire()
            return inv.outranked((namespace, name), units or UNITS)

    def standing(self, namespace: str, name: str) -> list[str]:
        """Why an order has lost devices it holds to holders ranked above it (empty: it stands)."""
        inv = self.inventory
        with inv.lock:
            inv.expire()
            return inv.displaced((namespace, name))

    def release(self, namespace: str, name: str) -> bool:
        """Drop what was reserved for an order that will not take it (gone, or its plan refused)."""
        inv = self.inventory
        with inv.lock:
            held = bool(inv.reserved_by((namespace, name)))
            inv.release((namespace, name))
            self._heard.pop((namespace, name), None)
        return held

    def reservations(self) -> Reservations:
        """Every reservation held now (lapsed ones dropped first), with its devices and age."""
        inv = self.inventory
        with inv.lock:
            inv.expire()
            now = time.monotonic()
            return Reservations(
                reservations=[
                    Reservation(
                        order=OrderRef(namespace=ns, name=name),
                        devices=[
                            ReservedDevice(
                                driver=h.device[0], pool=h.device[1], device=h.device[2], units=h.units
                            )
                            for h in held
                        ],
                        age_seconds=round(max(0.0, now - made), 3),
                        expires_in_seconds=round(max(0.0, deadline - now), 3),
                    )
                    for (ns, name), made, deadline, held in inv.reservations()
                ]
            )

    def _prepare(self, request: PlanRequest) -> Order | PlanResponse:
        """What one order asks of the ledger, or the refusal that needs no search."""
        inv = self.inventory
        order: OrderKey = (request.order.namespace, request.order.name)
        reqs = request.requirements or RuntimeRequirements()
        runtime = next((MemoryRuntime(r) for r in reqs.runtimes if r in set(MemoryRuntime)), None)
        need = memory_need(request.facts, self.context, runtime)
        if need is None:
            return _refuse(
                Reason.NO_COMPATIBLE_PLACEMENT,
                f"The memory need of {request.facts.name} cannot be computed: its facts carry "
                "neither a parameter count nor a weight size (memory profile incomplete); "
                "an administrator's subject.",
            )
        priority = inv.priority_of(request.priority_class_name)
        if priority is None:
            return _refuse(
                Reason.PRIORITY_CLASS_NOT_FOUND,
                f"PriorityClass {request.priority_class_name!r} named by the class does not "
                "exist in the cluster; an administrator must create it or change the class.",
            )
        policy = request.accelerator_policy or AcceleratorPolicy()
        if request.refused is not None:
            self._learn(order, request.refused)
        ask, refusal = self._ask(request, need, policy, order)
        if refusal is not None:
            return PlanResponse(refusal=refusal)
        assert ask is not None
        classes = policy.device_class_names or sorted(inv.class_selectors)
        known = [c for c in classes if c in inv.class_selectors]
        if not known:
            return _refuse(
                Reason.NO_CAPACITY,
                f"None of the device classes {classes} exists in the cluster, so no accelerator "
                f"can hold {gib(need.required)} GiB; wait for the hardware to be published.",
            )
        return Order(request, order, need, priority, ask, known)

    def _place(self, o: Order) -> PlanResponse:
        """One order on the ledger as it stands: classes in policy order, then preemption."""
        request, order, need, priority, ask, known = o.request, o.key, o.need, o.priority, o.ask, o.classes
        inv = self.inventory
        findings = Findings()
        for cls in known:
            undecidable = self._undecidable(cls, ask)
            if undecidable is not None:
                return PlanResponse(refusal=undecidable)
            found = self._search(cls, ask, inv.groups(cls), own_adjusted=True)
            if found is not None:
                return self._answer(request, order, priority, need, found, [])
            self._observe(cls, ask, findings, priority, order)
        refusal = refusal_for(need, known, findings)
        if (
            refusal.reason in (Reason.NO_CAPACITY, Reason.NO_COMPATIBLE_PLACEMENT)
            and findings.lower
            and "incomplete" not in refusal.message
        ):
            for cls in known:
                hit = self._preempt(cls, ask, priority, order)
                if hit is not None:
                    return self._answer(request, order, priority, need, hit[0], hit[1])
            refusal = Refusal(
                reason=Reason.PLANNING_PREEMPTION_FAILED,
                message=(
                    f"Releasing every lower-priority holding ({len(findings.lower)} orders) on "
                    f"{', '.join(known)} would still leave no room for {gib(need.required)} GiB; "
                    f"retried. Before preemption: {refusal.message}"
                ),
            )
        if ask.refused is not None and refusal.reason in (
            Reason.NO_CAPACITY,
            Reason.NO_COMPATIBLE_PLACEMENT,
            Reason.PLANNING_PREEMPTION_FAILED,
        ):
            devices, words = ask.refused
            refusal = Refusal(
                reason=Reason.RESOURCE_CLAIM_EXHAUSTED,
                message=(
                    f"The scheduler could not allocate the claim planned on {devices}: {words.rstrip('.')}. "
                    f"Every device class the order may use was tried ({', '.join(known)}) and none has room "
                    f"elsewhere: {refusal.message}"
                ),
            )
        return PlanResponse(refusal=refusal)

    # ------------------------------------------------------------------ joint placement

    def _undecidable_any(self, o: Order) -> bool:
        return any(self._undecidable(cls, o.ask) is not None for cls in o.classes)

    def _kinds(self, orders: list[Order]) -> Kinds:
        """The devices with room these orders could take one of, grouped into kinds, with free units per
        kind (the class index gives the devices with room; full ones could take none of them)."""
        inv = self.inventory
        index: dict[tuple[object, ...], int] = {}
        kinds: list[Kind] = []
        devices: list[list[Device]] = []
        frees: list[list[int]] = []
        stock: list[dict[int, int]] = []
        found: dict[DeviceKey, tuple[Device, int]] = {}
        for cls in dict.fromkeys(c for o in orders for c in o.classes):
            for gkey, group in inv.groups(cls).items():
                if gkey[0] < 0:
                    continue  # no memory published: never placed alone
                entries = group.entries
                for free, sk in entries[bisect.bisect_left(entries, (1,)) :]:
                    device = group.devices[sk]
                    found.setdefault(device.key, (device, free))
        selectors = sorted({o.ask.selector for o in orders if o.ask.selector})
        # Devices alike in every respect the orders' filters read give the same fits: computed once.
        profiles: dict[tuple[object, ...], int | None] = {}  # profile -> its kind (None: fits none)
        o_distrust = set().union(*(o.ask.distrust for o in orders)) if orders else set()
        for device, free in sorted(found.values(), key=lambda pair: pair[0].sort_key()):
            profile = (
                device.memory,
                device.shareable,
                device.type,
                device.classes,
                device.compute_capability,
                tuple(self._selector(device, e) is True for e in selectors) if selectors else (),
                device.group[4],
                device.key in o_distrust,
            )
            if profile in profiles:
                k = profiles[profile]
            else:
                fits = tuple(self._fits_one(o, device) for o in orders)
                k = None
                if any(f is not None for f in fits):
                    sig = (device.memory, device.shareable, device.type, device.group[4], fits)
                    k = index.get(sig)
                    if k is None:
                        k = index[sig] = len(kinds)
                        assert device.memory is not None
                        kinds.append(Kind(memory=device.memory, shareable=device.shareable, fits=fits))
                        devices.append([])
                        frees.append([])
                        stock.append({})
                profiles[profile] = k
            if k is None:
                continue
            devices[k].append(device)
            frees[k].append(free)
            stock[k][free] = stock[k].get(free, 0) + 1
        return kinds, devices, frees, stock

    def _fits_one(self, o: Order, device: Device) -> tuple[int, int] | None:
        """(index of the order's first class admitting the device, units it takes there), or None."""
        for rank, cls in enumerate(o.classes):
            if cls in device.classes:
                if not self._passes(device, o.ask):
                    return None
                fit = self._fit(device, o.ask)
                return None if fit is None else (rank, fit[0])
        return None

    def _take(
        self, o: Order, j: int, kinds: list[Kind], shelf: Stock, choice: tuple[int, int]
    ) -> PlanResponse:
        """Reserve the device `most_placed` chose: the first of its kind with that many units free.

        The search sees devices one by one; partitions of one GPU draw on shared counters, so an earlier
        choice of the batch can leave none of the kind with that room: then the one-order answer.
        """
        k, free = choice
        fit = kinds[k].fits[j]
        assert fit is not None
        device = shelf.take(k, free)
        if device is None:
            return self._place(o)
        found = self._fit(device, o.ask)
        assert found is not None
        units, mode, sharing = found
        candidate = Candidate(o.classes[fit[0]], (device,), units, mode, sharing, ())
        answer = self._answer(o.request, o.key, o.priority, o.need, candidate, [])
        shelf.put(k, device)
        return answer

    def _ask(
        self, request: PlanRequest, need: MemoryNeed, policy: AcceleratorPolicy, order: OrderKey
    ) -> tuple[Ask | None, Refusal | None]:
        inv = self.inventory
        permitted = policy.allowed_share_percents
        shares = tuple(sorted({s for s in permitted if share_in_range(s)})) if permitted else _EVERY_SHARE
        reqs = request.requirements or RuntimeRequirements()
        modes: set[tuple[PlacementMode, SharingMode]] = set()
        for pm in reqs.placement_modes:
            for sm in reqs.sharing_modes:
                modes.add((pm, sm))
        if policy.selector:
            try:
                inv.judge.check(policy.selector)
            except SelectorError as error:
                return None, Refusal(
                    reason=Reason.PLACEMENT_UNDECIDABLE,
                    message=(
                        f"The accelerator policy's selector {policy.selector!r} cannot be judged: {error}. "
                        "The class needs an administrator's eye; waiting will not help."
                    ),
                )
        distrust = inv.distrusted()
        refused = self._refused.get(order)
        own = inv.holds(order)
        if refused is not None and not any(
            k in distrust or (k in own and inv.room(k, (order,)) < refused[1]) for k in refused[0]
        ):
            del self._refused[order]  # the cluster changed where it was refused: that refusal is over
            refused = None
        prefer = set(own)
        holding = request.holding
        if holding is not None and holding.driver and holding.pool and holding.devices:
            prefer |= {(holding.driver, holding.pool, d) for d in holding.devices}
        return Ask(
            need=need,
            shares=shares,
            modes=modes,
            max_devices=reqs.max_devices or 8,
            selector=policy.selector or None,
            min_cc=reqs.min_compute_capability,
            own=own,
            prefer=prefer - set(distrust),
            order=order,
            margin=reqs.memory_margin_percent,
            distrust=distrust,
            refused=(refused[2], refused[3]) if refused is not None else None,
        ), None

    def _learn(self, order: OrderKey, refused: SchedulerRefusal) -> None:
        """The scheduler refused the claim pinned to these devices.

        Where the ledger has no room for it either, it already counts what took the room (a claim the
        scheduler allocated first, a victim of preemption still leaving): no disagreement, and the refusal
        stands while that room is missing. Where the room appeared after the refusal, within the scheduler's
        retry, its words predate it: nothing is learned. Otherwise the ledger saw room the scheduler did not:
        no claim of that size or larger is offered there (to this order or any other) until the cluster
        changes there (someone else's holding released or smaller, the pool published again; `distrust_ttl` at
        most). Logged and counted once per refusal learned, not once per pass that reports it again."""
        p, inv = refused.placement, self.inventory
        said = (refused.since.timestamp() if refused.since is not None else None, refused.message)
        heard = self._heard.get(order)
        if heard is None or heard[0] != said:
            heard = self._heard[order] = (said, time.time())
        if not (p.driver and p.pool and p.devices):
            return
        keys = [(p.driver, p.pool, d) for d in p.devices]
        shared = p.sharing_mode == SharingMode.SHARES
        units = (p.share_percent if p.placement_mode == PlacementMode.SHARED else UNITS) if shared else None
        where = f"{', '.join(f'{p.pool}/{d}' for d in p.devices)} ({p.device_class_name})"
        rooms = [inv.room(k, (order,)) for k in keys]
        asked = units or UNITS
        if any(r < asked for r in rooms):
            self._refused[order] = (keys, asked, where, refused.message)
            return
        # The refusal is no later than the end of its condition's second (metav1.Time keeps seconds) nor than
        # when it was first reported here: room freed within that second is older unless this refusal was heard
        # before it (a refusal the ledger explained, then room: its retry has not come yet).
        since = min(refused.since.timestamp() + 1.0 if refused.since is not None else 0.0, heard[1])
        now = time.time()
        if any(since < (freed := inv.freed_at(k)) and now - freed < SCHEDULER_RETRY for k in keys):
            return
        if not inv.distrust(keys, units, self.distrust_ttl, order):
            self._refused[order] = (keys, asked, where, refused.message)
            return
        self._refused[order] = (keys, asked, where, refused.message)
        if self.on_disagreement is not None:
            self.on_disagreement()
        log.warning(
            "the scheduler refused the claim of %s/%s for %s on %s although the ledger saw room (free units "
            "%s beside what others hold there); not offered there again until the cluster changes there: %s",
            order[0],
            order[1],
            f"{units} shares" if units is not None else "the whole device",
            where,
            rooms,
            refused.message,
        )

    # ------------------------------------------------------------------ filters

    def _passes(self, device: Device, ask: Ask, *, refusals: bool = True) -> bool:
        """Whether the order may be placed on the device: its filters, and (unless told not to) no refusal
        by the scheduler standing there for what it would ask."""
        if refusals and device.key in ask.distrust and self._refused_for(device, ask):
            return False
        if ask.min_cc and (
            device.compute_capability is None or _semver(device.compute_capability) < _semver(ask.min_cc)
        ):
            return False
        if ask.selector is None:
            return True
        result = self._selector(device, ask.selector)
        return result is True

    @staticmethod
    def _refused_for(device: Device, ask: Ask) -> bool:
        """Whether a refusal by the scheduler on the device covers what the order would ask of it."""
        refused = ask.distrust[device.key]
        if refused is None or not device.shareable or device.memory is None:
            return True
        units = ask.share_for(ask.need.required, device.memory) or UNITS
        return units >= refused

    def _selector(self, device: Device, expression: str) -> bool | SelectorError:
        return self.inventory.selects(expression, device)

    def _undecidable(self, cls: str, ask: Ask) -> Refusal | None:
        faults = self.inventory.class_faults.get(cls) or {}
        if faults:
            fault = faults[min(faults)]
            return Refusal(
                reason=Reason.PLACEMENT_UNDECIDABLE,
                message=(
                    f"The selector of device class {cls} cannot be judged: {fault.message()}. "
                    "The search never started; an administrator must fix the class, waiting will not help."
                ),
            )
        if ask.selector is None:
            return None
        for device in self.inventory.class_devices(cls):
            result = self._selector(device, ask.selector)
            if isinstance(result, SelectorError):
                return Refusal(
                    reason=Reason.PLACEMENT_UNDECIDABLE,
                    message=(
                        f"The accelerator policy's selector cannot be judged on device class {cls}: "
                        f"{_POLICY}: selector #0 on device {device.ident}: {result}. The search never "
                        "started; an administrator must fix the selector, waiting will not help."
                    ),
                )
        return None

    # ------------------------------------------------------------------ search

    def _search(
        self, cls: str, ask: Ask, groups: dict[GroupKey, _Group], *, own_adjusted: bool
    ) -> Candidate | None:
        inv = self.inventory
        own = ask.own if own_adjusted else set()
        best: Candidate | None = None
        largest = self._largest(groups, ask)
        own_devices = [
            inv.devices[k]
            for k in sorted(own)
            if k in inv.devices and cls in inv.devices[k].classes and not inv.devices[k].tainted
        ]

        def consider(c: Candidate | None) -> None:
            nonlocal best
            if c is not None and (best is None or c.rank < best.rank):
                best = c

        for gkey in sorted(groups):
            group = groups[gkey]
            fit = ask.fit(gkey[0], gkey[1], gkey[2]) if gkey[0] >= 0 and group.devices else None
            if fit is None:
                continue
            units, mode, sharing = fit
            entries = group.entries
            for i in range(bisect.bisect_left(entries, (units,)), len(entries)):
                free, sk = entries[i]
                device = group.devices[sk]
                if device.key in own or not self._passes(device, ask):
                    continue
                consider(self._single(cls, device, free, units, mode, sharing, ask))
                break
            for device in own_devices:
                if device.group == gkey and self._passes(device, ask):
                    free = inv.room(device.key, (ask.order,))
                    if free >= units:
                        consider(self._single(cls, device, free, units, mode, sharing, ask))
        if best is not None or (largest > 0 and ask.holds(largest)):
            return best  # a model one device of the class holds never spans several
        if not ask.allows(PlacementMode.MULTI_DEVICE, SharingMode.NONE) and not ask.allows(
            PlacementMode.MULTI_DEVICE, SharingMode.SHARES
        ):
            return None
        for gkey in sorted(groups):
            consider(self._multi(cls, gkey, groups[gkey], ask, own, own_devices))
        return best

    def _largest(self, groups: dict[GroupKey, _Group], ask: Ask) -> int:
        """The memory of the largest device of the class the order may use at all, free or not.

        Only devices the order's filters admit count: a larger card its selector excludes must not stop
        it from spanning the devices it may use (issue 18: refused while the scheduler could allocate).
        """
        filtered = ask.selector is not None or ask.min_cc is not None or bool(ask.distrust)
        return max(
            (
                g[0]
                for g, grp in groups.items()
                if grp.devices and (not filtered or any(self._passes(d, ask) for d in grp.devices.values()))
            ),
            default=-1,
        )

    def _single(
        self,
        cls: str,
        device: Device,
        free: int,
        units: int,
        mode: PlacementMode,
        sharing: SharingMode,
        ask: Ask,
    ) -> Candidate:
        memory = device.memory or 0
        if device.shareable:
            before, after = free * memory // UNITS, (free - units) * memory // UNITS
        else:  # a whole device is a free piece of its full memory, gone once taken
            before, after = memory, 0
        # The loss in the sum of squared free pieces: best fit on a shared device (the one with the
        # least free memory loses least), and a whole device only when that costs less than a share.
        loss = before * before - after * after
        rank = (
            0 if device.key in ask.prefer else 1,
            loss,
            0 if free < UNITS else 1,
            memory,
            device.sort_key(),
        )
        return Candidate(cls, (device,), units, mode, sharing, rank)

    def _multi(
        self,
        cls: str,
        gkey: GroupKey,
        group: _Group,
        ask: Ask,
        own: set[DeviceKey],
        own_devices: list[Device],
    ) -> Candidate | None:
        memory, shareable = gkey[0], gkey[1]
        if memory <= 0:
            return None
        sharing = SharingMode.SHARES if shareable else SharingMode.NONE
        if not ask.allows(PlacementMode.MULTI_DEVICE, sharing):
            return None
        count = ask.spans(memory)
        if count is None:
            return None
        inv = self.inventory
        extra: dict[str, list[Device]] = {}
        for device in own_devices:
            if (
                device.group == gkey
                and inv.room(device.key, (ask.order,)) >= UNITS
                and self._passes(device, ask)
            ):
                extra.setdefault(device.pool, []).append(device)
        best: Candidate | None = None
        for pool in sorted(set(group.full_free) | set(extra)):
            mine = extra.get(pool, [])
            avail = [
                group.devices[sk]
                for sk in sorted(group.full_free.get(pool, ()))
                if group.devices[sk].key not in own and self._passes(group.devices[sk], ask)
            ]
            if len(mine) + len(avail) < count:
                continue
            picked: list[Device] = []
            for device in mine + avail:  # partitions of one GPU must fit its counters together
                if len(picked) < count and inv.counters_fit([d.key for d in picked] + [device.key]):
                    picked.append(device)
            if len(picked) < count:
                continue
            chosen = tuple(picked)
            nodes = {d.node for d in chosen}
            if len(nodes) != 1:
                continue
            rank = (
                0 if any(d.key in ask.prefer for d in chosen) else 1,
                count * memory,
                len(mine) + len(avail),
                0,
                (pool,),
            )
            c = Candidate(cls, chosen, UNITS, PlacementMode.MULTI_DEVICE, sharing, rank)
            if best is None or c.rank < best.rank:
                best = c
        return best

    # ------------------------------------------------------------------ refusals

    def _surveyed(self, cls: str, ask: Ask) -> Survey | None:
        """The class's survey for this order's filters, when it applies: the order holds nothing there and
        no refusal by the scheduler stands on a device of the class."""
        inv = self.inventory
        if ask.own or any(cls in d.classes for k in ask.distrust if (d := inv.devices.get(k)) is not None):
            return None
        key = (cls, ask.selector, ask.min_cc)
        survey = self._surveys.get(key)
        if survey is not None and survey.version == inv.version:
            return survey
        if len(self._surveys) > 64:
            self._surveys.clear()
        survey = self._surveys[key] = Survey(inv.version)
        pools: dict[tuple[str, GroupKey], int] = {}
        lowest: dict[OrderKey, int] = {}
        for device in inv.class_devices(cls):
            if device.tainted and device.memory is not None:
                if self._passes(device, ask, refusals=False):
                    state = inv.node_states.get(device.node or "") or "tainted by its driver"
                    survey.closed.setdefault(device.memory, set()).add(
                        f"{device.node or device.pool} ({state})"
                    )
                continue
            if device.tainted or not self._passes(device, ask, refusals=False):
                continue
            survey.admitted += 1
            free = inv.room(device.key)
            under: int | None = None
            for h in inv.holdings_on(device.key):
                if h.order is not None:
                    held_at = inv.priority_of_holding(h)
                    lowest[h.order] = min(lowest.get(h.order, held_at), held_at)
                    under = held_at if under is None else min(under, held_at)
            survey.any_free = survey.any_free or free > 0
            if device.memory is None:
                survey.unprofiled.append(device.ident)
                survey.unprofiled_per_pool[device.pool] = survey.unprofiled_per_pool.get(device.pool, 0) + 1
                continue
            if under is not None:
                survey.lowered.append((under, device.sort_key(), device))
            if device.memory > survey.largest[0]:
                survey.largest = (device.memory, f"{device.product or device.ident}, class {cls}")
            free_bytes = (
                free * device.memory // UNITS if device.shareable else (device.memory if free == UNITS else 0)
            )
            survey.largest_free = max(survey.largest_free, free_bytes)
            (survey.shared_sizes if device.shareable else survey.whole_sizes).add(device.memory)
            pools[(device.pool, device.group)] = pools.get((device.pool, device.group), 0) + 1
        for (_, gkey), n in pools.items():
            survey.sizes[gkey[0]] = max(survey.sizes.get(gkey[0], 0), n)
        survey.holders = sorted((p, o) for o, p in lowest.items())
        survey.lowered.sort(key=lambda entry: entry[:2])
        return survey

    def _observe(self, cls: str, ask: Ask, f: Findings, priority: int, order: OrderKey) -> None:
        inv = self.inventory
        pools: dict[tuple[str, GroupKey], int] = {}
        departed = [(n, d) for n, (_, ds) in inv.departed.items() for d in ds if cls in d.classes]
        for node, device in departed:
            if (
                device.memory is not None
                and ask.holds(device.memory)
                and self._passes(device, ask, refusals=False)
            ):
                f.out_of_service.add(f"{node} (deleted)")
        survey = self._surveyed(cls, ask)
        if survey is not None:
            observe_survey(survey, ask, f, priority, order)
            return
        for device in inv.class_devices(cls):
            if device.tainted and device.memory is not None and ask.holds(device.memory):
                if self._passes(device, ask, refusals=False):
                    state = inv.node_states.get(device.node or "") or "tainted by its driver"
                    f.out_of_service.add(f"{device.node or device.pool} ({state})")
                continue
            if device.tainted or not self._passes(device, ask, refusals=False):
                continue
            refused = device.key in ask.distrust and self._refused_for(device, ask)
            f.admitted += 1
            free = inv.room(device.key, (order,)) if device.key in ask.own else inv.room(device.key)
            if refused:
                free = 0  # the scheduler said there is no room there for this order's claim
            for h in inv.holdings_on(device.key):
                if h.order is not None and h.order != order and inv.priority_of_holding(h) < priority:
                    f.lower.add(h.order)
            if device.memory is None:
                f.unprofiled.append(device.ident)
                f.unprofiled_per_pool[device.pool] = f.unprofiled_per_pool.get(device.pool, 0) + 1
                f.any_free = f.any_free or free > 0
                continue
            if device.memory > f.largest[0]:
                f.largest = (device.memory, f"{device.product or device.ident}, class {cls}")
            free_bytes = (
                free * device.memory // UNITS if device.shareable else (device.memory if free == UNITS else 0)
            )
            f.largest_free = max(f.largest_free, free_bytes)
            fits = ask.holds(device.memory) and (
                not device.shareable or ask.share_for(ask.need.required, device.memory) is not None
            )
            if fits:
                f.fits_by_size = True
            key = (device.pool, device.group)
            pools[key] = pools.get(key, 0) + 1
            f.any_free = f.any_free or free > 0
        for (_, gkey), n in pools.items():
            if (count := ask.spans(gkey[0])) is not None and count <= n:
                f.fits_by_size = True

    # ------------------------------------------------------------------ preemption

    def _preempt(
        self, cls: str, ask: Ask, priority: int, order: OrderKey
    ) -> tuple[Candidate, list[OrderKey]] | None:
        """The single-device placement that needs the fewest, lowest lower-priority orders released."""
        inv = self.inventory
        best: tuple[tuple[object, ...], Candidate, list[OrderKey]] | None = None
        survey = self._surveyed(cls, ask)
        devices: Iterable[Device] = inv.class_devices(cls)
        if survey is not None:  # only devices someone of lower priority holds can be made room on
            devices = (d for under, _, d in survey.lowered if under < priority)
        for device in devices:
            if device.tainted or device.memory is None or not self._passes(device, ask):
                continue
            fit = self._fit(device, ask)
            if fit is None:
                continue
            units, mode, sharing = fit
            released = {order}
            if inv.room(device.key, released) >= units:
                continue  # room without anyone released: the plain search would have found it
            by_order: dict[OrderKey, int] = {}
            for h in inv.holdings_on(device.key):
                held_at = inv.priority_of_holding(h)
                if h.order is not None and h.order != order and held_at < priority:
                    by_order[h.order] = max(by_order.get(h.order, held_at), held_at)
            gain = {v: inv.room(device.key, (order, v)) for v in by_order}
            chosen: list[OrderKey] = []
            for victim in sorted(by_order, key=lambda v: (by_order[v], -gain[v], v)):
                chosen.append(victim)
                released.add(victim)
                if inv.room(device.key, released) >= units:
                    break
            if not chosen or inv.room(device.key, released) < units:
                continue
            top = max(by_order[v] for v in chosen)
            cand = self._single(cls, device, units, units, mode, sharing, ask)
            cost = (len(chosen), top, cand.rank)
            if best is None or cost < best[0]:
                best = (cost, cand, sorted(chosen))
        return None if best is None else (best[1], best[2])

    def _fit(self, device: Device, ask: Ask) -> tuple[int, PlacementMode, SharingMode] | None:
        """Units, mode and sharing one device would give the order, ignoring who holds it."""
        return ask.fit(device.memory or 0, device.shareable, device.type)

    # ------------------------------------------------------------------ answer

    def _answer(
        self,
        request: PlanRequest,
        order: OrderKey,
        priority: int,
        need: MemoryNeed,
        found: Candidate,
        victims: list[OrderKey],
    ) -> PlanResponse:
        placement = _placement(found, need)
        memory = found.devices[0].memory or 0
        if not request.dry_run:
            self._reserve(order, priority, found)
            if victims:  # who no longer stands beside this plan, by the one ranking the ledger keeps
                victims = sorted(
                    {
                        h.order
                        for d in found.devices
                        for h in self.inventory.holdings_on(d.key)
                        if h.order is not None and h.order != order and self.inventory.displaced(h.order)
                    }
                )
        launch = (
            need.launch(
                memory, found.units if found.mode == PlacementMode.SHARED else UNITS, len(found.devices)
            )
            if memory
            else None
        )
        est = estimate(
            request.facts,
            need,
            len(found.devices),
            launch if isinstance(launch, Fit) else None,
            placement.share_percent,
        )
        return PlanResponse(
            placement=placement, estimates=est, preempt=[Victim(namespace=ns, name=n) for ns, n in victims]
        )

    def _reserve(self, order: OrderKey, priority: int, found: Candidate) -> None:
        """Hold the devices for the plan until its LaunchPlan shows them (the order counts once per device:
        its claims, plan and reservation there are not added up)."""
        shared = found.sharing == SharingMode.SHARES
        self.inventory.reserve(
            order,
            priority,
            [
                (d.key, found.units if shared else None, d.share_request(found.units) if shared else None)
                for d in found.devices
            ],
            self.reservation_ttl,
        )


def _placement(found: Candidate, need: MemoryNeed) -> Placement:
    """The placement a candidate is, as the wire carries it."""
    first = found.devices[0]
    memory = first.memory or 0
    if found.mode == PlacementMode.SHARED:
        per_device = found.units * memory // UNITS
    else:
        per_device = need.per_device(len(found.devices))
    return Placement(
        device_class_name=found.device_class,
        driver=first.driver,
        pool=first.pool,
        devices=[d.name for d in found.devices],
        device_uuids=[d.uuid or d.name for d in found.devices],
        node_name=first.node,
        accelerator_product_name=first.product,
        accelerator_memory_gi_b=gib(memory),
        accelerator_compute_capability=_major_minor(first.compute_capability),
        placement_mode=found.mode,
        sharing_mode=found.sharing,
        share_percent=found.units if found.sharing == SharingMode.SHARES else None,
        device_count=len(found.devices),
        memory_gi_b=gib(per_device),
        capacity_requests=(
            {n: quantity_text(v) for n, v in sorted(first.share_request(found.units).items())}
            if found.sharing == SharingMode.SHARES
            else None
        ),
    )


def _refuse(reason: Reason, message: str) -> PlanResponse:
    return PlanResponse(refusal=Refusal(reason=reason, message=message))


def judge_plan(placement: Placement, inventory: Inventory) -> Refusal | None:
    """LaunchPlanNotAPlacement when a stored placement is not one; None when it is."""

    def no(field_name: str, value: object, why: str) -> Refusal:
        # The fact only: whose fix it is (delete a hand-written plan, or report the module's) the caller says.
        return Refusal(
            reason=Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
            message=f"the launch plan is not a placement: {field_name}={value!r} {why}",
        )

    for capacity, amount in (placement.capacity_requests or {}).items():
        try:
            parse_quantity(amount)
        except QuantityError:
            return no(f"capacityRequests.{capacity}", amount, "is not a quantity")
    share = placement.share_percent
    if share is not None and not share_in_range(share):
        return no("sharePercent", share, "is outside 1..100")
    if placement.placement_mode == PlacementMode.SHARED and share is None:
        return no("sharePercent", None, "is missing for placementMode Shared")
    if placement.device_count < 1:
        return no("deviceCount", placement.device_count, "is below 1")
    if placement.device_class_name is None:
        return no("deviceClassName", None, "is missing: an accelerator asked for with no device class")
    with inventory.lock:
        if placement.device_class_name not in inventory.class_selectors:
            return no(
                "deviceClassName", placement.device_class_name, "names a device class that does not exist"
            )
        devices = inventory.class_devices(placement.device_class_name)
        largest = max((d.memory or 0 for d in devices), default=0)
    for name, value in (
        ("memoryGiB", placement.memory_gi_b),
        ("acceleratorMemoryGiB", placement.accelerator_memory_gi_b),
    ):
        if value is not None and (value <= 0 or value * GIB > largest + GIB // 100):
            return no(
                name,
                value,
                f"is memory the devices of class {placement.device_class_name} do not "
                f"carry (largest {gib(largest)} GiB)",
            )
    return None


def _major_minor(version: str | None) -> str | None:
    """A version attribute such as 8.9.0 as CUDA names compute capabilities: 8.9."""
    return ".".join(version.split(".")[:2]) if version else None
