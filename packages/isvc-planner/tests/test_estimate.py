"""The memory formula checked against published figures."""

from __future__ import annotations

import pytest
from isvc_api import ModelFacts, Quantization
from isvc_planner import (
    memory_need,
)
from isvc_planner._estimate import kv_cache_bytes

GB = 1e9
GIB = 1 << 30


@pytest.mark.parametrize(
    ("name", "published_gb", "tolerance"),
    [
        # huggingface.co/blog/llama31, "Inference Memory Requirements": 8B FP16 16 GB, 70B FP8 70 GB.
        ("llama8b", 16.0, 0.02),
        ("llama70b_fp8", 70.0, 0.02),
        # Hugging Face file listing of Qwen/Qwen2.5-7B-Instruct: 4 safetensors shards, 15.23 GB.
        ("qwen7b", 15.23, 0.02),
        # BAAI/bge-m3 pytorch_model.bin (fp32): 2.27 GB.
        ("bge_m3", 2.27, 0.02),
        # Qwen/Qwen2.5-32B-Instruct-AWQ safetensors: about 19.3 GB; embeddings and lm_head stay 16-bit
        # in AWQ checkpoints, which a per-parameter formula does not see, hence the wider band.
        ("qwen32b_awq", 19.3, 0.15),
    ],
)
def test_weights_match_published_checkpoint_sizes(
    models: dict[str, ModelFacts], name: str, published_gb: float, tolerance: float
) -> None:
    need = memory_need(models[name])
    assert need is not None
    assert need.weights / GB == pytest.approx(published_gb, rel=tolerance)


@pytest.mark.parametrize(
    ("name", "tokens", "published_gib"),
    [
        # huggingface.co/blog/llama31 KV cache table (FP16): 8B 1.95 GB at 16k and 15.62 GB at 128k,
        # 70B 39.06 GB at 128k (computed for 16000/128000 tokens, divided by 1024**3).
        ("llama8b", 16000, 1.953125),
        ("llama8b", 128000, 15.625),
        ("llama70b_fp8", 128000, 39.0625),
        ("llama8b", 1024, 0.125),
    ],
)
def test_kv_cache_matches_the_published_table(
    models: dict[str, ModelFacts], name: str, tokens: int, published_gib: float
) -> None:
    amount, words = kv_cache_bytes(models[name], tokens)
    assert amount / GIB == pytest.approx(published_gib, abs=1e-6)
    assert f"{tokens} tokens" in words


def test_embedding_model_keeps_no_kv_cache(models: dict[str, ModelFacts]) -> None:
    need = memory_need(models["bge_m3"])
    assert need is not None
    assert need.kv_cache == 0
    assert need.required < 4 * GIB


def test_default_context_is_capped_by_the_model_and_explained(models: dict[str, ModelFacts]) -> None:
    need = memory_need(models["qwen7b"])
    assert need is not None
    assert need.context == 8192
    assert need.required == need.weights + need.kv_cache + need.overhead
    assert "2 × 28 layers × 4 KV heads × 128 head dim × 8192 tokens × 2 B" in need.explanation
    short = memory_need(models["qwen7b"].model_copy(update={"context_length": 2048}))
    assert short is not None and short.context == 2048 and short.kv_cache == need.kv_cache // 4


def test_quantization_shrinks_weights_in_proportion(models: dict[str, ModelFacts]) -> None:
    base = models["llama8b"]
    bf16 = memory_need(base)
    fp8 = memory_need(base.model_copy(update={"quantization": Quantization.FP8}))
    awq = memory_need(base.model_copy(update={"quantization": Quantization.AWQ}))
    assert bf16 and fp8 and awq
    assert fp8.weights * 2 == pytest.approx(bf16.weights, rel=1e-6)
    assert 0.25 < awq.weights / bf16.weights < 0.27


def test_tensor_parallel_splits_weights_but_not_the_fixed_overhead(models: dict[str, ModelFacts]) -> None:
    need = memory_need(models["llama70b_fp8"])
    assert need is not None
    assert need.per_device(2) < need.required / 2 + 1.01 * GIB
    assert need.per_device(4) * 4 > need.required


def test_no_parameter_count_falls_back_to_weight_files_or_gives_up(models: dict[str, ModelFacts]) -> None:
    bare = models["qwen7b"].model_copy(update={"parameter_count": None, "weight_bytes": 15_230_000_000})
    need = memory_need(bare)
    assert need is not None and need.weights == 15_230_000_000
    assert memory_need(bare.model_copy(update={"weight_bytes": None})) is None
