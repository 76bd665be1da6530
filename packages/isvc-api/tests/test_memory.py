"""The memory model against the validation table (tests/data/models.yaml): real checkpoints, the cards
the NVIDIA DRA driver publishes, and vLLM's own measured memory (issue 10)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_api import (
    GIB,
    MIN_CONTEXT,
    VLLM_LADDER,
    Batch,
    Fit,
    MemoryRuntime,
    ModelFacts,
    checkpoint_weights,
    fit_launch,
    kv_layout,
    need_per_device,
    visible_bytes,
    vllm_margin,
)

TABLE: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "data" / "models.yaml").read_text("utf-8"))
MODELS = {m["key"]: m for m in TABLE["models"]}
CARDS = TABLE["cards"]


def quantity(text: str) -> int:
    """A Kubernetes BinarySI quantity as the DRA driver writes capacity.memory."""
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", text).groups()  # type: ignore[union-attr]
    return int(number) * (1024**2 if unit == "Mi" else 1024**3)


def facts(key: str) -> ModelFacts:
    return ModelFacts(source="HuggingFace", **MODELS[key]["facts"])


def truth_bytes(row: dict[str, Any]) -> float:
    """What the runtime loads: vLLM's "Model loading took" when measured, else the checkpoint."""
    if "loaded_gib" in row:
        return float(row["loaded_gib"]) * GIB
    return float(row["checkpoint_bytes"])


def test_the_table_holds_at_least_fifteen_models_each_with_a_source() -> None:
    assert len(MODELS) >= 15
    assert all(row.get("source") for row in MODELS.values())
    assert all(card.get("source") for card in CARDS.values())


@pytest.mark.parametrize("key", sorted(MODELS))
def test_weight_estimate_is_within_five_percent_of_the_checkpoint(key: str) -> None:
    row = MODELS[key]
    estimate = checkpoint_weights(facts(key))
    assert estimate is not None
    assert abs(estimate.total - truth_bytes(row)) <= 0.05 * truth_bytes(row), estimate.words


def test_quantized_weights_count_embeddings_and_lm_head_at_16_bit_issue_10() -> None:
    """On main, 70B-FP8 and 32B-AWQ were 2.1-2.3 GB short: embeddings and lm_head stay 16-bit."""
    fp8 = facts("llama-3.1-70b-instruct-fp8")
    every_weight_one_byte = fp8.parameter_count or 0
    estimate = checkpoint_weights(fp8)
    assert estimate is not None
    assert estimate.total - every_weight_one_byte == 2 * 128256 * 8192  # embed + lm_head, 1 extra byte each


def test_element_counts_give_the_bytes_of_the_checkpoint() -> None:
    counts = ModelFacts(
        source="HuggingFace",
        name="x",
        quantization="FP8",
        dtype_counts={"F8_E4M3": 1000, "BF16": 100, "F32": 10},
    )
    estimate = checkpoint_weights(counts)
    assert estimate is not None and estimate.total == 1000 + 200 + 40


def test_kv_per_token_matches_vllm_for_mistral_small() -> None:
    """vLLM held 28.20 GiB = 184,832 tokens: 163,840 B/token (LLMD row 8)."""
    layout = kv_layout(facts("mistral-small-3.2-24b-instruct"))
    assert layout is not None and layout.per_token == 163_840


def test_kv_of_mla_is_one_latent_per_layer_on_every_rank() -> None:
    one, two = kv_layout(facts("deepseek-v2-lite-chat"), 1), kv_layout(facts("deepseek-v2-lite-chat"), 2)
    assert one is not None and two is not None
    assert one.per_token == two.per_token == 27 * (512 + 64) * 2


def test_sliding_window_layers_stop_growing_past_the_window() -> None:
    layout = kv_layout(facts("gemma-2-9b-it"))
    assert layout is not None
    per_layer = 2 * 8 * 256 * 2
    assert layout.bytes_for(8192, 2048) == 21 * per_layer * 8192 + 21 * per_layer * (4096 - 1 + 2048)


def test_kv_heads_split_by_tensor_parallel() -> None:
    one, two = kv_layout(facts("llama-3.1-70b-instruct"), 1), kv_layout(facts("llama-3.1-70b-instruct"), 2)
    assert one is not None and two is not None and one.per_token == 2 * two.per_token


def test_issue_example_llama_8b_on_a_29_percent_h100_share_starts() -> None:
    """Main compiled 0.24 and 13312 tokens, and vLLM had -0.88 GiB for the KV cache."""
    result = fit_launch(facts("llama-3.1-8b-instruct"), MemoryRuntime.VLLM, quantity("81559Mi"), 29)
    assert isinstance(result, Fit)
    _starts(MODELS["llama-3.1-8b-instruct"], result, CARDS["H100-80GB"], 29)


