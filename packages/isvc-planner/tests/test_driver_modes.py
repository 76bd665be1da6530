"""Plans every mode of the NVIDIA DRA driver can satisfy (issue 41), on slices in the driver's own shapes
(`isvc_testing.driver_slices`): each plan's claim, judged by CEL against every device as kube-scheduler
judges it (the device class's selectors, then the claim's), selects exactly the planned devices with no CEL
error; its second choice any device of their shape; its capacity request is one the device's policy takes."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import GIB, ModelFacts, Placement, PlacementMode, Reason, SharingMode, parse_quantity
from isvc_ledger import consumption, parse_capacities
from isvc_planner import Inventory, Planner
from isvc_planner_client import CelJudge, OrderRef, PlanRequest, PlanResponse, device_activation
from isvc_testing import Gpu, Installation, MigInstance, driver_device_classes, driver_slices

DRIVER = "gpu.nvidia.com"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
JUDGE = CelJudge()


def _gpu(node: int, minor: int, product: str = H100, static_mig: bool = False, **kw: Any) -> Gpu:
    if static_mig:  # two 3g.20gb made beforehand, each with its own uuid
        kw |= {
            "mig_mode": True,
            "mig": tuple(MigInstance("3g.20gb", s, f"MIG-{node}{minor}{s}") for s in (0, 4)),
        }
    memory = 85520809984 if product == H100 else 42949672960  # NVML totals: 81559Mi, 40Gi
    arch, cc = ("Hopper", "9.0") if product == H100 else ("Ampere", "8.0")
    return Gpu(
        minor=minor,
        uuid=f"GPU-{node:04x}{minor:04x}-0000-0000-0000-000000000000",
        product=product,
        memory=memory,
        architecture=arch,
        compute_capability=cc,
        pci_bus_id=f"0000:{0x10 + minor:02x}:00.0",
        **kw,
    )


def _fleet(installation: Installation, **kw: Any) -> tuple[Inventory, list[dict[str, Any]]]:
    """Two nodes of two GPUs each, in one installation's mode."""
    slices = [
        s for n in (1, 2) for s in driver_slices(f"n{n}", [_gpu(n, m, **kw) for m in (0, 1)], installation)
    ]
    devices = [d | {"pool": s["spec"]["pool"]["name"]} for s in slices for d in s["spec"].get("devices", [])]
    return Inventory.from_objects(driver_device_classes(), slices, []), devices


def _sized(gib: float) -> ModelFacts:
    weights = (gib - 1) / 1.2  # KV unknown: 10 % of the weights; the runtime's own 1 GiB + 10 %
    return ModelFacts.model_validate(
        {
            "source": "HuggingFace",
            "name": f"m{gib}",
            "parameterCount": int(weights * GIB / 2),
            "dtype": "bfloat16",
        }
    )


def _plan(inv: Inventory, gib: float, name: str = "o") -> PlanResponse:
    return Planner(inv).plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=_sized(gib)))


def _admitted(devices: list[dict[str, Any]], placement: Placement, expression: str) -> set[tuple[str, str]]:
    """(pool, device) of every device the claim admits: its class's selectors, then `expression`."""
    [dc] = [c for c in driver_device_classes() if c["metadata"]["name"] == placement.device_class_name]
    class_cel = [s["cel"]["expression"] for s in dc["spec"]["selectors"]]
    out = set()
    for device in devices:
        activation = device_activation(DRIVER, device)
        if all(JUDGE.matches(e, activation) for e in class_cel) and JUDGE.matches(expression, activation):
            out.add((device["pool"], device["name"]))
    return out


def _shape(devices: list[dict[str, Any]], placement: Placement) -> set[tuple[str, str]]:
    """Devices alike the first planned one: its type, product, profile, memory and shares."""
    [first] = [d for d in devices if d["pool"] == placement.pool and d["name"] == placement.devices[0]]

    def same(d: dict[str, Any]) -> tuple[object, ...]:
        attrs, caps = d["attributes"], d.get("capacity") or {}
        keys = ("type", "productName", "profile")
        return (
            *(next(iter(attrs[k].values())) if k in attrs else None for k in keys),
            *((caps[k]["value"] if k in caps else None) for k in ("memory", "shares")),
            d.get("allowMultipleAllocations", False),
        )

    return {(d["pool"], d["name"]) for d in devices if same(d) == same(first)}


