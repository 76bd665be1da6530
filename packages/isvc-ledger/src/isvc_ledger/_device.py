"""One published DRA device as the ledger reads it, and the reading of devices from their slices.

Devices of one model publish the same capacities: `DeviceReader` reads them once per text and shares the
result (`_Reading`) between them, so a fleet of 80,000 alike devices parses a handful of capacity maps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from cachetools import LRUCache
from isvc_api import DeviceKey, quantity_bytes
from isvc_planner_client import SelectorError, device_activation

from isvc_ledger._capacity import (
    MEMORY,
    Capacity,
    named,
    parse_capacities,
    partial,
    share_request,
    whole_request,
)

__all__ = [
    "BLOCKING",
    "UNITS",
    "Device",
    "DeviceReader",
    "GroupKey",
    "attribute",
    "capacity_key",
    "counter_amount",
]

UNITS = 100
BLOCKING = frozenset({"NoSchedule", "NoExecute"})  # taint effects that keep new pods (and claims) off

GroupKey = tuple[
    int, bool, str, str, tuple[object, ...]
]  # (memory or -1, shareable, type, product, capacities)


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
        value = attribute(self.raw.get("attributes") or {}, self.driver, "uuid")
        return str(value) if value is not None else None

    @property
    def pin(self) -> dict[str, str] | None:
        """The attributes that name this device alone: its uuid; or, for a partition the driver publishes
        without one (DynamicMIG: every placement of every profile is a device), its parent's uuid and its
        profile, which any free placement of that profile on that parent answers; None when nothing does."""
        if self.uuid is not None:
            return {"uuid": self.uuid}
        attrs = self.raw.get("attributes") or {}
        parent, profile = (
            attribute(attrs, self.driver, "parentUUID"),
            attribute(attrs, self.driver, "profile"),
        )
        if parent is None or profile is None:
            return None
        return {"parentUUID": str(parent), "profile": str(profile)}

    @property
    def profile(self) -> str | None:
        """A MIG partition's profile ("3g.20gb"), if any."""
        value = attribute(self.raw.get("attributes") or {}, self.driver, "profile")
        return str(value) if value is not None else None

    @property
    def card(self) -> str:
        """The physical card a device is part of: a partition's parentUUID, else its uuid or name."""
        parent = attribute(self.raw.get("attributes") or {}, self.driver, "parentUUID")
        return str(parent) if parent is not None else self.uuid or self.name

    @property
    def compute_capability(self) -> str | None:
        """The CUDA compute capability the driver publishes ("9.0"), if any."""
        if self._cc == "":
            cc = attribute(self.raw.get("attributes") or {}, self.driver, "cudaComputeCapability")
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
                (self.capacity_key or capacity_key(self.capacities)) if self.shareable else (),
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
        """What the claim of `units` percent of this device asks of its capacities."""
        return share_request(units, self.capacities)

    def whole_request(self) -> dict[str, Decimal] | None:
        """What a claim taking all of this device asks of its capacities: all of each one with a request
        policy, on a device that allows several allocations (None on one that does not: a claim takes it
        whole by itself)."""
        return whole_request(self.capacities) if self.multi else None


def capacity_key(capacities: Mapping[str, Capacity]) -> tuple[object, ...]:
    """Capacities and their policies, comparable: devices alike have equal keys."""
    return tuple(sorted((n, str(c.value), repr(c.policy)) for n, c in capacities.items()))


def attribute(attrs: Mapping[str, Any], driver: str, name: str) -> Any:
    """The value of a device attribute published as `name` or `<driver>/name`; None when absent."""
    value = attrs.get(name) or attrs.get(f"{driver}/{name}")
    if value and isinstance(value, (dict, Mapping)):  # dicts first: ABCs check slowly
        return next(iter(value.values()))
    return None


def counter_amount(counter: Any) -> int:
    """A counter's value ({"value": "40Gi"}) in base units; 0 when it cannot be read."""
    value = counter.get("value") if isinstance(counter, Mapping) else counter
    try:
        return quantity_bytes(str(value))
    except ValueError:
        return 0


class _Reading(NamedTuple):
    """What the planner reads from a device's published capacities (devices of one model share it)."""

    capacities: dict[str, Capacity]
    key: tuple[object, ...]  # comparable: the capacities and their policies
    memory: int | None  # bytes
    partial: bool  # claims can each take part of the device (`_capacity.partial`)


class DeviceReader:
    """Devices read from their slices, their capacities read once per distinct text.

    A device as listed is kept (selectors judge it, a pool is read again from it), so what devices alike
    publish is kept once: their capacities, and each attribute value equal to the last one read under that
    name (devices of one node, and nodes of one model, publish the same but for names, UUIDs and bus
    addresses). At 10,000 nodes × 8 that is most of what the listed slices weigh (`nox -s bench`).
    """

    def __init__(self) -> None:
        self._readings: LRUCache[str, tuple[Any, _Reading]] = LRUCache(4096)
        self._recent: list[tuple[Any, _Reading]] = []
        self._last: dict[str, Any] = {}  # attribute name -> the value last read under it

    def _reading(self, raw: Mapping[str, Any]) -> tuple[Any, _Reading]:
        """A device's capacities as first published by a device alike, and what they read as: read once per
        text, devices of one model publish the same. The last few are compared first, which costs less than
        printing the text."""
        published = raw.get("capacity")
        for seen, reading in self._recent:
            if seen == published:
                return seen, reading
        text = repr(published)
        known = self._readings.get(text)
        if known is None:
            capacities = parse_capacities(raw)
            memory = capacities.get(named(capacities, MEMORY) or MEMORY)
            known = self._readings[text] = (
                published,
                _Reading(
                    capacities,
                    capacity_key(capacities),
                    math.ceil(memory.value) if memory is not None else None,
                    partial(capacities),
                ),
            )
        self._recent = [known, *self._recent[:3]]
        return known

    def _share(self, raw: Mapping[str, Any], capacity: Any) -> None:
        """Keep what the device publishes alike with devices read before once (`raw` is changed in place,
        equal throughout)."""
        if isinstance(raw, dict):
            if raw.get("capacity") is not capacity:
                raw["capacity"] = capacity
            attrs = raw.get("attributes")
            if type(attrs) is dict:
                last = self._last
                for name, value in attrs.items():
                    known = last.get(name)
                    if known is None or known != value:
                        last[name] = value
                    elif known is not value:
                        attrs[name] = known

    def device(
        self, driver: str, pool: str, node: str | None, raw: Mapping[str, Any], closed: set[str]
    ) -> Device:
        """A device of `driver`'s `pool` as its slice publishes it (`node`: the slice's node, if any;
        `closed`: nodes that take no new pods)."""
        capacity, reading = self._reading(raw)
        self._share(raw, capacity)
        multi = bool(raw.get("allowMultipleAllocations", False))
        taints = raw.get("taints")
        attrs = raw.get("attributes") or {}
        node = raw.get("nodeName") or node
        counters = raw.get("consumesCounters")
        return Device(
            key=(driver, pool, raw["name"]),
            node=node,
            raw=raw,
            type=attribute(attrs, driver, "type"),
            product=attribute(attrs, driver, "productName") or attribute(attrs, driver, "model"),
            memory=reading.memory,
            shareable=multi and reading.partial,
            tainted=node in closed or (any(t.get("effect") in BLOCKING for t in taints) if taints else False),
            consumes=tuple(
                sorted(
                    (str(c.get("counterSet")), name, counter_amount(v))
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
