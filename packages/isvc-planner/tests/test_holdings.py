"""What holds a device in the ledger: allocations as the scheduler recorded them and the module's LaunchPlans,
each order counted once; a claim nobody allocated holds nothing (issues 26 and 29)."""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER, ModelFacts, Placement
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse
from isvc_testing import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice

GPU = "gpu.nvidia.com"
KEY = (GPU, "n1", "gpu-0")


def launch_plan(
    namespace: str, name: str, placement: Placement, planned_at: str = "2026-12-01T10:00:00Z"
) -> dict[str, Any]:
    """A LaunchPlan as the controller stores it: named after its order."""
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "LaunchPlan",
        "metadata": {"namespace": namespace, "name": name, "labels": {LABEL_ORDER: name}},
        "spec": {"placement": placement.to_wire(), "plannedAt": planned_at},
    }


def pinned_claim(order: str, uuid: str, shares: int, *, name: str = "phantom") -> dict[str, Any]:
    """A claim carrying an order's label, pinned by uuid to a device as the module's template pins it, not
    allocated: what a namespace user can create with `edit` and no pod."""
    expression = f"device.driver == '{GPU}' && device.attributes['{GPU}'].uuid == '{uuid}'"
    claim = fleet_claim("ns", name, order, [])
    claim["spec"] = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": GPU,
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "selectors": [{"cel": {"expression": expression}}],
                        "capacity": {"requests": {"shares": str(shares), "memory": "1024Mi"}},
                    },
                }
            ]
        }
    }
    del claim["status"]
    return claim


def plan(planner: Planner, facts: ModelFacts, name: str) -> PlanResponse:
    return planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts))


def one_card(shares: bool = True) -> Inventory:
    return Inventory.from_objects(
        fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0, shares=shares)])], []
    )


def test_a_launch_plan_holds_its_device_after_the_reservation_expired_issue_26(
    models: dict[str, ModelFacts],
) -> None:
    """A quota refused the order's claim: its plan still means to use the device, so nobody else gets it."""
    inv = one_card(shares=False)
    planner = Planner(inv, reservation_ttl=0.0)
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    inv.upsert_plan(launch_plan("ns", "a", first))
    inv.expire()
    assert inv.reservations() == []
    refused = plan(planner, models["qwen7b"], "b")
    assert refused.refusal is not None and refused.placement is None
    assert plan(planner, models["qwen7b"], "a").placement == first  # its own plan is its own room


def test_a_plan_shows_its_devices_and_the_reservation_gives_way(models: dict[str, ModelFacts]) -> None:
    inv = one_card()
    planner = Planner(inv)
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None and inv.reserved_by(("ns", "a")) == [KEY]
    before = inv.view.ledger.room(KEY)
    inv.upsert_plan(launch_plan("ns", "a", first))
    assert inv.reserved_by(("ns", "a")) == [] and inv.view.ledger.room(KEY) == before


def test_an_order_counts_once_on_a_device_its_plan_and_claim_hold(models: dict[str, ModelFacts]) -> None:
    inv = one_card()
    first = plan(Planner(inv), models["qwen7b"], "a").placement
    assert first is not None and first.share_percent is not None
    inv.upsert_plan(launch_plan("ns", "a", first))
    inv.upsert_claim(fleet_claim("ns", "a-0-gpu", "a", [("n1", "gpu-0", first.share_percent)]))
    assert inv.view.ledger.room(KEY) == 100 - first.share_percent


def test_deleting_a_plan_frees_its_room_and_says_so(models: dict[str, ModelFacts]) -> None:
    inv = one_card()
    first = plan(Planner(inv, reservation_ttl=0.0), models["qwen7b"], "a").placement
    assert first is not None
    obj = launch_plan("ns", "a", first)
    inv.upsert_plan(obj)
    inv.expire()
    freed = inv.freed
    inv.delete_plan(obj)
    assert inv.view.ledger.room(KEY) == 100 and inv.freed > freed


def test_a_claim_nobody_allocated_holds_nothing_whatever_it_says_issue_29(
    models: dict[str, ModelFacts],
) -> None:
    """Phantom claims: the order's label, pinned by uuid, no pod. They never hold a device."""
    inv = one_card()
    uuid = inv.view.fleet.devices[KEY].uuid
    assert uuid is not None
    for i in range(4):
        inv.upsert_claim(pinned_claim("a", uuid, 90, name=f"phantom-{i}"))
    assert inv.view.ledger.room(KEY) == 100
    assert plan(Planner(inv), models["qwen7b"], "b").placement is not None


def test_an_allocation_holds_what_the_scheduler_recorded_whoever_made_the_claim(
    models: dict[str, ModelFacts],
) -> None:
    inv = one_card()
    inv.upsert_claim(fleet_claim("other", "theirs", None, [("n1", "gpu-0", 90)]))
    assert inv.view.ledger.room(KEY) == 10


def test_a_relist_of_unchanged_objects_makes_no_room_issue_26() -> None:
    """The watches list again every few minutes: that must not wake every waiting order."""
    inv = one_card()
    freed = inv.freed
    inv.upsert_slice(fleet_slice("n1", [fleet_gpu("n1", 0)]))
    for dc in fleet_device_classes():
        inv.upsert_device_class(dc)
    claim = fleet_claim("ns", "c", "o", [("n1", "gpu-0", 30)])
    inv.upsert_claim(claim)
    inv.upsert_claim(claim)
    assert inv.freed == freed
