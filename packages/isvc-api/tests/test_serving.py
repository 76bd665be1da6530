"""Sized to serve (issue 42): every launch of the validation table holds its serving target, by the runtime's own
accounting, at the share the planner sizes and on the whole card.

The checks here do not use the memory model's own KV arithmetic: vLLM's is its block pool (V33
v1/core/kv_cache_utils.py: the budget cut into blocks of 16 tokens of one layer, one null block per layer
reserved, a request takes ceil(tokens / 16) blocks of each full-attention layer and of each sliding-window
layer at most the window's, kv_cache_interface.py:901-955), llama.cpp's its slots (n_ctx_seq = n_ctx /
n_seq_max when the cache is not unified: tools/server/README.md `-np`, llama.cpp PR #17767).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from isvc_api import (
    SERVING_DEFAULTS,
    EndpointType,
    Fit,
    Load,
    MemoryRuntime,
    ServingTarget,
    fit_launch,
    need_per_device,
    serving_load,
    visible_bytes,
)
from pydantic import ValidationError

_spec = importlib.util.spec_from_file_location("memory_table", Path(__file__).parent / "test_memory.py")
assert _spec is not None and _spec.loader is not None
table = importlib.util.module_from_spec(_spec)
sys.modules["memory_table"] = table
_spec.loader.exec_module(table)

CHAT = SERVING_DEFAULTS[EndpointType.CHAT]
BLOCK = 16


def planned(model: Any, published: int, runtime: MemoryRuntime, load: Load) -> tuple[int, int] | None:
    """The share and tensor-parallel size the planner sizes for `load` (its need, the margin and rounding)."""
    for tp in (1, 2, 4, 8):
        need = need_per_device(model, runtime, tp, load=load)
        assert need is not None
        share = -(-need[0] * 100 // visible_bytes(published)) + 2
        if share <= 100:
            return share, tp
        if runtime != MemoryRuntime.VLLM:
            return None
    return None


def vllm_blocks(fit: Fit, facts: dict[str, Any]) -> tuple[int, int]:
    """vLLM's pool: blocks of 16 tokens of one layer the budget makes, and the layers (null block per layer)."""
    layers = facts["num_layers"]
    per_layer_token = fit.kv.per_token // layers
    return fit.kv_bytes // (BLOCK * per_layer_token), layers


def vllm_request_blocks(fit: Fit, facts: dict[str, Any], tokens: int) -> int:
    """Blocks of one layer a request of `tokens` takes over all layers, windowed layers capped."""
    layers = facts["num_layers"]
    windowed = fit.kv.window_layers // (fit.kv.per_token // layers) if fit.kv.window_layers else 0
    full = math.ceil(tokens / BLOCK) * (layers - windowed)
    batched = fit.batch.max_num_batched_tokens if fit.batch else 0
    window = math.ceil(min(tokens, fit.kv.window - 1 + batched) / BLOCK) * windowed if windowed else 0
    return full + window


def check_vllm_serves(fit: Fit, facts: dict[str, Any], load: Load) -> None:
    """The budget holds the load's requests at once at the typical length and its longest request, and
    --max-num-seqs asks no more sequences than it holds."""
    blocks, layers = vllm_blocks(fit, facts)
    usable = blocks - layers  # one null block of every layer
    wanted = load.within(facts.get("context_length"))
    held = usable // vllm_request_blocks(fit, facts, wanted.typical)
    assert held >= wanted.requests, fit.words()
    assert fit.batch is not None and fit.batch.max_num_seqs <= held, fit.words()
    assert fit.batch.max_num_seqs >= wanted.requests, fit.words()
    assert fit.context >= wanted.longest, fit.words()
    assert vllm_request_blocks(fit, facts, fit.context) <= usable, fit.words()


@pytest.mark.parametrize("card", sorted(table.CARDS))
@pytest.mark.parametrize("key", sorted(k for k, m in table.MODELS.items() if m["runtime"] == "vllm"))
def test_every_vllm_launch_of_the_table_serves_the_chat_target(key: str, card: str) -> None:
    """At the share the planner sizes for the chat default (16 requests of 2,048 tokens, the longest 8,192) and
    on the whole card: held by vLLM's own block accounting, and the launch still starts by published figures."""
    row, model = table.MODELS[key], table.facts(key)
    published = table.quantity(table.CARDS[card]["published"])
    sized = planned(model, published, MemoryRuntime.VLLM, CHAT)
    if sized is None:
        pytest.skip(f"{key} does not fit 8 × {card}")
    share, tp = sized
    for percent in sorted({share, 100}):
        fit = fit_launch(model, MemoryRuntime.VLLM, published, percent, tp, load=CHAT)
        assert isinstance(fit, Fit), f"{percent}% × {tp}: {fit}"
        check_vllm_serves(fit, row["facts"], CHAT)
        table._starts(row, fit, table.CARDS[card], percent)


