"""No launch states a context its KV budget cannot hold, whatever the recipe (issue 45, point 5).

A catalog model without KV geometry was taken to need a tenth of its weights for its KV cache and launched
with `--max-model-len 32768` on a budget of about 1 GB: vLLM refuses to start so ("The model's max seq len
... is larger than the maximum number of tokens that can be stored in KV cache"). Each recipe that starts a
runtime with a context is compiled alone over every model and card of the matrix, and over models whose
geometry is unknown: every launch's context fits the KV budget it states, and none is made on a guess.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    Estimates,
    ModelFacts,
    Placement,
    Reason,
    Refusal,
    kv_layout,
)
from isvc_runtime_recipes import AcceleratorFacts, RecipeBook, load_recipes

BOOK = load_recipes()
CONTEXT_FLAGS = {"vllm": "--max-model-len", "llamacpp": "-c"}
# a context flag: vLLM's --max-model-len, llama.cpp's -c (every slot's context together since issue 42)
SIZED = sorted(
    r.name
    for r in BOOK
    if any(p in a for p in ("{maxContextLength}", "{kvCacheTokens}") for group in r.args for a in group)
)
VLLM_BLOCK = 16  # tokens of a KV block (vLLM's default block size); one block is the null block


def _without_geometry(facts: ModelFacts) -> ModelFacts:
    return facts.model_copy(
        update={"num_layers": None, "num_kv_heads": None, "head_dim": None, "num_attention_heads": None}
    )


def _context(result: CompiledRuntime) -> int:
    flag = CONTEXT_FLAGS[result.runtime]
    return int(result.args[result.args.index(flag) + 1])


def _kv_budget(result: CompiledRuntime) -> int:
    """The KV bytes the launch states: vLLM's --kv-cache-memory-bytes, llama.cpp's sizing of its -c."""
    if "--kv-cache-memory-bytes" in result.args:
        return int(result.args[result.args.index("--kv-cache-memory-bytes") + 1])
    assert result.kv_cache_bytes is not None, result.args
    return result.kv_cache_bytes


def test_every_recipe_that_sizes_a_context_is_checked() -> None:
    assert {"vllm-chat", "vllm-chat-turing", "vllm-embed", "llamacpp-chat"} <= set(SIZED)


@pytest.mark.parametrize("recipe", SIZED)
def test_no_launch_states_a_context_its_kv_budget_cannot_hold(
    recipe: str,
    matrix_model: str,
    matrix_hardware: str,
    facts: Callable[[str], ModelFacts],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
    estimates: Callable[..., Estimates],
) -> None:
    alone = RecipeBook([r for r in BOOK if r.name == recipe], BOOK.flags)
    placement, card = hardware(matrix_hardware)
    for shape in (facts(matrix_model), _without_geometry(facts(matrix_model))):
        result = alone.compile(shape, None, placement, estimates(shape), shape.name, card)
        if isinstance(result, Refusal):
            continue
        layout = kv_layout(shape, placement.device_count)
        assert layout is not None, f"{recipe} launched {shape.name} without its KV geometry"
        context = _context(result)
        if not layout.per_token:
            continue  # an encoder: no KV cache to hold
        if result.runtime == "vllm":  # whole blocks, and the null block beside them
            needed = (math.ceil(context / VLLM_BLOCK) + 1) * VLLM_BLOCK * layout.per_token
        else:
            needed = context * layout.per_token
        assert needed <= _kv_budget(result), (shape.name, context, layout.per_token)


def test_a_chat_model_without_kv_geometry_is_refused_as_an_incomplete_memory_profile(
    facts: Callable[[str], ModelFacts],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
    estimates: Callable[..., Estimates],
) -> None:
    model = facts("catalog-chat-without-geometry")
    asked = BOOK.requirements(model, EndpointType.CHAT)
    assert isinstance(asked, Refusal) and asked.reason == Reason.NO_COMPATIBLE_PLACEMENT
    assert "memory profile" in asked.message and "KV cache geometry is unknown" in asked.message
    placement, card = hardware("h100-80gb-x2")
    assert BOOK.compile(model, EndpointType.CHAT, placement, estimates(model), "m", card) == asked


def test_an_encoder_needs_no_kv_geometry_and_a_decoder_embedding_model_does(
    facts: Callable[[str], ModelFacts],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
    estimates: Callable[..., Estimates],
) -> None:
    placement, card = hardware("l4-24gb-whole")
    encoder = _without_geometry(facts("bge-m3"))  # XLM-RoBERTa keeps no KV cache, whatever its size
    result = BOOK.compile(encoder, EndpointType.EMBEDDINGS, placement, estimates(encoder), "m", card)
    assert isinstance(result, CompiledRuntime), result
    decoder = _without_geometry(facts("qwen3-embedding-0.6b"))
    refused = BOOK.requirements(decoder, EndpointType.EMBEDDINGS)
    assert isinstance(refused, Refusal) and refused.reason == Reason.NO_COMPATIBLE_PLACEMENT
