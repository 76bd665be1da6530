"""The hardware the cluster publishes and who holds what of it: one ledger (dra.md §8.1).

Devices come from the latest generation of complete pools only. Holdings come from every
ResourceClaim's allocation (admin access excepted) and from short-lived reservations of plans not yet
visible as claims. Every device is counted in 100 units: a shareable device (allowMultipleAllocations
with a `shares` capacity of 100) gives one unit per share, any other device is taken whole (100).
A holding on a device that is no longer published consumes nothing that exists and frees nothing.

A claim of one of our orders that is not allocated yet but pinned to devices by their uuid (the
claims the operator builds from a plan) holds those devices too, for as long as it exists: the
scheduler will allocate exactly them, so the room is promised even after the plan's reservation
has expired (a pod that waits long for the scheduler, under load, outlived the reservation and its
device was planned a second time).

Partitionable devices (KEP-4815) draw on counter sets their pool publishes (`sharedCounters`): a
full GPU and its MIG-like partitions are separate devices that consume the same counters, so taking
one can leave the others without room although nobody holds them. As kube-scheduler's allocator does
(`checkAvailableCounters`), every held device of the pool consumes its counters, and a device that is
not held is free only while its own consumption still fits what is left of every counter it names;
otherwise it counts as fully used ("blocked").
"""

from __future__ import annotations

import bisect
import heapq
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isvc_api import LABEL_ORDER
from isvc_planner_client import CelJudge, SelectorError, device_activation, quantity_bytes

__all__ = [
    "UNITS",
    "Device",
    "DeviceKey",
    "Holding",
    "Inventory",
    "OrderKey",
    "SelectorFault",
]

UNITS = 100
SHARES = "shares"
MEMORY = "memory"
_BLOCKING = frozenset({"NoSchedule", "NoExecute"})
# How the operator pins a claim to planned devices: `…uuid == 'U'` or `…uuid in ['U1', 'U2']`.
_PINNED = re.compile(r"\.uuid\s*(?:==\s*'([^']*)'|in\s*\[([^\]]*)\])")
_QUOTED = re.compile(r"'([^']*)'")

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
OrderKey = tuple[str, str]  # (namespace, order name)
GroupKey = tuple[int, bool, str, str]  # (memory bytes or -1, shareable, type, product)


@dataclass(frozen=True)
class SelectorFault:
    """A selector that cannot be judged on a device: enough words for PlacementUndecidable."""

    owner: str  # "class gpu.nvidia.com" or "accelerator policy"
    index: int
    device: str
    error: str

    def message(self) -> str:
        """The fault in the scheduler's own wording."""
        return f"{self.owner}: selector #{self.index} on device {self.device}: {self.error}"


@dataclass(eq=False)
class Device:
    """One published device with what the planner reads from it."""

    key: DeviceKey
    node: str | None
    raw: Mapping[str, Any]
    activation: dict[str, Any]
    type: str | None
    uuid: str | None
    product: str | None
    memory: int | None
    shareable: bool
    tainted: bool
    compute_capability: str | None
    consumes: tuple[tuple[str, str, int], ...] = ()  # (counter set, counter, amount) it draws on
    classes: frozenset[str] = frozenset()
    selector_cache: dict[str, bool | SelectorError] = field(default_factory=dict)

    @property
    def driver(self) -> str:
        """DRA driver name."""
        return self.key[0]

    @property
    def pool(self) -> str:
        """DRA pool name."""
        return self.key[1]

    @property
    def name(self) -> str:
        """Device name in its pool."""
        return self.key[2]

    @property
    def ident(self) -> str:
        """driver/pool/device, as the scheduler prints it."""
        return "/".join(self.key)

    @property
    def group(self) -> GroupKey:
        """Devices of one group are interchangeable for placement."""
        return (
            self.memory if self.memory is not None else -1,
            self.shareable,
            self.type or "",
            self.product or "",
        )

    def sort_key(self) -> tuple[str, str, str, str]:
        """Deterministic order: node, pool, device, driver."""
        return (self.node or "", self.pool, self.name, self.driver)