@pytest.mark.parametrize("card", sorted(table.CARDS))
@pytest.mark.parametrize("key", sorted(k for k, m in table.MODELS.items() if m["runtime"] == "llamacpp"))
def test_every_llamacpp_launch_of_the_table_has_a_slot_for_each_request(key: str, card: str) -> None:
    """-np is the target's requests, each slot (-c / -np) holds the longest request, and what llama.cpp would
    allocate by published figures (the GGUF, the f16 KV of -c cells, the compute buffer, the CUDA context)
    fits the share."""
    row, model = table.MODELS[key], table.facts(key)
    published = table.quantity(table.CARDS[card]["published"])
    sized = planned(model, published, MemoryRuntime.LLAMACPP, CHAT)
    if sized is None:
        pytest.skip(f"{key} does not fit one {card}")
    seen = visible_bytes(published)
    wanted = CHAT.within(model.context_length)
    for percent in sorted({sized[0], 100}):
        fit = fit_launch(model, MemoryRuntime.LLAMACPP, published, percent, load=CHAT)
        assert isinstance(fit, Fit), f"{percent}%: {fit}"
        assert fit.slots == wanted.requests and fit.context >= wanted.longest, fit.words()
        assert fit.kv_tokens == fit.slots * fit.context
        f = row["facts"]
        kv = 2 * f["num_layers"] * f["num_kv_heads"] * f["head_dim"] * 2 * fit.kv_tokens
        used = table.truth_bytes(row) + kv + table._published_compute(f["num_attention_heads"], fit.context)
        assert used + table.CUDA_CONTEXT_BYTES <= seen * percent / 100, fit.words()


def test_issue_example_qwen_7b_on_an_h100_share_carries_16_requests_not_one_context() -> None:
    """Issue 42: the planner gave Qwen2.5-7B 23-24 % of an H100, a KV cache of about 4,800 tokens behind
    --max-num-seqs 256 (two requests of 2,048). Sized for the chat default, its share holds 16 at once."""
    model = table.facts("qwen2.5-7b-instruct")
    published = table.quantity("81559Mi")
    old = fit_launch(model, MemoryRuntime.VLLM, published, 24)
    assert isinstance(old, Fit) and old.kv_tokens < 3 * 2048 and old.sequences == 256
    share, tp = planned(model, published, MemoryRuntime.VLLM, CHAT) or (0, 0)
    fit = fit_launch(model, MemoryRuntime.VLLM, published, share, tp, load=CHAT)
    assert isinstance(fit, Fit) and fit.kv_tokens >= 16 * 2048 and fit.sequences == 16, fit.words()
    assert fit.serves().startswith("16 requests of 2,048 tokens at once")


def test_a_larger_target_needs_more_memory_and_a_share_too_small_names_it() -> None:
    model = table.facts("llama-3.1-8b-instruct")
    published = table.quantity("81559Mi")
    bigger = Load(requests=64, typical=2048, longest=8192)
    small, large = (need_per_device(model, MemoryRuntime.VLLM, load=load) for load in (CHAT, bigger))
    assert small is not None and large is not None and large[0] > small[0] + 6 * 2**30
    share, _ = planned(model, published, MemoryRuntime.VLLM, CHAT) or (0, 0)
    refused = fit_launch(model, MemoryRuntime.VLLM, published, share, load=bigger)
    assert isinstance(refused, str) and "requests of 2,048 tokens at once, fewer than 64" in refused


def test_max_num_seqs_follows_what_the_budget_holds_never_the_ladder_alone() -> None:
    """A share holding 20 requests of 2,048 tokens runs 20, not the 64 its batch setting was tried at."""
    model = table.facts("llama-3.1-8b-instruct")
    published = table.quantity("81559Mi")
    for percent in range(20, 60):
        fit = fit_launch(model, MemoryRuntime.VLLM, published, percent, load=CHAT)
        if isinstance(fit, Fit):
            assert fit.batch is not None
            held = (fit.kv_bytes - 2 * BLOCK * fit.kv.per_token) // (2048 * fit.kv.per_token)
            assert fit.batch.max_num_seqs == min(held, 256) >= 16


def test_the_defaults_by_endpoint_type_and_what_a_class_leaves_out() -> None:
    assert Load(16, 2048, 8192) == CHAT and CHAT.tokens == 32_768
    assert serving_load(None, EndpointType.EMBEDDINGS) == Load(32, 512, 8192)
    assert serving_load(None, None) == CHAT
    assert serving_load(ServingTarget(concurrent_requests=4), EndpointType.CHAT) == Load(4, 2048, 8192)
    assert serving_load(ServingTarget(longest_request_tokens=1024), EndpointType.CHAT) == Load(16, 1024, 1024)
    assert serving_load(ServingTarget(typical_request_tokens=16384), None) == Load(16, 16384, 16384)
    assert Load(16, 2048, 8192).within(4096) == Load(16, 2048, 4096)


def test_a_typical_request_longer_than_the_longest_is_refused() -> None:
    with pytest.raises(ValidationError, match="must not exceed longestRequestTokens"):
        ServingTarget(typical_request_tokens=4096, longest_request_tokens=2048)
    with pytest.raises(ValidationError):
        ServingTarget(concurrent_requests=0)
