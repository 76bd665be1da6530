"""ScalingHealthy: growth is possible (True), or blocked by capacity (False, phase Degraded)."""

from __future__ import annotations

from isvc_api import ConditionType, Verdict, find_condition

from isvc_operator._ports import Deps
from isvc_operator._scope import RETRY_CAPACITY, OrderScope

__all__ = ["step"]


def step(scope: OrderScope, deps: Deps) -> Verdict:
    """Judge growth; one GrowthClaimUnplaced event per replica pod the last status did not name yet."""
    if scope.children is None or scope.policy is None or not scope.holds(ConditionType.WORKLOAD_READY):
        return scope.waits_for(ConditionType.WORKLOAD_READY)
    children = scope.children
    verdict, unplaced = deps.workload.growth(
        children.deployment, children.pods, children.claims, scope.policy
    )
    if not verdict.holds:
        scope.requeue(RETRY_CAPACITY)
    last = find_condition(scope.previous.conditions, ConditionType.SCALING_HEALTHY.value)
    said = last.message if last is not None and last.status == "False" else ""
    for pod, message in unplaced:
        if pod not in said:  # the last verdict named every pod it reported on
            scope.event("Warning", "GrowthClaimUnplaced", message)
    return verdict
