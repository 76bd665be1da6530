"""The state one reconcile pass carries from step to step, and how it becomes a status."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from isvc_api import (
    Condition,
    ConditionType,
    EndpointStatus,
    EndpointType,
    InferenceService,
    LaunchPlanSpec,
    ModelFacts,
    ModelStatus,
    Phase,
    Reason,
    Resolved,
    StatusReason,
    set_condition,
)

from isvc_operator._policy import EffectivePolicy

__all__ = ["ORDERED", "Pass", "Verdict"]

ORDERED = [
    ConditionType.CLASS_RESOLVED,
    ConditionType.MODEL_RESOLVED,
    ConditionType.PLANNED,
    ConditionType.WORKLOAD_READY,
    ConditionType.READY,
    ConditionType.SCALING_HEALTHY,
]


@attrs.frozen
class Verdict:
    """What one step says about its condition."""

    status: str
    reason: str
    message: str

    @classmethod
    def ok(cls, reason: StatusReason, message: str) -> Verdict:
        return cls("True", reason.value, message)

    @classmethod
    def refuse(cls, reason: Reason, message: str) -> Verdict:
        return cls("False", reason.value, message)

    @classmethod
    def waiting(cls, on: ConditionType, why: str) -> Verdict:
        return cls("Unknown", StatusReason.WAITING.value, f"waits for {on.value}: {why}")


@attrs.define
class Pass:
    """One reconcile pass over one order."""

    order: InferenceService
    raw: dict[str, Any]
    now: datetime
    verdicts: dict[ConditionType, Verdict] = attrs.field(factory=dict)
    policy: EffectivePolicy | None = None
    facts: ModelFacts | None = None
    endpoint_type: EndpointType | None = None
    plan: LaunchPlanSpec | None = None
    resolved: Resolved | None = None
    endpoint: EndpointStatus | None = None
    auth_secret_name: str | None = None
    token: str | None = None
    children: tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]] | None = None
    requeue_after: float | None = None
    events: list[tuple[str, str, str]] = attrs.field(factory=list)
    unplaced: bool = False  # no LaunchPlan and the planner found no room: a workload left must go

    @property
    def namespace(self) -> str:
        return self.order.metadata.namespace or "default"

    @property
    def name(self) -> str:
        return self.order.metadata.name

    def say(self, type_: ConditionType, verdict: Verdict) -> None:
        """Record the step's verdict on its condition."""
        self.verdicts[type_] = verdict

    def holds(self, type_: ConditionType) -> bool:
        """Whether an earlier step's condition is True."""
        v = self.verdicts.get(type_)
        return v is not None and v.status == "True"

    def blocker(self, type_: ConditionType) -> str:
        v = self.verdicts.get(type_)
        return "not judged yet" if v is None else v.reason

    def waits_for(self, type_: ConditionType) -> Verdict:
        """Unknown: an earlier condition is not True, so this one cannot be told yet."""
        return Verdict.waiting(type_, self.blocker(type_))

    def requeue(self, seconds: float) -> None:
        """Ask for another pass no later than `seconds` from now."""
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def phase(self) -> Phase:
        """The phase follows from the conditions: they say why."""
        ready = self.verdicts.get(ConditionType.READY)
        if ready is not None and ready.status == "True":
            scaling = self.verdicts.get(ConditionType.SCALING_HEALTHY)
            return Phase.DEGRADED if scaling is not None and scaling.status == "False" else Phase.READY
        if ready is not None and ready.reason == Reason.SERVICE_UNHEALTHY.value:
            return Phase.FAILED
        return Phase.PENDING

    def first_not_true(self) -> str | None:
        for type_ in ORDERED:
            v = self.verdicts.get(type_)
            if v is not None and v.status != "True":
                return v.reason
        return None

    def conditions(self, previous: list[Condition], generation: int | None) -> list[Condition]:
        """Merge this pass's verdicts into the previous conditions, in the documented order."""
        merged = list(previous)
        for type_ in ORDERED:
            v = self.verdicts.get(type_)
            if v is None:
                continue
            merged = set_condition(
                merged,
                Condition(type=type_.value, status=v.status, reason=v.reason, message=v.message,
                          observed_generation=generation),
                at=self.now,
            )
        rank = {t.value: i for i, t in enumerate(ORDERED)}
        return sorted(merged, key=lambda c: rank.get(c.type, len(rank)))

    def model_status(self) -> ModelStatus | None:
        if self.facts is None and self.endpoint_type is None:
            return None
        return ModelStatus(
            endpoint_type=self.endpoint_type,
            format=self.facts.format if self.facts else None,
            parameter_count=self.facts.parameter_count if self.facts else None,
            quantization=self.facts.quantization if self.facts else None,
        )
