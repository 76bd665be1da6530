"""Steps decide, the reconciler writes: a step's outcome carries the writes it intends and the status fields it
decided, and what a later pass must know travels as a typed field, never as words read back from a message."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import GROUP, VERSION, InferenceService, Reason, Refusal, Verdict
from isvc_operator import PlanOutcome
from isvc_operator._order import OrderReconciler
from isvc_operator._outcome import Delete, Outcome
from isvc_operator._scope import OrderScope
from isvc_operator._steps import STEPS, plan

from .fakes import T0, World

GV = f"{GROUP}/{VERSION}"


@pytest.fixture
def world() -> World:
    return World()


def _scope(world: World) -> OrderScope:
    raw = world.cluster.order("team-a", "support-llm")
    assert raw is not None
    return OrderScope(order=InferenceService.model_validate(raw), raw=raw, now=T0)


def _growth_events(world: World) -> list[Any]:
    return [e for e in world.cluster.events if e[2] == "GrowthClaimUnplaced"]


def test_the_planned_step_intends_the_take_down_and_writes_nothing_itself(world: World) -> None:
    assert world.run()["phase"] == "Ready"
    world.cluster.delete(GV, "LaunchPlan", "team-a", "support-llm")  # preempted: plan and room gone
    world.planner.outcome = PlanOutcome(
        placement=None,
        estimates=None,
        refusal=Refusal(reason=Reason.NO_CAPACITY, message="no room"),
        preempt=[],
    )
    scope, deps = _scope(world), world.reconciler().d
    for type_, step in STEPS[:2]:
        OrderReconciler._take(scope, type_, step(scope, deps))
    outcome = plan.step(scope, deps)
    assert outcome.verdict.reason == Reason.NO_CAPACITY.value
    assert Delete("apps/v1", "StatefulSet", "support-llm") in outcome.writes
    assert "endpoint" in outcome.fields and outcome.fields["endpoint"] is None
    # reading and judging wrote nothing: the workload stands until the reconciler applies the outcome
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")


def test_a_field_a_step_does_not_name_keeps_what_the_status_said_and_one_named_none_is_cleared(
    world: World,
) -> None:
    world.run()
    scope = _scope(world)
    assert scope.status.endpoint is not None and scope.status.launch_plan_name == "support-llm"
    verdict = Verdict(status="False", reason=Reason.NO_CAPACITY.value, message="no room")
    OrderReconciler._take(scope, STEPS[2][0], Outcome(verdict, {"endpoint": None}))
    assert scope.status.endpoint is None
    assert scope.status.launch_plan_name == "support-llm"


def test_each_unplaced_replica_is_reported_once_whatever_the_condition_says(world: World) -> None:
    # the verdict names no pod: which replicas were reported is status.unplacedReplicas, not the message
    world.workload.growth_verdict = Verdict(status="True", reason="ScalingOK", message="replicas wait.")
    world.workload.unplaced = [("p-2", "Replica pod p-2: its claim got no device.")]
    assert world.run()["unplacedReplicas"] == ["p-2"]
    world.restart()
    world.run()
    assert len(_growth_events(world)) == 1
    world.workload.unplaced.append(("p-3", "Replica pod p-3: its claim got no device."))
    assert world.run()["unplacedReplicas"] == ["p-2", "p-3"]
    assert len(_growth_events(world)) == 2
    world.workload.unplaced = []
    assert "unplacedReplicas" not in world.run()
