"""The hardware the cluster publishes and who holds what of it: one ledger (dra.md §8.1).

Devices come from the latest generation of complete pools only. Holdings are what kube-scheduler counts
and what the module has planned:

- every ResourceClaim's allocation (admin access excepted), as the scheduler recorded it: a shared
  result consumes its `consumedCapacity`, any other result the whole device. Only the scheduler writes
  an allocation (claim status); a claim nobody allocated holds nothing, whoever made it and whatever its
  labels say (a namespace user may create claims: issue 29);
- the module's LaunchPlans: each plan holds its devices, at what its claim will ask, for as long as it
  exists, so an order whose claim waits (for the scheduler, for a quota) keeps its room. Namespace users
  may read and delete LaunchPlans, never create or change them (the chart's roles);
- reservations of plans not yet stored as a LaunchPlan (a short TTL, keyed by order).

An order counts once per device: its allocated claims together, or its plan (or reservation), whichever
takes more of each capacity. What a holding consumes is computed in the scheduler's own arithmetic
(`_capacity`: request policies, rounding, every published capacity), so the ledger never admits a claim the
scheduler would not; a shareable device's free room is the largest share whose claim still fits. A
holding on a device that is no longer published consumes nothing that exists and frees nothing.

Partitionable devices (KEP-4815) draw on counter sets their pool publishes (`sharedCounters`): a full GPU
and its MIG-like partitions are separate devices that consume the same counters, so taking one can leave
the others without room although nobody holds them. As kube-scheduler's allocator does
(`checkAvailableCounters`), every held device of the pool consumes its counters, and a device that is not
held is free only while its own consumption still fits what is left of every counter it names; otherwise
it counts as fully used ("blocked").

Who stands on a device is one ranking (`displaced`): holders without an order first (nobody can release
them), then by priority, then the earlier holding. An order that does not fit among those ranked above it
has lost the device; since placing it there needs room among all other holders, a superset of those, it
can never be placed back on the device it lost while the ledger is unchanged.
"""

from __future__ import annotations

import bisect
import functools
import gc
import heapq
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

from cachetools import LRUCache
from isvc_api import LABEL_ORDER, DeviceKey, OrderKey, Placement, claim_capacity_requests
from isvc_planner_client import (
    CelJudge,
    QuantityError,
    SelectorError,
    device_activation,
    parse_quantity,
    quantity_bytes,
)
from pydantic import ValidationError

from isvc_planner._capacity import (
    MEMORY,
    SHARES,
    Capacity,
    Consumption,
    consumed,
    consumption,
    fits,
    named,
    parse_capacities,
    share_request,
)
from isvc_planner._selectors import SelectorMemo

__all__ = [
    "UNITS",
    "Device",
    "DeviceKey",
    "Holding",
    "Inventory",
    "OrderKey",
    "SelectorFault",
    "loading",
]

UNITS = 100
_ROOMS = 65536  # answers of _room_beside kept, by capacities and use (cleared when full)
_JUDGED = 65536  # devices' class judgements kept by what the selectors read (cleared when full)
_ZERO = Decimal(0)
_NOBODY: frozenset[OrderKey] = frozenset()
_MANY = 256  # devices touched at once past which their groups are sorted again rather than edited
_BLOCKING = frozenset({"NoSchedule", "NoExecute"})
DEPARTED_TTL = 3600.0  # seconds a deleted node's devices are remembered, to say where they went

GroupKey = tuple[
    int, bool, str, str, tuple[object, ...]
]  # (memory or -1, shareable, type, product, capacities)
Amounts = tuple[tuple[str, Decimal], ...]


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


@dataclass(eq=False, slots=True)
class Device:
    """One published device with what the planner reads from it."""

    key: DeviceKey
    node: str | None
    raw: Mapping[str, Any]
    type: str | None
    product: str | None
    memory: int | None
    shareable: bool
    tainted: bool
    consumes: tuple[tuple[str, str, int], ...] = ()  # (counter set, counter, amount) it draws on
    classes: frozenset[str] = frozenset()
    selector_cache: dict[str, bool | SelectorError] | None = None  # made when first judged
    capacities: dict[str, Capacity] = field(default_factory=dict)
    multi: bool = False  # allowMultipleAllocations: claims share it by consumable capacity
    capacity_key: tuple[object, ...] = ()  # its capacities and policies, comparable (empty: compute)
    _group: GroupKey | None = None
    _sort: str | None = None
    _activation: dict[str, Any] | None = None
    _cc: str | None = ""  # the compute capability once read ("": not yet)

    @property
    def activation(self) -> dict[str, Any]:
        """The `device` variable of a DRA selector, built when first needed."""
        if self._activation is None:
            self._activation = device_activation(self.driver, self.raw)
        return self._activation

    @property
    def uuid(self) -> str | None:
        """The GPU's UUID, as the driver publishes it (read when asked: few devices are)."""
        value = _attr(self.raw.get("attributes") or {}, self.driver, "uuid")
        return str(value) if value is not None else None

    @property
    def compute_capability(self) -> str | None:
        """The CUDA compute capability the driver publishes ("9.0"), if any."""
        if self._cc == "":
            cc = _attr(self.raw.get("attributes") or {}, self.driver, "cudaComputeCapability")
            self._cc = str(cc) if cc is not None else None
        return self._cc

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
        if self._group is None:
            self._group = (
                self.memory if self.memory is not None else -1,
                self.shareable,
                self.type or "",
                self.product or "",
                (self.capacity_key or _capacity_key(self.capacities)) if self.shareable else (),
            )
        return self._group

    def sort_key(self) -> str:
        """Deterministic order: node, pool, device, driver, joined by NUL (below every character a name
        may hold, so strings order as the tuples would, and compare faster)."""
        if self._sort is None:
            driver, pool, name = self.key
            self._sort = "\0".join((self.node or "", pool, name, driver))
        return self._sort

    def share_request(self, units: int) -> dict[str, Decimal]:
        """What the claim of `units` shares of this device asks of its capacities."""
        return share_request(units, self.capacities)


class Holding(NamedTuple):
    """What one claim, plan or reservation holds of one device (a tuple: a listing makes 100,000s)."""

    source: str  # "claim:<uid>", "plan:<ns>/<name>" or "reservation:<ns>/<name>"
    device: DeviceKey
    order: OrderKey | None  # None: not one of ours, cannot be preempted
    priority: int  # a reservation's, as the controller asked; otherwise its order's (priority_of_holding)
    units: int | None  # shares asked or given; None: the whole device
    request: Amounts | None = None  # a plan's or reservation's capacity requests, as its claim asks them
    recorded: Amounts | None = None  # an allocation's consumedCapacity, as the scheduler recorded it
    whole: bool = False  # takes the device whole (an unshared allocation, a plan of a whole device)
    since: float = 0.0  # when it began (epoch seconds): the earlier of two alike stands

    @property
    def kind(self) -> str:
        """claim, plan or reservation."""
        return self.source.split(":", 1)[0]


# A holding from its fields in order, without the Python-level constructor (a listing makes 100,000s).
_holding: Callable[[tuple[Any, ...]], Holding] = functools.partial(tuple.__new__, Holding)


CLAIM = "claim:"  # how a claim's holdings' source begins


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


def _capacity_key(capacities: Mapping[str, Capacity]) -> tuple[object, ...]:
    return tuple(sorted((n, str(c.value), repr(c.policy)) for n, c in capacities.items()))


def _attr(attrs: Mapping[str, Any], driver: str, name: str) -> Any:
    value = attrs.get(name) or attrs.get(f"{driver}/{name}")
    if value and isinstance(value, (dict, Mapping)):  # dicts first: ABCs check slowly
        return next(iter(value.values()))
    return None


