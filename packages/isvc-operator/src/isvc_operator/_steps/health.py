"""Ready: the inference API answered the probe with the token; a sustained failure after Ready fails it."""

from __future__ import annotations

from isvc_api import ConditionType, HealthStatus, Verdict, find_condition

from isvc_operator._ports import Deps
from isvc_operator._scope import OrderScope

__all__ = ["step"]


def _record(scope: OrderScope) -> HealthStatus:
    """The probe's record from the status; one written before records were kept starts from Ready."""
    previous = scope.previous
    if previous.health is not None:
        return previous.health
    ready = find_condition(previous.conditions, ConditionType.READY.value)
    if ready is not None and ready.status == "True":
        return HealthStatus(ever_ready=True)
    return HealthStatus()


def step(scope: OrderScope, deps: Deps) -> Verdict:
    """Judge the latest probe with the record of the run of failures (status.health).

    A served order is probed between passes and woken when the result changes; without such probing
    the step asks for a pass every period.
    """
    if not scope.holds(ConditionType.WORKLOAD_READY):
        deps.health.forget(scope.namespace, scope.name)
        workload = scope.verdicts.get(ConditionType.WORKLOAD_READY)
        record = _record(scope)
        if scope.children is None or workload is None or not record.ever_ready:
            return scope.waits_for(ConditionType.WORKLOAD_READY)
        # It served, and no replica does now: a blip while one comes back (a rollout), then a failure.
        record, verdict = deps.health.without_replica(
            f"no replica is ready ({workload.reason})", record, scope.now
        )
        scope.health = record
        scope.requeue(deps.health.period)
        return verdict
    # The name the plan in force serves: while an edit waits for a new plan it is still the old model's.
    served = scope.plan.runtime.served_name if scope.plan is not None and scope.plan.runtime else None
    record, verdict = deps.health.check(
        scope.namespace,
        scope.name,
        deps.workload.service_port,
        scope.token,
        served,
        _record(scope),
        scope.now,
    )
    scope.health = record
    if not deps.health.watched:
        scope.requeue(deps.health.period)
    return verdict
