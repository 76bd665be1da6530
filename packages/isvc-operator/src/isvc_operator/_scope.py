"""The scope of one reconcile pass: what the steps found, each field saying which step sets it."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, TypeVar

import attrs
from isvc_api import (
    ConditionType,
    Constraints,
    EndpointStatus,
    EndpointType,
    HealthStatus,
    InferenceService,
    InferenceServiceStatus,
    LaunchPlanSpec,
    ModelFacts,
    ModelStatus,
    Resolved,
    ScalingStatus,
    StartupFailure,
    Verdict,
)

from isvc_operator._policy import EffectivePolicy
from isvc_operator._ports import Deps, OrderKey

__all__ = [
    "KEEP",
    "RETRY_CAPACITY",
    "RETRY_SOON",
    "WORKLOAD_KINDS",
    "Children",
    "Keep",
    "OrderScope",
    "controlled_by",
    "kept",
    "made_for",
    "take_down_workload",
]

RETRY_SOON = 5.0  # a dependency that should answer in a moment
RETRY_CAPACITY = 15.0  # room that may free up


class Keep(enum.Enum):
    """A status field no step decided on this pass: what the previous status said still holds."""

    KEEP = "keep"


KEEP = Keep.KEEP
T = TypeVar("T")


def kept(decided: T | Keep, previous: T) -> T:
    """The value a step decided, or the previous one when no step decided."""
    return previous if isinstance(decided, Keep) else decided


@attrs.frozen
class Children:
    """The order's workload as the cache holds it: its StatefulSet, pods and claims."""

    deployment: dict[str, Any] | None
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]


@attrs.define
class OrderScope:
    """One pass over one order. Fields are None (or KEEP) until the step named beside them sets them."""

    order: InferenceService
    raw: dict[str, Any]
    now: datetime
    verdicts: dict[ConditionType, Verdict] = attrs.field(factory=dict)
    # ClassResolved: the policy in force, when the class holds (or the built-in one without a class).
    policy: EffectivePolicy | None = None
    constraints: Constraints | Keep | None = KEEP
    # ModelResolved: the model's facts and contract, when it resolves; the model status when decided.
    facts: ModelFacts | None = None
    endpoint_type: EndpointType | None = None
    model: ModelStatus | Keep | None = KEEP
    # Planned: the plan in force, what it resolved to, the LaunchPlan's name while one exists.
    plan: LaunchPlanSpec | None = None
    resolved: Resolved | Keep | None = KEEP
    launch_plan_name: str | Keep | None = KEEP
    launch_plan_obj: dict[str, Any] | None = None  # the LaunchPlan as read or applied in this pass
    unplaced: bool = False  # no plan, and the planner found no room: a workload left behind must go
    # WorkloadReady: the endpoint, its token, the children read, a failing container.
    endpoint: EndpointStatus | Keep | None = KEEP
    auth_secret_name: str | Keep | None = KEEP
    token: str | None = None
    children: Children | None = None
    startup_failure: StartupFailure | Keep | None = KEEP
    roll_waits: bool = False  # a roll of its pods nobody asked for waits for its class's turn
    set_applied: bool = False  # the set was written on this pass (its roll, if any, begins now)
    scaling: ScalingStatus | Keep | None = KEEP  # what the autoscaler follows
    # Ready: the probe's record.
    health: HealthStatus | Keep | None = KEEP
    # What the pass asks of the controller and the API.
    requeue_after: float | None = None
    wake: list[OrderKey] = attrs.field(factory=list)
    events: list[tuple[str, str, str]] = attrs.field(factory=list)
    failed: list[ConditionType] = attrs.field(factory=list)  # steps that raised
    terminating: bool = False  # its namespace is being deleted: the pass ends, writing nothing

    @property
    def namespace(self) -> str:
        return self.order.metadata.namespace or "default"

    @property
    def name(self) -> str:
        return self.order.metadata.name

    @property
    def key(self) -> OrderKey:
        return self.namespace, self.name

    @property
    def previous(self) -> InferenceServiceStatus:
        """The status as the pass read it (empty for a new order)."""
        return self.order.status or InferenceServiceStatus()

    def holds(self, type_: ConditionType) -> bool:
        """Whether an earlier step's condition is True on this pass."""
        verdict = self.verdicts.get(type_)
        return verdict is not None and verdict.holds

    def waits_for(self, type_: ConditionType) -> Verdict:
        """Unknown: an earlier condition is not True, so the caller's cannot be told yet."""
        verdict = self.verdicts.get(type_)
        return Verdict.waiting(type_, "not judged yet" if verdict is None else verdict.reason)

    def requeue(self, seconds: float) -> None:
        """Ask for another pass no later than `seconds` from now."""
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def event(self, type_: str, reason: str, message: str) -> None:
        """Record an event on the order, emitted once the status is written."""
        self.events.append((type_, reason, message))


# The order's workload: its StatefulSet, and the Deployment an earlier version made (removed once found).
WORKLOAD_KINDS = ("StatefulSet", "Deployment")


def controlled_by(obj: dict[str, Any], kind: str, uid: str | None) -> bool:
    """Whether `obj` has a controller reference to the `kind` of that uid."""
    return uid is not None and any(
        o.get("controller") and o.get("kind") == kind and o.get("uid") == uid
        for o in obj["metadata"].get("ownerReferences") or []
    )


def made_for(obj: dict[str, Any], scope: OrderScope) -> bool:
    """Whether the order controls `obj` (its controller reference): an object a user merely labels as the
    order's is not the order's, to judge or to delete (issue 29)."""
    return controlled_by(obj, "InferenceService", scope.order.metadata.uid)


def take_down_workload(scope: OrderScope, deps: Deps) -> None:
    """Delete the order's workload: its set (its model volumes go with it) and any older Deployment."""
    for kind in WORKLOAD_KINDS:
        for obj in deps.cluster.owned(kind, scope.namespace, scope.name):
            if made_for(obj, scope):
                deps.cluster.delete("apps/v1", kind, scope.namespace, obj["metadata"]["name"])
