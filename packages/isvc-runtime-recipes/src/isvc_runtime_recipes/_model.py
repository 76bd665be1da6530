"""The recipe format: what a runtime serves, on which hardware, and how its command line is built."""

from __future__ import annotations

import re
import string
from typing import Annotated

from isvc_api import EndpointType, LoadMetrics, ModelFormat, PlacementMode, Quantization, SharingMode, Wire
from pydantic import Field, StringConstraints, field_validator, model_validator

__all__ = [
    "PLACEHOLDERS",
    "AcceleratorConstraints",
    "AcceleratorFacts",
    "MemoryPolicy",
    "PlacementConstraints",
    "Reasoning",
    "Recipe",
    "RecipePorts",
    "RuntimeFlags",
    "Serves",
    "ToolCalling",
    "ToolParserRule",
    "parse_compute_capability",
    "placeholders",
]

# Values a recipe's argument templates may name; compile() fills each one, or None to drop the group.
PLACEHOLDERS = frozenset(
    {
        "modelPath",  # the weights on the model volume (a file for GGUF, a directory otherwise)
        "servedName",  # the model name clients send: the order's model
        "httpPort",
        "metricsPort",
        "tensorParallelSize",  # devices of the placement
        "gpuMemoryUtilization",  # fraction of the card the runtime may claim
        "maxContextLength",  # tokens that fit the memory left after the weights
        "quantization",  # the runtime's value for the model's quantization; None when native
        "toolCallParser",  # the parser chosen for the model; only in toolCalling.args
        "reasoningParser",  # the reasoning parser chosen for the model; only in reasoning.args
        "maxNumSeqs",  # requests run at once (vLLM --max-num-seqs, llama.cpp -np): what the KV budget holds
        "maxNumBatchedTokens",  # vLLM --max-num-batched-tokens of that setting
        "enforceEager",  # "" (the group's flag alone) when that setting captures no graphs, else dropped
        "kvCacheMemoryBytes",  # vLLM --kv-cache-memory-bytes: the KV budget in bytes the memory model gives
        "kvCacheTokens",  # llama.cpp -c: the cells of its KV cache, a slot of maxContextLength per request
    }
)

_CC = re.compile(r"^\d+\.\d+$")
ComputeCapability = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")]
Token = Annotated[str, StringConstraints(min_length=1)]


def parse_compute_capability(value: str) -> tuple[int, int]:
    """'8.6' -> (8, 6), so that '10.0' sorts above '9.0'."""
    if not _CC.match(value):
        raise ValueError(f"compute capability {value!r} is not of the form MAJOR.MINOR")
    major, minor = value.split(".")
    return int(major), int(minor)


class AcceleratorFacts(Wire):
    """What is known of the card a plan landed on, beyond what the Placement says."""

    product_name: str | None = Field(default=None, description="Product, e.g. NVIDIA A100-SXM4-80GB.")
    memory_gi_b: float | None = Field(
        default=None, alias="memoryGiB", description="Memory of one device, GiB."
    )
    compute_capability: ComputeCapability | None = Field(
        default=None, description="CUDA compute capability, e.g. 8.0."
    )


class Serves(Wire):
    """Which models a recipe serves; a list left out admits every value."""

    endpoint_types: list[EndpointType] = Field(min_length=1, description="API contracts served.")
    formats: list[ModelFormat] = Field(min_length=1, description="Weight formats loaded.")
    quantizations: list[Quantization] = Field(min_length=1, description="Quantizations loaded.")
    architectures: list[Token] | None = Field(
        default=None, description="Glob patterns over config.json architectures, e.g. *ForCausalLM."
    )
    families: list[Token] | None = Field(
        default=None, description="config.json model_type values, e.g. llama, qwen2."
    )


class AcceleratorConstraints(Wire):
    """What a recipe asks of the card; every field left out admits every card."""

    products: list[Token] | None = Field(default=None, description="Glob patterns over product names.")
    min_memory_gi_b: float | None = Field(
        default=None, alias="minMemoryGiB", description="Least memory of one device, GiB.", gt=0
    )
    min_compute_capability: ComputeCapability | None = Field(
        default=None, description="Lowest CUDA compute capability."
    )
    compute_capabilities: list[ComputeCapability] | None = Field(
        default=None, description="Exact compute capabilities, for runtimes built per capability."
    )


class PlacementConstraints(Wire):
    """Which placements a recipe can run in."""

    modes: list[PlacementMode] = Field(min_length=1, description="Placement modes.")
    sharing_modes: list[SharingMode] = Field(min_length=1, description="Sharing modes.")
    max_devices: int = Field(default=1, ge=1, le=64, description="Most devices of one replica.")


class RecipePorts(Wire):
    """Container ports; metrics may share the http port."""

    http: int = Field(ge=1, le=65535, description="Inference API port.")
    metrics: int = Field(ge=1, le=65535, description="Prometheus metrics port.")


class MemoryPolicy(Wire):
    """How a recipe claims accelerator memory."""

    margin: float = Field(
        default=0.05,
        ge=0,
        lt=0.5,
        description="Fraction of the card left unclaimed, so co-placed runtimes never oversubscribe it.",
    )
    kv_bytes_per_element: int = Field(
        default=2, ge=1, le=4, description="Bytes of one KV-cache element (2 for fp16/bf16)."
    )
    context_granularity: int = Field(default=256, ge=1, description="Context length is a multiple.")
    min_context_length: int = Field(
        default=256, ge=1, description="Shortest context worth starting the runtime for."
    )


