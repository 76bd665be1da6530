"""The books: the read-model, the ledger, the index and the priorities kept together as objects change.

Every change goes through here, so what it touches is recounted and re-indexed once: a slice event
republishes its pool only; a claim event recounts its devices only (and the partitions sharing their
counters). A listing applied at once (`applying`) recounts and indexes what it touched once at the end, and
each kind's first listing waits for the books to be `synced` (nothing is planned before), so every device is
counted and indexed once, with every holding in. The books keep no lock: their owner holds one around every
call (the planner's `Inventory`), or nobody else sees them (`kubectl isvc capacity`).
"""

from __future__ import annotations

import gc
import heapq
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from isvc_api import DeviceKey, OrderKey
from isvc_planner_client import CelJudge

from isvc_ledger._classes import DeviceClasses
from isvc_ledger._device import Device
from isvc_ledger._fleet import Fleet, PoolKey, node_state
from isvc_ledger._holding import (
    CLAIM,
    Holding,
    claim_holdings,
    claim_key,
    plan_holdings,
    reservation_holdings,
    source_of,
)
from isvc_ledger._index import RoomIndex
from isvc_ledger._ledger import Ledger, Touched
from isvc_ledger._ranking import Priorities, Ranking

__all__ = ["Books", "View", "loading"]

_MANY = 256  # devices touched at once past which their groups are sorted again rather than edited

_pauses = [0, False]  # loadings under way, and whether the collector ran before the first began
_pauses_lock = threading.Lock()


@contextmanager
def loading(keep: bool = False) -> Iterator[None]:
    """Apply a listing: the collector pauses until it is in (process-wide; nested and concurrent uses
    count). At 10,000 nodes × 8 devices a listing leaves over a million objects alive, and the collector,
    triggered by allocations, would traverse the growing heap again and again (one full pass then takes
    0.75 s; `nox -s bench`). With `keep` (a first listing: what it leaves alive lives as long as the
    process) the heap is frozen out of the collector's passes before it resumes, which would otherwise
    walk every object the listing made once more (0.1 s a kind at that size)."""
    with _pauses_lock:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _pauses_lock:
            if keep:
                gc.freeze()
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()


@dataclass(frozen=True)
class View:
    """What a decision reads: the books' parts, as they are while their owner's lock is held."""

    fleet: Fleet
    classes: DeviceClasses
    ledger: Ledger
    index: RoomIndex
    priorities: Priorities
    ranking: Ranking
    books: Books

    @property
    def version(self) -> int:
        """Moves whenever what a plan reads may have changed (`Books.version`)."""
        return self.books.version


