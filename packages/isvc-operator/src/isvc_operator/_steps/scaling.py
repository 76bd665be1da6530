"""ScalingHealthy: growth is possible or waits for capacity (True), or is blocked by preemption (False, phase
Degraded)."""

from __future__ import annotations

from isvc_api import ConditionType, Reason, find_condition

from isvc_operator._outcome import Event, Outcome
from isvc_operator._ports import Deps, TemporaryError
from isvc_operator._scope import RETRY_CAPACITY, OrderScope

__all__ = ["step"]


def _outranked(scope: OrderScope, deps: Deps) -> tuple[str, ...]:
    """Where orders of higher priority hold the room a replica of the order needs, as the planner's ledger
    says now (asked afresh: a judgement kept from an earlier pass predates the replica). A planner that does
    not answer changes nothing: the verdict of the last pass stands."""
    assert scope.plan is not None
    deps.planner.forget_judgement(scope.namespace, scope.name)
    try:
        return deps.planner.judge(scope.namespace, scope.name, scope.plan.placement).outranked
    except TemporaryError:
        last = find_condition(scope.previous.conditions, ConditionType.SCALING_HEALTHY.value)
        blocked = last is not None and last.reason == Reason.SCALE_UP_BLOCKED.value
        return ("the planner did not answer; as the last pass found",) if blocked else ()


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Judge growth; one GrowthClaimUnplaced event per replica pod the last status did not name yet."""
    if scope.children is None or scope.policy is None or not scope.holds(ConditionType.WORKLOAD_READY):
        return Outcome(scope.waits_for(ConditionType.WORKLOAD_READY), {"unplaced_replicas": None})
    children = scope.children
    verdict, unplaced = deps.workload.growth(
        children.deployment,
        children.pods,
        children.claims,
        scope.policy,
        lambda: _outranked(scope, deps) if scope.plan is not None else (),
    )
    reported = set(scope.previous.unplaced_replicas or ())
    events = tuple(
        Event("Warning", "GrowthClaimUnplaced", message) for pod, message in unplaced if pod not in reported
    )
    return Outcome(
        verdict,
        {"unplaced_replicas": [pod for pod, _ in unplaced] or None},
        events=events,
        requeue_after=None if verdict.holds else RETRY_CAPACITY,
    )
