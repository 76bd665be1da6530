"""InferenceService, the order: a model and, optionally, a class; and what the platform says of it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, JsonValue, model_validator

from isvc_api._base import Wire
from isvc_api._class import InferenceServiceClass, InferenceServiceClassSpec
from isvc_api._conditions import Condition
from isvc_api._plan import LaunchLoad, LaunchPlan
from isvc_api._vocabulary import (
    API_VERSION,
    DNS_LABEL,
    DNS_NAME,
    CatalogKind,
    EndpointType,
    ExposureType,
    MetricsPath,
    ModelFormat,
    ModelSource,
    ObjectMeta,
    PlacementMode,
    Quantization,
    ScalingMetric,
    ScalingSignal,
    SharingMode,
)

__all__ = [
    "AuthSecretRef",
    "Constraints",
    "EndpointStatus",
    "HealthStatus",
    "InferenceService",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "ModelRef",
    "ModelSpec",
    "ModelStatus",
    "Resolved",
    "ScalingStatus",
    "StartupFailure",
    "parse",
]


class ModelRef(Wire):
    """A reference to a model; which fields go with which source is checked at write time."""

    name: str = Field(
        description=(
            "HuggingFace: a repository id, owner/name with an optional @revision. "
            "AIModels: the name of a Model or ClusterModel."
        ),
        min_length=1,
        max_length=512,
    )
    kind: CatalogKind | None = Field(
        default=None, description="Catalog kind: Model (namespaced) or ClusterModel. Catalog only."
    )
    namespace: str | None = Field(
        default=None,
        description="Namespace of a Model; defaults to the order's. Only with kind Model.",
        max_length=63,
        pattern=DNS_LABEL,
    )

    @property
    def served_name(self) -> str:
        """The name the model is served and asked for by: the reference without a pinned @revision."""
        return self.name.split("@", 1)[0]


class AuthSecretRef(Wire):
    """A Secret in the order's namespace holding a token for the model source."""

    name: str = Field(description="Secret name.", min_length=1, max_length=253, pattern=DNS_NAME)
    key: str = Field(
        default="token", description="Key in the Secret holding the token.", min_length=1, max_length=253
    )


_UNION_RULES: list[JsonValue] = [
    {
        "rule": "self.src != 'HuggingFace' || (!has(self.ref.kind) && !has(self.ref.__namespace__))",
        "message": "a HuggingFace source takes a repository id in ref.name, without ref.kind "
        "or ref.namespace",
    },
    {
        "rule": "self.src != 'AIModels' || has(self.ref.kind)",
        "message": "an AIModels source takes ref.name and ref.kind (Model or ClusterModel)",
    },
    {
        "rule": "!has(self.ref.__namespace__) || (has(self.ref.kind) && self.ref.kind == 'Model')",
        "message": "ref.namespace is allowed with kind Model only",
    },
]


def _rule_message(index: int) -> str:
    rule = _UNION_RULES[index]
    assert isinstance(rule, dict)
    return str(rule["message"])