class ToolParserRule(Wire):
    """Which parser suits which models; every given field must match."""

    parser: Token = Field(
        description="The runtime's parser name, filled into {toolCallParser} or {reasoningParser}."
    )
    families: list[Token] | None = Field(default=None, description="config.json model_type values.")
    architectures: list[Token] | None = Field(default=None, description="Glob patterns.")
    name_pattern: str | None = Field(default=None, description="Regular expression over the model name.")
    mistral_format: bool | None = Field(
        default=None,
        description="Match only a repository that does (true) or does not (false) hold Mistral's own "
        "format (params.json, consolidated weights); unknown never matches a stated value.",
    )
    args: list[list[Token]] = Field(
        default_factory=list,
        description="Argument groups this parser needs besides the section's own (e.g. vLLM's mistral "
        "parser: --tokenizer-mode, --config-format and --load-format mistral).",
    )

    @field_validator("name_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value


class ToolCalling(Wire):
    """The flags that enable tool calling, added only for a model whose family has a known parser."""

    args: list[list[Token]] = Field(min_length=1, description="Argument groups enabling tool calls.")
    parsers: list[ToolParserRule] = Field(min_length=1, description="First matching rule wins.")


class Reasoning(Wire):
    """The flags that separate a reasoning model's thinking from its answer, for models with a parser."""

    args: list[list[Token]] = Field(min_length=1, description="Argument groups enabling the parser.")
    parsers: list[ToolParserRule] = Field(min_length=1, description="First matching rule wins.")


class Recipe(Wire):
    """One way to run models: a runtime, its image, what it serves and its command-line template."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
    runtime: Token = Field(description="Runtime whose accepted-flags file checks the arguments.")
    priority: int = Field(default=100, description="Lower is tried first; ties go by name.")
    disabled: bool = Field(default=False, description="An override may switch a shipped recipe off.")
    description: str = Field(default="", description="For humans.")
    image: Token = Field(description="Container image, pinned to a version.")
    image_by_compute_capability: dict[ComputeCapability, Token] | None = Field(
        default=None, description="Image per compute capability; image is used when it is unknown."
    )
    command: list[Token] = Field(min_length=1, max_length=16, description="Entrypoint.")
    serves: Serves
    accelerator: AcceleratorConstraints = Field(default_factory=AcceleratorConstraints)
    placement: PlacementConstraints
    ports: RecipePorts
    health_path: str = Field(default="/health", pattern=r"^/")
    metrics_path: str = Field(default="/metrics", pattern=r"^/")
    api_key_env: Token = Field(description="Environment variable the runtime reads its API key from.")
    load_metrics: LoadMetrics | None = Field(
        default=None,
        description="The runtime's own load gauges on its metrics port and path, which the autoscaler follows; "
        "absent: the autoscaler follows CPU.",
    )
    model_file: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="Marks a runtime that loads one file (GGUF): the file the model source chose (a "
        "Hugging Face GGUF repository's variant), else this name under the model directory.",
    )
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy)
    quantization_values: dict[Quantization, Token] = Field(
        default_factory=dict, description="The runtime's value per quantization; absent: no flag."
    )
    env: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] = Field(
        default_factory=dict, description="Plain environment variables."
    )
    args: list[list[Token]] = Field(min_length=1, description="Argument groups, with {placeholders}.")
    tool_calling: ToolCalling | None = Field(default=None, description="Flags enabling tool calls.")
    reasoning: Reasoning | None = Field(default=None, description="Flags enabling a reasoning parser.")

    @model_validator(mode="after")
    def _templates(self) -> Recipe:
        """Every placeholder is one compile() fills, and each parser only in its own section."""
        parsers = {"toolCallParser", "reasoningParser"}
        sections: list[tuple[list[list[str]], set[str]]] = [(self.args, parsers)]
        for section, own in ((self.tool_calling, "toolCallParser"), (self.reasoning, "reasoningParser")):
            if section is not None:
                sections.append((section.args, parsers - {own}))
                sections += [(rule.args, parsers - {own}) for rule in section.parsers]
        for groups, refused in sections:
            for group in groups:
                for name in placeholders(group):
                    if name not in PLACEHOLDERS or name in refused:
                        raise ValueError(f"recipe {self.name}: unknown placeholder {{{name}}} in {group}")
        for env_name in self.env:
            if env_name == self.api_key_env:
                raise ValueError(f"recipe {self.name}: {env_name} comes from the auth Secret, not env")
        return self


def placeholders(group: list[str]) -> list[str]:
    """Names of the {placeholders} in one argument group."""
    names: list[str] = []
    for token in group:
        for _, field, _, _ in string.Formatter().parse(token):
            if field is not None:
                names.append(field)
    return names


class RuntimeFlags(Wire):
    """The flags one runtime accepts, in the version the recipes pin."""

    runtime: Token
    version: Token
    positional_model: bool = Field(default=False, description="Model is a positional argument.")
    flags: list[Annotated[str, StringConstraints(pattern=r"^--?[A-Za-z0-9][-A-Za-z0-9_]*$")]] = Field(
        min_length=1
    )
