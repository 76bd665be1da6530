"""The canonical condition order and the no-room reason sets, which the controller, the planner's callers and
kubectl read from here."""

from __future__ import annotations

from isvc_api import CONDITION_ORDER, NO_ROOM, READINESS, WAITING_FOR_ROOM, ConditionType, Reason


def test_readiness_is_the_condition_order_without_growth() -> None:
    assert [c.value for c in CONDITION_ORDER] == [
        "ClassResolved",
        "ModelResolved",
        "Planned",
        "WorkloadReady",
        "Ready",
        "ScalingHealthy",
    ]
    assert (*READINESS, ConditionType.SCALING_HEALTHY) == CONDITION_ORDER


def test_an_order_without_room_waits_and_passes_on_its_own() -> None:
    assert NO_ROOM < WAITING_FOR_ROOM
    assert all(r.retried for r in WAITING_FOR_ROOM)
    assert {Reason.RESOURCE_CLAIM_PENDING, Reason.SCALE_UP_BLOCKED} == WAITING_FOR_ROOM - NO_ROOM