def _amounts(raw: Mapping[str, Any] | None) -> Amounts | None:
    """Quantities by capacity name, as exact numbers; None when there are none or one cannot be read."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    out = []
    for name, value in sorted(raw.items()):
        text = value.get("value") if isinstance(value, Mapping) else value
        try:
            out.append((str(name), parse_quantity(str(text))))
        except QuantityError:
            return None
    return tuple(out)


_RECORDED: dict[tuple[tuple[str, Any], ...], tuple[Amounts, int | None]] = {}


def _recorded(raw: Mapping[str, Any] | None) -> tuple[Amounts, int | None]:
    """A shared result's consumedCapacity as exact amounts (none when absent or unreadable), and the shares
    among them, rounded up; remembered by its text: a fleet's claims record a few dozen alike."""
    try:
        key = tuple(raw.items()) if type(raw) is dict else None
        known = _RECORDED.get(key) if key is not None else None
    except TypeError:  # a value that is not text (unhashable): read each time
        key = known = None
    if known is None:
        amounts = _amounts(raw) or ()
        units = None
        for name, amount in amounts:
            if name == SHARES or name.endswith(f"/{SHARES}"):
                units = math.ceil(amount)
        known = (amounts, units)
        if key is not None:
            if len(_RECORDED) >= 4096:
                _RECORDED.clear()
            _RECORDED[key] = known
    return known


def _claim_holdings(
    claim: Mapping[str, Any],
) -> tuple[str, str, OrderKey | None, list[Holding], bool]:
    """(uid, source, order, holdings, whether it waits for an allocation) of a ResourceClaim."""
    meta = claim.get("metadata") or {}
    uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
    named_order = (meta.get("labels") or {}).get(LABEL_ORDER)
    order: OrderKey | None = (meta.get("namespace") or "", named_order) if named_order else None
    allocation = (claim.get("status") or {}).get("allocation")
    results = ((allocation or {}).get("devices") or {}).get("results") or ()
    since = _stamp(meta.get("creationTimestamp"))
    source = CLAIM + uid
    holdings = []
    for r in results:
        if r.get("adminAccess"):
            continue
        # As the scheduler books it (kubernetes v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/
        # allocateddevices.go foreachAllocatedDevice): a result with a shareID consumes what it recorded
        # (nothing when it recorded nothing), any other takes its device whole.
        device = (r["driver"], r["pool"], r["device"])
        if r.get("shareID") is None:
            holdings.append(_holding((source, device, order, 0, None, None, None, True, since)))
            continue
        recorded, units = _recorded(r.get("consumedCapacity"))
        # priority 0: never the claim's labels (writable by namespace users), see priority_of_holding
        holdings.append(_holding((source, device, order, 0, units, None, recorded, False, since)))
    waits = allocation is None and order is not None and not meta.get("deletionTimestamp")
    return uid, source, order, holdings, waits


def _stamp(text: Any) -> float:
    """An RFC 3339 time as epoch seconds; 0 when absent."""
    if isinstance(text, datetime):
        return text.timestamp()
    if not isinstance(text, str) or not text:
        return 0.0
    return _seconds(text)


@functools.lru_cache(maxsize=4096)
def _seconds(text: str) -> float:
    """`_stamp` of a text, remembered: objects listed together were made within a few seconds."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _add(into: Consumption, more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, _ZERO) + amount


def _most(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> Consumption:
    return {n: max(a.get(n, _ZERO), b.get(n, _ZERO)) for n in a.keys() | b.keys()}


class _Reading(NamedTuple):
    """What the planner reads from a device's published capacities (devices of one model share it)."""

    capacities: dict[str, Capacity]
    key: tuple[object, ...]  # comparable: the capacities and their policies
    memory: int | None  # bytes
    units: bool  # publishes exactly UNITS shares