def _measured_overhead(row: dict[str, Any], batch: Batch | None, tp: int) -> float:
    """vLLM's measured non-KV memory at this batch: activation scales with sampler rows (LLMD rows 4-7
    and the class figures are at 1024 rows) and, for a class figure, with the vocabulary; non-torch as
    measured at that TP size."""
    rows = min(batch.max_num_seqs, batch.max_num_batched_tokens) if batch else 1024
    measured = row.get("measured")
    classes = TABLE["overhead_classes"]
    if measured:
        activation, at = measured["activation_gib"], measured["rows"]
    else:
        cls = classes["moe"] if row["facts"].get("num_experts") else classes["dense"]
        vocab = row["facts"].get("vocab_size") or cls["vocab"]
        activation, at = cls["activation_gib"] * vocab / cls["vocab"], cls["rows"]
    non_torch = classes["non_torch_gib"]["tp1" if tp == 1 else "tp2"]
    return (activation * rows / at + non_torch) * GIB


def seen_bytes(card: dict[str, Any]) -> float:
    """What torch reports on the card: a public log's figure, else the published capacity less the largest
    gap measured between the two (the table's `seen_gap_gib`), never the code's own SEEN_GAP."""
    if "seen_gib" in card:
        return float(card["seen_gib"]) * GIB
    return quantity(card["published"]) - float(TABLE["seen_gap_gib"]["gib"]) * GIB


def _starts(row: dict[str, Any], result: Fit, card: dict[str, Any], share: int) -> float:
    """The launch starts under vLLM v0.11's accounting with the KV budget in bytes (issue 25), judged with
    figures that do not come from the memory model: `--gpu-memory-utilization` × what torch sees is free
    within the share beside the CUDA context; one request of `--max-model-len` fits the budget; and the
    share holds the published weights, the measured non-KV need, the budget, the context and the graphs.
    Returns what is left of the share (the margin as measured)."""
    seen = seen_bytes(card)
    assert result.utilization is not None
    budget = float(result.utilization) * seen
    context_bytes = 0.3 * 1e9  # "~300MB" with lazy loading (pytorch #107667)
    assert budget + context_bytes <= seen * share / 100, result.words()
    batched = result.batch.max_num_batched_tokens if result.batch else 512
    assert result.kv.bytes_for(result.context, batched) + 16 * result.kv.per_token <= result.kv_bytes
    weights = truth_bytes(row) / result.tp
    graphs = 1.03 * GIB if result.batch and result.batch.cuda_graphs else 0.0  # LLMD rows 1-8, largest
    left = seen * share / 100 - context_bytes - graphs - weights - result.kv_bytes
    left -= _measured_overhead(row, result.batch, result.tp)
    assert left >= 0, f"{left / GIB:.2f} GiB: {result.words()}"
    return left


