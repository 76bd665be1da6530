"""Consumable capacity (KEP-5075) counted as kube-scheduler counts it, to the byte.

A port of the arithmetic of k8s.io/dynamic-resource-allocation v0.36.3 (the module Kubernetes 1.36.3
builds kube-scheduler with), `structured/internal/incubating/consumable_capacity.go`: with
DRAConsumableCapacity on (beta, on by default in 1.36) `structured/allocator.go` `NewAllocator` picks the
"incubating" allocator, the first whose SupportedFeatures include ConsumableCapacity, and it checks every
candidate device with `CmpRequestOverCapacity` (`allocator_incubating.go`, also in `allocateDevice`).

- `consumed` is `calculateConsumedCapacity`: a capacity the request does not name consumes
  `requestPolicy.default`, or the whole value when the device sets no policy (`fillEmptyRequest`); a
  named one is rounded up by `validRange` (below min: min; else min + n·step, on integer values as
  `Quantity.Value()` rounds them up: `roundUpRange`) or to the first `validValues` entry at or above it
  (`roundUpValidValues`), and taken as asked without a policy.
- `violates` is `violatesPolicy`: a consumption above `validRange.max`, off the step, or not among the
  `validValues` makes the device ineligible; the default never violates (the API server only accepts a
  default inside the range or among the values, `CapacityRequestPolicy` in k8s.io/api v0.36 resource/v1).
- `fits` is `CmpRequestOverCapacity`: a request naming a capacity the device does not publish never
  fits (`requestsContainNonExistCapacity`); otherwise, for every capacity the device publishes, what is
  already consumed plus this request must not exceed the value.

`share_request` is the other direction: the claim request of a share that consumes exactly what it asks,
memory floored to a value the policy accepts as is, so that the claims of shares summing to at most 100
never ask together for more memory than the device has (a rounding surplus per claim summed past the
card before: 5 × 7373Mi + 2 × 18842Mi on an 80Gi H100 left 7371Mi for a share asking 7373Mi).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from isvc_api import QuantityError, parse_quantity

__all__ = [
    "Capacity",
    "Consumption",
    "Policy",
    "consumed",
    "consumption",
    "fits",
    "named",
    "parse_capacities",
    "partial",
    "quantity_text",
    "share_request",
    "violates",
    "whole_request",
]

SHARES = "shares"
MEMORY = "memory"
MI = 1 << 20

Consumption = dict[str, Decimal]  # capacity name -> amount consumed


@dataclass(frozen=True)
class Policy:
    """A capacity's requestPolicy: a default, and either valid values or a range with a step."""

    default: Decimal | None = None
    valid_values: tuple[Decimal, ...] = ()
    min: Decimal | None = None
    max: Decimal | None = None
    step: Decimal | None = None
    ranged: bool = False  # validRange is set (its min is required by the API)


@dataclass(frozen=True)
class Capacity:
    """One capacity a device publishes: its value and request policy."""

    value: Decimal
    policy: Policy | None = None


def _quantity(raw: Any) -> Decimal | None:
    if raw is None:
        return None
    try:
        return parse_quantity(str(raw))
    except QuantityError:
        return None


def _policy(raw: Mapping[str, Any] | None) -> Policy | None:
    if not isinstance(raw, Mapping):
        return None
    ranged = raw.get("validRange")
    values = tuple(v for v in (_quantity(x) for x in raw.get("validValues") or []) if v is not None)
    if isinstance(ranged, Mapping):
        return Policy(
            default=_quantity(raw.get("default")),
            min=_quantity(ranged.get("min")),
            max=_quantity(ranged.get("max")),
            step=_quantity(ranged.get("step")),
            ranged=True,
        )
    return Policy(default=_quantity(raw.get("default")), valid_values=values)


def parse_capacities(device: Mapping[str, Any]) -> dict[str, Capacity]:
    """The capacities of a resource.k8s.io/v1 Device, by the names it publishes them under."""
    out: dict[str, Capacity] = {}
    for name, raw in (device.get("capacity") or {}).items():
        if not isinstance(raw, Mapping):
            continue
        value = _quantity(raw.get("value"))
        if value is not None:
            out[str(name)] = Capacity(value, _policy(raw.get("requestPolicy")))
    return out


def _up(value: Decimal) -> int:
    """`Quantity.Value()`: the value rounded up to an integer (away from zero)."""
    return math.ceil(value) if value >= 0 else math.floor(value)


