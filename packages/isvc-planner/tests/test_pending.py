"""Claims of our orders pinned to planned devices hold them until allocated (issue 18).

Under load a pod may wait for the scheduler longer than a plan's reservation lives; the ledger then
saw the device free and planned it a second time, and one of the two claims could never be allocated.
"""

from __future__ import annotations

from typing import Any

from isvc_api import ModelFacts
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse
from isvc_testing import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice

GPU = "gpu.nvidia.com"


def pinned_claim(
    order: str,
    uuids: list[str],
    shares: int | None = None,
    *,
    name: str = "c",
    allocated: list[tuple[str, str, int | None]] | None = None,
) -> dict[str, Any]:
    """A claim as the operator's template makes it: pinned by uuid, pending unless `allocated`."""
    test = f"== '{uuids[0]}'" if len(uuids) == 1 else "in [" + ", ".join(f"'{u}'" for u in uuids) + "]"
    expression = f"device.driver == '{GPU}' && device.attributes['{GPU}'].uuid {test}"
    exactly: dict[str, Any] = {
        "deviceClassName": GPU,
        "allocationMode": "ExactCount",
        "count": len(uuids),
        "selectors": [{"cel": {"expression": expression}}],
    }
    if shares is not None:
        exactly["capacity"] = {"requests": {"shares": str(shares), "memory": "1024Mi"}}
    claim = fleet_claim("ns", name, order, allocated or [])
    claim["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
    if allocated is None:
        del claim["status"]
    return claim


def plan(planner: Planner, facts: ModelFacts, name: str) -> PlanResponse:
    return planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts))


def uuid_of(inv: Inventory, device: str) -> str:
    uuid = inv.devices[(GPU, "n1", device)].uuid
    assert uuid is not None
    return uuid


def test_a_pending_pinned_claim_keeps_its_device_after_the_reservation_expired(
    models: dict[str, ModelFacts],
) -> None:
    slices = [fleet_slice("n1", [fleet_gpu("n1", 0, shares=False)])]
    inv = Inventory.from_objects(fleet_device_classes(), slices, [])
    planner = Planner(inv, reservation_ttl=0.0)
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    inv.upsert_claim(pinned_claim("a", first.device_uuids))
    # the reservation is gone, the claim holds
    assert plan(planner, models["qwen7b"], "b").refusal is not None
    assert inv.pending(("ns", "a")) == [(GPU, "n1", "gpu-0")]


def test_a_pending_claim_holds_its_shares_and_gives_way_to_its_allocation() -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    uuid = uuid_of(inv, "gpu-0")
    inv.upsert_claim(pinned_claim("a", [uuid], 60))
    assert inv.used((GPU, "n1", "gpu-0")) == 60
    inv.upsert_claim(pinned_claim("a", [uuid], 60, allocated=[("n1", "gpu-0", 60)]))
    assert inv.used((GPU, "n1", "gpu-0")) == 60 and inv.pending(("ns", "a")) == []


def test_a_pending_claim_seen_before_its_device_is_published_holds_it_once_published() -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [], [])
    device = fleet_gpu("n1", 0)
    inv.upsert_claim(pinned_claim("a", [device["attributes"]["uuid"]["string"]], 30))
    inv.upsert_slice(fleet_slice("n1", [device]))
    assert inv.used((GPU, "n1", "gpu-0")) == 30


def test_claims_of_others_and_unpinned_pending_claims_hold_nothing() -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    theirs = pinned_claim("a", [uuid_of(inv, "gpu-0")], 30)
    theirs["metadata"]["labels"] = {}
    inv.upsert_claim(theirs)
    unpinned = pinned_claim("b", ["x"], 30, name="d")
    unpinned["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = []
    inv.upsert_claim(unpinned)
    assert inv.used((GPU, "n1", "gpu-0")) == 0
