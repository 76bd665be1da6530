"""What every child of an order shares: its name, labels, owner reference, and the inputs bundle."""

from __future__ import annotations

from typing import Any

from isvc_api import (
    LABEL_MANAGED_BY,
    LABEL_ORDER,
    MANAGER,
    CompiledRuntime,
    Constraints,
    Estimates,
    Exposure,
    InferenceService,
    InferenceServiceClassSpec,
    LaunchPlanSpec,
    Placement,
    ScalingPolicy,
    UpdateStrategy,
)
from pydantic import BaseModel, ConfigDict, Field

from isvc_workload._errors import PlanNotExpressible

__all__ = ["WorkloadInputs", "child_labels", "child_metadata", "owner_reference"]


def child_labels(order_name: str) -> dict[str, str]:
    """Labels every child of an order carries: the order, the manager, and the Deckhouse pair."""
    return {
        LABEL_ORDER: order_name,
        LABEL_MANAGED_BY: MANAGER,
        "heritage": "deckhouse",
        "module": "isvc",
    }


def owner_reference(order: InferenceService) -> dict[str, Any]:
    """The controller reference that makes a child go when its order goes."""
    if not order.metadata.uid:
        raise PlanNotExpressible("metadata.uid", order.metadata.uid, "an order read from the API has a uid")
    return order.owner_reference()


def child_metadata(
    order: InferenceService, name: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """metadata of a child named `name` in the order's namespace."""
    if not order.metadata.name or not order.metadata.namespace:
        raise PlanNotExpressible(
            "metadata.namespace", order.metadata.namespace, "an order has a name and a namespace"
        )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": order.metadata.namespace,
        "labels": child_labels(order.metadata.name),
        "ownerReferences": [owner_reference(order)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


class WorkloadInputs(BaseModel):
    """Everything the workload of one order is built from: the order, its plan, and its class's say."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    order: InferenceService = Field(description="The order, as read from the API (uid included).")
    placement: Placement = Field(description="Where it runs.")
    estimates: Estimates = Field(description="cpu, memory and model volume.")
    runtime: CompiledRuntime = Field(description="The compiled recipe.")
    constraints: Constraints | None = Field(
        default=None, description="Replica bounds and priority class; None: one replica."
    )
    scaling: ScalingPolicy | None = Field(
        default=None, description="The class's scaling policy: targets and the scale-down window."
    )
    exposure: Exposure = Field(default_factory=Exposure, description="How the endpoint is published.")
    update_strategy: UpdateStrategy | None = Field(default=None, description="How the workload rolls.")
    priority: int = Field(default=0, description="Value of the order's PriorityClass, for claim labels.")
    model_commit: str | None = Field(default=None, description="The model's commit to download.")
    model_repo: str | None = Field(
        default=None, description="The catalog model's Hugging Face repository to download; None: none."
    )
    model_files: list[str] | None = Field(
        default=None, description="The repository's files to download; None: the whole repository."
    )
    token_digest: str | None = Field(
        default=None, description="Digest of the endpoint's token: the pods roll when it changes."
    )
    metered: bool = Field(
        default=False, description="The runtime's API is reached through the request meter (`_meter`)."
    )

    @property
    def name(self) -> str:
        """The order's name, which every child takes."""
        return self.order.metadata.name

    @property
    def namespace(self) -> str:
        """The order's namespace, where every child lives."""
        return self.order.metadata.namespace or ""

    @classmethod
    def from_plan(
        cls,
        order: InferenceService,
        plan: LaunchPlanSpec,
        klass: InferenceServiceClassSpec | None,
        *,
        exposure: Exposure | None = None,
        priority: int = 0,
        token_digest: str | None = None,
    ) -> WorkloadInputs:
        """Bundle an order with its plan and class; `exposure` overrides the class's (class-less orders)."""
        if plan.estimates is None:
            raise PlanNotExpressible("spec.estimates", None, "a plan that runs a workload carries estimates")
        if plan.runtime is None:
            raise PlanNotExpressible("spec.runtime", None, "a plan that runs a workload carries a runtime")
        constraints = Constraints.of_class(klass) if klass is not None else None
        return cls(
            order=order,
            placement=plan.placement,
            estimates=plan.estimates,
            runtime=plan.runtime,
            constraints=constraints,
            scaling=klass.scaling_policy if klass else None,
            exposure=exposure or (klass.exposure if klass and klass.exposure else Exposure()),
            update_strategy=klass.update_strategy if klass else None,
            priority=priority,
            model_commit=plan.model_commit,
            model_files=plan.model_files,
            model_repo=plan.model_repo,
            token_digest=token_digest,
        )
