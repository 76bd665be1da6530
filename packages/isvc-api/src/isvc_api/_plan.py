"""LaunchPlan: where an order runs and how its runtime is launched, as the platform decided."""

from __future__ import annotations

import math
from datetime import datetime
from typing import ClassVar

from pydantic import ConfigDict, Field

from isvc_api._base import Wire
from isvc_api._conditions import Condition
from isvc_api._vocabulary import API_VERSION, ObjectMeta, PlacementMode, SharingMode

__all__ = [
    "CompiledRuntime",
    "DeviceSelectors",
    "Estimates",
    "LaunchPlan",
    "LaunchPlanSpec",
    "LaunchPlanStatus",
    "LoadMetrics",
    "Placement",
    "Port",
    "claim_capacity_requests",
]


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


class LaunchLoad(Wire):
    """What a launch holds and serves: its KV budget, the margin it leaves and the load it was sized for (one
    definition for the plan's estimates, its compiled runtime and the order's `status.resolved`)."""

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
    kv_cache_tokens: int | None = Field(
        default=None,
        description="Tokens of KV cache per device the launch holds (llama.cpp: -c; vLLM: the budget at the bytes "
        "of one token).",
    )
    concurrent_requests: int | None = Field(
        default=None,
        description="Requests of requestTokens the launch serves at once, none waiting for KV cache (vLLM "
        "--max-num-seqs, llama.cpp -np).",
    )
    request_tokens: int | None = Field(
        default=None, description="The typical request, in tokens, the launch was sized to serve at once."
    )


class Estimates(LaunchLoad):
    """Resource estimates that come with a plan."""

    required_memory_gi_b: float = Field(
        alias="requiredMemoryGiB", description="Accelerator memory the model needs, GiB."
    )
    weights_gi_b: float = Field(alias="weightsGiB", description="Weights, GiB.")
    kv_cache_gi_b: float = Field(alias="kvCacheGiB", description="KV cache, GiB.")
    overhead_gi_b: float = Field(alias="overheadGiB", description="Runtime overhead, GiB.")
    context_length: int = Field(
        description="The longest request the launch accepts, in tokens: vLLM --max-model-len, llama.cpp -c / -np."
    )
    kv_bytes_per_token: int | None = Field(
        default=None, description="KV-cache bytes one token takes on each device."
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


class CompiledRuntime(LaunchLoad):
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
