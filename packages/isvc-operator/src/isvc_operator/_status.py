"""The status of an order: built from a pass's verdicts, the phase computed here and nowhere else,
written once per pass and only when its content changed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from isvc_api import (
    API_VERSION,
    CONDITION_ORDER,
    Condition,
    ConditionType,
    InferenceServiceStatus,
    LaunchPlanConditionType,
    LaunchPlanStatus,
    Phase,
    Reason,
    StatusReason,
    Verdict,
    conditions_of,
    find_condition,
    set_condition,
)

from isvc_operator._api import Cluster
from isvc_operator._outcome import Event
from isvc_operator._scope import OrderScope

__all__ = [
    "ORDERED",
    "PROGRESS_SECONDS",
    "build",
    "changes",
    "deferred",
    "first_not_true",
    "phase",
    "write",
    "write_plan",
]

ORDERED = CONDITION_ORDER


def phase(verdicts: Mapping[ConditionType, Verdict]) -> Phase:
    """Whether the endpoint serves, and whether anything is wrong: the one rule of the four phases.

    Ready serves with every condition True; Degraded serves while a condition is not True (growth blocked,
    or a later step of a serving order refused: its class gone, a new plan or workload refused, while the
    workload it had keeps answering); Failed stopped answering after it served (ServiceUnhealthy); Pending
    has not served yet, whatever refuses it. Serving is the Ready condition: the probe of the endpoint.
    """
    ready = verdicts.get(ConditionType.READY)
    if ready is not None and ready.holds:
        wrong = any(not v.holds for t, v in verdicts.items() if t != ConditionType.READY)
        return Phase.DEGRADED if wrong else Phase.READY
    if ready is not None and ready.reason == Reason.SERVICE_UNHEALTHY.value:
        return Phase.FAILED
    return Phase.PENDING


def first_not_true(verdicts: Mapping[ConditionType, Verdict]) -> str | None:
    """The reason of the first condition, in the documented order, that is not True."""
    for type_ in ORDERED:
        verdict = verdicts.get(type_)
        if verdict is not None and not verdict.holds:
            return verdict.reason
    return None


def _conditions(scope: OrderScope, generation: int | None) -> list[Condition]:
    merged = list(scope.previous.conditions)
    for type_ in ORDERED:
        verdict = scope.verdicts.get(type_)
        if verdict is not None:
            merged = set_condition(merged, verdict.condition(type_, generation), at=scope.now)
    rank = {t.value: i for i, t in enumerate(ORDERED)}
    return sorted(merged, key=lambda c: rank.get(c.type, len(rank)))


def build(scope: OrderScope) -> InferenceServiceStatus:
    """The status a pass decided: the fields the steps decided over the previous status, the conditions, the
    phase and the reason. observedGeneration moves only when every step ran to its end."""
    generation = scope.order.metadata.generation
    return scope.status.model_copy(
        update={
            "observed_generation": scope.previous.observed_generation if scope.failed else generation,
            "phase": phase(scope.verdicts).value,
            "reason": first_not_true(scope.verdicts),
            "conditions": _conditions(scope, generation),
        }
    )


# How long after its workload starts coming up an order's status keeps the first step it reported: on a
# quick start each step in between (claim allocated, volume bound, replicas starting) was a status write
# of its own, read by no one before Ready replaced it.
PROGRESS_SECONDS = 5.0
_COMING_UP = frozenset({Reason.RESOURCE_CLAIM_PENDING.value, Reason.WORKLOAD_NOT_READY.value})
_FOLLOWING = frozenset(
    {ConditionType.WORKLOAD_READY.value, ConditionType.READY.value, ConditionType.SCALING_HEALTHY.value}
)


def _besides_progress(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without what tells how far the workload has come up."""
    rest = {k: v for k, v in status.items() if k not in ("reason", "conditions")}
    rest["conditions"] = [c for c in conditions_of({"status": status}) if c.get("type") not in _FOLLOWING]
    return rest


