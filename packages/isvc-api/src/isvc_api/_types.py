"""The custom resources: InferenceService (the order), InferenceServiceClass, LaunchPlan."""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, JsonValue, model_validator

from isvc_api._base import Wire
from isvc_api._conditions import Condition

__all__ = [
    "API_VERSION",
    "GROUP",
    "LABEL_MANAGED_BY",
    "LABEL_ORDER",
    "LABEL_PRIORITY",
    "MANAGER",
    "MIN_REPLICAS_ZERO",
    "TLS",
    "VERSION",
    "AcceleratorPolicy",
    "AdmissionPolicy",
    "AuthSecretRef",
    "Authentication",
    "CatalogKind",
    "CompiledRuntime",
    "Constraints",
    "EndpointStatus",
    "EndpointType",
    "Estimates",
    "Exposure",
    "ExposureType",
    "HealthStatus",
    "InferenceService",
    "InferenceServiceClass",
    "InferenceServiceClassSpec",
    "InferenceServiceClassStatus",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "LaunchPlan",
    "LaunchPlanSpec",
    "LaunchPlanStatus",
    "LoadMetrics",
    "MetricsPath",
    "ModelFormat",
    "ModelPolicy",
    "ModelRef",
    "ModelSource",
    "ModelSpec",
    "ModelStatus",
    "ObjectMeta",
    "Placement",
    "PlacementMode",
    "Port",
    "Quantization",
    "Resolved",
    "ScalingMetric",
    "ScalingPolicy",
    "ScalingSignal",
    "ScalingStatus",
    "ScalingTargets",
    "SharingMode",
    "StartupFailure",
    "UpdateStrategy",
    "claim_capacity_requests",
]

GROUP = "ai.deckhouse.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"  # of every kind the module defines
LABEL_ORDER = "ai.deckhouse.io/inference-service"  # on every object made for an order: its name
LABEL_PRIORITY = "ai.deckhouse.io/priority"  # on claims, for people: the planner never reads it (issue 14)
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "isvc-controller"  # the one field manager and managed-by value

MIN_REPLICAS_ZERO = (
    "minReplicas 0 (scale to zero) is not supported: a replica holds its device and its loaded model, and "
    "nothing would hold the first request while none runs; set minReplicas to 1 or more."
)

_DNS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class EndpointType(StrEnum):
    """The API contract an endpoint serves."""

    CHAT = "Chat"
    EMBEDDINGS = "Embeddings"
    RERANK = "Rerank"


class ModelSource(StrEnum):
    """Where a model comes from."""

    HUGGING_FACE = "HuggingFace"
    AI_MODELS = "AIModels"


class CatalogKind(StrEnum):
    """Kinds of the ai-models catalog."""

    MODEL = "Model"
    CLUSTER_MODEL = "ClusterModel"


class ModelFormat(StrEnum):
    """On-disk weight formats."""

    SAFETENSORS = "Safetensors"
    GGUF = "GGUF"
    PYTORCH = "PyTorch"


class Quantization(StrEnum):
    """Weight quantization schemes; NONE means the native dtype."""

    NONE = "None"
    AWQ = "AWQ"
    GPTQ = "GPTQ"
    FP8 = "FP8"
    BITSANDBYTES = "BitsAndBytes"
    GGUF = "GGUF"


class PlacementMode(StrEnum):
    """How an order sits on accelerators."""

    SHARED = "Shared"  # a share of one device, co-placed with others
    WHOLE_DEVICE = "WholeDevice"
    MULTI_DEVICE = "MultiDevice"  # several devices of one node, tensor parallel


class SharingMode(StrEnum):
    """How a device is shared between orders."""

    NONE = "None"
    SHARES = "Shares"  # consumable capacity: percent of the device
    PARTITION = "Partition"  # a fixed partition (MIG-like)


class ExposureType(StrEnum):
    """Where an endpoint is published."""

    CLUSTER_LOCAL = "ClusterLocal"
    EXTERNAL = "External"


class Authentication(StrEnum):
    """How clients authenticate to an endpoint."""

    TOKEN = "Token"
    NONE = "None"