@dataclass(frozen=True)
class Holding:
    """Units of one device held by a claim or a reservation."""

    source: str  # "claim:<uid>" or "reservation:<ns>/<name>"
    device: DeviceKey
    order: OrderKey | None  # None: not one of ours, cannot be preempted
    priority: int  # a reservation's, as the controller asked; a claim's is its order's (priority_of_holding)
    units: int | None  # None: the device's default consumption (whole unless shareable)


def _attr(device: Mapping[str, Any], driver: str, name: str) -> Any:
    attrs = device.get("attributes") or {}
    value = attrs.get(name) or attrs.get(f"{driver}/{name}")
    if isinstance(value, Mapping) and value:
        return next(iter(value.values()))
    return None


def _capacity(device: Mapping[str, Any], driver: str, name: str) -> Mapping[str, Any] | None:
    caps = device.get("capacity") or {}
    value = caps.get(name) or caps.get(f"{driver}/{name}")
    return value if isinstance(value, Mapping) else None


def _bytes(cap: Mapping[str, Any] | None) -> int | None:
    if cap is None or cap.get("value") is None:
        return None
    try:
        return quantity_bytes(str(cap["value"]))
    except ValueError:
        return None


class _Group:
    """Devices of one group admitted by one class, sorted by free units; fully free ones per pool."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, tuple[str, str, str, str]]] = []
        self.devices: dict[tuple[str, str, str, str], Device] = {}
        self.full_free: dict[str, set[tuple[str, str, str, str]]] = {}

    def add(self, device: Device, free: int) -> None:
        sk = device.sort_key()
        self.devices[sk] = device
        bisect.insort(self.entries, (free, sk))
        if free == UNITS:
            self.full_free.setdefault(device.pool, set()).add(sk)

    def remove(self, device: Device, free: int) -> None:
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


class Inventory:
    """Device classes, published devices, holdings and priority classes, kept current incrementally.

    Thread-safe through `lock`: the kube adapter's watch threads update while the service plans.
    """

    def __init__(self, judge: CelJudge | None = None) -> None:
        self.lock = threading.RLock()
        self.judge = judge or CelJudge()
        self.class_selectors: dict[str, list[str]] = {}
        self.class_faults: dict[str, dict[DeviceKey, SelectorFault]] = {}
        self.devices: dict[DeviceKey, Device] = {}
        self.priority_classes: dict[str, int] = {}
        self.default_priority = 0
        # Issue 14: a claim's priority is its order's class's PriorityClass, never a label users can write.
        self.order_classes: dict[OrderKey, str | None] = {}  # order -> its InferenceServiceClass, if any
        self.class_priorities: dict[str, str | None] = {}  # class -> its priorityClassName, if any
        self.synced = False
        # Nodes that take no new pods (cordoned, or a NoSchedule/NoExecute taint our pods do not tolerate):
        # the scheduler would never place a claim's pod there, so their devices are not offered.
        self.closed_nodes: set[str] = set()
        self._slices: dict[str, Mapping[str, Any]] = {}
        self._pool_devices: dict[tuple[str, str], set[DeviceKey]] = {}
        self._pool_slices: dict[tuple[str, str], set[str]] = {}
        self._claims: dict[str, list[Holding]] = {}
        self._holdings: dict[DeviceKey, dict[str, Holding]] = {}
        self._used: dict[DeviceKey, int] = {}
        self._reservations: dict[OrderKey, tuple[float, list[Holding]]] = {}
        self._reserved_at: dict[OrderKey, float] = {}  # when each reservation was made (monotonic)
        self._deadlines: list[tuple[float, OrderKey]] = []
        self._order_claims: dict[OrderKey, set[str]] = {}
        self._index: dict[str, dict[GroupKey, _Group]] = {}
        self._indexed: dict[DeviceKey, int] = {}  # free units a device was indexed with
        # Counter sets per pool: (set, counter) -> published value; and what held devices consume of them.
        self._counters: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self._consumed: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self._blocked: set[DeviceKey] = set()
        # Pending pinned claims: uid -> (order, priority, [(driver, uuid, shares or None)]).
        self._pending: dict[str, tuple[OrderKey, int, list[tuple[str, str, int | None]]]] = {}
        self._uuids: dict[tuple[str, str], DeviceKey] = {}
        # Refused by the scheduler although the ledger saw room: device -> (until, order, view then).
        self._distrust: dict[DeviceKey, tuple[float, OrderKey | None, tuple[object, ...]]] = {}
        self.version = 0

    # ------------------------------------------------------------------ construction

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
    ) -> Inventory:
        """An inventory from plain resource.k8s.io/v1 (scheduling.k8s.io/v1, v1, ai.deckhouse.io) dicts."""
        inv = cls()
        inv.closed_nodes = {n["metadata"]["name"] for n in nodes if _node_closed(n)}
        for dc in device_classes:
            inv._set_class(dc)
        for pc in priority_classes:
            inv.upsert_priority_class(pc)
        for order in orders:
            inv.upsert_order(order)
        for klass in service_classes:
            inv.upsert_service_class(klass)
        by_pool: set[tuple[str, str]] = set()
        for sl in slices:
            inv._slices[sl["metadata"]["name"]] = sl
            inv._pool_slices.setdefault(_pool_id(sl), set()).add(sl["metadata"]["name"])
            by_pool.add(_pool_id(sl))
        for pool in sorted(by_pool):
            inv._refresh_pool(pool)
        for claim in claims:
            inv.upsert_claim(claim)
        inv.synced = True
        return inv

    # ------------------------------------------------------------------ device classes

    def _set_class(self, dc: Mapping[str, Any]) -> None:
        name = dc["metadata"]["name"]
        selectors = [
            s["cel"]["expression"] for s in (dc.get("spec") or {}).get("selectors") or [] if s.get("cel")
        ]
        self.class_selectors[name] = selectors

    def upsert_device_class(self, dc: Mapping[str, Any]) -> None:
        """Add or change a DeviceClass; re-judges every device against it."""
        with self.lock:
            self._set_class(dc)
            self._rejudge_all()

    def delete_device_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        with self.lock:
            self.class_selectors.pop(name, None)
            self._rejudge_all()

    def _rejudge_all(self) -> None:
        for device in list(self.devices.values()):
            self._unindex(device)
            self._judge_classes(device)
            self._index_device(device)
        self.version += 1

    def _judge_classes(self, device: Device) -> None:
        admitted = set()
        for name, selectors in self.class_selectors.items():
            faults = self.class_faults.setdefault(name, {})
            faults.pop(device.key, None)
            ok = True
            for i, expr in enumerate(selectors):
                try:
                    if not self.judge.matches(expr, device.activation):
                        ok = False
                        break
                except SelectorError as error:
                    faults[device.key] = SelectorFault(f"class {name}", i, device.ident, str(error))
                    ok = False
                    break
            if ok:
                admitted.add(name)
        device.classes = frozenset(admitted)

    # ------------------------------------------------------------------ slices and pools

    def upsert_slice(self, sl: Mapping[str, Any]) -> None:
        """Add or change a ResourceSlice; its pool is recomputed."""
        with self.lock:
            name = sl["metadata"]["name"]
            old = self._slices.get(name)
            self._slices[name] = sl
            self._pool_slices.setdefault(_pool_id(sl), set()).add(name)
            if old is not None and _pool_id(old) != _pool_id(sl):
                self._pool_slices.get(_pool_id(old), set()).discard(name)
                self._refresh_pool(_pool_id(old))
            self._refresh_pool(_pool_id(sl))

    def delete_slice(self, name: str) -> None:
        """Forget a ResourceSlice; its pool is recomputed."""
        with self.lock:
            old = self._slices.pop(name, None)
            if old is not None:
                self._pool_slices.get(_pool_id(old), set()).discard(name)
                self._refresh_pool(_pool_id(old))

    def _refresh_pool(self, pool: tuple[str, str]) -> None:
        members = [self._slices[n] for n in sorted(self._pool_slices.get(pool, ())) if n in self._slices]
        published: dict[DeviceKey, Device] = {}
        counters: dict[tuple[str, str], int] = {}
        if members:
            top = max(int(s["spec"]["pool"].get("generation", 0)) for s in members)
            latest = [s for s in members if int(s["spec"]["pool"].get("generation", 0)) == top]
            expected = max(int(s["spec"]["pool"].get("resourceSliceCount", 1)) for s in latest)
            if len(latest) == expected:
                for sl in latest:
                    for cs in sl["spec"].get("sharedCounters") or []:
                        for counter, value in (cs.get("counters") or {}).items():
                            counters[(cs["name"], counter)] = _amount(value)
                    for raw in sl["spec"].get("devices") or []:
                        device = self._make_device(sl, raw)
                        published[device.key] = device
        for key in self._pool_devices.pop(pool, set()):
            self._blocked.discard(key)
            old = self.devices.pop(key, None)
            if old is not None and old.uuid is not None:
                self._uuids.pop((old.driver, old.uuid), None)
            if old is not None:
                self._unindex(old)
                for faults in self.class_faults.values():
                    faults.pop(key, None)
        self._counters.pop(pool, None)
        if counters:
            self._counters[pool] = counters
        for key, device in published.items():
            self._judge_classes(device)
            self.devices[key] = device
            if device.uuid is not None:
                self._uuids[(device.driver, device.uuid)] = key
            self._recount(key)
        if published:
            self._pool_devices[pool] = set(published)
        self._recount_counters(pool)
        for device in published.values():
            self._index_device(device)
        self.version += 1
        for uid in [u for u, (_, _, pins) in self._pending.items() if any(d == pool[0] for d, _, _ in pins)]:
            self._set_claim(uid, self._pinned_holdings(uid))  # the uuids may name other devices now

    def _make_device(self, sl: Mapping[str, Any], raw: Mapping[str, Any]) -> Device:
        spec = sl["spec"]
        driver = spec["driver"]
        shares = _capacity(raw, driver, SHARES)
        allow = bool(raw.get("allowMultipleAllocations", False))
        taints = raw.get("taints") or []
        cc = _attr(raw, driver, "cudaComputeCapability")
        return Device(
            key=(driver, spec["pool"]["name"], raw["name"]),
            node=raw.get("nodeName") or spec.get("nodeName"),
            raw=raw,
            activation=device_activation(driver, raw),
            type=_attr(raw, driver, "type"),
            uuid=_attr(raw, driver, "uuid"),
            product=_attr(raw, driver, "productName") or _attr(raw, driver, "model"),
            memory=_bytes(_capacity(raw, driver, MEMORY)),
            shareable=allow and _bytes(shares) == UNITS,
            tainted=any(t.get("effect") in _BLOCKING for t in taints)
            or (raw.get("nodeName") or spec.get("nodeName")) in self.closed_nodes,
            compute_capability=str(cc) if cc is not None else None,
            consumes=tuple(
                sorted(
                    (str(c.get("counterSet")), name, _amount(v))
                    for c in raw.get("consumesCounters") or []
                    for name, v in (c.get("counters") or {}).items()
                )
            ),
        )

    # ------------------------------------------------------------------ holdings

    def upsert_claim(self, claim: Mapping[str, Any]) -> None:
        """Add or change a ResourceClaim: its allocation results become holdings."""
        meta = claim.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        labels = meta.get("labels") or {}
        order: OrderKey | None = None
        if labels.get(LABEL_ORDER):
            order = (meta.get("namespace") or "", labels[LABEL_ORDER])
        priority = 0  # never the claim's labels (writable by namespace users): see priority_of_holding
        allocation = (claim.get("status") or {}).get("allocation")
        results = ((allocation or {}).get("devices") or {}).get("results") or []
        holdings = []
        for r in results:
            if r.get("adminAccess"):
                continue
            consumed = (r.get("consumedCapacity") or {}).get(SHARES)
            units = None
            if consumed is not None:
                try:
                    units = quantity_bytes(str(consumed))
                except ValueError:
                    units = None
            holdings.append(
                Holding(f"claim:{uid}", (r["driver"], r["pool"], r["device"]), order, priority, units)
            )
        pins = (
            _pins(claim)
            if allocation is None and order is not None and not meta.get("deletionTimestamp")
            else []
        )
        with self.lock:
            if pins:
                assert order is not None
                self._pending[uid] = (order, priority, pins)
                holdings = self._pinned_holdings(uid)
            else:
                self._pending.pop(uid, None)
            self._set_claim(uid, holdings)
            if order is not None and order in self._reservations:
                held = {h.device for u in self._order_claims.get(order, ()) for h in self._claims[u]}
                if {h.device for h in self._reservations[order][1]} <= held:
                    self.release(order)

    def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Forget a ResourceClaim."""
        meta = claim.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        with self.lock:
            self._pending.pop(uid, None)
            self._set_claim(uid, [])

    def _pinned_holdings(self, uid: str) -> list[Holding]:
        order, priority, pins = self._pending[uid]
        return [
            Holding(f"claim:{uid}", self._uuids[(driver, uuid)], order, priority, units)
            for driver, uuid, units in pins
            if (driver, uuid) in self._uuids
        ]

    def pending(self, order: OrderKey) -> list[DeviceKey]:
        """Devices the order's claims are pinned to and the scheduler has not allocated yet."""
        with self.lock:
            return sorted(
                {
                    h.device
                    for uid, (o, _, _) in self._pending.items()
                    if o == order
                    for h in self._claims.get(uid, [])
                }
            )

    def _set_claim(self, uid: str, holdings: list[Holding]) -> None:
        old = self._claims.pop(uid, [])
        for h in old:
            if h.order is not None:
                self._order_claims.get(h.order, set()).discard(uid)
        self._replace(f"claim:{uid}", old, holdings)
        if holdings:
            self._claims[uid] = holdings
            for h in holdings:
                if h.order is not None:
                    self._order_claims.setdefault(h.order, set()).add(uid)

    def reserve(
        self, order: OrderKey, priority: int, holdings: list[tuple[DeviceKey, int]], ttl: float
    ) -> None:
        """Hold devices for a plan that is not yet visible as a claim, for `ttl` seconds."""
        source = f"reservation:{order[0]}/{order[1]}"
        new = [Holding(source, key, order, priority, units) for key, units in holdings]
        with self.lock:
            old = self._reservations.pop(order, (0.0, []))[1]
            self._replace(source, old, new)
            now = time.monotonic()
            deadline = now + ttl
            self._reservations[order] = (deadline, new)
            self._reserved_at[order] = now
            heapq.heappush(self._deadlines, (deadline, order))

    def release(self, order: OrderKey) -> None:
        """Drop the reservation of an order."""
        with self.lock:
            old = self._reservations.pop(order, None)
            self._reserved_at.pop(order, None)
            if old is not None:
                self._replace(f"reservation:{order[0]}/{order[1]}", old[1], [])

    def reserved_by(self, order: OrderKey) -> list[DeviceKey]:
        """Devices reserved for an order and not yet seen as its claims."""
        with self.lock:
            return [h.device for h in self._reservations.get(order, (0.0, []))[1]]

    def reservations(self) -> list[tuple[OrderKey, float, float, list[Holding]]]:
        """(order, made at, deadline, holdings) of every reservation, by order; monotonic times."""
        with self.lock:
            return [
                (order, self._reserved_at.get(order, deadline), deadline, list(held))
                for order, (deadline, held) in sorted(self._reservations.items())
            ]

    def expire(self, now: float | None = None) -> None:
        """Drop reservations whose time is up."""
        now = time.monotonic() if now is None else now
        with self.lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                deadline, order = heapq.heappop(self._deadlines)
                current = self._reservations.get(order)
                if current is not None and current[0] == deadline:
                    self.release(order)

    def _replace(self, source: str, old: list[Holding], new: list[Holding]) -> None:
        touched = {h.device for h in old} | {h.device for h in new}
        for h in old:
            self._holdings.get(h.device, {}).pop(source, None)
        for h in new:
            slot = self._holdings.setdefault(h.device, {})
            prev = slot.get(source)
            if prev is not None and prev.units is not None and h.units is not None:
                h = Holding(source, h.device, h.order, h.priority, prev.units + h.units)
            slot[source] = h
        # A device drawing on counters changes what its siblings have left: they are re-indexed too.
        pools = {(k[0], k[1]) for k in touched if (d := self.devices.get(k)) is not None and d.consumes}
        affected = set(touched)
        for pool in pools:
            affected |= {k for k in self._pool_devices.get(pool, ()) if self.devices[k].consumes}
        devices = [d for k in sorted(affected) if (d := self.devices.get(k)) is not None]
        for device in devices:
            self._unindex(device)
        for key in touched:
            self._recount(key)
        for pool in pools:
            self._recount_counters(pool)
        for device in devices:
            self._index_device(device)
        self.version += 1

    def holding_units(self, h: Holding, device: Device) -> int:
        """Units one holding takes of a device: its shares on a shareable device, else all."""
        if not device.shareable:
            return UNITS
        if h.units is None:
            default = ((_capacity(device.raw, device.driver, SHARES) or {}).get("requestPolicy") or {}).get(
                "default"
            )
            return min(UNITS, quantity_bytes(str(default))) if default is not None else UNITS
        return min(UNITS, max(0, h.units))

    def _recount(self, key: DeviceKey) -> None:
        device = self.devices.get(key)
        holds = self._holdings.get(key) or {}
        if device is None:
            self._used.pop(key, None)
            return
        # Not capped at UNITS: while a preemption is under way the victim's claim and the new plan's
        # reservation overlap, and a victim that counts its own claim as free must still see no room.
        self._used[key] = sum(self.holding_units(h, device) for h in holds.values())

    def _recount_counters(self, pool: tuple[str, str]) -> None:
        """What the pool's held devices consume of its counter sets, and which devices that blocks."""
        keys = [k for k in self._pool_devices.get(pool, ()) if self.devices[k].consumes]
        self._blocked.difference_update(keys)
        consumed: dict[tuple[str, str], int] = {}
        for key in keys:
            if self._holdings.get(key):
                for counter_set, counter, amount in self.devices[key].consumes:
                    consumed[(counter_set, counter)] = consumed.get((counter_set, counter), 0) + amount
        self._consumed[pool] = consumed
        if not consumed:
            self._consumed.pop(pool, None)
        published = self._counters.get(pool, {})
        for key in keys:
            if self._holdings.get(key):
                continue
            for counter_set, counter, amount in self.devices[key].consumes:
                left = published.get((counter_set, counter), 0) - consumed.get((counter_set, counter), 0)
                if amount > left:  # a counter the pool does not publish has nothing left
                    self._blocked.add(key)
                    break

    def counters_fit(self, keys: Iterable[DeviceKey]) -> bool:
        """Whether devices not held yet could all be taken together without overdrawing a counter."""
        extra: dict[tuple[tuple[str, str], tuple[str, str]], int] = {}
        for key in keys:
            device = self.devices.get(key)
            if device is None or self._holdings.get(key):
                continue
            pool = (key[0], key[1])
            for counter_set, counter, amount in device.consumes:
                slot = (pool, (counter_set, counter))
                extra[slot] = extra.get(slot, 0) + amount
        for (pool_id, name), amount in extra.items():
            left = self._counters.get(pool_id, {}).get(name, 0) - self._consumed.get(pool_id, {}).get(name, 0)
            if amount > left:
                return False
        return True

    # ------------------------------------------------------------------ reading

    def used(self, key: DeviceKey) -> int:
        """Units of a published device held by anyone (above UNITS while a preemption is under way);
        UNITS for a device nobody holds whose counters its partitioned siblings have drawn down."""
        if key in self._blocked:
            return UNITS
        return self._used.get(key, 0)

    def distrust(self, keys: Iterable[DeviceKey], ttl: float, order: OrderKey | None = None) -> None:
        """The scheduler refused a claim (of `order`) pinned to these devices while the ledger saw room:
        offer them to nobody until the ledger's view of them changes (the pool, or who else holds them or
        the partitions they share counters with) or `ttl` passes."""
        until = time.monotonic() + ttl
        with self.lock:
            for key in keys:
                self._distrust[key] = (until, order, self._view(key, order))

    def distrusted(self) -> set[DeviceKey]:
        """Devices whose refusal by the scheduler still stands."""
        now = time.monotonic()
        with self.lock:
            for key, (until, order, view) in list(self._distrust.items()):
                if until <= now or self._view(key, order) != view:
                    del self._distrust[key]
            return set(self._distrust)

    def _view(self, key: DeviceKey, order: OrderKey | None) -> tuple[object, ...]:
        """What the ledger knows of a device, leaving out the holdings of `order` itself."""
        device = self.devices.get(key)
        if device is None:
            return ()
        near = [key]
        if device.consumes:
            near = sorted(k for k in self._pool_devices.get((key[0], key[1]), ()) if self.devices[k].consumes)
        held = tuple(
            sorted(
                h.source
                for k in near
                for h in (self._holdings.get(k) or {}).values()
                if order is None or h.order != order
            )
        )
        return (id(device), held)

    def generation(self, key: DeviceKey) -> int:
        """The generation of the pool a device is published in (-1: not published)."""
        with self.lock:
            if key not in self.devices:
                return -1
            names = self._pool_slices.get((key[0], key[1]), ())
            members = [self._slices[n] for n in names if n in self._slices]
            return max((int(s["spec"]["pool"].get("generation", 0)) for s in members), default=-1)

    def blocked(self, key: DeviceKey) -> bool:
        """Whether a device nobody holds has no room left in the counters it draws on."""
        return key in self._blocked

    def holdings_on(self, key: DeviceKey) -> list[Holding]:
        """Every holding on a device, published or not, in a stable order."""
        return sorted((self._holdings.get(key) or {}).values(), key=lambda h: h.source)

    def held_by(self, order: OrderKey) -> dict[DeviceKey, int]:
        """Units an order holds per published device (claims and its reservation)."""
        out: dict[DeviceKey, int] = {}
        sources = [self._claims[uid] for uid in sorted(self._order_claims.get(order, ()))]
        if order in self._reservations:
            sources.append(self._reservations[order][1])
        for hs in sources:
            for h in hs:
                device = self.devices.get(h.device)
                if h.order == order and device is not None:
                    out[h.device] = min(UNITS, out.get(h.device, 0) + self.holding_units(h, device))
        return out

    def orphans(self) -> list[Holding]:
        """Holdings on devices no longer published: they free nothing, also not for their holder."""
        return [h for key, hs in self._holdings.items() if key not in self.devices for h in hs.values()]

    def groups(self, device_class: str) -> dict[GroupKey, _Group]:
        """The placement index of one class."""
        return self._index.get(device_class, {})

    def class_devices(self, device_class: str) -> list[Device]:
        """Published devices a class admits, in a stable order."""
        return sorted((d for d in self.devices.values() if device_class in d.classes), key=Device.sort_key)

    def priority_of(self, name: str | None) -> int | None:
        """The value of a PriorityClass; the global default (or 0) for None; None when missing."""
        if name is None:
            return self.default_priority
        return self.priority_classes.get(name)

    def order_priority(self, order: OrderKey) -> int:
        """The priority of an order: its class's PriorityClass; the default for none, unknown or missing."""
        with self.lock:
            klass = self.order_classes.get(order)
            name = self.class_priorities.get(klass) if klass is not None else None
            value = self.priority_of(name)
            return self.default_priority if value is None else value

    def priority_of_holding(self, h: Holding) -> int:
        """A reservation's priority as planned; a claim's that of the order owning it, as it is now."""
        if h.order is not None and h.source.startswith("claim:"):
            return self.order_priority(h.order)
        return h.priority

    def upsert_order(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceService: only its class counts here."""
        meta = obj.get("metadata") or {}
        klass = (obj.get("spec") or {}).get("inferenceServiceClassName")
        with self.lock:
            self.order_classes[(meta.get("namespace") or "", meta.get("name") or "")] = (
                klass if isinstance(klass, str) and klass else None
            )

    def delete_order(self, obj: Mapping[str, Any]) -> None:
        """Forget an InferenceService."""
        meta = obj.get("metadata") or {}
        with self.lock:
            self.order_classes.pop((meta.get("namespace") or "", meta.get("name") or ""), None)

    def upsert_service_class(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceServiceClass: only its priorityClassName counts here."""
        name = (obj.get("spec") or {}).get("priorityClassName")
        with self.lock:
            self.class_priorities[obj["metadata"]["name"]] = name if isinstance(name, str) and name else None

    def delete_service_class(self, name: str) -> None:
        """Forget an InferenceServiceClass."""
        with self.lock:
            self.class_priorities.pop(name, None)

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        """A node opened or closed to new pods: its devices are offered again, or no longer."""
        self._set_node(node["metadata"]["name"], _node_closed(node))

    def delete_node(self, node: Mapping[str, Any]) -> None:
        """A node gone: its slices go with it; nothing is remembered of it here."""
        self._set_node(node["metadata"]["name"], False)

    def _set_node(self, name: str, closed: bool) -> None:
        with self.lock:
            if closed == (name in self.closed_nodes):
                return
            if closed:
                self.closed_nodes.add(name)
            else:
                self.closed_nodes.discard(name)
            pools = {(d.key[0], d.key[1]) for d in self.devices.values() if d.node == name}
            for pool in sorted(pools):
                self._refresh_pool(pool)

    def upsert_priority_class(self, pc: Mapping[str, Any]) -> None:
        """Add or change a PriorityClass."""
        with self.lock:
            self.priority_classes[pc["metadata"]["name"]] = int(pc.get("value", 0))
            if pc.get("globalDefault"):
                self.default_priority = int(pc.get("value", 0))

    def delete_priority_class(self, name: str) -> None:
        """Forget a PriorityClass."""
        with self.lock:
            self.priority_classes.pop(name, None)

    # ------------------------------------------------------------------ index

    def _index_device(self, device: Device) -> None:
        if device.tainted:
            return
        free = UNITS - self.used(device.key)
        self._indexed[device.key] = free
        for name in device.classes:
            self._index.setdefault(name, {}).setdefault(device.group, _Group()).add(device, free)

    def _unindex(self, device: Device) -> None:
        free = self._indexed.pop(device.key, None)
        if free is None:
            return
        for name in device.classes:
            group = self._index.get(name, {}).get(device.group)
            if group is not None:
                group.remove(device, free)


def _node_closed(node: Mapping[str, Any]) -> bool:
    """Whether a node takes no new pods: cordoned, or tainted NoSchedule/NoExecute (not-ready included)."""
    spec = node.get("spec") or {}
    taints = spec.get("taints") or []
    return bool(spec.get("unschedulable")) or any(t.get("effect") in _BLOCKING for t in taints)


def _pins(claim: Mapping[str, Any]) -> list[tuple[str, str, int | None]]:
    """(driver, uuid, shares or None) for each device a claim's requests are pinned to by uuid."""
    out: list[tuple[str, str, int | None]] = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly") or {}
        shares = ((exactly.get("capacity") or {}).get("requests") or {}).get(SHARES)
        units = _amount(shares) if shares is not None else None
        for selector in exactly.get("selectors") or []:
            expression = (selector.get("cel") or {}).get("expression") or ""
            driver = re.search(r"device\.driver\s*==\s*'([^']*)'", expression)
            match = _PINNED.search(expression)
            if driver is None or match is None:
                continue
            uuids = [match.group(1)] if match.group(1) is not None else _QUOTED.findall(match.group(2))
            out += [(driver.group(1), u, units) for u in uuids]
    return out


def _amount(counter: Any) -> int:
    """A counter's value ({"value": "40Gi"}) in base units; 0 when it cannot be read."""
    value = counter.get("value") if isinstance(counter, Mapping) else counter
    try:
        return quantity_bytes(str(value))
    except ValueError:
        return 0


def _pool_id(sl: Mapping[str, Any]) -> tuple[str, str]:
    return (sl["spec"]["driver"], sl["spec"]["pool"]["name"])