@pytest.mark.parametrize("card", sorted(CARDS))
@pytest.mark.parametrize("key", sorted(k for k, m in MODELS.items() if m["runtime"] == "vllm"))
def test_every_vllm_launch_the_model_sizes_starts(key: str, card: str) -> None:
    """At the smallest share (or TP size) the model asks for, and at the whole card, vLLM starts."""
    row = MODELS[key]
    model = facts(key)
    published = quantity(CARDS[card]["published"])
    for tp in (1, 2, 4, 8):
        need = need_per_device(model, MemoryRuntime.VLLM, tp)
        assert need is not None
        share = -(-need[0] * 100 // visible_bytes(published)) + 2  # margin and rounding, as the planner
        if share <= 100:
            break
    else:
        pytest.skip(f"{key} does not fit 8 × {card}")
    for percent in sorted({share, 100}):
        result = fit_launch(model, MemoryRuntime.VLLM, published, percent, tp)
        assert isinstance(result, Fit), f"{percent}% × {tp}: {result}"
        assert result.context >= min(MIN_CONTEXT, model.context_length or MIN_CONTEXT)
        _starts(row, result, CARDS[card], percent)
        assert result.margin >= vllm_margin(result.inside), result.words()


def test_a_small_share_lowers_the_batch_rather_than_refuse() -> None:
    model = facts("llama-3.1-8b-instruct")
    roomy = fit_launch(model, MemoryRuntime.VLLM, quantity("81559Mi"), 40)
    assert isinstance(roomy, Fit) and roomy.batch == VLLM_LADDER[0]
    smallest = next(
        f
        for s in range(10, 41)
        if isinstance(f := fit_launch(model, MemoryRuntime.VLLM, quantity("81559Mi"), s), Fit)
    )
    assert smallest.batch is not None and smallest.batch.max_num_seqs < VLLM_LADDER[0].max_num_seqs


def test_a_share_too_small_says_the_figures() -> None:
    result = fit_launch(facts("llama-3.1-8b-instruct"), MemoryRuntime.VLLM, quantity("81559Mi"), 15)
    assert isinstance(result, str)
    assert "GiB weights" in result and "fewer than 4,096" in result


def test_utilization_never_exceeds_the_share() -> None:
    result = fit_launch(facts("qwen2.5-7b-instruct"), MemoryRuntime.VLLM, quantity("46068Mi"), 60)
    assert isinstance(result, Fit) and result.utilization is not None
    assert result.utilization <= Decimal("0.60")


# ------------------------------------------------------------------ TEI and llama.cpp launches (issue 10)

ENCODERS = sorted(k for k, m in MODELS.items() if m["runtime"] == "tei")
GGUF = sorted(k for k, m in MODELS.items() if m["runtime"] == "llamacpp")
CUDA_CONTEXT_BYTES = 0.3 * 1e9  # "~300MB" with lazy loading (pytorch issue #107667)


def _published_compute(heads: int, context: int) -> float:
    """llama.cpp's compute buffer by the published log (LCPP-LOG): the two points fitted as
    ub × c × (heads + 1) × 4 B + rest, scaled to this model's heads."""
    table = TABLE["llamacpp_compute"]
    low, high = table["points"]
    per = (high["mib"] - low["mib"]) * 1024**2 / (high["context"] - low["context"])
    rest = low["mib"] * 1024**2 - per * low["context"]
    return per * (heads + 1) / (table["heads"] + 1) * context + rest


def test_the_llamacpp_compute_buffer_is_never_below_the_published_log() -> None:
    """At both published points (flash attention off), the model's compute buffer covers llama.cpp's."""
    table = TABLE["llamacpp_compute"]
    model = ModelFacts(
        source="HuggingFace",
        name="x",
        format="GGUF",
        quantization="GGUF",
        family="llama",
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=4096,
        intermediate_size=14336,
        vocab_size=32000,
        context_length=32768,
        weight_bytes=4 * GIB,
    )
    for point in table["points"]:
        need = need_per_device(model, MemoryRuntime.LLAMACPP, context=point["context"])
        assert need is not None
        kv = 2 * 32 * 8 * 128 * 2 * point["context"]
        compute = need[0] - 4 * GIB - kv - 512 * 1024**2  # less weights, KV and the CUDA context
        assert point["mib"] * 1024**2 <= compute <= point["mib"] * 1024**2 + 256 * 1024**2, need[1]


@pytest.mark.parametrize("card", sorted(CARDS))
@pytest.mark.parametrize("key", GGUF)
def test_every_llamacpp_launch_the_model_sizes_starts(key: str, card: str) -> None:
    """-c from the memory model, then what llama.cpp would allocate by published figures — the GGUF
    tensors, the f16 KV cache of -c cells, the compute buffer of the log, the CUDA context — fits the
    share; at the smallest share the planner would size and at the whole card."""
    row, model = MODELS[key], facts(key)
    published = quantity(CARDS[card]["published"])
    seen = float(CARDS[card]["seen_gib"]) * GIB if "seen_gib" in CARDS[card] else visible_bytes(published)
    need = need_per_device(model, MemoryRuntime.LLAMACPP)
    assert need is not None
    share = -(-need[0] * 100 // visible_bytes(published)) + 2
    if share > 100:
        pytest.skip(f"{key} does not fit one {card}")
    for percent in sorted({share, 100}):
        result = fit_launch(model, MemoryRuntime.LLAMACPP, published, percent)
        assert isinstance(result, Fit), f"{percent}%: {result}"
        f = row["facts"]
        kv = 2 * f["num_layers"] * f["num_kv_heads"] * f["head_dim"] * 2 * result.context
        used = truth_bytes(row) + kv + _published_compute(f["num_attention_heads"], result.context)
        assert used + CUDA_CONTEXT_BYTES <= seen * percent / 100, result.words()
        assert result.context >= min(MIN_CONTEXT, model.context_length or MIN_CONTEXT)


@pytest.mark.parametrize("card", sorted(CARDS))
@pytest.mark.parametrize("key", ENCODERS)
def test_every_tei_launch_starts_and_covers_what_tei_was_seen_to_hold(key: str, card: str) -> None:
    """The weights and TEI's overhead fit the smallest share the planner would size; where TEI's memory
    at rest is published (TEI-280), the estimate is not below it."""
    row, model = MODELS[key], facts(key)
    published = quantity(CARDS[card]["published"])
    need = need_per_device(model, MemoryRuntime.TEI)
    assert need is not None
    share = -(-need[0] * 100 // visible_bytes(published)) + 2
    result = fit_launch(model, MemoryRuntime.TEI, published, share)
    assert isinstance(result, Fit), result
    assert truth_bytes(row) + result.overhead <= visible_bytes(published) * share / 100
    if "measured_at_rest_gb" in row:
        assert result.weights + result.overhead >= row["measured_at_rest_gb"] * 1e9, result.words()


# ------------------------------------------------------------------ weights never under-counted (issue 25)

# Quantized checkpoints and the bytes they are published at. Without element counts (a catalog object, a
# repository whose files the Hub does not count) main planned AWQ at 0.88 and FP8 at 0.97 of them.
PUBLISHED_QUANTIZED = [
    # https://huggingface.co/Qwen/Qwen2.5-32B-Instruct-AWQ/tree/251a85a7dfd47d23dc308c69d2df71cf75b338f5:
    # model-0000{1..5}-of-00005.safetensors 3.94 + 3.98 + 3.95 + 3.98 + 3.48 GB
    ("qwen2.5-32b-instruct-awq", {}, 19.33e9),
    # https://huggingface.co/neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8/tree/4d24bdfe60a152b4193362a9c379d19ebdacc627:
    # model-00001-of-00002.safetensors 5 GB + model-00002-of-00002.safetensors 4.08 GB (Llama-3.1-8B's shapes)
    (
        "llama-3.1-8b-instruct",
        {"name": "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "quantization": "FP8", "quantization_bits": 8},
        9.08e9,
    ),
    # RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic: vLLM "Model loading took 67.72 GiB" (LLMD row 3, TP1)
    ("llama-3.3-70b-instruct-fp8-dynamic", {}, math.ceil(67.72 * GIB)),
]
_HF_ROUNDING = 0.005  # the Hub shows each file's size to three significant figures


@pytest.mark.parametrize(("key", "update", "published"), PUBLISHED_QUANTIZED)
def test_a_quantized_catalog_model_plans_at_least_its_published_bytes_issue_25(
    key: str, update: dict[str, Any], published: float
) -> None:
    """A catalog object states parameters, quantization and size, not the vocabulary: the size is the floor."""
    full = facts(key).model_copy(update=update)
    catalog = ModelFacts(
        source="AIModels",
        name=full.name,
        format="Safetensors",
        parameter_count=full.parameter_count,
        quantization=full.quantization,
        quantization_bits=full.quantization_bits,
        weight_bytes=int(published),
    )
    estimate = checkpoint_weights(catalog)
    assert estimate is not None and estimate.total >= published, estimate
    assert "less than the" in estimate.words


@pytest.mark.parametrize(("key", "update", "published"), PUBLISHED_QUANTIZED)
def test_a_quantized_repository_without_element_counts_counts_embeddings_at_16_bit_issue_25(
    key: str, update: dict[str, Any], published: float
) -> None:
    """From config.json alone (no counts, no sizes): embeddings and lm_head at 16 bits reach the published bytes."""
    hub = facts(key).model_copy(update={**update, "dtype_counts": None, "weight_bytes": None})
    estimate = checkpoint_weights(hub)
    assert estimate is not None and estimate.total >= published * (1 - _HF_ROUNDING), estimate


def test_parameters_dtype_and_file_size_alone_plan_at_least_the_file_size_issue_25() -> None:
    """A catalog object for meta-llama/Llama-3.1-8B-Instruct: "8B" parameters (its model card), bfloat16,
    and the files' size (model.safetensors.index.json total_size 16,060,522,496)."""
    catalog = ModelFacts(
        source="AIModels",
        name="llama-3-1-8b",
        format="Safetensors",
        parameter_count=8_000_000_000,
        dtype="bfloat16",
        weight_bytes=16_060_522_496,
    )
    estimate = checkpoint_weights(catalog)
    assert estimate is not None and estimate.total >= 16_060_522_496
    need = need_per_device(catalog, MemoryRuntime.VLLM)
    assert need is not None and need[0] > 16_060_522_496


def test_float32_files_count_at_the_16_bits_they_are_loaded_at() -> None:
    """BAAI/bge-m3: a 2.27 GB float32 file that TEI and vLLM load at 16 bits."""
    model = ModelFacts(source="AIModels", name="bge-m3", dtype="float32", weight_bytes=2_271_151_270)
    estimate = checkpoint_weights(model)
    assert estimate is not None and estimate.total == 2_271_151_270 // 2


def test_a_model_whose_size_nothing_states_is_not_sized() -> None:
    assert checkpoint_weights(ModelFacts(source="AIModels", name="x", dtype="bfloat16")) is None
    assert need_per_device(ModelFacts(source="AIModels", name="x"), MemoryRuntime.VLLM) is None