class ObjectMeta(Wire):
    """The part of metav1.ObjectMeta the module reads; everything else passes through."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(default="", description="Object name.")
    namespace: str | None = Field(default=None, description="Namespace, for namespaced objects.")
    uid: str | None = Field(default=None, description="Server-assigned id.")
    generation: int | None = Field(default=None, description="Spec generation.")
    resource_version: str | None = Field(default=None, description="Optimistic-lock version.")
    labels: dict[str, str] | None = Field(default=None, description="Labels.")
    annotations: dict[str, str] | None = Field(default=None, description="Annotations.")
    deletion_timestamp: datetime | None = Field(default=None, description="Set while deleting.")


# ---------------------------------------------------------------- InferenceService


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
        pattern=_DNS_LABEL,
    )

    @property
    def served_name(self) -> str:
        """The name the model is served and asked for by: the reference without a pinned @revision."""
        return self.name.split("@", 1)[0]


class AuthSecretRef(Wire):
    """A Secret in the order's namespace holding a token for the model source."""

    name: str = Field(description="Secret name.", min_length=1, max_length=253, pattern=_DNS_NAME)
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
        pattern=_DNS_NAME,
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


class ScalingSignal(StrEnum):
    """What an order's autoscaler follows."""

    QUEUE = "Queue"  # the runtime's own requests waiting (and KV-cache use where it publishes it)
    CPU = "CPU"  # the runtime containers' CPU against their request: the one signal every cluster has


class MetricsPath(StrEnum):
    """How the autoscaler reads the signal: the cluster's metrics adapter, never the module's own code."""

    PROMETHEUS_METRICS_ADAPTER = "PrometheusMetricsAdapter"  # Deckhouse: PodMetric + an autoscaling/v2 HPA
    KEDA = "KEDA"  # a KEDA ScaledObject with a prometheus trigger (KEDA makes the HPA)
    METRICS_SERVER = "MetricsServer"  # resource metrics (CPU) for an autoscaling/v2 HPA


class ScalingMetric(Wire):
    """One metric the autoscaler follows, and the value per replica that adds one."""

    name: str = Field(description="The metric, as the runtime publishes it (or cpu).")
    target: str = Field(description="The value per replica above which a replica is added.")


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


class Resolved(Wire):
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
        default=None, description="Context length (tokens) the launch was sized for: --max-model-len / -c."
    )
    kv_cache_bytes: int | None = Field(
        default=None,
        description="KV-cache bytes per device the runtime is launched with (vLLM --kv-cache-memory-bytes; "
        "llama.cpp: the KV of -c).",
    )
    margin_gi_b: float | None = Field(
        default=None,
        alias="marginGiB",
        description="Memory per device the launch leaves beyond the weights, the runtime's own need and the KV "
        "cache, GiB.",
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


class ScalingTargets(Wire):
    """What one replica may carry before the autoscaler adds another (the runtime's own load signal)."""

    requests_waiting_per_replica: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="Requests waiting in the runtime's queue per replica (vLLM num_requests_waiting, llama.cpp "
        "requests_deferred, TEI queue size) above which a replica is added.",
    )
    cache_usage_percent: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="KV-cache use per replica, percent, above which a replica is added; only for runtimes "
        "that publish it (vLLM). Absent: the queue alone.",
    )


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


class DeviceSelectors(Wire):
    """The plan's devices as its claim selects them (issue 40): the first replica takes the devices planned,
    a further one any device of their shape on the class."""

    pinned: str = Field(
        description=(
            "CEL admitting exactly the planned devices: by uuid, or, for a partition the driver publishes "
            "without one, by its parent's uuid and its profile."
        ),
        max_length=8192,
    )
    alike: str = Field(
        description=(
            "CEL admitting any device of the planned devices' shape on the class: product, memory, type, "
            "profile and whether claims share it."
        ),
        max_length=8192,
    )