def deferred(scope: OrderScope, status: InferenceServiceStatus) -> float | None:
    """Seconds to wait before writing `status` (this pass's), when all it changes is how far a workload that
    began coming up less than PROGRESS_SECONDS ago has come; None: write it now.

    Ready, a refusal, an edit or anything else is written at once; the wait is a timer the pass names, and
    nothing is kept between passes (the condition's lastTransitionTime says when the workload began)."""
    previous = scope.order.status
    if scope.failed:
        return None
    if previous is None or not (previous.phase or previous.conditions):
        return _new_order_waiting_for_its_class(scope)
    if previous.phase != Phase.PENDING.value or status.phase != Phase.PENDING.value:
        return None
    before = find_condition(previous.conditions, ConditionType.WORKLOAD_READY.value)
    after = find_condition(status.conditions, ConditionType.WORKLOAD_READY.value)
    if (
        before is None
        or after is None
        or before.last_transition_time is None
        or (before.status, after.status) != ("False", "False")
        or before.reason not in _COMING_UP
        or after.reason not in _COMING_UP
    ):
        return None
    old, new = previous.to_wire(), status.to_wire()
    if new == old or _besides_progress(new) != _besides_progress(old):
        return None
    left = (before.last_transition_time - scope.now).total_seconds() + PROGRESS_SECONDS
    return left if left > 0 else None


def _new_order_waiting_for_its_class(scope: OrderScope) -> float | None:
    """A new order whose class has not been judged yet (the controller just started, or the class is new):
    its first status waits for the class's judgement, which passes the order again, up to
    PROGRESS_SECONDS after the order was created; then it says what it waits for."""
    verdict = scope.verdicts.get(ConditionType.CLASS_RESOLVED)
    created = scope.raw.get("metadata", {}).get("creationTimestamp")
    if verdict is None or verdict.reason != StatusReason.WAITING.value or not isinstance(created, str):
        return None
    try:
        born = datetime.fromisoformat(created)
    except ValueError:
        return None
    left = (born - scope.now).total_seconds() + PROGRESS_SECONDS
    return left if left > 0 else None


def write(scope: OrderScope, cluster: Cluster, built: InferenceServiceStatus) -> bool:
    """Apply the status the pass built when it differs from what the pass read; True when it was written."""
    status = built.to_wire()
    if scope.order.status is not None and status == scope.order.status.to_wire():
        return False
    cluster.apply_status(
        {
            "apiVersion": API_VERSION,
            "kind": "InferenceService",
            "metadata": {"name": scope.name, "namespace": scope.namespace},
            "status": status,
        }
    )
    return True


def write_plan(scope: OrderScope, cluster: Cluster) -> bool:
    """Mirror the order's Planned onto its LaunchPlan as InForce, written only when it changed (a write
    wakes the order again through the LaunchPlan watch); True when it was written."""
    obj, verdict = scope.launch_plan_obj, scope.verdicts.get(ConditionType.PLANNED)
    if obj is None or scope.status.launch_plan_name is None or verdict is None:
        return False
    generation = obj["metadata"].get("generation")
    previous = LaunchPlanStatus.model_validate(obj.get("status") or {})
    condition = verdict.condition(LaunchPlanConditionType.IN_FORCE, generation)
    status = LaunchPlanStatus(
        observed_generation=generation, conditions=set_condition(previous.conditions, condition, at=scope.now)
    )
    if status.to_wire() == previous.to_wire():
        return False
    cluster.apply_status(
        {
            "apiVersion": API_VERSION,
            "kind": "LaunchPlan",
            "metadata": {"name": obj["metadata"]["name"], "namespace": scope.namespace},
            "status": status.to_wire(),
        }
    )
    return True


def changes(scope: OrderScope) -> list[Event]:
    """An event for each condition whose status or reason moved on this pass (not for every pass): Normal
    when it holds, Warning otherwise; a condition merely waiting on an earlier one says nothing new."""
    events = []
    for type_ in ORDERED:
        verdict = scope.verdicts.get(type_)
        if verdict is None or verdict.reason == StatusReason.WAITING.value:
            continue
        last = find_condition(scope.previous.conditions, type_.value)
        if last is not None and (last.status, last.reason) == (verdict.status, verdict.reason):
            continue
        kind = "Normal" if verdict.holds else "Warning"
        events.append(Event(kind, verdict.reason, f"{type_.value}: {verdict.message}"))
    return events
