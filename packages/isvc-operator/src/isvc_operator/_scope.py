"""The scope of one reconcile pass: the order as read, what the steps found for the later ones, and the status
as the steps so far decided it (kept by the reconciler, which applies each step's outcome)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from isvc_api import (
    ConditionType,
    EndpointType,
    InferenceService,
    InferenceServiceStatus,
    LaunchPlanSpec,
    ModelFacts,
    Obj,
    OrderKey,
    Verdict,
    find_condition,
)

from isvc_operator._api import Cluster
from isvc_operator._outcome import Delete, Event
from isvc_operator._policy import EffectivePolicy

__all__ = [
    "RETRY_CAPACITY",
    "RETRY_SOON",
    "WORKLOAD_KINDS",
    "Children",
    "OrderScope",
    "controlled_by",
    "left_by_earlier",
    "made_for",
    "workload_deletes",
]

RETRY_SOON = 5.0  # a dependency that should answer in a moment
RETRY_CAPACITY = 15.0  # room that may free up


@attrs.frozen
class Children:
    """The order's workload as the cache holds it: its StatefulSet, pods and claims."""

    deployment: dict[str, Any] | None
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]


@attrs.define
class OrderScope:
    """One pass over one order. What the steps found is None until the step named beside it finds it."""

    order: InferenceService
    raw: dict[str, Any]
    now: datetime
    # Kept by the reconciler: each step's verdict, and the status with the fields the steps decided so far.
    verdicts: dict[ConditionType, Verdict] = attrs.field(factory=dict)
    status: InferenceServiceStatus = attrs.field(
        default=attrs.Factory(lambda self: self.previous, takes_self=True)
    )
    # ClassResolved: the policy in force, when the class holds (or the built-in one without a class).
    policy: EffectivePolicy | None = None
    # ModelResolved: the model's facts and contract, when it resolves.
    facts: ModelFacts | None = None
    endpoint_type: EndpointType | None = None
    # Planned: the plan in force; the LaunchPlan as read or stored in this pass.
    plan: LaunchPlanSpec | None = None
    launch_plan_obj: Obj | None = None
    # the planner's ResourceClaimExhausted: the scheduler refused the plan's claim and no other device has room
    claim_exhausted: str | None = None
    # a new plan the held set's model volume cannot take: the plan serving stays in force, WorkloadReady refuses
    outgrown: str | None = None
    # WorkloadReady: the endpoint's token, the children read.
    token: str | None = None
    children: Children | None = None
    # What the pass asks of the controller and the API, gathered by the reconciler.
    requeue_after: float | None = None
    wake: list[OrderKey] = attrs.field(factory=list)
    events: list[Event] = attrs.field(factory=list)
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

    def repeats(self, type_: ConditionType, verdict: Verdict) -> bool:
        """Whether `verdict` is what the condition already said (status, reason and message): nothing new."""
        last = find_condition(self.previous.conditions, type_.value)
        return last is not None and (last.status, last.reason, last.message) == (
            verdict.status,
            verdict.reason,
            verdict.message,
        )


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
    order's is not the order's, to judge or to delete."""
    return controlled_by(obj, "InferenceService", scope.order.metadata.uid)


def left_by_earlier(obj: dict[str, Any], scope: OrderScope, set_uid: str | None = None) -> bool:
    """Whether `obj` is what an earlier order of this name left: its owner (its controller, when it has one) an
    InferenceService of the order's name and another uid, or the order's StatefulSet of another uid than
    `set_uid`, the set made for this order (the set's pods and model volumes). Names are unique in a namespace,
    so that owner is gone, and the garbage collector removes what it owned; an order made again at once must not
    take it over meanwhile."""
    refs = obj["metadata"].get("ownerReferences") or []
    controller = [o for o in refs if o.get("controller")]
    for ref in controller or refs:
        if ref.get("name") != scope.name or not ref.get("uid"):
            continue
        if ref.get("kind") == "InferenceService" and ref["uid"] != scope.order.metadata.uid:
            return True
        if ref.get("kind") == "StatefulSet" and ref["uid"] != set_uid:
            return True
    return False


def workload_deletes(scope: OrderScope, cluster: Cluster) -> list[Delete]:
    """The deletions that take the order's workload down: its set (its model volumes go with it) and any older
    Deployment, of those the order controls."""
    return [
        Delete("apps/v1", kind, obj["metadata"]["name"])
        for kind in WORKLOAD_KINDS
        for obj in cluster.owned(kind, scope.namespace, scope.name)
        if made_for(obj, scope)
    ]
