"""`kubectl isvc capacity`: per device class and card, the shares and memory held and by which orders,
the room left, and the orders waiting for room — from ResourceSlices, claims, launch plans and orders.

A device's class is read from the DeviceClass selectors when they are plain conjunctions of
`device.driver == '…'` and `device.attributes['…'].name == '…'` (the NVIDIA driver's classes are), and
from the claims allocated on it otherwise. Memory held on a shared device is the consumed `memory`
capacity when the claim asked for it, and the share of the card's memory when it did not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from isvc_api import LABEL_ORDER, LABEL_PRIORITY, Reason
from pydantic import Field

from kubectl_isvc._common import Exit, Out, Unread, unread
from kubectl_isvc._errors import ReadFailed
from kubectl_isvc._read import (
    Obj,
    Reader,
    claims_path,
    device_classes_path,
    orders_path,
    plans_path,
    priority_classes_path,
    slices_path,
)

__all__ = [
    "ADMIN_HINT",
    "WAITING_REASONS",
    "Capacity",
    "Card",
    "ClassSummary",
    "Holder",
    "Waiting",
    "capacity",
    "compute",
    "parse_quantity",
]

GIB = 1024**3
# Reasons of orders that wait for room (or, ScaleUpBlocked, for room to grow).
WAITING_REASONS = frozenset(
    {
        Reason.NO_CAPACITY,
        Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
        Reason.NO_COMPATIBLE_PLACEMENT,
        Reason.PLANNING_PREEMPTION_FAILED,
        Reason.RESOURCE_CLAIM_EXHAUSTED,
        Reason.RESOURCE_CLAIM_PENDING,
        Reason.SCALE_UP_BLOCKED,
    }
)
_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: Any) -> float | None:
    """A Kubernetes quantity (`80Gi`, `81559Mi`, `100`, `1.5`) as a number; None when it is not one."""
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in ("", *_SUFFIX):
        return None
    return float(match.group(1)) * (_SUFFIX[match.group(2)] if match.group(2) else 1)


class Holder(Out):
    """An order holding (allocated claim) or reserved (launch plan, not yet allocated) part of a card."""

    namespace: str
    order: str
    priority: int | None
    state: str  # Allocated | Planned
    device: str
    device_class: str | None
    share_percent: float | None
    memory_gi_b: float | None
    claim: str | None = None


class Card(Out):
    """One physical accelerator (a GPU and its partitions)."""

    driver: str
    node: str | None
    pool: str
    card: str
    product: str | None
    device_classes: list[str]
    devices: list[str]
    memory_gi_b: float | None  # None: the card publishes no memory (an incomplete memory profile)
    held_gi_b: float
    free_gi_b: float | None
    shares_total: int | None  # the shares of its shareable devices; None when it has none
    shares_used: float | None
    holders: list[Holder]


class ClassSummary(Out):
    """A device class over its cards."""

    name: str
    cards: int
    memory_gi_b: float
    held_gi_b: float
    free_gi_b: float
    free_cards: int


class Waiting(Out):
    """An order waiting for room, with its reason."""

    namespace: str
    name: str
    priority: int | None
    priority_class_name: str | None
    condition: str | None
    reason: str
    message: str
    since: str | None


class Capacity(Out):
    """What capacity found, and what it could not read."""

    exit_code: int
    device_classes: list[ClassSummary]
    cards: list[Card]
    waiting: list[Waiting]
    unread: list[Unread] = Field(default_factory=list)


# ---------------------------------------------------------------- devices and classes

_ATOM = re.compile(
    r"""^device\.driver\s*==\s*(['"])(?P<driver>[^'"]+)\1$"""
    r"""|^device\.attributes\[(['"])(?P<domain>[^'"]+)\3\]\.(?P<attr>\w+)\s*==\s*(['"])(?P<value>[^'"]*)\6$"""
)


def _matcher(device_class: Obj) -> list[tuple[str, str, str]] | None:
    """The class's selectors as (domain, attribute, value) atoms (domain "" for the driver), None when some
    selector is more than a conjunction of equalities."""
    atoms: list[tuple[str, str, str]] = []
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        expression = ((selector.get("cel") or {}).get("expression") or "").strip()
        for part in expression.split("&&"):
            match = _ATOM.match(part.strip().strip("()").strip())
            if match is None:
                return None
            if match.group("driver"):
                atoms.append(("", "driver", match.group("driver")))
            else:
                atoms.append((match.group("domain"), match.group("attr"), match.group("value")))
    return atoms


def _value(entry: Any) -> Any:
    if isinstance(entry, dict):
        for key in ("string", "int", "bool", "version", "value"):
            if key in entry:
                return entry[key]
    return entry


def _qualified(driver: str, values: dict[str, Any]) -> dict[str, Any]:
    """Attribute or capacity names as domain/name (an unqualified name is in the driver's domain)."""
    return {(k if "/" in k else f"{driver}/{k}"): _value(v) for k, v in (values or {}).items()}


class _Device:
    def __init__(self, driver: str, pool: str, node: str | None, raw: Obj) -> None:
        self.driver, self.pool, self.node = driver, pool, node
        self.name = str(raw.get("name", ""))
        self.attributes = _qualified(driver, raw.get("attributes") or {})
        self.capacity = {
            k: parse_quantity(v) for k, v in _qualified(driver, raw.get("capacity") or {}).items()
        }
        self.classes: set[str] = set()

    def attr(self, name: str) -> Any:
        return self.attributes.get(f"{self.driver}/{name}")

    @property
    def memory(self) -> float | None:
        return self.capacity.get(f"{self.driver}/memory")

    @property
    def shares(self) -> float | None:
        return self.capacity.get(f"{self.driver}/shares")

    @property
    def card_key(self) -> str:
        return str(self.attr("parentUUID") or self.attr("uuid") or f"{self.pool}/{self.name}")

    def matches(self, atoms: list[tuple[str, str, str]]) -> bool:
        for domain, attr, value in atoms:
            have = self.driver if domain == "" else self.attributes.get(f"{domain}/{attr}")
            if str(have) != value:
                return False
        return bool(atoms)


def _devices(slices: list[Obj]) -> list[_Device]:
    """The devices of the newest generation of every pool."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))
        newest[key] = max(newest.get(key, 0), int((spec.get("pool") or {}).get("generation") or 0))
    out = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver")), str(pool.get("name")))
        if int(pool.get("generation") or 0) != newest[key]:
            continue
        out += [_Device(key[0], key[1], spec.get("nodeName"), d) for d in spec.get("devices") or []]
    return out


# ---------------------------------------------------------------- holders


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _holders(
    claims: list[Obj],
    plans: list[Obj],
    devices: dict[tuple[str, str, str], _Device],
    priority_of: dict[tuple[str, str], int | None],
) -> list[Holder]:
    out: list[Holder] = []
    allocated: set[tuple[str, str, str, str]] = set()
    for claim in claims:
        meta = claim.get("metadata") or {}
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace", ""))
        owner = next((o.get("name") for o in meta.get("ownerReferences") or []), None)
        order = str(labels.get(LABEL_ORDER) or owner or meta.get("name", ""))
        requests = {
            r.get("name"): (r.get("exactly") or {}).get("deviceClassName")
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            device = devices.get(key)
            device_class = requests.get(result.get("request")) or requests.get(
                str(result.get("request", "")).split("/")[0]
            )
            if device is not None and device_class:
                device.classes.add(str(device_class))
            consumed = {
                k if "/" in k else f"{key[0]}/{k}": parse_quantity(v)
                for k, v in (result.get("consumedCapacity") or {}).items()
            }
            share, memory = _portion(
                device, consumed.get(f"{key[0]}/shares"), consumed.get(f"{key[0]}/memory")
            )
            priority = _int(labels.get(LABEL_PRIORITY))
            out.append(
                Holder(
                    namespace=namespace,
                    order=order,
                    priority=priority if priority is not None else priority_of.get((namespace, order)),
                    state="Allocated",
                    device=f"{key[1]}/{key[2]}",
                    device_class=device_class,
                    share_percent=share,
                    memory_gi_b=memory,
                    claim=str(meta.get("name", "")),
                )
            )
            allocated.add((namespace, order, key[1], key[2]))
    for plan in plans:
        meta = plan.get("metadata") or {}
        placement = (plan.get("spec") or {}).get("placement") or {}
        namespace = str(meta.get("namespace", ""))
        order = str(
            next(
                (
                    o.get("name")
                    for o in meta.get("ownerReferences") or []
                    if o.get("kind") == "InferenceService"
                ),
                meta.get("name", ""),
            )
        )
        pool = placement.get("pool")
        for name in placement.get("devices") or []:
            if (namespace, order, pool, name) in allocated:
                continue
            device = next(
                (
                    d
                    for k, d in devices.items()
                    if k[1] == pool
                    and k[2] == name
                    and (not placement.get("driver") or k[0] == placement.get("driver"))
                ),
                None,
            )
            share = placement.get("sharePercent") if placement.get("placementMode") == "Shared" else None
            memory_gib = placement.get("memoryGiB")
            shares_total = device.shares if device is not None else None
            share_units = share * shares_total / 100 if share is not None and shares_total else None
            share_pct, memory = _portion(
                device, share_units, memory_gib * GIB if isinstance(memory_gib, int | float) else None
            )
            out.append(
                Holder(
                    namespace=namespace,
                    order=order,
                    priority=priority_of.get((namespace, order)),
                    state="Planned",
                    device=f"{pool}/{name}",
                    device_class=placement.get("deviceClassName"),
                    share_percent=share_pct,
                    memory_gi_b=memory,
                )
            )
    return out


def _portion(
    device: _Device | None, shares: float | None, memory: float | None
) -> tuple[float | None, float | None]:
    """(percent of the device, GiB) one allocation takes: consumed shares and memory when the device is
    shareable, the whole device otherwise."""
    if device is None:
        return None, (memory / GIB if memory else None)
    total_shares, total_memory = device.shares, device.memory
    if total_shares and shares is not None:
        percent = 100 * shares / total_shares
        if memory:
            return percent, memory / GIB
        return percent, (total_memory * percent / 100 / GIB if total_memory else None)
    return 100.0, (total_memory / GIB if total_memory else None)


# ---------------------------------------------------------------- the whole picture


def _priority_map(orders: list[Obj], priority_classes: list[Obj]) -> dict[tuple[str, str], int | None]:
    values = {str((p.get("metadata") or {}).get("name")): _int(p.get("value")) for p in priority_classes}
    default = next((_int(p.get("value")) for p in priority_classes if p.get("globalDefault")), 0)
    out: dict[tuple[str, str], int | None] = {}
    for order in orders:
        meta = order.get("metadata") or {}
        name = ((order.get("status") or {}).get("constraints") or {}).get("priorityClassName")
        out[(str(meta.get("namespace")), str(meta.get("name")))] = values.get(name) if name else default
    return out


def _waiting(orders: list[Obj], priority_of: dict[tuple[str, str], int | None]) -> list[Waiting]:
    out = []
    for order in orders:
        meta, status = order.get("metadata") or {}, order.get("status") or {}
        reason = status.get("reason")
        if reason not in WAITING_REASONS:
            continue
        cond: Obj = next((c for c in status.get("conditions") or [] if c.get("reason") == reason), {})
        key = (str(meta.get("namespace")), str(meta.get("name")))
        out.append(
            Waiting(
                namespace=key[0],
                name=key[1],
                priority=priority_of.get(key),
                priority_class_name=(status.get("constraints") or {}).get("priorityClassName"),
                condition=cond.get("type"),
                reason=str(reason),
                message=str(cond.get("message", "")),
                since=cond.get("lastTransitionTime"),
            )
        )
    return sorted(out, key=lambda w: (-(w.priority or 0), w.since or "", w.namespace, w.name))


def _round(value: float) -> float:
    return round(value, 2)


def compute(
    slices: list[Obj],
    device_classes: list[Obj],
    claims: list[Obj],
    plans: list[Obj],
    orders: list[Obj],
    priority_classes: list[Obj],
    unread: Iterable[Unread] = (),
) -> Capacity:
    """The capacity picture from the objects read (pure: no cluster)."""
    devices = _devices(slices)
    matchers = {str((c.get("metadata") or {}).get("name")): _matcher(c) for c in device_classes}
    for device in devices:
        device.classes |= {
            name for name, atoms in matchers.items() if atoms is not None and device.matches(atoms)
        }
    by_key = {(d.driver, d.pool, d.name): d for d in devices}
    priority_of = _priority_map(orders, priority_classes)
    holders = _holders(claims, plans, by_key, priority_of)
    cards: dict[tuple[str, str, str], list[_Device]] = {}
    for d in devices:
        cards.setdefault((d.driver, d.pool, d.card_key), []).append(d)
    out: list[Card] = []
    for (driver, pool, key), members in cards.items():
        whole = next((d for d in members if str(d.attr("uuid")) == key), None)
        names = {f"{pool}/{d.name}" for d in members}
        on_card = [h for h in holders if h.device in names]
        if whole is not None and whole.memory is not None:
            memory: float | None = whole.memory / GIB
        elif whole is None and all(d.memory is not None for d in members):
            memory = sum(d.memory or 0 for d in members) / GIB
        else:
            memory = None
        held = sum(h.memory_gi_b or 0 for h in on_card)
        shareable = [d for d in members if d.shares]
        shares_total = int(sum(d.shares or 0 for d in shareable)) if shareable else None
        shares_used = (
            sum(h.share_percent or 0 for h in on_card if h.device in {f"{pool}/{d.name}" for d in shareable})
            if shareable
            else None
        )
        label = (
            whole.name
            if whole is not None
            else (members[0].name.split("-mig-")[0] if "-mig-" in members[0].name else key)
        )
        product = next((str(d.attr("productName")) for d in members if d.attr("productName")), None)
        classes = sorted({c for d in members for c in d.classes})
        out.append(
            Card(
                driver=driver,
                node=members[0].node,
                pool=pool,
                card=label,
                product=product,
                device_classes=classes,
                devices=sorted(d.name for d in members),
                memory_gi_b=_round(memory) if memory is not None else None,
                held_gi_b=_round(held),
                free_gi_b=_round(max(0.0, memory - held)) if memory is not None else None,
                shares_total=shares_total,
                shares_used=_round(shares_used) if shares_used is not None else None,
                holders=sorted(on_card, key=lambda h: (h.device, h.namespace, h.order)),
            )
        )
    out.sort(key=lambda c: (c.device_classes[0] if c.device_classes else "~", c.node or "", c.pool, c.card))
    summaries = []
    for name in sorted({c for card in out for c in card.device_classes}):
        mine = [c for c in out if name in c.device_classes]
        summaries.append(
            ClassSummary(
                name=name,
                cards=len(mine),
                memory_gi_b=_round(sum(c.memory_gi_b or 0 for c in mine)),
                held_gi_b=_round(sum(c.held_gi_b for c in mine)),
                free_gi_b=_round(sum(c.free_gi_b or 0 for c in mine)),
                free_cards=sum(1 for c in mine if not c.holders),
            )
        )
    missing = list(unread)
    return Capacity(
        exit_code=Exit.UNKNOWN if missing else Exit.SERVING,
        device_classes=summaries,
        cards=out,
        waiting=_waiting(orders, priority_of),
        unread=missing,
    )


ADMIN_HINT = (
    "capacity reads cluster-wide objects (ResourceSlices, claims and orders of every namespace): "
    "it is a command for administrators"
)


def _unread_admin(e: ReadFailed) -> Unread:
    return unread(e, ADMIN_HINT)


def capacity(reader: Reader) -> Capacity:
    """Read the cluster-wide objects as the caller (an administrator's reads) and compute the picture; what
    could not be read is named and makes the exit code 2."""
    failed: list[Unread] = []

    def read(path: str, what: str) -> list[Obj]:
        try:
            return reader.items(path, what)
        except ReadFailed as e:
            failed.append(_unread_admin(e))
            return []

    return compute(
        slices=read(slices_path(), "ResourceSlices"),
        device_classes=read(device_classes_path(), "DeviceClasses"),
        claims=read(claims_path(), "ResourceClaims in all namespaces"),
        plans=read(plans_path(), "LaunchPlans in all namespaces"),
        orders=read(orders_path(), "InferenceServices in all namespaces"),
        priority_classes=read(priority_classes_path(), "PriorityClasses"),
        unread=failed,
    )