def consumed(requested: Decimal | None, capacity: Capacity) -> Decimal:
    """What one request consumes of one capacity (`calculateConsumedCapacity`)."""
    policy = capacity.policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested
    if policy.ranged and policy.min is not None:
        if requested < policy.min:
            return policy.min
        if policy.step is None:
            return requested
        added = _up(requested) - _up(policy.min)
        step = _up(policy.step)
        n = -(-added // step)
        return Decimal(_up(policy.min) + step * n)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def violates(amount: Decimal, policy: Policy | None) -> bool:
    """Whether a consumption breaks the capacity's request policy (`violatesPolicy`)."""
    if policy is None or (policy.default is not None and amount == policy.default):
        return False
    if policy.ranged:
        if policy.max is not None and amount > policy.max:
            return True
        if policy.step is not None and policy.min is not None:
            return (_up(amount) - _up(policy.min)) % _up(policy.step) != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def consumption(
    requests: Mapping[str, Decimal] | None, capacities: Mapping[str, Capacity]
) -> Consumption | None:
    """What a request consumes of every capacity of a device; None when the device cannot take it at all
    (a capacity it does not publish, or an amount its policy refuses)."""
    requests = requests or {}
    if any(name not in capacities for name in requests):
        return None
    out: Consumption = {}
    for name, capacity in capacities.items():
        amount = consumed(requests.get(name), capacity)
        if violates(amount, capacity.policy):
            return None
        out[name] = amount
    return out


def fits(
    used: Mapping[str, Decimal], take: Mapping[str, Decimal], capacities: Mapping[str, Capacity]
) -> bool:
    """Whether `take` fits beside what is `used` in every capacity of the device (`CmpRequestOverCapacity`)."""
    return all(
        used.get(name, Decimal(0)) + take.get(name, Decimal(0)) <= c.value for name, c in capacities.items()
    )


def _down(amount: Decimal, capacity: Capacity) -> Decimal:
    """The largest amount at most `amount` that the policy consumes as asked (no rounding up); the
    smallest it accepts when none is that small (then the request costs more than its part)."""
    policy = capacity.policy
    if policy is None:
        return amount
    if policy.ranged and policy.min is not None:
        if amount <= policy.min:
            return policy.min
        if policy.max is not None:
            amount = min(amount, policy.max)
        if policy.step is None:
            return amount
        step = _up(policy.step)
        base = _up(policy.min)
        return Decimal(base + (math.floor(amount) - base) // step * step)
    if policy.valid_values:
        below = [v for v in policy.valid_values if v <= amount]
        return below[-1] if below else policy.valid_values[0]
    return amount


def named(capacities: Mapping[str, Capacity], base: str) -> str | None:
    """The name a device publishes a capacity under: `base` or `<driver>/<base>`."""
    if base in capacities:
        return base
    return next((n for n in sorted(capacities) if n.endswith(f"/{base}")), None)


def share_request(share: int, capacities: Mapping[str, Capacity]) -> dict[str, Decimal]:
    """The capacity request of a claim for `share` percent of a shareable device: the same part of its memory
    floored to a value its policy takes as asked, so shares that sum to at most 100 never ask for more memory
    together than the device has; and, where the device counts tenants by `shares` (the driver's
    ConsumableShares N), the same part of them rounded up, at least one (N = 100: `share` shares)."""
    out: dict[str, Decimal] = {}
    shares_name = named(capacities, SHARES)
    if shares_name is not None:
        count = capacities[shares_name].value
        out[shares_name] = max(Decimal(1), min(count, Decimal(math.ceil(count * share / 100))))
    memory_name = named(capacities, MEMORY)
    if memory_name is not None:
        memory = capacities[memory_name]
        out[memory_name] = _down(Decimal(math.floor(memory.value * share / 100)), memory)
    return out


def partial(capacities: Mapping[str, Capacity]) -> bool:
    """Whether claims can each take part of a device (on one that allows several allocations): it publishes
    memory, and every capacity a share's claim does not ask (`share_request` asks memory and shares) has a
    request policy, so each claim consumes its default, not all of it (the driver's MIG devices with shares
    on carry engines and memory slices without one: one claim each)."""
    asked = {named(capacities, MEMORY), named(capacities, SHARES)}
    return named(capacities, MEMORY) is not None and all(
        c.policy is not None for name, c in capacities.items() if name not in asked
    )


def whole_request(capacities: Mapping[str, Capacity]) -> dict[str, Decimal]:
    """The capacity request that takes all of a device allowing several allocations: every capacity with a
    request policy at its value, so no other claim fits beside it."""
    return {
        name: c.value
        for name, c in sorted(capacities.items())
        if c.policy is not None and not violates(c.value, c.policy)
    }


def quantity_text(amount: Decimal) -> str:
    """A Kubernetes quantity for an amount: whole Mi when it is one, else the plain number."""
    if amount == amount.to_integral_value():
        whole = int(amount)
        if whole and whole % MI == 0:
            return f"{whole // MI}Mi"
        return str(whole)
    return format(amount.normalize(), "f")