class _Group:
    """Devices of one group admitted by one class, sorted by free units; fully free ones per pool."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, str]] = []
        self.devices: dict[str, Device] = {}
        self.full_free: dict[str, set[str]] = {}

    def add(self, device: Device, free: int) -> None:
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
    `freed` counts the changes that may have made room (a holding gone or smaller, a pool republished,
    a class, node or priority changed); `wait_freed` lets a caller sleep until it moves.
    """

    def __init__(self, judge: CelJudge | None = None) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self.judge = judge or CelJudge()
        self.selectors = SelectorMemo(self.judge)
        self._every: tuple[str, ...] | None = None  # every class's selectors, judged together per device
        self._by_class: dict[str, list[Device]] = {}  # class -> its devices in order, once asked for
        self._node_pools: dict[str, set[tuple[str, str]]] = {}  # node -> pools publishing its devices
        # Devices to recount once a listing is applied, in the order it touched them (sorted runs sort fast).
        self._deferred: dict[DeviceKey, None] | None = None
        self._remember_nothing()
        self.class_selectors: dict[str, list[str]] = {}
        self.class_faults: dict[str, dict[DeviceKey, SelectorFault]] = {}
        self.devices: dict[DeviceKey, Device] = {}
        self.priority_classes: dict[str, int] = {}
        self.default_priority = 0
        # Issue 14: a claim's priority is its order's class's PriorityClass, never a label users can write.
        self.order_classes: dict[OrderKey, str | None] = {}  # order -> its InferenceServiceClass, if any
        self.class_priorities: dict[str, str | None] = {}  # class -> its priorityClassName, if any
        self._synced = False
        self._held = False  # first listings' devices wait, uncounted and unindexed, for `synced`
        self._rejudge = False  # the classes changed under a listing: every device is judged when it is in
        self._owed = False  # room may have appeared under a listing: waiters are woken once it is applied
        # Nodes that take no new pods (cordoned, or a NoSchedule/NoExecute taint our pods do not tolerate):
        # the scheduler would never place a claim's pod there, so their devices are not offered.
        self.closed_nodes: set[str] = set()
        self.node_states: dict[str, str] = {}  # a closed node -> why (cordoned, not ready, a taint)
        # Nodes deleted within DEPARTED_TTL, with the devices they published then: a refusal can say that the
        # devices which would hold an order went with their node, and a plan naming them is replanned.
        self.departed: dict[str, tuple[float, list[Device]]] = {}
        self.freed = 0
        self.version = 0
        self._slices: dict[str, Mapping[str, Any]] = {}
        self._pool_devices: dict[tuple[str, str], set[DeviceKey]] = {}
        self._pool_slices: dict[tuple[str, str], set[str]] = {}
        self._claims: dict[str, list[Holding]] = {}
        # Claims of orders nobody allocated yet, by order: a replica that has not started (what keeps a
        # plan on a closed node from standing, though another replica of the order still runs there).
        self._unallocated: dict[OrderKey, set[str]] = {}
        self._plans: dict[OrderKey, list[Holding]] = {}
        self._holdings: dict[DeviceKey, dict[str, Holding]] = {}
        self._room: dict[DeviceKey, int] = {}
        self._reservations: dict[OrderKey, tuple[float, list[Holding]]] = {}
        self._reserved_at: dict[OrderKey, float] = {}  # when each reservation was made (monotonic)
        self._deadlines: list[tuple[float, OrderKey]] = []
        self._order_sources: dict[OrderKey, set[str]] = {}  # order -> sources of its holdings
        self._index: dict[str, dict[GroupKey, _Group]] = {}
        self._indexed: dict[DeviceKey, int] = {}  # free units a device was indexed with
        # Counter sets per pool: (set, counter) -> published value; and what held devices consume of them.
        self._counters: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self._consumed: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self._blocked: set[DeviceKey] = set()
        # Holdings released or changed per device, not counting those of the order a refusal there names.
        self._released: dict[DeviceKey, int] = {}
        self._freed_at: dict[DeviceKey, float] = {}  # when (wall clock) such a holding last went or changed
        # Refused by the scheduler although the ledger saw room:
        # device -> (until, refused units or None for whole, the order, others' releases then, device then).
        self._distrust: dict[DeviceKey, tuple[float, int | None, OrderKey | None, int, int]] = {}

    def _remember_nothing(self) -> None:
        """What devices alike share, remembered once read: by model, by use, by what selectors read."""
        self._class_sets: dict[frozenset[str], frozenset[str]] = {}
        # Classes admitting a device (and faults) by what the selectors can read of it (SelectorMemo).
        self._judged: dict[Hashable, tuple[frozenset[str], tuple[tuple[str, int, str], ...]]] = {}
        self._readings: LRUCache[str, _Reading] = LRUCache(4096)
        self._recent: list[tuple[Any, _Reading]] = []
        self._takes: LRUCache[tuple[tuple[object, ...], int], Consumption | None] = LRUCache(65536)
        self._rooms: dict[tuple[object, ...], int] = {}  # _room_beside's answers by capacities and use

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
        plans: Iterable[Mapping[str, Any]] = (),
    ) -> Inventory:
        """An inventory from plain resource.k8s.io/v1 (scheduling.k8s.io/v1, v1, ai.deckhouse.io) dicts."""
        with loading():
            inv = cls()
            for node in nodes:
                state = _node_state(node)
                if state is not None:
                    inv.closed_nodes.add(node["metadata"]["name"])
                    inv.node_states[node["metadata"]["name"]] = state
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
            with inv.applying(until_synced=True):
                for pool in sorted(by_pool):
                    inv._refresh_pool(pool)
            with inv.applying(until_synced=True):
                inv.upsert_claims(claims)
                for plan in plans:
                    inv.upsert_plan(plan)
            inv.synced = True
        return inv

    def _free(self) -> None:
        """Room may have appeared: wake whoever waits for it (under a listing, once it is applied: the
        ledger stays locked until then, so nobody could look sooner)."""
        if self._deferred is not None:
            self._owed = True
            return
        with self._changed:
            self.freed += 1
            self._changed.notify_all()

    def wait_freed(self, after: int, timeout: float) -> int:
        """Block until `freed` differs from `after` or `timeout` seconds pass; the value then."""
        with self._changed:
            self._changed.wait_for(lambda: self.freed != after, timeout)
            return self.freed

    # ------------------------------------------------------------------ device classes

    def _set_class(self, dc: Mapping[str, Any]) -> None:
        name = dc["metadata"]["name"]
        selectors = [
            s["cel"]["expression"] for s in (dc.get("spec") or {}).get("selectors") or [] if s.get("cel")
        ]
        self.class_selectors[name] = selectors
        self._every = None

    def upsert_device_class(self, dc: Mapping[str, Any]) -> None:
        """Add or change a DeviceClass; re-judges every device against it (a relist changes nothing)."""
        with self.lock:
            before = self.class_selectors.get(dc["metadata"]["name"])
            self._set_class(dc)
            if before != self.class_selectors[dc["metadata"]["name"]]:
                self._rejudge_all()

    def delete_device_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        with self.lock:
            self.class_selectors.pop(name, None)
            self._every = None
            self._rejudge_all()

    def _rejudge_all(self) -> None:
        """Judge every device against the classes again; under a listing (classes listed after the slices,
        or one of many classes), once when the listing is applied."""
        self._by_class.clear()
        if self._deferred is not None:
            self._rejudge = self._rejudge or bool(self.devices)  # devices made later are judged anew
        else:
            self._judge_every()
            for device in self.devices.values():
                self._index_device(device)
        self.version += 1
        self._free()

    def _judge_every(self) -> None:
        """Take every device out of the index and judge it against the classes again."""
        for faults in self.class_faults.values():
            faults.clear()
        for device in self.devices.values():
            self._unindex(device)
            self._judge_classes(device)

    def selects(self, expression: str, device: Device) -> bool | SelectorError:
        """Whether a selector admits a device, or why it cannot be judged there (remembered per device)."""
        if device.selector_cache is None:
            device.selector_cache = {}
        cached = device.selector_cache.get(expression)
        if cached is None:
            answers = self.selectors.judge_all(
                (expression,), device.driver, device.raw, lambda: device.activation
            )
            cached = device.selector_cache[expression] = answers[expression]
        return cached

    def _judge_classes(self, device: Device) -> None:
        """Which classes admit the device (and which cannot judge it), remembered by what their selectors
        can read of a device: a fleet's devices alike are judged once."""
        if self._every is None:
            self._every = tuple(dict.fromkeys(e for sel in self.class_selectors.values() for e in sel))
            self._judged.clear()
        signature = self.selectors.signature(self._every, device.driver, device.raw)
        judged = self._judged.get(signature) if signature is not None else None
        if judged is None:
            judged = self._judge_anew(device)
            if signature is not None:
                if len(self._judged) >= _JUDGED:
                    self._judged.clear()
                self._judged[signature] = judged
        classes, unjudged = judged
        for name, index, error in unjudged:
            self.class_faults.setdefault(name, {})[device.key] = SelectorFault(
                f"class {name}", index, device.ident, error
            )
        device.classes = classes

    def _judge_anew(self, device: Device) -> tuple[frozenset[str], tuple[tuple[str, int, str], ...]]:
        """(classes admitting the device, (class, selector, error) of each that cannot judge it)."""
        assert self._every is not None
        results = self.selectors.judge_all(self._every, device.driver, device.raw, lambda: device.activation)
        admitted = set()
        faults: list[tuple[str, int, str]] = []
        for name, selectors in self.class_selectors.items():
            ok = True
            for i, expr in enumerate(selectors):
                result = results[expr]
                if isinstance(result, SelectorError):
                    faults.append((name, i, str(result)))
                    ok = False
                    break
                if not result:
                    ok = False
                    break
            if ok:
                admitted.add(name)
        classes = frozenset(admitted)
        return self._class_sets.setdefault(classes, classes), tuple(faults)  # one set shared by devices alike

    # ------------------------------------------------------------------ slices and pools

    def upsert_slice(self, sl: Mapping[str, Any]) -> None:
        """Add or change a ResourceSlice; its pool is recomputed."""
        with self.lock:
            name = sl["metadata"]["name"]
            old = self._slices.get(name)
            self._slices[name] = sl
            if old is not None and old.get("spec") == sl.get("spec"):
                return  # a relist, or metadata only: the pool is what it was
            pool = _pool_id(sl)
            self._pool_slices.setdefault(pool, set()).add(name)
            if old is not None and _pool_id(old) != pool:
                self._pool_slices.get(_pool_id(old), set()).discard(name)
                self._refresh_pool(_pool_id(old))
            self._refresh_pool(pool)

    def delete_slice(self, name: str) -> None:
        """Forget a ResourceSlice; its pool is recomputed."""
        with self.lock:
            old = self._slices.pop(name, None)
            if old is not None:
                self._pool_slices.get(_pool_id(old), set()).discard(name)
                self._refresh_pool(_pool_id(old))

    def _refresh_pool(self, pool: tuple[str, str]) -> None:
        published, counters = self._published(pool)
        nodes_before: set[str | None] = set()
        for key in self._pool_devices.pop(pool, ()):
            self._blocked.discard(key)
            self._room.pop(key, None)
            old = self.devices.pop(key, None)
            if old is not None:
                self._unindex(old)
                self._list_device(old, False)
                nodes_before.add(old.node)
                for faults in self.class_faults.values():
                    faults.pop(key, None)
        for node in nodes_before:
            self._on_node(node, pool, False)
        self._counters.pop(pool, None)
        if counters:
            self._counters[pool] = counters
        nodes: set[str | None] = set()
        # Counters to count: the pool's, or those its devices drew on before (most pools: none at all).
        consumes = bool(counters) or pool in self._consumed
        devices, deferred = self.devices, self._deferred
        for key, device in published.items():
            self._judge_classes(device)
            devices[key] = device
            self._list_device(device, True)
            nodes.add(device.node)
            consumes = consumes or bool(device.consumes)
            if deferred is not None:  # a listing: counted and indexed with the rest of it
                deferred[key] = None
        for node in nodes:
            self._on_node(node, pool, True)
        if published:
            self._pool_devices[pool] = set(published)
        if consumes:
            self._recount_counters(pool)
        if deferred is None:
            for key in published:
                self._recount(key)
            for device in published.values():
                self._index_device(device)
        self.version += 1
        self._free()

    def _published(self, pool: tuple[str, str]) -> tuple[dict[DeviceKey, Device], dict[tuple[str, str], int]]:
        """The devices and counters a pool publishes: those of its newest generation's slices, once every
        one of them is in (none while some are missing, as the scheduler has it)."""
        members = [self._slices[n] for n in sorted(self._pool_slices.get(pool, ())) if n in self._slices]
        published: dict[DeviceKey, Device] = {}
        counters: dict[tuple[str, str], int] = {}
        if not members:
            return published, counters
        if len(members) > 1:
            top = max(int(s["spec"]["pool"].get("generation", 0)) for s in members)
            members = [s for s in members if int(s["spec"]["pool"].get("generation", 0)) == top]
        if len(members) != max(int(s["spec"]["pool"].get("resourceSliceCount", 1)) for s in members):
            return published, counters
        for sl in members:
            spec = sl["spec"]
            for cs in spec.get("sharedCounters") or ():
                for counter, value in (cs.get("counters") or {}).items():
                    counters[(cs["name"], counter)] = _amount(value)
            driver, name, node = spec["driver"], spec["pool"]["name"], spec.get("nodeName")
            for raw in spec.get("devices") or ():
                device = self._make_device(driver, name, node, raw)
                published[device.key] = device
        return published, counters

    def _reading(self, raw: Mapping[str, Any]) -> _Reading:
        """A device's capacities, read once per text: devices of one model publish the same. The last few
        are compared first, which costs less than printing the text."""
        published = raw.get("capacity")
        for seen, reading in self._recent:
            if seen == published:
                return reading
        text = repr(published)
        known = self._readings.get(text)
        if known is None:
            capacities = parse_capacities(raw)
            shares = capacities.get(named(capacities, SHARES) or SHARES)
            memory = capacities.get(named(capacities, MEMORY) or MEMORY)
            known = self._readings[text] = _Reading(
                capacities,
                _capacity_key(capacities),
                math.ceil(memory.value) if memory is not None else None,
                shares is not None and shares.value == UNITS,
            )
        self._recent = [(published, known), *self._recent[:3]]
        return known

    def _make_device(self, driver: str, pool: str, node: str | None, raw: Mapping[str, Any]) -> Device:
        """A device of `driver`'s `pool` as its slice publishes it (`node`: the slice's node, if any)."""
        reading = self._reading(raw)
        multi = bool(raw.get("allowMultipleAllocations", False))
        taints = raw.get("taints")
        attrs = raw.get("attributes") or {}
        node = raw.get("nodeName") or node
        counters = raw.get("consumesCounters")
        return Device(
            key=(driver, pool, raw["name"]),
            node=node,
            raw=raw,
            type=_attr(attrs, driver, "type"),
            product=_attr(attrs, driver, "productName") or _attr(attrs, driver, "model"),
            memory=reading.memory,
            shareable=multi and reading.units,
            tainted=node in self.closed_nodes
            or (any(t.get("effect") in _BLOCKING for t in taints) if taints else False),
            consumes=tuple(
                sorted(
                    (str(c.get("counterSet")), name, _amount(v))
                    for c in counters or ()
                    for name, v in (c.get("counters") or {}).items()
                )
            )
            if counters
            else (),
            capacities=reading.capacities,
            multi=multi,
            capacity_key=reading.key,
        )

    # ------------------------------------------------------------------ holdings

    def upsert_claim(self, claim: Mapping[str, Any]) -> None:
        """Add or change a ResourceClaim: the results of its allocation become holdings.

        A claim that is not allocated holds nothing: a claim is anyone's to create in their namespace, and
        a module's claim that waits is held by its order's LaunchPlan instead (issue 29)."""
        self.upsert_claims((claim,))

    def upsert_claims(self, claims: Iterable[Mapping[str, Any]]) -> None:
        """`upsert_claim` of each, the ledger locked once (a listing's page)."""
        with self.lock:
            table, unallocated = self._claims, self._unallocated
            for claim in claims:
                uid, source, order, holdings, waits = _claim_holdings(claim)
                if table.get(uid, []) != holdings:  # a relist, or status other than the allocation
                    self._set_source(source, table, uid, holdings)
                if order is not None and (waits or order in unallocated):
                    self._note_unallocated(order, uid, waits)

    def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Forget a ResourceClaim."""
        meta = claim.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        order = (meta.get("namespace") or "", (meta.get("labels") or {}).get(LABEL_ORDER) or "")
        with self.lock:
            self._set_source(CLAIM + uid, self._claims, uid, [])
            self._note_unallocated(order, uid, False)

    def _note_unallocated(self, order: OrderKey, uid: str, waits: bool) -> None:
        """Keep which claims of the order wait for an allocation. One that begins to wait while the order's
        plan names a device out of service strands the order (a replica that cannot start there): room moves,
        so the order is judged again."""
        waiting = self._unallocated.get(order)
        if waits == (waiting is not None and uid in waiting):
            return
        if waits:
            self._unallocated.setdefault(order, set()).add(uid)
            if self._stranded(order):
                self._free()
            return
        assert waiting is not None
        waiting.discard(uid)
        if not waiting:
            del self._unallocated[order]

    def upsert_plan(self, plan: Mapping[str, Any]) -> None:
        """Add or change a LaunchPlan: its order holds the devices it places it on, at what its claim asks.

        A plan is named after its order. Once it names the devices of the order's reservation, the
        reservation has done its work and is dropped."""
        meta = plan.get("metadata") or {}
        key: OrderKey = (meta.get("namespace") or "", meta.get("name") or "")
        holdings: list[Holding] = []
        placement = _placement(plan) if not meta.get("deletionTimestamp") else None
        if placement is not None and placement.driver and placement.pool and placement.devices:
            requests = claim_capacity_requests(placement)
            request = _amounts(requests) if requests else None
            since = _stamp((plan.get("spec") or {}).get("plannedAt")) or _stamp(meta.get("creationTimestamp"))
            holdings = [
                Holding(
                    f"plan:{key[0]}/{key[1]}",
                    (placement.driver, placement.pool, d),
                    key,
                    0,
                    placement.share_percent if request else None,
                    request=request,
                    whole=request is None,
                    since=since,
                )
                for d in dict.fromkeys(placement.devices)
            ]
        with self.lock:
            if self._plans.get(key, []) != holdings:
                self._set_source(f"plan:{key[0]}/{key[1]}", self._plans, key, holdings)
            reserved = self._reservations.get(key)
            if (
                holdings
                and reserved is not None
                and {h.device for h in reserved[1]} <= {h.device for h in holdings}
            ):
                self.release(key)

    def delete_plan(self, plan: Mapping[str, Any]) -> None:
        """Forget a LaunchPlan."""
        meta = plan.get("metadata") or {}
        key: OrderKey = (meta.get("namespace") or "", meta.get("name") or "")
        with self.lock:
            self._set_source(f"plan:{key[0]}/{key[1]}", self._plans, key, [])

    def _set_source(
        self, source: str, table: dict[Any, list[Holding]], key: Any, holdings: list[Holding]
    ) -> None:
        old = table.pop(key, None) or []
        if not old and self._deferred is not None:  # a listing's new holdings: the common case, kept short
            if holdings:
                table[key] = holdings
                self._hold(source, holdings)
            return
        for h in old:
            known = self._order_sources.get(h.order) if h.order is not None else None
            if known is not None:
                known.discard(source)
        self._replace(source, old, holdings)
        if holdings:
            table[key] = holdings
            sources = self._order_sources
            for h in holdings:
                if h.order is not None:
                    known = sources.get(h.order)
                    if known is None:
                        sources[h.order] = {source}
                    else:
                        known.add(source)

    def reserve(
        self,
        order: OrderKey,
        priority: int,
        holdings: list[tuple[DeviceKey, int | None, Mapping[str, Decimal] | None]],
        ttl: float,
    ) -> None:
        """Hold devices for a plan that is not yet stored as a LaunchPlan, for `ttl` seconds:
        (device, shares or None for the whole device, what its claim asks)."""
        source = f"reservation:{order[0]}/{order[1]}"
        now = time.time()
        new = [
            Holding(
                source,
                key,
                order,
                priority,
                units,
                request=tuple(sorted(request.items())) if request else None,
                whole=not request,
                since=now,
            )
            for key, units, request in holdings
        ]
        with self.lock:
            old = self._reservations.pop(order, (0.0, []))[1]
            self._order_sources.get(order, set()).discard(source)
            self._replace(source, old, new)
            if new:
                self._order_sources.setdefault(order, set()).add(source)
            started = time.monotonic()
            deadline = started + ttl
            self._reservations[order] = (deadline, new)
            self._reserved_at[order] = started
            heapq.heappush(self._deadlines, (deadline, order))

    def release(self, order: OrderKey) -> None:
        """Drop the reservation of an order."""
        with self.lock:
            old = self._reservations.pop(order, None)
            self._reserved_at.pop(order, None)
            if old is not None:
                source = f"reservation:{order[0]}/{order[1]}"
                self._order_sources.get(order, set()).discard(source)
                self._replace(source, old[1], [])

    def reserved_by(self, order: OrderKey) -> list[DeviceKey]:
        """Devices reserved for an order and not yet seen in its LaunchPlan."""
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

    def _hold(self, source: str, new: list[Holding]) -> None:
        """Take up a source's first holdings under a listing (counted and indexed when it is applied)."""
        held, deferred, sources = self._holdings, self._deferred, self._order_sources
        assert deferred is not None
        for h in new:
            slot = held.get(h.device)
            if slot is None:
                held[h.device] = {source: h}
            else:
                prev = slot.get(source)
                slot[source] = h if prev is None else _merged(prev, h)
            deferred[h.device] = None
            if h.order is not None:
                known = sources.get(h.order)
                if known is None:
                    sources[h.order] = {source}
                else:
                    known.add(source)

    def _replace(self, source: str, old: list[Holding], new: list[Holding]) -> None:
        touched = {h.device for h in new}
        if old:
            touched |= {h.device for h in old}
            kept = {(h.device, h) for h in new}
            for h in old:
                self._holdings.get(h.device, {}).pop(source, None)
                if (h.device, h) not in kept and not self._refused_near(h.device, h.order):
                    self._released[h.device] = self._released.get(h.device, 0) + 1
                    self._freed_at[h.device] = time.time()
        for h in new:
            slot = self._holdings.setdefault(h.device, {})
            prev = slot.get(source)
            slot[source] = h if prev is None else _merged(prev, h)
        if old:
            for key in touched:
                if not self._holdings.get(key):
                    self._holdings.pop(key, None)
        if self._deferred is not None:
            for key in touched:
                self._deferred[key] = None
            return
        self._settle(touched)

    @contextmanager
    def applying(self, until_synced: bool = False) -> Iterator[None]:
        """Apply many changes at once (a listing): the devices they touch are recounted and indexed once at
        the end, not after each change. The ledger stays locked meanwhile, so no one reads it half applied.

        With `until_synced` (a first listing, while the ledger is not synced: nothing is planned on it yet)
        they wait for the ledger to be marked `synced`, with those of every other kind's first listing and
        of any event in between: each device is counted and indexed once, with every holding in."""
        with self.lock:
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
        with self.lock:
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
            touched.update(dict.fromkeys(self.devices))
        if touched:
            self._settle(touched)
        if owed:
            self._free()

    def _settle(self, touched: Collection[DeviceKey]) -> None:
        """Recount and re-index devices whose holdings changed; wake the waiting room if room appeared."""
        devices: list[Device] = []
        pools: set[tuple[str, str]] = set()
        out_of_service = False  # a device gone or tainted: a pod left it, a plan there may be stranded
        for key in touched:
            device = self.devices.get(key)
            if device is None:
                self._room.pop(key, None)
                out_of_service = True
                continue
            out_of_service = out_of_service or device.tainted
            devices.append(device)
            if device.consumes:
                pools.add((key[0], key[1]))
        for pool in pools:  # a device drawing on counters changes what its siblings have left
            devices += [
                self.devices[k]
                for k in self._pool_devices.get(pool, ())
                if k not in touched and self.devices[k].consumes
            ]
        if len(devices) > _MANY:
            for pool in pools:
                self._recount_counters(pool)
            grew = self._reindex_many(devices)  # each counted anew
        else:
            before = [self._indexed.get(d.key) for d in devices]
            for device in devices:
                self._unindex(device)
            for pool in pools:
                self._recount_counters(pool)
            for device in devices:
                self._recount(device.key)
            for device in devices:
                self._index_device(device)
            grew = any(
                was is not None and self._indexed.get(d.key, was) > was
                for d, was in zip(devices, before, strict=True)
            )
        self.version += 1
        if grew or out_of_service:
            self._free()

    def _consumption(self, h: Holding, device: Device) -> Consumption | None:
        """What one holding consumes of a device; None: all of it."""
        if h.whole or not device.multi:
            return None
        if h.recorded is not None:
            return dict(h.recorded)
        asked = dict(h.request or ())
        taken = consumption(asked, device.capacities)
        if taken is None:  # asks what the device's policy refuses: counted as asked, it is never allocated so
            taken = {n: asked.get(n, consumed(None, c)) for n, c in device.capacities.items()}
        return taken

    def _load(
        self,
        key: DeviceKey,
        exclude: frozenset[OrderKey] = _NOBODY,
        holders: Collection[Holding] | None = None,
    ) -> tuple[bool, Consumption]:
        """(taken whole, consumed per capacity) of a published device by every holder not excluded (its
        holdings, when the caller has them). Each order counts once: its allocated claims together, or its
        plan or reservation, whichever is more."""
        device = self.devices[key]
        whole = False
        total: Consumption = {}
        if holders is None:
            holders = (self._holdings.get(key) or {}).values()
        for h in holders:  # claims alone (the common case): each order's claims together, one sum
            if not h.source.startswith(CLAIM):
                break
            if h.order is not None and h.order in exclude:
                continue
            if h.whole or not device.multi:
                whole = True
                continue
            for name, amount in h.recorded or ():  # a shared result: what the scheduler recorded
                total[name] = total.get(name, _ZERO) + amount
        else:
            return whole, total
        whole, total = False, {}
        claimed: dict[OrderKey, Consumption] = {}
        planned: dict[OrderKey, Consumption] = {}
        for h in holders:
            if h.order is not None and h.order in exclude:
                continue
            taken = self._consumption(h, device)
            if taken is None:
                whole = True
            elif h.order is None:
                _add(total, taken)
            elif h.kind == "claim":
                _add(claimed.setdefault(h.order, {}), taken)
            else:
                planned[h.order] = _most(planned.get(h.order, {}), taken)
        for order, taken in claimed.items():
            _add(total, _most(taken, planned.pop(order)) if order in planned else taken)
        for taken in planned.values():
            _add(total, taken)
        return whole, total

    def share_take(self, device: Device, units: int) -> Consumption | None:
        """What the claim of `units` shares consumes of a shareable device (None: its policy refuses it),
        remembered per capacities: devices of one model ask alike."""
        slot = (device.capacity_key or _capacity_key(device.capacities), units)
        if slot not in self._takes:
            self._takes[slot] = consumption(device.share_request(units), device.capacities)
        return self._takes[slot]

    def _fits_share(self, device: Device, used: Mapping[str, Decimal], units: int) -> bool:
        take = self.share_take(device, units)
        return take is not None and fits(used, take, device.capacities)

    def room(self, key: DeviceKey, exclude: Iterable[OrderKey] = ()) -> int:
        """Free units of a published device for someone who may count `exclude`'s holdings as free: the
        largest share whose claim fits every capacity of a shareable device beside what the others hold
        (the scheduler's arithmetic), else UNITS for a device nobody else holds and 0 for one held."""
        device = self.devices.get(key)
        if device is None:
            return 0
        skip = frozenset(exclude) if exclude else _NOBODY
        holders = (self._holdings.get(key) or {}).values()
        if not skip or not any(h.order in skip for h in holders):
            cached = self._room.get(key)
            if cached is not None:
                return cached
        if key in self._blocked:
            return 0
        if not device.shareable:
            return 0 if any(h.order is None or h.order not in skip for h in holders) else UNITS
        if not holders:  # the same for every device of its capacities (remembered by _room_beside)
            return self._room_beside(device, {})
        whole, used = self._load(key, skip, holders)
        if whole:
            return 0
        return self._room_beside(device, used)

    def _count(self, device: Device) -> int:
        """`room(device.key)` counted anew (not from `_room`), for a device that is published."""
        key = device.key
        if key in self._blocked:
            return 0
        held = self._holdings.get(key)
        if not device.shareable:
            return 0 if held else UNITS
        if not held:
            return self._room_beside(device, {})
        whole, used = self._load(key, _NOBODY, held.values())
        return 0 if whole else self._room_beside(device, used)

    def _room_beside(self, device: Device, used: Consumption) -> int:
        """The largest share of a shareable device whose claim fits beside what is `used`, remembered by
        the device's capacities and that use: devices of one model held alike have the same room."""
        slot = (device.capacity_key or _capacity_key(device.capacities), tuple(sorted(used.items())))
        room = self._rooms.get(slot)
        if room is None:
            if len(self._rooms) >= _ROOMS:
                self._rooms.clear()
            room = self._rooms[slot] = self._search_room(device, used)
        return room

    def _search_room(self, device: Device, used: Consumption) -> int:
        shares = device.capacities[named(device.capacities, SHARES) or SHARES]
        top = min(UNITS, math.floor(shares.value - used.get(named(device.capacities, SHARES) or SHARES, 0)))
        if top <= 0:
            return 0
        if self._fits_share(device, used, top):
            return top
        low, high = 0, top  # the largest share that fits lies in [low, high)
        while high - low > 1:
            mid = (low + high) // 2
            if self._fits_share(device, used, mid):
                low = mid
            else:
                high = mid
        return low

    def fits_share(self, key: DeviceKey, units: int, exclude: Iterable[OrderKey] = ()) -> bool:
        """Whether a claim of `units` shares (UNITS: the whole of a device that is not shareable) fits."""
        return self.room(key, exclude) >= units

    def _recount(self, key: DeviceKey) -> None:
        device = self.devices.get(key)
        if device is None:
            self._room.pop(key, None)
            return
        self._room[key] = self._count(device)

    def _recount_counters(self, pool: tuple[str, str]) -> None:
        """What the pool's held devices consume of its counter sets, and which devices that blocks."""
        keys = [k for k in self._pool_devices.get(pool, ()) if self.devices[k].consumes]
        self._blocked.difference_update(keys)
        consumed_: dict[tuple[str, str], int] = {}
        for key in keys:
            if self._holdings.get(key):
                for counter_set, counter, amount in self.devices[key].consumes:
                    consumed_[(counter_set, counter)] = consumed_.get((counter_set, counter), 0) + amount
        self._consumed[pool] = consumed_
        if not consumed_:
            self._consumed.pop(pool, None)
        published = self._counters.get(pool, {})
        for key in keys:
            if self._holdings.get(key):
                continue
            for counter_set, counter, amount in self.devices[key].consumes:
                left = published.get((counter_set, counter), 0) - consumed_.get((counter_set, counter), 0)
                if amount > left:  # a counter the pool does not publish has nothing left
                    self._blocked.add(key)
                    break

    def left(self, key: DeviceKey) -> Consumption | None:
        """What is left of each capacity of a shareable device beside every holding; None when it is
        taken whole, blocked by its counters, or not published."""
        device = self.devices.get(key)
        if device is None or not device.multi or key in self._blocked:
            return None
        whole, used = self._load(key)
        if whole:
            return None
        return {name: c.value - used.get(name, Decimal(0)) for name, c in device.capacities.items()}

    def counters_left(self, pool: tuple[str, str]) -> dict[tuple[str, str], int]:
        """What is left of each shared counter of a pool, (counter set, counter) -> amount."""
        consumed_ = self._consumed.get(pool, {})
        return {name: value - consumed_.get(name, 0) for name, value in self._counters.get(pool, {}).items()}

    def admits(self, takes: Iterable[tuple[DeviceKey, Mapping[str, Decimal] | None]]) -> bool:
        """Whether new holdings fit together beside every holding there, in the ledger's arithmetic: each
        (device, its claim's capacity requests, or None to take the device whole); the counters the devices
        nobody holds yet draw on must hold them all."""
        by_device: dict[DeviceKey, list[Mapping[str, Decimal] | None]] = {}
        for key, requests in takes:
            by_device.setdefault(key, []).append(requests)
        with self.lock:
            for key, asked in by_device.items():
                device = self.devices.get(key)
                if device is None or key in self._blocked:
                    return False
                if any(r is None for r in asked) or not device.multi:
                    if len(asked) > 1 or self._holdings.get(key):
                        return False
                    continue
                whole, used = self._load(key)
                if whole:
                    return False
                for requests in asked:
                    take = consumption(requests, device.capacities)
                    if take is None or not fits(used, take, device.capacities):
                        return False
                    _add(used, take)
            return self.counters_fit(by_device)

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
        """Units of a published device that are not free (UNITS − `room`): what others hold, or all of it
        when its counters are drawn down by its partitioned siblings."""
        return UNITS - self.room(key)

    def distrust(
        self, keys: Iterable[DeviceKey], units: int | None, ttl: float, order: OrderKey | None
    ) -> bool:
        """The scheduler refused a claim of `order` for `units` shares (None: whole devices) on these devices
        while the ledger saw room: no claim of that size or larger is offered on them until a holding of
        someone else there is released or shrinks, the pool is published again, or `ttl` passes.
        True when this is news (not already known for as much or less)."""
        until = time.monotonic() + ttl
        news = False
        with self.lock:
            for key in keys:
                device = self.devices.get(key)
                if device is None:
                    continue
                known = self._distrust.get(key)
                standing = known is not None and self._stands(key, known)
                if not standing or not _at_most(known[1] if known else None, units):
                    news = True
                    self._distrust[key] = (until, units, order, self._others_released(key, order), id(device))
                else:
                    assert known is not None
                    self._distrust[key] = (until, *known[1:])
        return news

    def distrusted(self) -> dict[DeviceKey, int | None]:
        """Devices a scheduler refusal still stands on: the smallest share refused (None: whole devices)."""
        with self.lock:
            for key, known in list(self._distrust.items()):
                if not self._stands(key, known):
                    del self._distrust[key]
            return {key: known[1] for key, known in self._distrust.items()}

    def refused_order(self, key: DeviceKey) -> OrderKey | None:
        """The order whose claim the scheduler refused on a distrusted device."""
        with self.lock:
            known = self._distrust.get(key)
            return known[2] if known is not None else None

    def _stands(self, key: DeviceKey, known: tuple[float, int | None, OrderKey | None, int, int]) -> bool:
        until, _, order, releases, ident = known
        device = self.devices.get(key)
        return (
            until > time.monotonic()
            and device is not None
            and id(device) == ident
            and self._others_released(key, order) == releases
        )

    def _near(self, key: DeviceKey) -> list[DeviceKey]:
        """A device and the partitions it shares counters with."""
        device = self.devices.get(key)
        if device is None or not device.consumes:
            return [key]
        return [k for k in self._pool_devices.get((key[0], key[1]), ()) if self.devices[k].consumes]

    def _refused_near(self, key: DeviceKey, order: OrderKey | None) -> bool:
        """Whether a refusal on the device or its counter siblings names `order` (its own releases there do
        not end the refusal: the order moving away is not the cluster changing)."""
        return order is not None and any(
            (r := self._distrust.get(k)) is not None and r[2] == order for k in self._near(key)
        )

    def _others_released(self, key: DeviceKey, order: OrderKey | None) -> int:
        """How many holdings went or changed on a device and its counter siblings, the refused order's
        own left out: a refusal stands while none did."""
        return sum(self._released.get(k, 0) for k in self._near(key))

    def freed_at(self, key: DeviceKey) -> float:
        """When (seconds since the epoch) a holding of someone else on a device or its counter siblings last
        went or changed (0: never since the planner started): room newer than a refusal was not refused."""
        with self.lock:
            return max((self._freed_at.get(k, 0.0) for k in self._near(key)), default=0.0)

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

    def holds(self, order: OrderKey) -> set[DeviceKey]:
        """Published devices an order holds: by its allocated claims, its plan or its reservation."""
        with self.lock:
            return {
                h.device
                for source in self._order_sources.get(order, ())
                for h in self._source_holdings(source)
                if h.order == order and h.device in self.devices
            }

    def _source_holdings(self, source: str) -> list[Holding]:
        kind, _, rest = source.partition(":")
        if kind == "claim":
            return self._claims.get(rest, [])
        namespace, _, name = rest.partition("/")
        if kind == "plan":
            return self._plans.get((namespace, name), [])
        return self._reservations.get((namespace, name), (0.0, []))[1]

    def held_by(self, order: OrderKey) -> dict[DeviceKey, int]:
        """Units an order's holdings free on each published device it holds, were it to let them go."""
        with self.lock:
            return {key: self.room(key, (order,)) - self.room(key) for key in sorted(self.holds(order))}

    def orphans(self) -> list[Holding]:
        """Holdings on devices no longer published: they free nothing, also not for their holder."""
        return [h for key, hs in self._holdings.items() if key not in self.devices for h in hs.values()]

    def groups(self, device_class: str) -> dict[GroupKey, _Group]:
        """The placement index of one class."""
        return self._index.get(device_class, {})

    def class_devices(self, device_class: str) -> list[Device]:
        """Published devices a class admits, in a stable order (kept as devices come and go; not to be
        changed by the caller)."""
        with self.lock:
            listed = self._by_class.get(device_class)
            if listed is None:
                listed = self._by_class[device_class] = sorted(
                    (d for d in self.devices.values() if device_class in d.classes), key=Device.sort_key
                )
            return listed

    def _on_node(self, node: str | None, pool: tuple[str, str], present: bool) -> None:
        """Keep which pools publish devices of each node (a node opened or closed refreshes only those)."""
        if node is None:
            return
        pools = self._node_pools.setdefault(node, set())
        if present:
            pools.add(pool)
            return
        pools.discard(pool)  # a pool's devices all go at once, and those it still publishes come back
        if not pools:
            del self._node_pools[node]

    def _list_device(self, device: Device, present: bool) -> None:
        """Add a device to (or take it from) the class listings made so far."""
        if not self._by_class:  # none made yet (a first listing): nothing to keep
            return
        for name in device.classes:
            listed = self._by_class.get(name)
            if listed is None:
                continue
            at = bisect.bisect_left(listed, device.sort_key(), key=Device.sort_key)
            if present:
                listed.insert(at, device)
                continue
            while (
                at < len(listed) and listed[at] is not device and listed[at].sort_key() == device.sort_key()
            ):
                at += 1
            if at < len(listed) and listed[at] is device:
                del listed[at]

    def out_of_service(self, key: DeviceKey, node: str | None = None) -> str | None:
        """Why a device takes no new claim (its node deleted or closed, or the device withdrawn or tainted),
        in words; None while it is in service. `node`: where a device no longer published was."""
        with self.lock:
            device = self.devices.get(key)
            if device is None:
                where = node or next(
                    (n for n, (_, ds) in self.departed.items() if any(d.key == key for d in ds)), None
                )
                if where is not None and where in self.departed:
                    return f"{key[1]}/{key[2]}: node {where} was deleted"
                return (
                    f"{key[1]}/{key[2]} is no longer published (its driver withdrew it, or its node is gone)"
                )
            state = self.node_states.get(device.node or "")
            if state is not None:
                return f"{key[1]}/{key[2]}: node {device.node} is {state}, so no new pod starts there"
            if device.tainted:
                return f"{key[1]}/{key[2]} is tainted by its driver (NoSchedule or NoExecute)"
            return None

    def running_on(self, order: OrderKey, key: DeviceKey) -> bool:
        """Whether a claim of the order is allocated on the device: a pod of it was placed there and runs."""
        with self.lock:
            return any(
                h.kind == "claim" and h.order == order for h in (self._holdings.get(key) or {}).values()
            )

    def gone(
        self, order: OrderKey, driver: str, pool: str, devices: Iterable[str], node: str | None
    ) -> list[str]:
        """Devices of a plan the order can no longer start on, each with why (the node's state, or gone). A
        device on a closed node where a pod of the order runs still stands: closing a node stops new pods,
        not the ones it runs; it is lost once that pod goes (evicted by a drain, or the node's taint), or
        once a replica of the order waits to start (every replica's claim names the plan's devices, so it
        never starts there, and a drain would wait for it for ever)."""
        out: list[str] = []
        for name in dict.fromkeys(devices):
            key = (driver, pool, name)
            why = self.out_of_service(key, node)
            if why is not None and (key not in self.devices or not self._stands_closed(order, key)):
                out.append(why)
        return out

    def _stands_closed(self, order: OrderKey, key: DeviceKey) -> bool:
        """Whether the order stands on a device out of service: a pod of it runs there and none waits."""
        with self.lock:
            return self.running_on(order, key) and order not in self._unallocated

    def stranded(self) -> list[OrderKey]:
        """Orders whose plan places them on a device out of service where no pod of theirs runs, or where a
        replica of theirs waits to start: each is to be judged again (planned elsewhere, or waiting with why)."""
        with self.lock:
            return sorted(order for order in self._plans if self._stranded(order))

    def _stranded(self, order: OrderKey) -> bool:
        return any(
            h.device not in self.devices
            or (self.devices[h.device].tainted and not self._stands_closed(order, h.device))
            for h in self._plans.get(order, ())
        )

    def displaced(self, order: OrderKey) -> list[str]:
        """Why an order no longer stands on a device it holds (empty: it stands on all of them).

        On each device, holders are ranked: those of no order first (nobody can release them), then by
        priority, then the earlier holding; each holder stands if it fits beside those ranked above it.
        """
        with self.lock:
            return [why for key in sorted(self.holds(order)) if (why := self._displaced_on(order, key))]

    def _displaced_on(self, order: OrderKey, key: DeviceKey) -> str | None:
        """Why the order does not stand on one device it holds, or None when it does."""
        device = self.devices[key]
        ranked = self._ranked(key)
        used: Consumption = {}
        whole = stood = False
        for who, priority, _, load in ranked:
            alone = not device.multi or load is None  # it takes the device whole
            stands = not stood if alone else not whole and fits(used, load or {}, device.capacities)
            if stands:
                stood = True
                whole = whole or alone
                _add(used, load or {})
            elif who == order:
                above = [f"{w[0]}/{w[1]}" if w else "a claim of no order" for w, *_ in ranked if w != order]
                return (
                    f"{device.ident}: holders of higher priority or earlier ({', '.join(above[:4])}) "
                    f"leave no room for this order's holding at priority {priority}"
                )
        return None

    def outranked(self, order: OrderKey, units: int) -> list[str]:
        """Devices the order holds where orders of higher priority than it hold the room it needs, with who.

        Where it has lost the device (`displaced`): its own holding would fit were they gone, so the loss is
        preemption. Where it stands: a further claim of `units` (one more replica of it) finds no room now and
        would were they gone, so growth there is blocked by priority, not by a full device. Holders of no order
        and orders of its own priority or below never outrank it: they came first, or yield to it.
        """
        out: list[str] = []
        with self.lock:
            mine = self.order_priority(order)
            for key in sorted(self.holds(order)):
                above: dict[OrderKey, int] = {}
                for h in self.holdings_on(key):
                    held_at = self.priority_of_holding(h)
                    if h.order is not None and h.order != order and held_at > mine:
                        above[h.order] = max(above.get(h.order, held_at), held_at)
                if not above:
                    continue
                need = units if self.devices[key].shareable else UNITS
                mine_too = (order,) if self._displaced_on(order, key) is not None else ()
                if self.room(key, mine_too) >= need or self.room(key, (*mine_too, *above)) < need:
                    continue
                who = ", ".join(f"{ns}/{n} at priority {p}" for (ns, n), p in sorted(above.items())[:4])
                out.append(f"{self.devices[key].ident}: {who}")
        return out

    def _ranked(self, key: DeviceKey) -> list[tuple[OrderKey | None, int, float, Consumption | None]]:
        """The holders of a device in standing order: (order, priority, since, what it takes or None for all)."""
        device = self.devices[key]
        per: dict[object, tuple[OrderKey | None, int, float, list[Holding]]] = {}
        for h in (self._holdings.get(key) or {}).values():
            who: object = h.order if h.order is not None else h.source
            order, prio, since, hs = per.get(who, (h.order, self.priority_of_holding(h), h.since, []))
            hs.append(h)
            per[who] = (order, max(prio, self.priority_of_holding(h)), min(since, h.since), hs)
        out = []
        for order, prio, since, hs in per.values():
            load: Consumption | None = {}
            claimed: Consumption = {}
            planned: Consumption = {}
            for h in hs:
                taken = self._consumption(h, device)
                if taken is None:
                    load = None
                    break
                if h.kind == "claim":
                    _add(claimed, taken)
                else:
                    planned = _most(planned, taken)
            if load is not None:
                load = _most(claimed, planned)
            out.append((order, prio, since, load))
        out.sort(key=lambda r: (r[0] is not None, -r[1], r[2], r[0] or ("", "")))
        return out

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
        """A reservation's priority as planned; a claim's or plan's that of its order, as it is now."""
        if h.order is not None and h.kind != "reservation":
            return self.order_priority(h.order)
        return h.priority

    def upsert_order(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceService: only its class counts here."""
        meta = obj.get("metadata") or {}
        klass = (obj.get("spec") or {}).get("inferenceServiceClassName")
        key = (meta.get("namespace") or "", meta.get("name") or "")
        value = klass if isinstance(klass, str) and klass else None
        with self.lock:
            known = key in self.order_classes
            before = self.order_classes.get(key)
            self.order_classes[key] = value
            if not known or before != value:
                self.version += 1  # the priority of what it holds may have changed
            if known and before != value:
                self._free()  # its priority changed: a preemption may now be possible

    def delete_order(self, obj: Mapping[str, Any]) -> None:
        """Forget an InferenceService."""
        meta = obj.get("metadata") or {}
        with self.lock:
            self.order_classes.pop((meta.get("namespace") or "", meta.get("name") or ""), None)
            self.version += 1

    def upsert_service_class(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceServiceClass: only its priorityClassName counts here."""
        name = (obj.get("spec") or {}).get("priorityClassName")
        value = name if isinstance(name, str) and name else None
        with self.lock:
            key = obj["metadata"]["name"]
            changed = key in self.class_priorities and self.class_priorities[key] != value
            self.version += key not in self.class_priorities or self.class_priorities[key] != value
            self.class_priorities[key] = value
            if changed:
                self._free()

    def delete_service_class(self, name: str) -> None:
        """Forget an InferenceServiceClass."""
        with self.lock:
            self.class_priorities.pop(name, None)
            self.version += 1

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        """A node opened or closed to new pods: its devices are offered again, or no longer."""
        name = node["metadata"]["name"]
        with self.lock:
            self.departed.pop(name, None)
        self._set_node(name, _node_state(node))

    def delete_node(self, node: Mapping[str, Any]) -> None:
        """A node gone: its slices go with it; what it published is remembered for a while (`departed`)."""
        name = node["metadata"]["name"]
        with self.lock:
            devices = [d for d in self.devices.values() if d.node == name]
            now = time.time()
            self.departed = {n: v for n, v in self.departed.items() if now - v[0] < DEPARTED_TTL}
            self.departed[name] = (now, devices)
            self._free()  # orders planned there are judged again: the room's answer names them
        self._set_node(name, "deleted")  # its slices may outlive it a moment: nothing is placed on them

    def _set_node(self, name: str, state: str | None) -> None:
        closed = state is not None
        with self.lock:
            if self.node_states.get(name) != state:
                self.version += 1  # what a refusal says of the node changed
            if state is not None:
                self.node_states[name] = state
            else:
                self.node_states.pop(name, None)
            if closed == (name in self.closed_nodes):
                return
            if closed:
                self.closed_nodes.add(name)
            else:
                self.closed_nodes.discard(name)
            for pool in sorted(self._node_pools.get(name, ())):
                self._refresh_pool(pool)

    def upsert_priority_class(self, pc: Mapping[str, Any]) -> None:
        """Add or change a PriorityClass."""
        with self.lock:
            name = pc["metadata"]["name"]
            value = int(pc.get("value", 0))
            changed = self.priority_classes.get(name) != value
            self.priority_classes[name] = value
            if pc.get("globalDefault"):
                changed = changed or self.default_priority != value
                self.default_priority = value
            if changed:
                self.version += 1
                self._free()

    def delete_priority_class(self, name: str) -> None:
        """Forget a PriorityClass."""
        with self.lock:
            self.priority_classes.pop(name, None)
            self.version += 1

    # ------------------------------------------------------------------ index

    def _index_device(self, device: Device) -> None:
        if device.tainted:
            return
        free = self.room(device.key)
        self._indexed[device.key] = free
        for name in device.classes:
            groups = self._index.setdefault(name, {})
            group = groups.get(device.group)
            if group is None:
                group = groups[device.group] = _Group()
            group.add(device, free)

    def _reindex_many(self, devices: list[Device]) -> bool:
        """Count many devices anew and index them at their room now (a listing applied): each group sorted
        once. Whether any indexed before has more room now."""
        # By the devices' set of classes (one object for devices alike) and group: expanded to classes after.
        changes: dict[tuple[frozenset[str], GroupKey], tuple[set[str], list[tuple[Device, int]]]] = {}
        grew = False
        rooms, indexed, count = self._room, self._indexed, self._count
        for device in devices:
            key = device.key
            free = rooms[key] = count(device)
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
                groups = self._index.setdefault(name, {})
                group = groups.get(gkey)
                if group is None:
                    group = groups[gkey] = _Group()
                group.replace(gone, added)
        return grew

    def _unindex(self, device: Device) -> None:
        free = self._indexed.pop(device.key, None)
        if free is None:
            return
        for name in device.classes:
            group = self._index.get(name, {}).get(device.group)
            if group is not None:
                group.remove(device, free)


def _merged(a: Holding, b: Holding) -> Holding:
    """Two results of one claim on one device (two requests): one holding taking both."""
    if a.whole or b.whole:
        return Holding(a.source, a.device, a.order, a.priority, None, whole=True, since=a.since)
    recorded = None
    if a.recorded is not None or b.recorded is not None:
        total: Consumption = dict(a.recorded or ())
        _add(total, dict(b.recorded or ()))
        recorded = tuple(sorted(total.items()))
    units = (a.units or 0) + (b.units or 0) if a.units is not None or b.units is not None else None
    return Holding(a.source, a.device, a.order, a.priority, units, a.request, recorded, False, a.since)


def _at_most(known: int | None, units: int | None) -> bool:
    """Whether a refusal already known for `known` units covers one for `units` (None: whole devices)."""
    if known is None:
        return units is None
    return units is None or known <= units


def _placement(plan: Mapping[str, Any]) -> Placement | None:
    try:
        return Placement.model_validate(((plan.get("spec") or {}).get("placement")) or {})
    except ValidationError:
        return None


def _node_closed(node: Mapping[str, Any]) -> bool:
    """Whether a node takes no new pods: cordoned, or tainted NoSchedule/NoExecute (not-ready included)."""
    return _node_state(node) is not None


# The taints the node lifecycle controller and cordon put on a node (k8s.io/api v0.36.3 core/v1
# well_known_taints.go), said in words.
_NODE_TAINTS = {
    "node.kubernetes.io/not-ready": "not ready",
    "node.kubernetes.io/unreachable": "unreachable",
    "node.kubernetes.io/unschedulable": "cordoned",
    "node.kubernetes.io/memory-pressure": "under memory pressure",
    "node.kubernetes.io/disk-pressure": "under disk pressure",
    "node.kubernetes.io/pid-pressure": "under PID pressure",
    "node.kubernetes.io/network-unavailable": "without network",
    "node.cloudprovider.kubernetes.io/shutdown": "shut down",
}


def _node_state(node: Mapping[str, Any]) -> str | None:
    """Why a node takes no new pods, in words (cordoned, not ready, unreachable, a NoSchedule/NoExecute
    taint); None when it takes them."""
    spec = node.get("spec") or {}
    said: list[str] = ["cordoned"] if spec.get("unschedulable") else []
    for taint in spec.get("taints") or []:
        if taint.get("effect") not in _BLOCKING:
            continue
        key = str(taint.get("key") or "")
        value = f"={taint['value']}" if taint.get("value") else ""
        words = _NODE_TAINTS.get(key, f"tainted {key}{value}:{taint.get('effect')}")
        if words not in said:
            said.append(words)
    return ", ".join(said) or None


def _amount(counter: Any) -> int:
    """A counter's value ({"value": "40Gi"}) in base units; 0 when it cannot be read."""
    value = counter.get("value") if isinstance(counter, Mapping) else counter
    try:
        return quantity_bytes(str(value))
    except ValueError:
        return 0


def _pool_id(sl: Mapping[str, Any]) -> tuple[str, str]:
    return (sl["spec"]["driver"], sl["spec"]["pool"]["name"])
