"""Ready: the inference API answered the probe with the token; a sustained failure after Ready fails it.

Ready is whether the endpoint serves, whatever an earlier condition says: an order that served keeps being
probed while a later step of it is refused (its class gone, a new plan or workload refused) and the workload
it had still stands with a replica ready, so its phase can tell that it serves (Degraded) from that it does
not. With no replica ready nothing serves, whatever the last probe said (Ready False, phase Pending, then
Failed once sustained).
"""

from __future__ import annotations

from isvc_api import ConditionType, HealthStatus, find_condition
from isvc_workload import serving

from isvc_operator._outcome import Event, Outcome
from isvc_operator._ports import Deps
from isvc_operator._scope import WORKLOAD_KINDS, OrderScope

__all__ = ["RUNTIME_ERRORS", "step"]


def _record(scope: OrderScope) -> HealthStatus:
    """The probe's record from the status; one written before records were kept starts from Ready."""
    previous = scope.previous
    if previous.health is not None:
        return previous.health
    ready = find_condition(previous.conditions, ConditionType.READY.value)
    if ready is not None and ready.status == "True":
        return HealthStatus(ever_ready=True)
    return HealthStatus()


def _held_token(scope: OrderScope, deps: Deps) -> str | None:
    """The endpoint's token when the workload step did not read it on this pass: the Secret the status
    names, when the module made it for this order (one it did not make is never used)."""
    if scope.token is not None:
        return scope.token
    name = scope.previous.auth_secret_name
    secret = deps.cluster.get_secret(scope.namespace, name) if name else None
    if secret is None:
        return None
    owners = secret["metadata"].get("ownerReferences") or []
    if not any(o.get("uid") == scope.order.metadata.uid and o.get("controller") for o in owners):
        return None
    return deps.workload.token(secret)


def _still_standing(scope: OrderScope, deps: Deps) -> HealthStatus | None:
    """The record of an order that served and whose workload still stands while an earlier condition (or
    the workload step, before it read the replicas) refuses this pass; None otherwise."""
    record = _record(scope)
    if scope.children is not None or not record.ever_ready:
        return None
    if scope.status.launch_plan_name is None or scope.status.endpoint is None:  # taken down
        return None
    standing = [
        obj
        for kind in WORKLOAD_KINDS
        for obj in deps.cluster.owned(kind, scope.namespace, scope.name)
        if not obj["metadata"].get("deletionTimestamp")
    ]
    return record if standing else None


def _without_replica(scope: OrderScope, deps: Deps, why: str, record: HealthStatus) -> Outcome:
    """It served, and no replica does now: the endpoint does not serve (whatever the probe says: the phase
    follows the endpoints, issue 45) while one comes back, and after the health window that is a failure."""
    record, verdict = deps.health.without_replica(f"no replica is ready ({why})", record, scope.now)
    return Outcome(verdict, {"health": record}, requeue_after=deps.health.period)


RUNTIME_ERRORS = "RuntimeErrors"  # event: a sustained rate of the runtime's own HTTP 5xx (issue 42)


def _probe(
    scope: OrderScope, deps: Deps, token: str | None, served: str | None, record: HealthStatus
) -> Outcome:
    record, verdict = deps.health.check(
        scope.namespace, scope.name, deps.workload.service_port, token, served, record, scope.now
    )
    # The runtime failing requests while its API answers the probe: said as an event, once an episode; the
    # order serves (a Reason would take it out of Ready for what most of its requests do not meet).
    errors = deps.health.runtime_errors(scope.namespace, scope.name)
    events = (Event("Warning", RUNTIME_ERRORS, errors),) if errors else ()
    return Outcome(
        verdict,
        {"health": record},
        events=events,
        requeue_after=None if deps.health.watched else deps.health.period,
    )


def _not_up(scope: OrderScope, deps: Deps) -> Outcome:
    """Ready while no replica of the plan in force is: probed while a pod of the order is ready behind its
    Service (a workload standing while an earlier condition refuses, a plan being replaced), not serving while
    none is, and waiting for the workload when the order never served."""
    record = _record(scope)
    held = _still_standing(scope, deps)
    workload = scope.verdicts.get(ConditionType.WORKLOAD_READY)
    rolling = scope.children is not None and workload is not None and record.ever_ready
    if held is None and not rolling:
        deps.health.forget(scope.namespace, scope.name)
        return Outcome(scope.waits_for(ConditionType.WORKLOAD_READY))
    if serving(deps.cluster.owned("Pod", scope.namespace, scope.name)):
        # what serves is what status.resolved describes (the plan before a refused one)
        resolved = scope.status.resolved
        served = resolved.served_model if resolved is not None and held is not None else None
        return _probe(scope, deps, _held_token(scope, deps), served, record)
    deps.health.forget(scope.namespace, scope.name)
    why = workload.reason if rolling and workload is not None else "none of the pods of its workload is ready"
    return _without_replica(scope, deps, why, record)


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Judge the latest probe with the record of the run of failures (status.health).

    A served order is probed between passes and woken when the result changes; without such probing
    the step asks for a pass every period.
    """
    if not scope.holds(ConditionType.WORKLOAD_READY):
        return _not_up(scope, deps)
    # The name the plan in force serves: while an edit waits for a new plan it is still the old model's.
    served = scope.plan.runtime.served_name if scope.plan is not None and scope.plan.runtime else None
    return _probe(scope, deps, scope.token, served, _record(scope))
