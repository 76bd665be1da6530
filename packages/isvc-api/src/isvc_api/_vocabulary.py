"""The words every kind of the API shares: its group and labels, the enumerations, object metadata."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict, Field

from isvc_api._base import Wire

__all__ = [
    "API_VERSION",
    "GROUP",
    "LABEL_MANAGED_BY",
    "LABEL_ORDER",
    "LABEL_PRIORITY",
    "MANAGER",
    "MIN_REPLICAS_ZERO",
    "VERSION",
    "Authentication",
    "CatalogKind",
    "EndpointType",
    "ExposureType",
    "MetricsPath",
    "ModelFormat",
    "ModelSource",
    "ObjectMeta",
    "PlacementMode",
    "Quantization",
    "ScalingMetric",
    "ScalingSignal",
    "SharingMode",
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

DNS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


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