def _judged(devices: list[dict[str, Any]], p: Placement, pinned: set[tuple[str, str]]) -> None:
    """The claim's two choices select what they should, and its capacity request is one the policy takes."""
    assert p.device_selectors is not None
    assert _admitted(devices, p, p.device_selectors.pinned) == pinned
    assert _admitted(devices, p, p.device_selectors.alike) == _shape(devices, p)
    [first] = [d for d in devices if d["pool"] == p.pool and d["name"] == p.devices[0]]
    if p.capacity_requests:
        asked = {n: parse_quantity(v) for n, v in p.capacity_requests.items()}
        assert consumption(asked, parse_capacities(first)) is not None, p.capacity_requests


def test_whole_cards_of_the_released_driver_are_pinned_by_uuid_and_grow_onto_any_alike() -> None:
    inv, devices = _fleet(Installation(release="v0.4.1"))
    p = _plan(inv, 30).placement
    assert p is not None and p.placement_mode == PlacementMode.WHOLE_DEVICE and p.device_uuids
    _judged(devices, p, {(p.pool or "", p.devices[0])} if p.devices else set())
    assert len(_shape(devices, p)) == 4  # every H100 of both nodes


def test_tensor_parallel_whole_cards_of_one_node_are_pinned_together() -> None:
    inv, devices = _fleet(Installation(release="v0.4.1"))
    p = _plan(inv, 120).placement
    assert p is not None and p.device_count == 2 and p.devices is not None
    _judged(devices, p, {(p.pool or "", d) for d in p.devices})


def test_static_mig_partitions_are_pinned_by_their_uuid() -> None:
    inv, devices = _fleet(Installation(release="v0.4.1"), product=A100, static_mig=True)
    answer = _plan(inv, 15)
    p = answer.placement
    assert p is not None, answer.refusal
    assert p.device_class_name == "mig.nvidia.com" and p.sharing_mode == SharingMode.PARTITION
    _judged(devices, p, {(p.pool or "", p.devices[0])} if p.devices else set())
    assert len(_shape(devices, p)) == 8  # every 3g.20gb of both nodes: a further replica takes any


def test_no_plan_spans_static_mig_partitions() -> None:
    inv, _ = _fleet(Installation(release="v0.4.1"), product=A100, static_mig=True)
    answer = _plan(inv, 30)
    assert answer.placement is None and answer.refusal is not None
    assert answer.refusal.reason == Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY


def test_a_dynamic_mig_placement_is_pinned_by_parent_and_profile_and_is_allocated() -> None:
    inv, devices = _fleet(Installation(release="main", dynamic_mig=True), product=A100, mig_mode=True)
    p = _plan(inv, 15).placement
    assert p is not None and p.device_class_name == "mig.nvidia.com" and p.device_uuids is None
    [planned] = [d for d in devices if d["pool"] == p.pool and d["name"] == (p.devices or [""])[0]]
    profile = planned["attributes"]["profile"]["string"]
    parent = planned["attributes"]["parentUUID"]["string"]
    same = {
        (d["pool"], d["name"])
        for d in devices
        if d["attributes"].get("profile", {}).get("string") == profile
        and d["attributes"]["parentUUID"]["string"] == parent
    }
    _judged(devices, p, same)  # one placement of this profile on this parent: any of them
    # the scheduler allocates one of them the counters hold, as the ledger admits it
    key = (DRIVER, p.pool or "", (p.devices or [""])[0])
    with inv.reading() as view:
        assert view.ledger.admits([(key, None)]) or key in view.ledger.holds(("ns", "o"))


@pytest.mark.parametrize(
    ("shares", "asked"), [("100", "20"), ("10", "2"), ("4", "1"), ("memory", None), ("unlimited", None)]
)
def test_a_share_asks_its_part_of_memory_and_of_the_cards_shares_whatever_n(
    shares: str, asked: str | None
) -> None:
    inv, devices = _fleet(Installation(release="main", consumable_shares=shares))
    answer = _plan(inv, 15)
    p = answer.placement
    assert p is not None, answer.refusal
    assert p.placement_mode == PlacementMode.SHARED and p.capacity_requests is not None
    assert p.capacity_requests.get("shares") == asked
    assert "memory" in p.capacity_requests
    _judged(devices, p, {(p.pool or "", (p.devices or [""])[0])})


def test_a_whole_card_taken_on_a_multi_allocatable_device_asks_all_of_it() -> None:
    inv, devices = _fleet(Installation(release="main", consumable_shares="10"))
    p = _plan(inv, 120).placement  # two whole H100s of one node
    assert p is not None and p.device_count == 2 and p.capacity_requests is not None
    assert p.capacity_requests["shares"] == "10" and p.capacity_requests["memory"] == "81559Mi"
    _judged(devices, p, {(p.pool or "", d) for d in p.devices or []})