class Placement(Wire):
    """Where an order runs. Deliberately lenient: the controller judges values, not the schema."""

    device_class_name: str | None = Field(default=None, description="DRA DeviceClass.")
    driver: str | None = Field(default=None, description="DRA driver of the device(s).")
    pool: str | None = Field(default=None, description="DRA pool of the device(s).")
    devices: list[str] | None = Field(default=None, description="Device names in the pool.", max_length=64)
    device_uuids: list[str] | None = Field(
        default=None,
        description="uuid attributes of the devices (none when a device is published without one).",
        max_length=64,
    )
    device_selectors: DeviceSelectors | None = Field(
        default=None,
        description=(
            "How the claim selects devices: the planned ones first, else any of their shape (a further "
            "replica, or a replica made again); absent in plans made before, which pin by uuid."
        ),
    )
    node_name: str | None = Field(default=None, description="Node of the devices.")
    accelerator_product_name: str | None = Field(default=None, description="Product name.")
    accelerator_memory_gi_b: float | None = Field(
        default=None, alias="acceleratorMemoryGiB", description="Memory of one device, GiB."
    )
    accelerator_compute_capability: str | None = Field(
        default=None, description="CUDA compute capability of the device(s), e.g. 8.9; recipes choose by it."
    )
    placement_mode: PlacementMode = Field(description="Shared, WholeDevice or MultiDevice.")
    sharing_mode: SharingMode = Field(default=SharingMode.NONE, description="Sharing mode.")
    share_percent: int | None = Field(default=None, description="Percent of one device.")
    device_count: int = Field(default=1, description="Devices per replica.")
    memory_gi_b: float | None = Field(
        default=None, alias="memoryGiB", description="Accelerator memory requested per device, GiB."
    )
    capacity_requests: dict[str, str] | None = Field(
        default=None,
        description=(
            "What the claim asks of each device's consumable capacity (shares, memory), as quantities the "
            "device's request policy takes as asked; computed by the planner from the ResourceSlice."
        ),
        max_length=16,
    )


def claim_capacity_requests(placement: Placement) -> dict[str, str] | None:
    """What one device's claim asks of its consumable capacity for this placement (None: nothing).

    The planner's exact figures when the plan carries them (a share, or whole shareable cards under tensor
    parallel); else, for a shared placement, the share and the memory rounded up to whole Mi, as plans made
    before the planner computed them were claimed (some drivers default an unrequested memory to the whole
    device).
    """
    if placement.sharing_mode == SharingMode.PARTITION:
        return None
    if placement.capacity_requests:
        return dict(placement.capacity_requests)
    if placement.placement_mode != PlacementMode.SHARED:
        return None
    requests = {"shares": str(placement.share_percent)}
    if placement.memory_gi_b is not None:
        requests["memory"] = f"{math.ceil(placement.memory_gi_b * 1024)}Mi"
    return requests


class Estimates(Wire):
    """Resource estimates that come with a plan."""

    required_memory_gi_b: float = Field(
        alias="requiredMemoryGiB", description="Accelerator memory the model needs, GiB."
    )
    weights_gi_b: float = Field(alias="weightsGiB", description="Weights, GiB.")
    kv_cache_gi_b: float = Field(alias="kvCacheGiB", description="KV cache, GiB.")
    overhead_gi_b: float = Field(alias="overheadGiB", description="Runtime overhead, GiB.")
    context_length: int = Field(description="Context length the KV cache was sized for.")
    kv_bytes_per_token: int | None = Field(
        default=None, description="KV-cache bytes one token takes on each device."
    )
    kv_cache_bytes: int | None = Field(
        default=None,
        description="KV-cache bytes per device the runtime is launched with (vLLM --kv-cache-memory-bytes; "
        "llama.cpp: the KV of -c).",
    )
    margin_gi_b: float | None = Field(
        default=None,
        alias="marginGiB",
        description="Memory per device the launch leaves beyond the weights, the runtime's own need and the KV "
        "cache, GiB.",
    )
    cpu: str = Field(description="CPU request.")
    memory: str = Field(description="Memory request.")
    model_volume: str = Field(description="Model volume size.")
    explanation: str = Field(default="", description="The arithmetic, for humans.")


class Port(Wire):
    """A container port."""

    name: str = Field(description="Port name.")
    container_port: int = Field(description="Port number.")


class LoadMetrics(Wire):
    """The metrics a runtime publishes for its own load, and how they are scraped."""

    requests_waiting: str = Field(description="Gauge of requests waiting for a free slot in the batch.")
    cache_usage: str | None = Field(
        default=None, description="Gauge of KV-cache use, a fraction 0..1; absent when the runtime has none."
    )
    token_guarded: bool = Field(
        default=False,
        description="Whether the metrics path asks for the endpoint's API key (a bearer token).",
    )


