"""What one claim, plan or reservation holds of one device, read from the object that says so.

Only the scheduler writes an allocation (claim status): a claim nobody allocated holds nothing, whoever
made it and whatever its labels say (a namespace user may create claims: issue 29). A LaunchPlan holds its
devices at what its claim will ask (namespace users may read and delete LaunchPlans, never create or
change them: the chart's roles).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

from isvc_api import (
    LABEL_ORDER,
    DeviceKey,
    OrderKey,
    Placement,
    QuantityError,
    claim_capacity_requests,
    parse_quantity,
)
from pydantic import ValidationError

from isvc_ledger._capacity import SHARES, Consumption

__all__ = [
    "CLAIM",
    "Amounts",
    "Holding",
    "add",
    "claim_holdings",
    "most",
    "plan_holdings",
    "reservation_holdings",
    "source_of",
]

CLAIM = "claim:"  # how a claim's holdings' source begins
_ZERO = Decimal(0)

Amounts = tuple[tuple[str, Decimal], ...]


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


def source_of(kind: str, order: OrderKey) -> str:
    """The source of a plan's or a reservation's holdings."""
    return f"{kind}:{order[0]}/{order[1]}"


def add(into: Consumption, more: Mapping[str, Decimal]) -> None:
    """Add `more` to `into`, capacity by capacity."""
    for name, amount in more.items():
        into[name] = into.get(name, _ZERO) + amount


def most(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> Consumption:
    """The larger of two consumptions, capacity by capacity."""
    return {n: max(a.get(n, _ZERO), b.get(n, _ZERO)) for n in a.keys() | b.keys()}


def merged(a: Holding, b: Holding) -> Holding:
    """Two results of one claim on one device (two requests): one holding taking both."""
    if a.whole or b.whole:
        return Holding(a.source, a.device, a.order, a.priority, None, whole=True, since=a.since)
    recorded = None
    if a.recorded is not None or b.recorded is not None:
        total: Consumption = dict(a.recorded or ())
        add(total, dict(b.recorded or ()))
        recorded = tuple(sorted(total.items()))
    units = (a.units or 0) + (b.units or 0) if a.units is not None or b.units is not None else None
    return Holding(a.source, a.device, a.order, a.priority, units, a.request, recorded, False, a.since)


def amounts(raw: Mapping[str, Any] | None) -> Amounts | None:
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
        read = amounts(raw) or ()
        units = None
        for name, amount in read:
            if name == SHARES or name.endswith(f"/{SHARES}"):
                units = math.ceil(amount)
        known = (read, units)
        if key is not None:
            if len(_RECORDED) >= 4096:
                _RECORDED.clear()
            _RECORDED[key] = known
    return known


def claim_holdings(
    claim: Mapping[str, Any],
) -> tuple[str, str, OrderKey | None, list[Holding], bool]:
    """(uid, source, order, holdings, whether it waits for an allocation) of a ResourceClaim."""
    meta = claim.get("metadata") or {}
    uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
    named_order = (meta.get("labels") or {}).get(LABEL_ORDER)
    order: OrderKey | None = (meta.get("namespace") or "", named_order) if named_order else None
    allocation = (claim.get("status") or {}).get("allocation")
    results = ((allocation or {}).get("devices") or {}).get("results") or ()
    since = stamp(meta.get("creationTimestamp"))
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


def claim_key(claim: Mapping[str, Any]) -> tuple[str, OrderKey]:
    """(uid, the order its label names) of a ResourceClaim being forgotten."""
    meta = claim.get("metadata") or {}
    uid = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
    return uid, (meta.get("namespace") or "", (meta.get("labels") or {}).get(LABEL_ORDER) or "")


def plan_holdings(plan: Mapping[str, Any]) -> tuple[OrderKey, list[Holding]]:
    """(order, holdings) of a LaunchPlan: its order holds the devices it places it on, at what its claim
    asks; none while it is being deleted or when its placement names no devices."""
    meta = plan.get("metadata") or {}
    key: OrderKey = (meta.get("namespace") or "", meta.get("name") or "")
    placement = _placement(plan) if not meta.get("deletionTimestamp") else None
    if placement is None or not (placement.driver and placement.pool and placement.devices):
        return key, []
    requests = claim_capacity_requests(placement)
    request = amounts(requests) if requests else None
    since = stamp((plan.get("spec") or {}).get("plannedAt")) or stamp(meta.get("creationTimestamp"))
    return key, [
        Holding(
            source_of("plan", key),
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


def reservation_holdings(
    order: OrderKey,
    priority: int,
    held: list[tuple[DeviceKey, int | None, Mapping[str, Decimal] | None]],
    now: float,
) -> list[Holding]:
    """A reservation's holdings: (device, shares or None for the whole device, what its claim asks)."""
    source = source_of("reservation", order)
    return [
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
        for key, units, request in held
    ]


def stamp(text: Any) -> float:
    """An RFC 3339 time as epoch seconds; 0 when absent."""
    if isinstance(text, datetime):
        return text.timestamp()
    if not isinstance(text, str) or not text:
        return 0.0
    return _seconds(text)


@functools.lru_cache(maxsize=4096)
def _seconds(text: str) -> float:
    """`stamp` of a text, remembered: objects listed together were made within a few seconds."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _placement(plan: Mapping[str, Any]) -> Placement | None:
    try:
        return Placement.model_validate(((plan.get("spec") or {}).get("placement")) or {})
    except ValidationError:
        return None
