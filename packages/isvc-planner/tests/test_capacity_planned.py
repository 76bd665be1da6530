"""Every placement's claim is one the scheduler admits, and a device's free room is the largest share it
admits (issue 26): the planner on generated devices, checked against `scheduler_admits`, a separate
transliteration of k8s.io/dynamic-resource-allocation v0.36.3's `calculateConsumedCapacity`,
`violatesPolicy` and `CmpRequestOverCapacity` in integers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isvc_api import GIB, LABEL_ORDER, ModelFacts, ModelSource, Placement, parse_quantity
from isvc_ledger import share_request
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest
from isvc_testing import fleet_device_classes, fleet_gpu, fleet_slice

GI = GIB
MI = 1 << 20


# ---- a separate transliteration of the scheduler's arithmetic, in integers, for the property test ----------


def _round_up_range(requested: int, low: int, step: int | None) -> int:
    """roundUpRange."""
    if requested < low:
        return low
    if step is None:
        return requested
    n, rest = divmod(requested - low, step)
    return low + step * (n + (1 if rest else 0))


def scheduler_admits(
    used: dict[str, int], asked: dict[str, int], device: dict[str, Any]
) -> dict[str, int] | None:
    """CmpRequestOverCapacity over calculateConsumedCapacity and violatesPolicy; what the claim consumes when
    the device takes it, else None."""
    out = {}
    for name, spec in device["capacity"].items():
        value = int(parse_quantity(spec["value"]))
        policy = spec.get("requestPolicy")
        if name not in asked:
            amount = int(parse_quantity(policy["default"])) if policy and "default" in policy else value
        elif policy is None:
            amount = asked[name]
        elif "validRange" in policy:
            r = policy["validRange"]
            step = int(parse_quantity(r["step"])) if "step" in r else None
            low = int(parse_quantity(r["min"]))
            amount = _round_up_range(asked[name], low, step)
            over = ("max" in r and amount > int(parse_quantity(r["max"]))) or bool(
                step and (amount - low) % step
            )
            if over and amount != int(parse_quantity(policy["default"])):
                return None
        else:
            values = sorted(int(parse_quantity(v)) for v in policy["validValues"])
            amount = next((v for v in values if asked[name] <= v), asked[name])
            if amount not in values:
                return None
        if used.get(name, 0) + amount > value:
            return None
        out[name] = amount
    if any(name not in device["capacity"] for name in asked):
        return None
    return out


MEMORY_POLICIES = [
    {"default": "0", "validRange": {"min": "0", "step": "1Mi"}},  # the NVIDIA driver's
    {"default": "0", "validRange": {"min": "0", "step": "1Gi"}},
    {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},  # dra-example-driver's shape
    {"default": "0", "validValues": ["0", "4Gi", "8Gi", "16Gi", "24Gi", "40Gi", "48Gi", "80Gi"]},
    None,  # a device publishing memory without a policy: consumed as asked
]
SHARE_POLICIES = [
    {"default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}},
    {"default": "5", "validRange": {"min": "5", "max": "100", "step": "5"}},
]
memory_st = st.sampled_from(["80Gi", "81559Mi", "23034Mi", "40Gi", "141Gi", "97871234567"])
device_st = st.tuples(memory_st, st.integers(0, len(MEMORY_POLICIES) - 1), st.integers(0, 1))
legacy_st = st.lists(st.tuples(st.integers(1, 60), st.booleans()), max_size=4)  # (share, rounded up)


def _device(node: str, memory: str, memory_policy: int, share_policy: int) -> dict[str, Any]:
    device = fleet_gpu(node, 0, memory_gi=memory)
    device["capacity"]["shares"]["requestPolicy"] = SHARE_POLICIES[share_policy]
    policy = MEMORY_POLICIES[memory_policy]
    if policy is None:
        device["capacity"]["memory"].pop("requestPolicy", None)
    else:
        device["capacity"]["memory"]["requestPolicy"] = policy
    return device


def _allocated(name: str, node: str, taken: dict[str, int]) -> dict[str, Any]:
    """A claim the scheduler allocated, recording what it consumed."""
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "labels": {LABEL_ORDER: name}},
        "spec": {},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": node,
                            "device": "gpu-0",
                            "shareID": f"share-{name}",
                            "consumedCapacity": {n: str(v) for n, v in taken.items()},
                        }
                    ]
                }
            }
        },
    }


def _facts(gib: int) -> ModelFacts:
    return ModelFacts(
        source=ModelSource.HUGGING_FACE,
        name=f"m{gib}",
        parameter_count=gib * GI // 2 // 2,
        dtype="bfloat16",
        num_layers=24,
        num_attention_heads=16,
        num_kv_heads=4,
        head_dim=128,
        context_length=4096,
    )


def _asked(placement: Placement) -> dict[str, int]:
    return {n: int(parse_quantity(v)) for n, v in (placement.capacity_requests or {}).items()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fleet=st.lists(device_st, min_size=1, max_size=3),
    legacy=legacy_st,
    orders=st.lists(st.tuples(st.integers(1, 50), st.booleans()), min_size=1, max_size=14),
)
def test_the_ledger_admits_exactly_what_the_scheduler_admits(
    fleet: list[tuple[str, int, int]], legacy: list[tuple[int, bool]], orders: list[tuple[int, bool]]
) -> None:
    """On generated devices (memory sizes and request policies) holding generated claims (some asked as plans
    used to ask, memory rounded up to whole Mi), every placement's claim is admitted by the scheduler's
    arithmetic beside everything before it, and each device's free room is the largest share it admits."""
    devices = {f"n{i}": _device(f"n{i}", *spec) for i, spec in enumerate(fleet)}
    inv = Inventory.from_objects(
        fleet_device_classes(), [fleet_slice(n, [d]) for n, d in devices.items()], []
    )
    used: dict[str, dict[str, int]] = {n: {} for n in devices}
    for i, (share, rounded_up) in enumerate(legacy):
        node = f"n{i % len(devices)}"
        memory = int(parse_quantity(devices[node]["capacity"]["memory"]["value"]))
        mib = -(-memory * share // 100 // MI) if rounded_up else memory * share // 100 // MI
        taken = scheduler_admits(used[node], {"shares": share, "memory": mib * MI}, devices[node])
        if taken is not None:
            inv.upsert_claim(_allocated(f"legacy{i}", node, taken))
            used[node] = {n: used[node].get(n, 0) + v for n, v in taken.items()}
    planner = Planner(inv)
    for i, (gib, allocate) in enumerate(orders):
        answer = planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=_facts(gib)))
        p = answer.placement
        if p is not None:
            assert p.pool is not None and p.capacity_requests is not None
            taken = scheduler_admits(used[p.pool], _asked(p), devices[p.pool])
            assert taken is not None, f"o{i}: {p.capacity_requests} on {p.pool} refused beside {used[p.pool]}"
            used[p.pool] = {n: used[p.pool].get(n, 0) + v for n, v in taken.items()}
            if allocate:  # the scheduler allocated it; otherwise the reservation stands for it
                inv.upsert_claim(_allocated(f"o{i}", p.pool, taken))
        for node, device in devices.items():
            room = inv.view.ledger.room(("gpu.nvidia.com", node, "gpu-0"))
            caps = inv.view.fleet.devices[("gpu.nvidia.com", node, "gpu-0")].capacities
            if room > 0:
                fit = {n: int(v) for n, v in share_request(room, caps).items()}
                assert scheduler_admits(used[node], fit, device) is not None, (
                    f"{node}: room {room} not admitted"
                )
            if room < 100:
                more = {n: int(v) for n, v in share_request(room + 1, caps).items()}
                assert scheduler_admits(used[node], more, device) is None, f"{node}: {room + 1} admitted too"