class ModelSpec(Wire):
    """The model to serve and where it comes from."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _UNION_RULES})

    src: ModelSource = Field(description="Model source: HuggingFace or AIModels (the catalog).")
    ref: ModelRef = Field(description="Reference to the model within its source.")
    auth_secret_ref: AuthSecretRef | None = Field(
        default=None, description="Secret with a token for gated or private models."
    )

    @model_validator(mode="after")
    def _union(self) -> ModelSpec:
        """The same union the API server enforces with CEL, with the same messages."""
        if self.src == ModelSource.HUGGING_FACE and (self.ref.kind or self.ref.namespace):
            raise ValueError(_rule_message(0))
        if self.src == ModelSource.AI_MODELS and self.ref.kind is None:
            raise ValueError(_rule_message(1))
        if self.ref.namespace is not None and self.ref.kind != CatalogKind.MODEL:
            raise ValueError(_rule_message(2))
        return self


class InferenceServiceSpec(Wire):
    """An order: a model and, optionally, a class. The platform decides everything else."""

    model: ModelSpec = Field(description="The model to serve.")
    inference_service_class_name: str | None = Field(
        default=None,
        description="The class whose policy applies. Absent: the platform's built-in defaults.",
        min_length=1,
        max_length=253,
        pattern=DNS_NAME,
    )


class EndpointStatus(Wire):
    """The published endpoint."""

    url: str = Field(description="HTTPS URL of the inference API.")
    type: ExposureType = Field(description="ClusterLocal or External.")
    tool_calling_supported: bool | None = Field(
        default=None,
        description="True when the resolved recipe carries the runtime flag enabling tool "
        "calling; absent until a plan is resolved.",
    )
    tool_call_parser: str | None = Field(
        default=None,
        description="The runtime's tool-call parser in force (vLLM --tool-call-parser); absent when tool "
        "calling is off or the runtime names none.",
    )
    reasoning_parser: str | None = Field(
        default=None,
        description="The runtime's reasoning parser in force (vLLM --reasoning-parser): the reply carries "
        "the model's reasoning apart from its answer; absent when none is enabled.",
    )


class ModelStatus(Wire):
    """What the platform decided about the model."""

    endpoint_type: EndpointType | None = Field(
        default=None, description="The API contract served: Chat, Embeddings or Rerank."
    )
    format: ModelFormat | None = Field(default=None, description="Weight format found.")
    parameter_count: int | None = Field(default=None, description="Parameter count found.")
    quantization: Quantization | None = Field(default=None, description="Quantization found.")


class ScalingStatus(Wire):
    """What the order's replicas follow, when an autoscaler drives them."""

    signal: ScalingSignal = Field(description="Queue (the runtime's own load) or CPU.")
    path: MetricsPath = Field(
        description="How the autoscaler reads it: PrometheusMetricsAdapter, KEDA or MetricsServer."
    )
    metrics: list[ScalingMetric] = Field(default_factory=list, description="What is followed.", max_length=4)
    autoscaler: str = Field(description="The object that scales the order's StatefulSet: kind/name.")
    message: str | None = Field(default=None, description="Why this signal, when it is not the queue.")


class Constraints(Wire):
    """Bounds the class puts on the order, echoed because users cannot read classes."""

    min_replicas: int = Field(description="Lowest replica count in force.")
    max_replicas: int = Field(description="Highest replica count in force.")
    autoscaler: bool = Field(default=False, description="Whether an autoscaler drives replicas.")
    priority_class_name: str | None = Field(default=None, description="Priority class in force.")

    @classmethod
    def of_class(cls, spec: InferenceServiceClassSpec | None) -> Constraints:
        """The bounds a class sets; a class without scalingPolicy (or no class) gives one replica."""
        scaling = spec.scaling_policy if spec is not None else None
        return cls(
            min_replicas=scaling.min_replicas if scaling else 1,
            max_replicas=scaling.max_replicas if scaling else 1,
            autoscaler=scaling.autoscaler if scaling else False,
            priority_class_name=spec.priority_class_name if spec is not None else None,
        )


class Resolved(LaunchLoad):
    """What the platform assigned to the order."""

    device_class: str | None = Field(default=None, description="DRA DeviceClass of the claim.")
    accelerator_product_name: str | None = Field(default=None, description="Accelerator product.")
    accelerator_memory_gi_b: float | None = Field(
        default=None, alias="acceleratorMemoryGiB", description="Memory of one device, GiB."
    )
    placement_mode: PlacementMode | None = Field(default=None, description="Placement mode.")
    sharing_mode: SharingMode | None = Field(default=None, description="Sharing mode.")
    share_percent: int | None = Field(default=None, description="Percent of one device, 1..100.")
    device_count: int | None = Field(default=None, description="Devices held per replica.")
    node_name: str | None = Field(default=None, description="Node the plan placed the order on.")
    devices: list[str] | None = Field(
        default=None,
        description="The devices of the plan, <pool>/<device>: orders sharing one card name the same.",
        max_length=64,
    )
    served_model: str | None = Field(
        default=None,
        description="The model the plan in force serves (status.model is what the order asks; "
        "they differ while an edit waits for a new plan).",
    )
    required_memory_gi_b: float | None = Field(
        default=None, alias="requiredMemoryGiB", description="Accelerator memory the model needs."
    )
    weights_gi_b: float | None = Field(
        default=None, alias="weightsGiB", description="Weights as the runtime holds them, GiB (all devices)."
    )
    kv_bytes_per_token: int | None = Field(
        default=None, description="KV-cache bytes one token takes on each device."
    )
    overhead_gi_b: float | None = Field(
        default=None,
        alias="overheadGiB",
        description="Runtime memory per device besides weights and KV cache (activations, CUDA context, "
        "CUDA graphs), GiB.",
    )
    context_length: int | None = Field(
        default=None,
        description="The longest request the launch accepts, in tokens: vLLM --max-model-len, llama.cpp -c / -np.",
    )
    cpu: str | None = Field(default=None, description="CPU request estimate.")
    memory: str | None = Field(default=None, description="Memory request estimate.")
    model_volume: str | None = Field(default=None, description="Model volume size estimate.")
    runtime: str | None = Field(default=None, description="Recipe that serves the model.")
    replan_count: int = Field(default=0, description="How many times the plan was recomputed.")
    inputs_hash: str | None = Field(
        default=None,
        description="Hash of the inputs (order, class, model facts, recipes) last planned for; a new "
        "one is counted once in replanCount.",
    )


