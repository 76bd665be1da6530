"""Facts about a model that the planner and the recipes need, gathered without downloading weights."""

from __future__ import annotations

from pydantic import Field

from isvc_api._base import Wire
from isvc_api._reasons import Reason
from isvc_api._vocabulary import (
    EndpointType,
    ModelFormat,
    ModelSource,
    PlacementMode,
    Quantization,
    SharingMode,
)

__all__ = ["ModelFacts", "Refusal", "RuntimeRequirements"]


class ModelFacts(Wire):
    """What a model source told about a model; None means the source did not say."""

    source: ModelSource = Field(description="Where the facts came from.")
    name: str = Field(description="Model name as served (the order's reference).")
    revision: str | None = Field(default=None, description="Source revision, when pinned.")
    commit: str | None = Field(
        default=None, description="The commit the source resolved the reference to (what is downloaded)."
    )
    ready: bool = Field(default=True, description="Whether the source says the model is ready.")
    format: ModelFormat | None = Field(default=None, description="Weight format.")
    architecture: str | None = Field(default=None, description="e.g. LlamaForCausalLM.")
    family: str | None = Field(default=None, description="config.json model_type, e.g. llama.")
    parameter_count: int | None = Field(default=None, description="Number of parameters.")
    dtype: str | None = Field(default=None, description="Native dtype, e.g. bfloat16.")
    quantization: Quantization = Field(default=Quantization.NONE, description="Quantization.")
    quantization_bits: int | None = Field(default=None, description="Bits per quantized weight.")
    context_length: int | None = Field(default=None, description="Maximum context length.")
    num_layers: int | None = Field(default=None, description="Transformer layers.")
    num_attention_heads: int | None = Field(default=None, description="Attention heads.")
    num_kv_heads: int | None = Field(default=None, description="Key/value heads (GQA).")
    head_dim: int | None = Field(default=None, description="Dimension of one head.")
    hidden_size: int | None = Field(default=None, description="Hidden size.")
    weight_bytes: int | None = Field(default=None, description="Total size of the weight files.")
    download_repo: str | None = Field(
        default=None,
        description="The Hugging Face repository (owner/name) the model's files are downloaded from when the "
        "order names it through a catalog object whose source is that repository; None otherwise.",
    )
    gguf_files: list[str] | None = Field(
        default=None,
        description="The GGUF files of the variant chosen in the repository, shards in order: a one-file "
        "runtime loads the first (it finds the other shards beside it), the download fetches only these; "
        "None when the source names no file.",
    )
    dtype_counts: dict[str, int] | None = Field(
        default=None,
        description="Elements per safetensors dtype (e.g. BF16, F8_E4M3, I32) over the weight files, as "
        "stored; the weights' bytes as loaded come from these.",
    )
    intermediate_size: int | None = Field(default=None, description="MLP intermediate size.")
    vocab_size: int | None = Field(default=None, description="Vocabulary size.")
    tie_word_embeddings: bool | None = Field(default=None, description="lm_head shares the embeddings.")
    num_experts: int | None = Field(default=None, description="Routed experts (mixture of experts).")
    sliding_window: int | None = Field(default=None, description="Sliding attention window, tokens.")
    sliding_window_layers: int | None = Field(
        default=None, description="Layers that attend within the sliding window (the rest attend fully)."
    )
    kv_lora_rank: int | None = Field(default=None, description="MLA latent rank (DeepSeek-V2/V3).")
    qk_rope_head_dim: int | None = Field(default=None, description="MLA rotary head dimension.")
    chat_template_tools: bool | None = Field(
        default=None, description="Whether the chat template renders tools; None when not read."
    )
    mistral_format: bool | None = Field(
        default=None,
        description="Whether the repository holds Mistral's own format (params.json and consolidated "
        "weights), which vLLM's mistral tool parser loads with --tokenizer-mode/--config-format/"
        "--load-format mistral; None when not read.",
    )
    endpoint_types: list[EndpointType] | None = Field(
        default=None,
        description="API contracts the model serves; None when the source carries no such facts.",
    )


class Refusal(Wire):
    """One reason from the closed set and a message that says whose fix it is and what to do."""

    reason: Reason = Field(description="The reason.")
    message: str = Field(description="One or two sentences: what happened and what to do.")


class RuntimeRequirements(Wire):
    """What the recipes able to serve a model ask of the hardware; the planner honours it."""

    recipes: list[str] = Field(default_factory=list, description="Candidate recipe names.")
    placement_modes: list[PlacementMode] = Field(
        default_factory=lambda: list(PlacementMode), description="Placement modes some recipe runs in."
    )
    sharing_modes: list[SharingMode] = Field(
        default_factory=lambda: list(SharingMode), description="Sharing modes some recipe runs in."
    )
    min_compute_capability: str | None = Field(
        default=None, description="Lowest CUDA compute capability, e.g. 8.0."
    )
    max_devices: int | None = Field(default=None, description="Most devices one replica may use.")
    runtimes: list[str] = Field(
        default_factory=list,
        description="Runtimes of the candidate recipes, first tried first (vllm, tei, llamacpp); the "
        "planner sizes memory for the first it knows.",
    )
    memory_margin_percent: int = Field(
        default=0,
        ge=0,
        le=50,
        description="Percent of each device the runtime leaves unclaimed (its CUDA context); "
        "the planner sizes shares and whole devices with it on top of the estimate.",
    )