class Books:
    """The DRA read-model, the ledger, the room index and the priorities, changed together."""

    def __init__(self, judge: CelJudge | None = None, on_free: Callable[[], None] | None = None) -> None:
        self.classes = DeviceClasses(judge)
        self.fleet = Fleet(self.classes)
        self.ledger = Ledger(self.fleet)
        self.index = RoomIndex()
        self.priorities = Priorities()
        self.ranking = Ranking(self.ledger, self.priorities)
        self.view = View(
            self.fleet, self.classes, self.ledger, self.index, self.priorities, self.ranking, self
        )
        self.version = 0  # moves with every change a plan may read
        self._on_free = on_free or (lambda: None)
        # Devices to recount once a listing is applied, in the order it touched them (sorted runs sort fast).
        self._deferred: Touched | None = None
        self._synced = False
        self._held = False  # first listings' devices wait, uncounted and unindexed, for `synced`
        self._rejudge = False  # the classes changed under a listing: every device is judged when it is in
        self._owed = False  # room may have appeared under a listing: waiters are woken once it is applied
        self._planned: dict[OrderKey, list[Holding]] = {}  # each plan's holdings as it names them
        self._voided: dict[OrderKey, set[DeviceKey]] = {}  # devices a plan no longer holds (`_effective`)
        self._made: dict[OrderKey, float] = {}  # when each reservation was made (monotonic)
        self._until: dict[OrderKey, float] = {}  # when it lapses
        self._deadlines: list[tuple[float, OrderKey]] = []

    @classmethod
    def from_objects(
        cls,
        device_classes: Iterable[Mapping[str, Any]],
        slices: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        priority_classes: Iterable[Mapping[str, Any]] = (),
        orders: Iterable[Mapping[str, Any]] = (),
        service_classes: Iterable[Mapping[str, Any]] = (),
        nodes: Iterable[Mapping[str, Any]] = (),
        plans: Iterable[Mapping[str, Any]] = (),
    ) -> Books:
        """Books from plain resource.k8s.io/v1 (scheduling.k8s.io/v1, v1, ai.deckhouse.io) dicts."""
        with loading():
            books = cls()
            for node in nodes:
                books.fleet.set_node(node["metadata"]["name"], node_state(node))
            for dc in device_classes:
                books.classes.put(dc)
            for pc in priority_classes:
                books.upsert_priority_class(pc)
            for order in orders:
                books.upsert_order(order)
            for klass in service_classes:
                books.upsert_service_class(klass)
            for sl in slices:
                books.fleet.keep_slice(sl)
            with books.applying(until_synced=True):
                for pool in books.fleet.pools():
                    books._refresh_pool(pool)
            with books.applying(until_synced=True):
                books.upsert_claims(claims)
                for plan in plans:
                    books.upsert_plan(plan)
            books.synced = True
        return books

    def _free(self) -> None:
        """Room may have appeared: tell the owner (under a listing, once it is applied)."""
        if self._deferred is not None:
            self._owed = True
            return
        self._on_free()

    # ------------------------------------------------------------------ device classes

    def upsert_device_class(self, dc: Mapping[str, Any]) -> None:
        """Add or change a DeviceClass; re-judges every device against it (a relist changes nothing)."""
        if self.classes.put(dc):
            self._rejudge_all()

    def delete_device_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        self.classes.drop(name)
        self._rejudge_all()

    def _rejudge_all(self) -> None:
        """Judge every device against the classes again; under a listing (classes listed after the slices,
        or one of many classes), once when the listing is applied."""
        self.fleet.unlist_classes()
        if self._deferred is not None:
            self._rejudge = self._rejudge or bool(self.fleet.devices)  # devices made later are judged anew
        else:
            self._judge_every()
            for device in self.fleet.devices.values():
                self.index.add(device, self.ledger.room(device.key))
        self.version += 1
        self._free()

    def _judge_every(self) -> None:
        """Take every device out of the index and judge it against the classes again."""
        self.classes.clear_faults()
        for device in self.fleet.devices.values():
            self.index.remove(device)
            self.classes.admit(device)

    # ------------------------------------------------------------------ slices and nodes

    def upsert_slice(self, sl: Mapping[str, Any]) -> None:
        """Add or change a ResourceSlice; its pool is recomputed."""
        for pool in self.fleet.put_slice(sl):
            self._refresh_pool(pool)

    def delete_slice(self, name: str) -> None:
        """Forget a ResourceSlice; its pool is recomputed."""
        for pool in self.fleet.drop_slice(name):
            self._refresh_pool(pool)

    def _refresh_pool(self, pool: PoolKey) -> None:
        change = self.fleet.republish(pool)
        for old in change.gone:
            self.ledger.forget(old.key)
            self.index.remove(old)
        deferred = self._deferred
        if deferred is not None:  # a listing: counted and indexed with the rest of it
            for key in change.published:
                deferred[key] = None
        if change.counters or pool in self.ledger.consumed:
            self.ledger.recount_counters(pool)
        if deferred is None:
            for key in change.published:
                self.ledger.recount(key)
            for device in change.published.values():
                self.index.add(device, self.ledger.room(device.key))
        self.version += 1
        self._free()

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        """A node opened or closed to new pods: its devices are offered again, or no longer."""
        name = node["metadata"]["name"]
        self.fleet.node_back(name)
        self._set_node(name, node_state(node))

    def delete_node(self, node: Mapping[str, Any]) -> None:
        """A node gone: its slices go with it; what it published is remembered for a while (`departed`)."""
        name = node["metadata"]["name"]
        self.fleet.node_deleted(name)
        self._free()  # orders planned there are judged again: the room's answer names them
        self._set_node(name, "deleted")  # its slices may outlive it a moment: nothing is placed on them

    def _set_node(self, name: str, state: str | None) -> None:
        said, pools = self.fleet.set_node(name, state)
        if said:
            self.version += 1  # what a refusal says of the node changed
        for pool in pools:
            self._refresh_pool(pool)

    # ------------------------------------------------------------------ holdings

    def _touched(self) -> Touched:
        return self._deferred if self._deferred is not None else {}

    def _settle_now(self, touched: Touched) -> None:
        if self._deferred is None and touched:
            self._settle(touched)

    def upsert_claim(self, claim: Mapping[str, Any]) -> None:
        """Add or change a ResourceClaim: the results of its allocation become holdings.

        A claim that is not allocated holds nothing: a claim is anyone's to create in their namespace, and
        a module's claim that waits is held by its order's LaunchPlan instead (issue 29)."""
        self.upsert_claims((claim,))

    def upsert_claims(self, claims: Iterable[Mapping[str, Any]]) -> None:
        """`upsert_claim` of each (a listing's page)."""
        ledger = self.ledger
        table, unallocated = ledger.claims, ledger.unallocated
        for claim in claims:
            uid, source, order, holdings, waits = claim_holdings(claim)
            if table.get(uid, []) != holdings:  # a relist, or status other than the allocation
                touched = self._touched()
                ledger.set_source(source, table, uid, holdings, touched)
                self._settle_now(touched)
                self._refloat(order)
            watched = order is not None and (waits or order in unallocated)
            if watched and order is not None:
                if ledger.note_unallocated(order, uid, waits):
                    self._free()
                self._refloat(order)

    def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Forget a ResourceClaim."""
        uid, order = claim_key(claim)
        touched = self._touched()
        self.ledger.set_source(CLAIM + uid, self.ledger.claims, uid, [], touched)
        self._settle_now(touched)
        self.ledger.note_unallocated(order, uid, False)
        self._refloat(order)

    def upsert_plan(self, plan: Mapping[str, Any]) -> None:
        """Add or change a LaunchPlan: its order holds the devices it places it on, at what its claim asks.

        A plan is named after its order. Once it names the devices of the order's reservation, the
        reservation has done its work and is dropped."""
        key, holdings = plan_holdings(plan)
        if self._planned.get(key, []) != holdings:
            self._planned[key] = holdings
            self._voided.pop(key, None)  # a new plan holds what it names
            self._set_plan(key, self._effective(key))
        reserved = self.ledger.reservations.get(key)
        if holdings and reserved is not None and {h.device for h in reserved} <= {h.device for h in holdings}:
            self.release(key)

    def delete_plan(self, plan: Mapping[str, Any]) -> None:
        """Forget a LaunchPlan."""
        meta = plan.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        self._planned.pop(key, None)
        self._voided.pop(key, None)
        self._set_plan(key, [])

    def _effective(self, order: OrderKey) -> list[Holding]:
        """The holdings of the order's plan, less those its claims answered elsewhere (issues 40, 41).

        A plan holds its devices for its order until the order runs: while no claim of it is allocated,
        or one still waits for an allocation, or one is allocated there. A claim's first choice is the
        planned devices and its second any of their shape, so once every claim of the order is allocated and
        none on a planned device, the order runs elsewhere and the plan no longer holds that device; and a
        plan on a partition the driver publishes without a uuid (DynamicMIG) holds one placement of its
        profile on its parent, so a claim on another such placement is the plan's, whatever else waits. A
        device so let go stays let go until the plan changes: a replica made again later takes any device of
        its shape, and never displaces whoever took the room meanwhile."""
        planned = self._planned.get(order, [])
        claimed = self.ledger.claimed(order)
        voided = self._voided.setdefault(order, set())
        if planned and claimed:
            devices = self.fleet.devices
            settled = order not in self.ledger.unallocated
            pins = [devices[k].pin for k in claimed if k in devices and devices[k].uuid is None]
            for h in planned:
                device = devices.get(h.device)
                if h.device in claimed:
                    continue
                if settled or (
                    device is not None and device.uuid is None and device.pin and device.pin in pins
                ):
                    voided.add(h.device)
        if not voided:
            del self._voided[order]
            return planned
        return [h for h in planned if h.device not in voided]

    def _refloat(self, order: OrderKey | None) -> None:
        """The order's claims changed: what its plan holds again (`_effective`)."""
        if order is not None and order in self._planned:
            effective = self._effective(order)
            if self.ledger.plans.get(order, []) != effective:
                self._set_plan(order, effective)

    def _set_plan(self, key: OrderKey, holdings: list[Holding]) -> None:
        touched = self._touched()
        self.ledger.set_source(source_of("plan", key), self.ledger.plans, key, holdings, touched)
        self._settle_now(touched)

    # ------------------------------------------------------------------ reservations

    def reserve(
        self,
        order: OrderKey,
        priority: int,
        held: list[tuple[DeviceKey, int | None, Mapping[str, Decimal] | None]],
        ttl: float,
    ) -> None:
        """Hold devices for a plan that is not yet stored as a LaunchPlan, for `ttl` seconds:
        (device, shares or None for the whole device, what its claim asks)."""
        holdings = reservation_holdings(order, priority, held, time.time())
        touched = self._touched()
        self.ledger.set_source(
            source_of("reservation", order), self.ledger.reservations, order, holdings, touched
        )
        self._settle_now(touched)
        self._made[order] = started = time.monotonic()
        self._until[order] = deadline = started + ttl
        heapq.heappush(self._deadlines, (deadline, order))

    def release(self, order: OrderKey) -> None:
        """Drop the reservation of an order."""
        self._made.pop(order, None)
        self._until.pop(order, None)
        if order in self.ledger.reservations:
            touched = self._touched()
            self.ledger.set_source(
                source_of("reservation", order), self.ledger.reservations, order, [], touched
            )
            self._settle_now(touched)

    def expire(self, now: float | None = None) -> None:
        """Drop reservations whose time is up."""
        now = time.monotonic() if now is None else now
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, order = heapq.heappop(self._deadlines)
            if self._until.get(order) == deadline:
                self.release(order)

    def reserved_by(self, order: OrderKey) -> list[DeviceKey]:
        """Devices reserved for an order and not yet seen in its LaunchPlan."""
        return [h.device for h in self.ledger.reservations.get(order, [])]

    def reservations(self) -> list[tuple[OrderKey, float, float, list[Holding]]]:
        """(order, made at, deadline, holdings) of every reservation, by order; monotonic times."""
        return [
            (order, self._made.get(order, deadline), deadline, list(self.ledger.reservations.get(order, [])))
            for order, deadline in sorted(self._until.items())
        ]

    # ------------------------------------------------------------------ priorities

    def upsert_order(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceService: only its class counts here."""
        known, changed = self.priorities.put_order(obj)
        if not known or changed:
            self.version += 1  # the priority of what it holds may have changed
        if known and changed:
            self._free()  # its priority changed: a preemption may now be possible

    def delete_order(self, obj: Mapping[str, Any]) -> None:
        """Forget an InferenceService."""
        self.priorities.drop_order(obj)
        self.version += 1

    def upsert_service_class(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceServiceClass: only its priorityClassName counts here."""
        moved, changed = self.priorities.put_class(obj)
        self.version += moved
        if changed:
            self._free()

    def delete_service_class(self, name: str) -> None:
        """Forget an InferenceServiceClass."""
        self.priorities.class_priorities.pop(name, None)
        self.version += 1

    def upsert_priority_class(self, pc: Mapping[str, Any]) -> None:
        """Add or change a PriorityClass."""
        if self.priorities.put_priority_class(pc):
            self.version += 1
            self._free()

    def delete_priority_class(self, name: str) -> None:
        """Forget a PriorityClass."""
        self.priorities.values.pop(name, None)
        self.version += 1

    # ------------------------------------------------------------------ applying at once

    @contextmanager
    def applying(self, until_synced: bool = False) -> Iterator[None]:
        """Apply many changes at once (a listing): the devices they touch are recounted and indexed once at
        the end, not after each change.

        With `until_synced` (a first listing, while the books are not synced: nothing is planned on them
        yet) they wait for the books to be marked `synced`, with those of every other kind's first listing
        and of any event in between: each device is counted and indexed once, with every holding in."""
        if until_synced and not self._synced:
            self._held = True
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            if not self._held:
                self._apply_deferred()

    @property
    def synced(self) -> bool:
        """Whether every kind has been listed once: the ledger answers plans only then."""
        return self._synced

    @synced.setter
    def synced(self, value: bool) -> None:
        self._synced = value
        if value and self._held:  # what the first listings applied is counted and indexed now
            self._held = False
            self._apply_deferred()

    def _apply_deferred(self) -> None:
        """Judge, count and index what a listing (or the first listings) touched, once."""
        touched, self._deferred = self._deferred or {}, None
        owed, self._owed = self._owed, False
        if self._rejudge:
            self._rejudge = False
            self._judge_every()
            touched.update(dict.fromkeys(self.fleet.devices))
        if touched:
            self._settle(touched)
        if owed:
            self._free()

    def _settle(self, touched: Collection[DeviceKey]) -> None:
        """Recount and re-index devices whose holdings changed; tell the owner if room appeared."""
        fleet, ledger, index = self.fleet, self.ledger, self.index
        devices: list[Device] = []
        pools: set[PoolKey] = set()
        out_of_service = False  # a device gone or tainted: a pod left it, a plan there may be stranded
        for key in touched:
            device = fleet.devices.get(key)
            if device is None:
                ledger.recount(key)
                out_of_service = True
                continue
            out_of_service = out_of_service or device.tainted
            devices.append(device)
            if device.consumes:
                pools.add((key[0], key[1]))
        for pool in pools:  # a device drawing on counters changes what its siblings have left
            devices += [
                fleet.devices[k]
                for k in fleet.pool_devices(pool)
                if k not in touched and fleet.devices[k].consumes
            ]
        if len(devices) > _MANY:
            for pool in pools:
                ledger.recount_counters(pool)
            grew = index.readd_many(devices, ledger.recounted)  # each counted anew
        else:
            grew = self._settle_few(devices, pools)
        self.version += 1
        if grew or out_of_service:
            self._free()

    def _settle_few(self, devices: list[Device], pools: set[PoolKey]) -> bool:
        """`_settle` device by device; whether any indexed before has more room now."""
        index, ledger = self.index, self.ledger
        before = [index.indexed.get(d.key) for d in devices]
        for device in devices:
            index.remove(device)
        for pool in pools:
            ledger.recount_counters(pool)
        for device in devices:
            ledger.recount(device.key)
        for device in devices:
            index.add(device, ledger.room(device.key))
        return any(
            was is not None and index.indexed.get(d.key, was) > was
            for d, was in zip(devices, before, strict=True)
        )