class CompiledRuntime(Wire):
    """A recipe compiled against a placement: the exact container to run."""

    model_config = ConfigDict(extra="allow")

    recipe: str = Field(description="Recipe name.")
    image: str = Field(description="Container image.")
    command: list[str] = Field(default_factory=list, description="Entrypoint.", max_length=16)
    args: list[str] = Field(default_factory=list, description="Arguments.", max_length=256)
    env: dict[str, str] = Field(default_factory=dict, description="Plain environment variables.")
    ports: list[Port] = Field(default_factory=list, description="Ports.", max_length=8)
    health_path: str = Field(default="/health", description="HTTP path of the readiness probe.")
    served_name: str | None = Field(
        default=None, description="The model name the runtime serves, which clients (and the probe) send."
    )
    tool_calling_supported: bool = Field(default=False, description="Tool-call flags present.")
    tool_call_parser: str | None = Field(
        default=None, description="The tool-call parser the args enable, when the runtime names one."
    )
    reasoning_parser: str | None = Field(
        default=None, description="The reasoning parser the args enable (vLLM --reasoning-parser)."
    )
    kv_cache_bytes: int | None = Field(
        default=None,
        description="KV-cache bytes per device the runtime is launched with (vLLM --kv-cache-memory-bytes; "
        "llama.cpp: the KV of -c).",
    )
    margin_gi_b: float | None = Field(
        default=None,
        alias="marginGiB",
        description="Memory per device the launch leaves beyond the weights, the runtime's own need and the KV "
        "cache, GiB.",
    )
    content_hash: str = Field(default="", description="Hash of what rolls the workload.")


class LaunchPlanSpec(Wire):
    """The placement and compiled runtime of one order."""

    model_config = ConfigDict(extra="forbid")

    placement: Placement = Field(description="Where the order runs.")
    estimates: Estimates | None = Field(default=None, description="Resource estimates.")
    runtime: CompiledRuntime | None = Field(default=None, description="Compiled recipe.")
    inputs_hash: str | None = Field(
        default=None, description="Hash of the order and model facts the plan was computed from."
    )
    model_commit: str | None = Field(
        default=None, description="The model's commit the plan was sized for; the workload downloads it."
    )
    model_repo: str | None = Field(
        default=None,
        description="The Hugging Face repository the workload downloads a catalog model from (the catalog "
        "object's source); absent: the order's own Hugging Face reference, or nothing to download.",
        max_length=253,
    )
    model_files: list[str] | None = Field(
        default=None,
        description="The files of the model repository the workload downloads (a GGUF repository: the "
        "variant the runtime loads); absent: the whole repository.",
        max_length=256,
    )
    planned_at: datetime | None = Field(default=None, description="When the plan was computed.")


class LaunchPlanStatus(Wire):
    """Whether the order runs on this plan; the controller writes it after each pass of the order."""

    observed_generation: int | None = Field(
        default=None, description="The LaunchPlan's .metadata.generation the controller last judged."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="InForce: whether the order runs on this plan, and why not.",
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class LaunchPlan(Wire):
    """The launch configuration of one order, owned by it."""

    KIND: ClassVar[str] = "LaunchPlan"
    PLURAL: ClassVar[str] = "launchplans"

    api_version: str = Field(default=API_VERSION, description="API version.")
    kind: str = Field(default="LaunchPlan", description="Kind.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: LaunchPlanSpec = Field(description="The plan.")
    status: LaunchPlanStatus | None = Field(default=None, description="Whether the plan is in force.")


def parse(obj: dict[str, Any]) -> InferenceService | InferenceServiceClass | LaunchPlan:
    """Parse a wire object of one of our kinds."""
    kinds: dict[str, type[InferenceService | InferenceServiceClass | LaunchPlan]] = {
        "InferenceService": InferenceService,
        "InferenceServiceClass": InferenceServiceClass,
        "LaunchPlan": LaunchPlan,
    }
    return kinds[obj["kind"]].model_validate(obj)
