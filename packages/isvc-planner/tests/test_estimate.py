"""The planner's memory need, from the shared memory model (isvc_api._memory), checked against published
figures; the full validation table is packages/isvc-api/tests/data/models.yaml."""

from __future__ import annotations

import math

import pytest
from isvc_api import GIB, MemoryRuntime, ModelFacts, Quantization
from isvc_planner import estimate, memory_need

GB = 1e9


@pytest.mark.parametrize(
    ("name", "published_gb", "tolerance"),
    [
        # huggingface.co/blog/llama31, "Inference Memory Requirements": 8B FP16 16 GB.
        ("llama8b", 16.06, 0.02),
        # llm-d-benchmark @0fa12aa empirical-vllm-memory-results.md: vLLM loaded Llama-3.3-70B FP8-dynamic
        # in 67.72 GiB (embeddings and lm_head stay bf16).
        ("llama70b_fp8", 67.72 * GIB / GB, 0.02),
        # Hugging Face Qwen/Qwen2.5-7B-Instruct model.safetensors.index.json total_size 15,231,233,024.
        ("qwen7b", 15.23, 0.02),
        # BAAI/bge-m3: 568M parameters served in fp16 by TEI (the fp32 file is 2.27 GB).
        ("bge_m3", 1.136, 0.02),
        # Qwen/Qwen2.5-32B-Instruct-AWQ: about 19.3 GB; embeddings and lm_head stay 16-bit.
        ("qwen32b_awq", 19.3, 0.03),
    ],
)
def test_weights_match_published_checkpoint_sizes(
    models: dict[str, ModelFacts], name: str, published_gb: float, tolerance: float
) -> None:
    need = memory_need(models[name])
    assert need is not None
    assert need.weights / GB == pytest.approx(published_gb, rel=tolerance)


def test_embedding_model_keeps_no_kv_cache_and_runs_on_tei(models: dict[str, ModelFacts]) -> None:
    need = memory_need(models["bge_m3"])
    assert need is not None
    assert need.runtime == MemoryRuntime.TEI
    assert need.kv_cache == 0
    assert need.required < 4 * GIB


def test_the_minimum_context_is_capped_by_the_model_and_explained(models: dict[str, ModelFacts]) -> None:
    need = memory_need(models["qwen7b"])
    assert need is not None
    assert need.context == 4096
    assert need.required == need.weights + need.kv_cache + need.overhead
    assert "2 × 28 layers × 4 KV heads × 128 head dim × 2 B" in need.explanation
    short = memory_need(models["qwen7b"].model_copy(update={"context_length": 2048}))
    assert short is not None and short.context == 2048 and short.kv_cache == need.kv_cache // 2


def test_quantization_shrinks_weights_but_not_the_embeddings(models: dict[str, ModelFacts]) -> None:
    base = models["llama8b"]
    bf16 = memory_need(base)
    fp8 = memory_need(base.model_copy(update={"quantization": Quantization.FP8}))
    assert bf16 and fp8
    embeddings = 2 * 128256 * 4096
    assert fp8.weights == (base.parameter_count or 0) - embeddings + 2 * embeddings


def test_tensor_parallel_counts_the_runtime_overhead_on_every_gpu_issue_10(
    models: dict[str, ModelFacts],
) -> None:
    need = memory_need(models["llama70b_fp8"])
    assert need is not None
    split = need.weights / 2
    assert need.per_device(2) - split > 2 * GIB  # activation, non-torch, CUDA context and graphs per GPU
    assert need.per_device(2) < 40 * GIB  # "TP2 would need about 39 GiB per GPU" (issue 10)


def test_no_parameter_count_falls_back_to_weight_files_or_gives_up(models: dict[str, ModelFacts]) -> None:
    bare = models["qwen7b"].model_copy(update={"parameter_count": None, "weight_bytes": 15_230_000_000})
    need = memory_need(bare)
    assert need is not None and need.weights == 15_230_000_000
    assert memory_need(bare.model_copy(update={"weight_bytes": None})) is None


def test_a_catalog_model_without_its_vocabulary_plans_at_least_its_files_issue_25(
    models: dict[str, ModelFacts],
) -> None:
    """Qwen/Qwen2.5-32B-Instruct-AWQ as a catalog object states: 32.76B parameters, AWQ, and its files'
    size (huggingface.co/Qwen/Qwen2.5-32B-Instruct-AWQ/tree/251a85a7dfd47d23dc308c69d2df71cf75b338f5:
    3.94 + 3.98 + 3.95 + 3.98 + 3.48 GB). Main planned 17.02 GB of weights, 0.88 of them."""
    published = 19_330_000_000
    catalog = ModelFacts(
        source="AIModels",
        name="qwen-32b-awq",
        format="Safetensors",
        parameter_count=models["qwen32b_awq"].parameter_count,
        quantization=Quantization.AWQ,
        weight_bytes=published,
    )
    need = memory_need(catalog)
    assert need is not None
    assert need.weights >= published and need.required > published


def test_the_plan_states_the_kv_budget_and_margin_of_the_launch_on_its_placement_issue_25(
    models: dict[str, ModelFacts],
) -> None:
    need = memory_need(models["llama8b"])
    assert need is not None
    h100 = 81559 * 1024**2
    launch = need.launch(h100, 40, 1)
    assert not isinstance(launch, str)
    est = estimate(models["llama8b"], need, 1, launch)
    assert est.kv_cache_bytes == launch.kv_bytes > launch.kv.per_token * launch.context
    assert est.margin_gi_b is not None and est.margin_gi_b >= 0.15
    assert f"KV {launch.kv_bytes:,} B" in est.explanation


def test_a_share_of_a_card_asks_for_that_share_of_its_cpus(models: dict[str, ModelFacts]) -> None:
    """Two CPUs a device; a runtime on a share drives that share (two co-tenants of a small card fit a
    two-CPU node, as the real node's tiny models do)."""
    need = memory_need(models["qwen7b"])
    assert need is not None
    assert estimate(models["qwen7b"], need, 1).cpu == "2"
    assert estimate(models["qwen7b"], need, 2).cpu == "4"
    assert estimate(models["qwen7b"], need, 1, share_percent=30).cpu == "1"
    assert estimate(models["qwen7b"], need, 1, share_percent=80).cpu == "2"


def test_a_kv_geometry_unknown_is_shown_as_the_bytes_taken_not_as_zero_per_token_issue_45(
    models: dict[str, ModelFacts],
) -> None:
    """`kubectl isvc estimate` printed "KV cache 0.0 … 0 B/token" beside "taken as 10 % of weights"."""
    bare = models["qwen7b"].model_copy(update={"num_layers": None})
    need = memory_need(bare, runtime=MemoryRuntime.TEI)
    assert need is not None and need.kv_cache == math.ceil(need.weights * 0.10)
    told = estimate(bare, need)
    assert told.kv_bytes_per_token is None
    assert told.kv_cache_gi_b == pytest.approx(need.weights * 0.10 / GIB, abs=0.01)
    assert "KV cache geometry unknown, taken as 10 % of weights" in told.explanation
    assert need.required == need.weights + need.kv_cache + need.overhead
