"""Who outranks an order on its devices (issue 28): orders of higher priority holding the room it needs.

The one ledger says it to the controller (`POST /v1/hold`, `outranked`): where the order stands, a replica
more of it (growth) that finds no room because of them is blocked by preemption (ScaleUpBlocked), while one
that finds a device simply full waits for capacity; where it lost the device, the loss is preemption only
when orders of higher priority took it, not when a claim of no order or of its own priority came first.
"""

from __future__ import annotations

from typing import Any

from isvc_planner import Inventory
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)

ORDER = ("ns", "o")
CARD = "gpu.nvidia.com/n1/gpu-0"


def ledger(*claims: dict[str, Any], high: int = 1000, plans: tuple[dict[str, Any], ...] = ()) -> Inventory:
    """One shareable H100; order `o` (no priority class: 0), orders `h` of class `high` and `e` of class
    `equal` (priority 0)."""
    return Inventory.from_objects(
        fleet_device_classes(),
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        claims,
        priority_classes=[fleet_priority_class("high", high), fleet_priority_class("equal", 0)],
        orders=[fleet_order("ns", "o"), fleet_order("ns", "h", "high"), fleet_order("ns", "e", "equal")],
        service_classes=[fleet_service_class("high", "high"), fleet_service_class("equal", "equal")],
        plans=plans,
    )


def shares(name: str, order: str | None, units: int) -> dict[str, Any]:
    return fleet_claim("ns", name, order, [("n1", "gpu-0", units)])


def test_a_replica_the_room_of_a_higher_priority_order_would_hold_is_outranked() -> None:
    inv = ledger(shares("o-0", "o", 40), shares("h-0", "h", 40))
    assert inv.view.ranking.outranked(ORDER, 40) == [f"{CARD}: ns/h at priority 1000"]


def test_a_replica_on_a_card_full_of_equals_waits_for_capacity_and_is_not_outranked() -> None:
    assert ledger(shares("o-0", "o", 40), shares("e-0", "e", 40)).view.ranking.outranked(ORDER, 40) == []
    # a card full of holders of no order, beside a small one of higher priority: without it still no room
    small = ledger(shares("o-0", "o", 40), shares("h-0", "h", 10), shares("x", None, 40))
    assert small.view.ranking.outranked(ORDER, 40) == []
    # room for the replica: nothing blocks it, whoever else is there
    assert ledger(shares("o-0", "o", 40), shares("h-0", "h", 10)).view.ranking.outranked(ORDER, 40) == []


def test_a_device_lost_to_a_higher_priority_order_is_preemption_and_to_a_claim_of_no_order_is_not() -> None:
    # the order's plan (its claim not allocated yet) on a card another claim now fills
    plan = launch_plan_of("o", 40)
    taken = ledger(shares("x", None, 80), plans=(plan,))
    assert taken.view.ranking.displaced(ORDER) and taken.view.ranking.outranked(ORDER, 40) == []
    preempted = ledger(shares("h-0", "h", 80), plans=(plan,))
    assert preempted.view.ranking.displaced(ORDER) and preempted.view.ranking.outranked(ORDER, 40) == [
        f"{CARD}: ns/h at priority 1000"
    ]


def launch_plan_of(name: str, units: int) -> dict[str, Any]:
    """A LaunchPlan of order `name` for `units` shares of the card."""
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "LaunchPlan",
        "metadata": {"namespace": "ns", "name": name},
        "spec": {
            "plannedAt": "2026-12-01T10:00:00Z",
            "placement": {
                "deviceClassName": "gpu.nvidia.com",
                "driver": "gpu.nvidia.com",
                "pool": "n1",
                "devices": ["gpu-0"],
                "placementMode": "Shared",
                "sharingMode": "Shares",
                "sharePercent": units,
                "deviceCount": 1,
                "capacityRequests": {"shares": str(units)},
            },
        },
    }


def test_growth_is_blocked_by_priority_only_when_no_device_of_the_plans_shape_has_room_issue_40() -> None:
    """A further replica takes any device of its plan's shape: a second card with room means growth is not
    blocked, however the order's own card is held; with both full, it is blocked where higher priority holds."""
    two = [fleet_slice("n1", [fleet_gpu("n1", 0)]), fleet_slice("n2", [fleet_gpu("n2", 0)])]

    def fleet(*claims: dict[str, Any]) -> Inventory:
        return Inventory.from_objects(
            fleet_device_classes(),
            two,
            list(claims),
            priority_classes=[fleet_priority_class("high", 1000)],
            orders=[fleet_order("ns", "o"), fleet_order("ns", "h", "high")],
            service_classes=[fleet_service_class("high", "high")],
        )

    mine, theirs = shares("o-0", "o", 40), shares("h-0", "h", 60)
    both = [("gpu.nvidia.com", "n1", "gpu-0"), ("gpu.nvidia.com", "n2", "gpu-0")]
    free_elsewhere = fleet(mine, theirs)
    assert free_elsewhere.view.ranking.outranked(ORDER, 40) == [
        f"{CARD}: ns/h at priority 1000"
    ]  # its card only
    assert free_elsewhere.view.ranking.outranked(ORDER, 40, both) == []  # the other card has room
    full = fleet(mine, theirs, fleet_claim("ns", "x", None, [("n2", "gpu-0", 100)]))
    assert full.view.ranking.outranked(ORDER, 40, both) == [f"{CARD}: ns/h at priority 1000"]
