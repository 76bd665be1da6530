"""Placement of orders on the books: one order at a time, or those that wait together; classes in policy
order, preemption by priority.

One order's search is `_search` (best fit on one device, tensor parallel on one node, preemption), what a
refusal reads of the devices `_survey` and `_refusals`, what the scheduler said `_heard`, orders placed
jointly `_together`, the answer `_answer`. Every decision reads the books through `Inventory.reading()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from isvc_api import (
    AcceleratorPolicy,
    DeviceKey,
    Fit,
    MemoryRuntime,
    OrderKey,
    Placement,
    PlacementMode,
    Reason,
    Refusal,
    RuntimeRequirements,
    SharingMode,
    gib,
    serving_load,
    share_in_range,
)
from isvc_ledger import UNITS, View, capacity_view
from isvc_planner_client import (
    CapacityView,
    OrderRef,
    PlanRequest,
    PlanResponse,
    Reservation,
    Reservations,
    ReservedDevice,
    SelectorError,
    Victim,
)

from isvc_planner._answer import ClaimShape, judge_plan, placement_of, profile_selector, refuse
from isvc_planner._estimate import MemoryNeed, estimate, memory_need
from isvc_planner._heard import Heard
from isvc_planner._inventory import Inventory
from isvc_planner._order import Ask, Candidate, Order
from isvc_planner._refusals import Findings, refusal_for
from isvc_planner._search import MIG, fit, largest, passes, preempt, search, undecidable
from isvc_planner._stock import Kinds
from isvc_planner._survey import Surveys
from isvc_planner._together import kinds_of, place_together

__all__ = ["FIFO_AFTER", "MAX_JOINT", "SOLVER_SECONDS", "Planner"]

_EVERY_SHARE = tuple(s for s in range(1, UNITS + 1) if share_in_range(s))  # what a policy naming none permits
# The most orders of one priority placed together at once (the joint search's depth is the number of
# orders); more waiting ones are placed together in further batches of this many, in the order they came.
MAX_JOINT = 200
# Seconds the solver may take for one pass of orders waiting together (`plan_many`), every priority
# together: the controller's client waits 10 s for an answer (isvc_planner_client.PlannerClient), and on
# the large packing instances of `nox -s bench` this reaches the acceptance figures (packages/isvc-planner
# README, "Packing quality").
SOLVER_SECONDS = 2.0
# Seconds an order waits for room before it is placed oldest first, ahead of orders packed together for the
# most placed (issue 45: freed room went to the newest small orders while older large ones waited).
FIFO_AFTER = 60.0


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
        fifo_after: float = FIFO_AFTER,
    ) -> None:
        self.inventory = inventory
        self.reservation_ttl = reservation_ttl
        self.context = context
        self.solver_seconds = solver_seconds  # 0: orders waiting together get the search's packing only
        # Told each solver run's outcome: optimal (proven), better (more orders than the search, not proven),
        # limit (no better packing within the budget), failed, or stale (the books changed meanwhile).
        self.on_solver = on_solver
        self.said: set[str] = set()  # solver outcomes logged already
        self.surveys = Surveys()
        self.heard = Heard(inventory, distrust_ttl)
        self.heard.on_disagreement = on_disagreement
        self.fifo_after = fifo_after
        # The device kept for the oldest order of each priority that waited long and found no room: no order
        # of its priority or below is placed there until it is (its wait ends once that device frees up).
        self.keeps: dict[DeviceKey, tuple[OrderKey, int]] = {}

    @property
    def on_disagreement(self) -> Callable[[], None] | None:
        """Told each disagreement with the scheduler learned (`Heard.learn`)."""
        return self.heard.on_disagreement

    @on_disagreement.setter
    def on_disagreement(self, value: Callable[[], None] | None) -> None:
        self.heard.on_disagreement = value

    # ------------------------------------------------------------------ entry points

    def plan(self, request: PlanRequest) -> PlanResponse:
        """A placement with estimates, a refusal, and the orders to release first (if any)."""
        with self.inventory.reading() as view:
            prepared = self._prepare(view, request)
            return prepared if isinstance(prepared, PlanResponse) else self.place(view, prepared)

    def plan_many(self, requests: Sequence[PlanRequest], budget: int = 20_000) -> list[PlanResponse]:
        """Answers for orders that wait together, placed jointly so that the most of them fit.

        Higher priorities go first. Within one priority, orders holding devices are replanned one by one
        (they keep what they hold), then orders that need several devices; the rest are placed together:
        the greedy floor and the bounded search of `most_placed` (`budget` nodes), then, unless that
        search proved its packing the best, the solver (`_solver`) within what is left of
        `solver_seconds`, outside the books' lock. The solver's packing is taken only when it places
        more orders and the books, as they are then, admit all of it; orders left out get the one-order
        answer (a refusal, or preemption).
        """
        answers: list[PlanResponse | None] = [None] * len(requests)
        ends = time.monotonic() + self.solver_seconds
        prepared: dict[int, Order] = {}
        first: dict[tuple[str, str], int] = {}
        with self.inventory.reading() as view:
            for i, request in enumerate(requests):
                if first.setdefault((request.order.namespace, request.order.name), i) != i:
                    continue  # an order named twice is planned once; later copies get the same answer
                p = self._prepare(view, request)
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
        """Place the orders of one priority together (`plan_many`); answers[where[j]] is orders[j]'s: those
        that waited long first, oldest first (`_oldest_first`), then the rest."""
        with self.inventory.reading() as view:
            first = self._oldest_first(view, orders, where, answers)
            alone = [
                j
                for j, o in enumerate(orders)
                if j not in first and (o.ask.prefer or o.ask.refused or _undecidable_any(view, o))
            ]
            rest = [j for j in range(len(orders)) if j not in set(alone) and j not in first]
            several: list[int] = []
            kinds: Kinds | None = None
            if len(rest) > 1:  # one order alone keeps the one-order path
                kinds = kinds_of(view, [orders[j] for j in rest])
                several = [j for n, j in enumerate(rest) if all(k.fits[n] is None for k in kinds[0])]
            for j in alone + several:
                answers[where[j]] = self.place(view, orders[j])
        joint = [j for j in rest if j not in set(several)] if kinds is not None else []
        if alone or several or len(joint) > MAX_JOINT:
            kinds = None  # placements changed the stock, or the batches are not these orders
        for at in range(0, len(joint), MAX_JOINT):  # batches as they came, each on what the last left
            batch = joint[at : at + MAX_JOINT]
            if len(batch) > 1:
                place_together(
                    self, [orders[j] for j in batch], [where[j] for j in batch], answers, budget, ends, kinds
                )
        with self.inventory.reading() as view:  # left out of every packing: the one-order answer
            for j in rest:
                if answers[where[j]] is None:
                    answers[where[j]] = self.place(view, orders[j])

    def _oldest_first(
        self, view: View, orders: list[Order], where: list[int], answers: list[PlanResponse | None]
    ) -> set[int]:
        """Place the orders of one priority that have waited `fifo_after` seconds or more, oldest first, each
        on its best fit; the oldest of them that finds no room keeps the device closest to holding it, which
        no newer order of its priority is offered. The indices placed or refused here."""
        now = time.time()
        due = sorted(
            (
                j
                for j, o in enumerate(orders)
                if (since := _since(o)) is not None and now - since >= self.fifo_after
            ),
            key=lambda j: _since(orders[j]) or 0.0,
        )
        if not orders:
            return set()
        level = orders[0].priority
        self.keeps = {k: v for k, v in self.keeps.items() if v[1] != level}  # kept anew below
        keeper: Order | None = None
        for j in due:
            o = orders[j]
            o.ask.kept = self._kept_from(o.key, o.priority)
            answers[where[j]] = answer = self.place(view, o)
            if keeper is None and answer.refusal is not None and answer.refusal.reason in _NO_ROOM:
                keeper = o
                kept = _closest(view, o)
                if kept is not None:
                    self.keeps[kept] = (o.key, o.priority)
        for o in orders:
            o.ask.kept = self._kept_from(o.key, o.priority)
        return set(due)

    def _kept_from(self, order: OrderKey, priority: int) -> frozenset[DeviceKey]:
        """Devices kept for older orders of `priority` or above: not offered to `order`."""
        return frozenset(k for k, (o, p) in self.keeps.items() if o != order and p >= priority)

    def shapes(self, request: PlanRequest) -> list[ClaimShape]:
        """Every claim shape the order could take on an empty fleet: per allowed class and device profile,
        the share or whole devices (tensor parallel: the count) the planner would give it there."""
        with self.inventory.reading() as view:
            prepared = self._prepare(view, request)
            if isinstance(prepared, PlanResponse):
                return []
            out: dict[tuple[str, str, int, int | None], ClaimShape] = {}
            for cls in prepared.classes:
                _shapes_of(view, cls, prepared.ask, out)
            return list(out.values())

    def gone(self, namespace: str, name: str, placement: Placement) -> list[str]:
        """Devices of the order's plan out of service for it (node deleted, closed, device withdrawn), each
        with why: an inventory change, not a disagreement; the plan is to be made anew. Not while a device of
        the plan's shape is in service on the class: its claim's second choice takes that (issue 40), and
        nothing is replanned (a new plan would roll every replica onto a new claim template)."""
        if not (placement.driver and placement.pool and placement.devices):
            return []
        keys = [(placement.driver, placement.pool, d) for d in placement.devices]
        with self.inventory.reading() as view:
            gone = view.ledger.gone((namespace, name), keys, placement.node_name)
            if gone and _alike(view, placement):
                return []  # a replica made again takes any device of the plan's shape in service (issue 40)
            return gone

    def outranked(self, namespace: str, name: str, placement: Placement) -> list[str]:
        """Devices of the order's plan where orders of higher priority hold the room it needs (for its plan
        where it lost them: preemption; for one more replica where it stands: growth blocked by priority)."""
        units = placement.share_percent if placement.placement_mode == PlacementMode.SHARED else None
        with self.inventory.reading() as view:
            return view.ranking.outranked((namespace, name), units or UNITS, _alike(view, placement))

    def standing(self, namespace: str, name: str) -> list[str]:
        """Why an order has lost devices it holds to holders ranked above it (empty: it stands)."""
        with self.inventory.reading() as view:
            return view.ranking.displaced((namespace, name))

    def release(self, namespace: str, name: str) -> bool:
        """Drop what was reserved for an order that will not take it (gone, or its plan refused)."""
        inv = self.inventory
        with inv.reading():
            held = bool(inv.reserved_by((namespace, name)))
            inv.release((namespace, name))
            self.heard.forget((namespace, name))
            self.keeps = {k: v for k, v in self.keeps.items() if v[0] != (namespace, name)}
        return held

    def reservations(self) -> Reservations:
        """Every reservation held now (lapsed ones dropped first), with its devices and age."""
        with self.inventory.reading():
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
                    for (ns, name), made, deadline, held in self.inventory.reservations()
                ]
            )

    def judge(self, placement: Placement) -> Refusal | None:
        """LaunchPlanNotAPlacement when a stored placement is not one (`judge_plan`); None when it is."""
        with self.inventory.reading() as view:
            return judge_plan(placement, view)

    def capacity(self) -> CapacityView:
        """Every published device as the books count it (`GET /v1/capacity`)."""
        with self.inventory.reading() as view:
            return capacity_view(view)

    # ------------------------------------------------------------------ one order

    def _prepare(self, view: View, request: PlanRequest) -> Order | PlanResponse:
        """What one order asks of the books, or the refusal that needs no search."""
        order = (request.order.namespace, request.order.name)
        reqs = request.requirements or RuntimeRequirements()
        runtime = next((MemoryRuntime(r) for r in reqs.runtimes if r in set(MemoryRuntime)), None)
        need = memory_need(request.facts, self.context, runtime, serving_load(request.serving, None))
        if need is None:
            return _refused(
                Reason.NO_COMPATIBLE_PLACEMENT,
                f"The memory need of {request.facts.name} cannot be computed: its facts carry "
                "neither a parameter count nor a weight size (memory profile incomplete); "
                "an administrator's subject.",
            )
        priority = view.priorities.of(request.priority_class_name)
        if priority is None:
            return _refused(
                Reason.PRIORITY_CLASS_NOT_FOUND,
                f"PriorityClass {request.priority_class_name!r} named by the class does not "
                "exist in the cluster; an administrator must create it or change the class.",
            )
        policy = request.accelerator_policy or AcceleratorPolicy()
        if request.refused is not None:
            self.heard.learn(view, order, request.refused)
        ask, refusal = self._ask(view, request, need, policy, order)
        if refusal is not None:
            return PlanResponse(refusal=refusal)
        assert ask is not None
        classes = policy.device_class_names or sorted(view.classes.selectors)
        known = [c for c in classes if c in view.classes.selectors]
        if not known:
            return _refused(
                Reason.NO_CAPACITY,
                f"None of the device classes {classes} exists in the cluster, so no accelerator "
                f"can hold {gib(need.required)} GiB; wait for the hardware to be published.",
            )
        ask.kept = self._kept_from(order, priority)
        return Order(request, order, need, priority, ask, known)

    def _ask(
        self,
        view: View,
        request: PlanRequest,
        need: MemoryNeed,
        policy: AcceleratorPolicy,
        order: tuple[str, str],
    ) -> tuple[Ask | None, Refusal | None]:
        permitted = policy.allowed_share_percents
        shares = tuple(sorted({s for s in permitted if share_in_range(s)})) if permitted else _EVERY_SHARE
        reqs = request.requirements or RuntimeRequirements()
        modes = {(pm, sm) for pm in reqs.placement_modes for sm in reqs.sharing_modes}
        if policy.selector:
            try:
                view.classes.judge.check(policy.selector)
            except SelectorError as error:
                return None, refuse(
                    Reason.PLACEMENT_UNDECIDABLE,
                    f"The accelerator policy's selector {policy.selector!r} cannot be judged: {error}. "
                    "The class needs an administrator's eye; waiting will not help.",
                )
        distrust = self.inventory.distrusted()
        own = view.ledger.holds(order)
        refused = self.heard.standing(view, order, distrust, own)
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
            refused=refused,
        ), None

    def place(self, view: View, o: Order) -> PlanResponse:
        """One order on the books as they stand: classes in policy order, then preemption."""
        findings = Findings()
        for cls in o.classes:
            refusal = undecidable(view, cls, o.ask)
            if refusal is not None:
                return PlanResponse(refusal=refusal)
            found = search(view, cls, o.ask, own_adjusted=True)
            if found is not None:
                return self.answer(view, o, found, [])
            self.surveys.observe(view, cls, o.ask, findings, o.priority, o.key)
        refusal = refusal_for(o.need, o.classes, findings)
        if (
            refusal.reason in (Reason.NO_CAPACITY, Reason.NO_COMPATIBLE_PLACEMENT)
            and findings.lower
            and "incomplete" not in refusal.message
        ):
            for cls in o.classes:
                hit = self._preempt(view, cls, o)
                if hit is not None:
                    return self.answer(view, o, hit[0], hit[1])
            refusal = refuse(
                Reason.PLANNING_PREEMPTION_FAILED,
                f"Releasing every lower-priority holding ({len(findings.lower)} orders) on "
                f"{', '.join(o.classes)} would still leave no room for {gib(o.need.required)} GiB; "
                f"retried. Before preemption: {refusal.message}",
            )
        if o.ask.refused is not None and refusal.reason in (
            Reason.NO_CAPACITY,
            Reason.NO_COMPATIBLE_PLACEMENT,
            Reason.PLANNING_PREEMPTION_FAILED,
        ):
            devices, words = o.ask.refused
            refusal = refuse(
                Reason.RESOURCE_CLAIM_EXHAUSTED,
                f"The scheduler could not allocate the claim planned on {devices}: {words.rstrip('.')}. "
                f"Every device class the order may use was tried ({', '.join(o.classes)}) and none has room "
                f"elsewhere: {refusal.message}",
            )
        return PlanResponse(refusal=refusal)

    def _preempt(self, view: View, cls: str, o: Order) -> tuple[Candidate, list[tuple[str, str]]] | None:
        """The single-device placement that needs the fewest, lowest lower-priority orders released."""
        survey = self.surveys.surveyed(view, cls, o.ask)
        if survey is not None:  # only devices someone of lower priority holds can be made room on
            devices = [d for under, _, d in survey.lowered if under < o.priority]
        else:
            devices = view.fleet.class_devices(cls)
        best = preempt(view, cls, o.ask, o.priority, o.key, devices)
        return None if best is None else (best[1], best[2])

    def answer(self, view: View, o: Order, found: Candidate, victims: list[tuple[str, str]]) -> PlanResponse:
        """The answer of a placement found: reserved (unless a dry run), with estimates and who to release."""
        placement = placement_of(found, o.need, o.ask.selector)
        memory = found.devices[0].memory or 0
        if not o.request.dry_run:
            self._reserve(o, found)
            self.keeps = {k: v for k, v in self.keeps.items() if v[0] != o.key}
            if victims:  # who no longer stands beside this plan, by the one ranking the books keep
                victims = sorted(
                    {
                        h.order
                        for d in found.devices
                        for h in view.ledger.holdings_on(d.key)
                        if h.order is not None and h.order != o.key and view.ranking.displaced(h.order)
                    }
                )
        units = found.units if found.mode == PlacementMode.SHARED else UNITS
        launch = o.need.launch(memory, units, len(found.devices)) if memory else None
        est = estimate(
            o.request.facts,
            o.need,
            len(found.devices),
            launch if isinstance(launch, Fit) else None,
            placement.share_percent,
        )
        return PlanResponse(
            placement=placement, estimates=est, preempt=[Victim(namespace=ns, name=n) for ns, n in victims]
        )

    def _reserve(self, o: Order, found: Candidate) -> None:
        """Hold the devices for the plan until its LaunchPlan shows them (the order counts once per device:
        its claims, plan and reservation there are not added up)."""
        shared = found.sharing == SharingMode.SHARES
        self.inventory.reserve(
            o.key,
            o.priority,
            [
                (d.key, found.units if shared else None, d.share_request(found.units) if shared else None)
                for d in found.devices
            ],
            self.reservation_ttl,
        )


_NO_ROOM = (Reason.NO_CAPACITY, Reason.NO_COMPATIBLE_PLACEMENT, Reason.PLANNING_PREEMPTION_FAILED)


def _since(o: Order) -> float | None:
    """When the order began to wait for room (epoch seconds), if it says."""
    since = o.request.waiting_since
    return since.timestamp() if since is not None else None


def _closest(view: View, o: Order) -> DeviceKey | None:
    """The device of the order's classes closest to holding it: in service, admitted by its filters, large
    enough, the most units free (then by name)."""
    best: tuple[int, str, DeviceKey] | None = None
    for cls in o.classes:
        for device in view.fleet.class_devices(cls):
            if device.tainted or device.memory is None or not passes(view, device, o.ask):
                continue
            if fit(device, o.ask) is None:
                continue
            candidate = (-view.ledger.room(device.key), device.sort_key(), device.key)
            if best is None or candidate < best:
                best = candidate
    return None if best is None else best[2]


def _alike(view: View, placement: Placement) -> list[DeviceKey] | None:
    """Devices a further replica of the plan may take: those of its class its claim's second choice admits
    (None for a plan made before, whose replicas take its own devices)."""
    chosen, cls = placement.device_selectors, placement.device_class_name
    if chosen is None or cls is None:
        return None
    return [
        d.key
        for d in view.fleet.class_devices(cls)
        if not d.tainted and view.classes.selects(chosen.alike, d) is True
    ]


def _undecidable_any(view: View, o: Order) -> bool:
    return any(undecidable(view, cls, o.ask) is not None for cls in o.classes)


def _refused(reason: Reason, message: str) -> PlanResponse:
    return PlanResponse(refusal=refuse(reason, message))


def _shapes_of(
    view: View, cls: str, ask: Ask, out: dict[tuple[str, str, int, int | None], ClaimShape]
) -> None:
    """The claim shapes one class's devices offer the order (`Planner.shapes`)."""
    alone = ask.holds(max(0, largest(view, view.index.groups(cls), ask)))
    extra = (ask.selector,) if ask.selector else ()
    for device in view.fleet.class_devices(cls):
        if device.tainted or device.memory is None or not passes(view, device, ask):
            continue
        selector = profile_selector(device)
        found = fit(device, ask)
        if found is not None:
            shares = found[0] if found[2] == SharingMode.SHARES else None
            out.setdefault((cls, selector, 1, shares), ClaimShape(cls, (selector, *extra), 1, shares))
            continue
        if alone or device.type == MIG:  # one device holds it, or partitions (never combined)
            continue
        usable = ask.usable(device.memory)
        for count in (2, 4, 8):
            if count <= ask.max_devices and ask.need.per_device(count) <= usable:
                sharing = SharingMode.SHARES if device.shareable else SharingMode.NONE
                if ask.allows(PlacementMode.MULTI_DEVICE, sharing):
                    shares = UNITS if device.shareable else None
                    out.setdefault(
                        (cls, selector, count, shares), ClaimShape(cls, (selector, *extra), count, shares)
                    )
                break
