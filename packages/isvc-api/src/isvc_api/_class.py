"""InferenceServiceClass: an administrator's policy for a group of orders."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field, model_validator

from isvc_api._base import Wire
from isvc_api._conditions import Condition
from isvc_api._serving import ServingTarget
from isvc_api._vocabulary import (
    API_VERSION,
    MIN_REPLICAS_ZERO,
    Authentication,
    EndpointType,
    ExposureType,
    ModelFormat,
    ObjectMeta,
)

__all__ = [
    "TLS",
    "AcceleratorPolicy",
    "AdmissionPolicy",
    "Exposure",
    "InferenceServiceClass",
    "InferenceServiceClassSpec",
    "InferenceServiceClassStatus",
    "ModelPolicy",
    "ScalingPolicy",
    "ScalingTargets",
    "UpdateStrategy",
]


class ModelPolicy(Wire):
    """Which models and API contracts the class admits."""

    allowed_endpoint_types: list[EndpointType] = Field(
        description="API contracts in order of preference; the first one the model serves wins.",
        max_length=3,
    )
    allowed_formats: list[ModelFormat] | None = Field(
        default=None, description="Weight formats admitted; absent admits all.", max_length=8
    )
    max_parameter_count: int | None = Field(
        default=None, description="Largest parameter count admitted.", ge=1
    )


class AdmissionPolicy(Wire):
    """Which namespaces may order with the class."""

    allowed_namespaces: list[str] | None = Field(
        default=None,
        description="Namespaces admitted; absent admits every namespace.",
        max_length=256,
    )


class TLS(Wire):
    """TLS for the endpoint."""

    cluster_issuer_name: str | None = Field(
        default=None, description="cert-manager ClusterIssuer; absent uses the module's default."
    )


class Exposure(Wire):
    """How the endpoint is published."""

    type: ExposureType = Field(default=ExposureType.EXTERNAL, description="ClusterLocal or External.")
    authentication: Authentication = Field(default=Authentication.TOKEN, description="Token or None.")
    tls: TLS | None = Field(default=None, description="TLS through cert-manager.")


# A replica runs the requests its KV budget serves at once (issue 42); the k-th request waiting behind them
# waits about k / at_once of a request's time for a slot. Asking for a replica once an eighth of that many wait
# keeps what the queue adds to a request's time to about an eighth: 2 for the chat default of 16 at once.
WAITING_SHARE = 8


class ScalingTargets(Wire):
    """What one replica may carry before the autoscaler adds another (the runtime's own load signal)."""

    requests_waiting_per_replica: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Requests waiting in the runtime's queue per replica (vLLM num_requests_waiting, llama.cpp "
        "requests_deferred, TEI queue size) above which a replica is added; they wait beyond the requests the "
        "replica serves at once. Absent: an eighth of those (its launch's concurrentRequests), at least 1.",
    )
    cache_usage_percent: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="KV-cache use per replica, percent, above which a replica is added; only for runtimes "
        "that publish it (vLLM). Absent: the queue alone.",
    )

    def waiting_for(self, at_once: int | None) -> int:
        """The requests waiting per replica that add one, for a replica serving `at_once` requests at once (None:
        not stated, taken as the chat default's 16)."""
        if self.requests_waiting_per_replica is not None:
            return self.requests_waiting_per_replica
        return max(1, -(-(at_once or 16) // WAITING_SHARE))


class ScalingPolicy(Wire):
    """Replica bounds and autoscaling; absent means one replica and no autoscaler."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.minReplicas <= self.maxReplicas",
                    "message": "minReplicas must not exceed maxReplicas",
                },
                {
                    "rule": "self.minReplicas >= 1",
                    "message": MIN_REPLICAS_ZERO,
                },
            ]
        }
    )

    # ge=0 so that a class stored before the rule above still reads; judge_class refuses it.
    min_replicas: int = Field(default=1, description="Lowest replica count, 1 or more.", ge=0, le=1000)
    max_replicas: int = Field(default=1, description="Highest replica count.", ge=1, le=1000)
    autoscaler: bool = Field(default=False, description="Whether an autoscaler drives replicas.")
    targets: ScalingTargets | None = Field(
        default=None, description="Load per replica that adds one; absent: the defaults of each field."
    )
    scale_down_stabilization_seconds: int = Field(
        default=600,
        ge=0,
        le=3600,
        description="How long the load must stay low before a replica is given up (a replica holds a device "
        "and a loaded model).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ScalingPolicy:
        if self.min_replicas > self.max_replicas:
            raise ValueError("minReplicas must not exceed maxReplicas")
        return self

    @property
    def effective_targets(self) -> ScalingTargets:
        """The targets in force: the class's, or the defaults."""
        return self.targets or ScalingTargets()


class AcceleratorPolicy(Wire):
    """Which accelerators may be tried, and which shares are permitted."""

    device_class_names: list[str] | None = Field(
        default=None,
        description="DRA DeviceClasses to try, in order; absent tries every one.",
        max_length=16,
    )
    selector: str | None = Field(
        default=None,
        description="CEL expression over a device (as in DRA selectors).",
        max_length=10240,
    )
    allowed_share_percents: list[int] | None = Field(
        default=None,
        description="Shares of one device permitted; absent permits 1..100.",
        max_length=100,
    )


class UpdateStrategy(Wire):
    """How the workload is rolled."""

    type: str = Field(
        default="RollingUpdate",
        description="RollingUpdate or Recreate.",
        pattern="^(RollingUpdate|Recreate)$",
    )


class InferenceServiceClassSpec(Wire):
    """Policy an administrator publishes for orders."""

    model_policy: ModelPolicy = Field(description="Which models and API contracts are admitted.")
    admission_policy: AdmissionPolicy | None = Field(default=None, description="Namespaces.")
    exposure: Exposure | None = Field(default=None, description="Publication of the endpoint.")
    scaling_policy: ScalingPolicy | None = Field(default=None, description="Replicas.")
    priority_class_name: str | None = Field(
        default=None, description="PriorityClass of order workloads.", max_length=253
    )
    accelerator_policy: AcceleratorPolicy | None = Field(default=None, description="Accelerators.")
    serving: ServingTarget | None = Field(
        default=None,
        description="The load one replica of an order must carry; the plan's KV budget, longest request and "
        "parallel sequences are sized for it. Absent: the defaults of the order's endpoint type.",
    )
    update_strategy: UpdateStrategy | None = Field(default=None, description="Workload rollout.")


class InferenceServiceClassStatus(Wire):
    """Whether the class holds."""

    observed_generation: int | None = Field(default=None, description="Generation judged.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready.",
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class InferenceServiceClass(Wire):
    """Policy for orders, cluster-scoped."""

    KIND: ClassVar[str] = "InferenceServiceClass"
    PLURAL: ClassVar[str] = "inferenceserviceclasses"

    api_version: str = Field(default=API_VERSION, description="API version.")
    kind: str = Field(default="InferenceServiceClass", description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: InferenceServiceClassSpec = Field(description="The policy.")
    status: InferenceServiceClassStatus | None = Field(default=None, description="Observed state.")


# ---------------------------------------------------------------- LaunchPlan