class StartupFailure(Wire):
    """The container that fails to start, and its output as read when the failure was first seen."""

    pod: str = Field(description="The pod whose container fails.")
    container: str = Field(description="The failing container.")
    restart_count: int = Field(default=0, description="Restart count when last seen.")
    output: list[str] = Field(
        default_factory=list,
        description="Last lines of the container's own output, read once.",
        max_length=16,
    )
    output_read: bool = Field(
        default=False, description="Whether the output was read (it is not read again for this container)."
    )


class HealthStatus(Wire):
    """The probe's record: whether the order ever served, and the run of failures since it last did."""

    ever_ready: bool = Field(default=False, description="Whether a probe of the order ever succeeded.")
    consecutive_failures: int = Field(default=0, description="Failed probes in a row.", ge=0)
    first_failure_time: datetime | None = Field(default=None, description="When the run of failures began.")
    last_failure_time: datetime | None = Field(
        default=None, description="When the last failed probe ran; a probe is counted once."
    )
    last_failure: str | None = Field(default=None, description="What the last failed probe found.")


class InferenceServiceStatus(Wire):
    """What the platform made of the order."""

    observed_generation: int | None = Field(default=None, description="The generation this status describes.")
    phase: str | None = Field(default=None, description="Pending, Ready, Degraded or Failed.")
    reason: str | None = Field(default=None, description="Reason of the first condition that is not True.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="ClassResolved, ModelResolved, Planned, WorkloadReady, Ready, ScalingHealthy.",
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    endpoint: EndpointStatus | None = Field(default=None, description="The published endpoint.")
    auth_secret_name: str | None = Field(
        default=None, description="Secret with the endpoint token (key token), when required."
    )
    model: ModelStatus | None = Field(default=None, description="What was decided about the model.")
    constraints: Constraints | None = Field(default=None, description="Bounds in force.")
    resolved: Resolved | None = Field(default=None, description="What the platform assigned.")
    launch_plan_name: str | None = Field(
        default=None, description="The order's LaunchPlan, while one exists (in force or refused)."
    )
    startup_failure: StartupFailure | None = Field(
        default=None,
        description="The container last seen failing to start, with its output as read once; cleared when "
        "a replica serves.",
    )
    health: HealthStatus | None = Field(default=None, description="The inference API probe's record.")
    scaling: ScalingStatus | None = Field(
        default=None,
        description="What the autoscaler follows; absent when no autoscaler drives the replicas.",
    )
    unplaced_replicas: list[str] | None = Field(
        default=None,
        description="Replica pods whose device claim the scheduler could not place, as ScalingHealthy last "
        "named them; a GrowthClaimUnplaced event reported each once.",
        max_length=1000,
    )


class InferenceService(Wire):
    """An order for LLM inference."""

    model_config = ConfigDict(extra="forbid")
    KIND: ClassVar[str] = "InferenceService"
    PLURAL: ClassVar[str] = "inferenceservices"

    api_version: str = Field(default=API_VERSION, description="API version.")
    kind: str = Field(default="InferenceService", description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: InferenceServiceSpec = Field(description="The order.")
    status: InferenceServiceStatus | None = Field(default=None, description="Observed state.")

    def owner_reference(self) -> dict[str, Any]:
        """The controller reference that makes an object of the order's go when the order goes."""
        return {
            "apiVersion": API_VERSION,
            "kind": "InferenceService",
            "name": self.metadata.name,
            "uid": self.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


# ---------------------------------------------------------------- InferenceServiceClass


def parse(obj: dict[str, Any]) -> InferenceService | InferenceServiceClass | LaunchPlan:
    """Parse a wire object of one of our kinds."""
    kinds: dict[str, type[InferenceService | InferenceServiceClass | LaunchPlan]] = {
        "InferenceService": InferenceService,
        "InferenceServiceClass": InferenceServiceClass,
        "LaunchPlan": LaunchPlan,
    }
    return kinds[obj["kind"]].model_validate(obj)
