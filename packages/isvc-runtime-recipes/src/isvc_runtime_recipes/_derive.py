"""Parameters derived from the model and the plan: endpoint type, model path, memory, context length."""

from __future__ import annotations

import re
from decimal import ROUND_FLOOR, Decimal
from fnmatch import fnmatchcase

from isvc_api import GIB, KV_GEOMETRY_UNKNOWN, EndpointType, Estimates, ModelFacts, Placement, SharingMode

from isvc_runtime_recipes._model import AcceleratorFacts, MemoryPolicy, Recipe, ToolParserRule

__all__ = [
    "MODELS_ROOT",
    "device_memory_gib",
    "effective_endpoint_type",
    "kv_bytes_per_token",
    "max_context_length",
    "memory_utilization",
    "model_dir",
    "reasoning_parser",
    "tool_call_parser",
]

MODELS_ROOT = "/models"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def effective_endpoint_type(facts: ModelFacts, endpoint_type: EndpointType | None) -> EndpointType:
    """The contract to serve: the order's, else what the model is, Chat when nothing says otherwise."""
    if endpoint_type is not None:
        return endpoint_type
    if facts.endpoint_types:
        if EndpointType.CHAT in facts.endpoint_types:
            return EndpointType.CHAT
        return facts.endpoint_types[0]
    architecture = facts.architecture or ""
    if fnmatchcase(architecture, "*ForSequenceClassification"):
        return EndpointType.RERANK
    if architecture.endswith(("Model", "ForTextEncoding")):
        return EndpointType.EMBEDDINGS
    return EndpointType.CHAT


def model_dir(name: str) -> str:
    """Where the model's files live on the model volume: /models/<owner>/<name>, revision dropped."""
    base = name.split("@", 1)[0]
    parts = [_UNSAFE.sub("-", part) for part in base.split("/") if part not in ("", ".", "..")]
    return "/".join([MODELS_ROOT, *parts]) if parts else f"{MODELS_ROOT}/model"


def device_memory_gib(placement: Placement, accelerator: AcceleratorFacts | None) -> float | None:
    """Memory of the device the runtime sees: a partition when partitioned, the card otherwise."""
    card = accelerator.memory_gi_b if accelerator and accelerator.memory_gi_b else None
    card = card or placement.accelerator_memory_gi_b
    if placement.sharing_mode == SharingMode.PARTITION and placement.memory_gi_b:
        return placement.memory_gi_b
    return card


def memory_utilization(placement: Placement, policy: MemoryPolicy) -> Decimal:
    """Fraction of the visible device the runtime may claim: the share minus the margin, floored.

    With Shares the runtime sees the whole card, so it must stay within its share; a partition or a
    whole device is all its own. Co-placed shares summing to at most 100 thus never claim more than
    the card, and the margin covers what a CUDA context holds outside the runtime's accounting.
    """
    share = Decimal(100)
    if placement.sharing_mode == SharingMode.SHARES and placement.share_percent is not None:
        share = Decimal(placement.share_percent)
    fraction = share / 100 - Decimal(str(policy.margin))
    return fraction.quantize(Decimal("0.01"), rounding=ROUND_FLOOR)


def kv_bytes_per_token(facts: ModelFacts, policy: MemoryPolicy) -> int | None:
    """Bytes of KV cache one token takes (keys and values of every layer), or None when unknown."""
    if not facts.num_layers:
        return None
    kv_heads = facts.num_kv_heads or facts.num_attention_heads
    head_dim = facts.head_dim
    if head_dim is None and facts.hidden_size and facts.num_attention_heads:
        head_dim = facts.hidden_size // facts.num_attention_heads
    if not kv_heads or not head_dim:
        return None
    return 2 * facts.num_layers * kv_heads * head_dim * policy.kv_bytes_per_element


def max_context_length(
    facts: ModelFacts,
    placement: Placement,
    estimates: Estimates,
    policy: MemoryPolicy,
    device_gib: float | None,
    utilization: Decimal,
) -> tuple[int | None, str]:
    """The longest context that fits what the placement leaves after weights and overhead.

    Returns the length, or None with the reason it does not fit. Without the model's KV geometry no context
    is sized (a guessed one need not start); without the device's memory the planner's own sizing
    (estimates.context_length) stands.
    """
    cap = facts.context_length or estimates.context_length
    per_token = kv_bytes_per_token(facts, policy)
    if per_token is None:  # a guessed context need not start (issue 45: 32768 tokens on a 1 GB KV budget)
        return None, KV_GEOMETRY_UNKNOWN
    if device_gib is None:
        return min(cap, estimates.context_length), ""
    budget_gib = float(utilization) * device_gib * max(placement.device_count, 1)
    kv_gib = budget_gib - estimates.weights_gi_b - estimates.overhead_gi_b
    fits = int(kv_gib * GIB // per_token) if kv_gib > 0 else 0
    length = min(fits, cap)
    if length < min(policy.min_context_length, cap):
        return None, (
            f"{budget_gib:.1f} GiB claimable leaves {max(kv_gib, 0):.2f} GiB for the KV cache after "
            f"{estimates.weights_gi_b:.1f} GiB weights and {estimates.overhead_gi_b:.1f} GiB overhead: "
            f"{fits} tokens, fewer than {min(policy.min_context_length, cap)}"
        )
    if length >= policy.context_granularity:
        length -= length % policy.context_granularity
    return length, ""


def _matching(rules: list[ToolParserRule], facts: ModelFacts) -> ToolParserRule | None:
    family = (facts.family or "").lower()
    for rule in rules:
        if rule.families is not None and family not in {f.lower() for f in rule.families}:
            continue
        if rule.architectures is not None and not any(
            fnmatchcase(facts.architecture or "", pattern) for pattern in rule.architectures
        ):
            continue
        if rule.name_pattern is not None and not re.search(rule.name_pattern, facts.name):
            continue
        if rule.mistral_format is not None and facts.mistral_format is not rule.mistral_format:
            continue
        return rule
    return None


def tool_call_parser(recipe: Recipe, facts: ModelFacts) -> ToolParserRule | None:
    """The tool-call parser the recipe knows for this model, or None: then no tool-call flags.

    Only a model whose chat template renders tools takes tool calls (issue 10): a template that was
    not read (None) or renders none (False) gets no tool-call flags, whatever its family.
    """
    if recipe.tool_calling is None or facts.chat_template_tools is not True:
        return None
    return _matching(recipe.tool_calling.parsers, facts)


def reasoning_parser(recipe: Recipe, facts: ModelFacts) -> ToolParserRule | None:
    """The reasoning parser the recipe knows for this model, or None: then no reasoning flags."""
    if recipe.reasoning is None:
        return None
    return _matching(recipe.reasoning.parsers, facts)
