"""Shared test data: a few real models' facts, a few cards, and a plausible estimate for a pair."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from isvc_api import GIB, Estimates, ModelFacts, Placement, Quantization
from isvc_runtime_recipes import AcceleratorFacts, RecipeBook, load_recipes

# Facts as the Hugging Face config.json of each model states them; chat_template_tools as its chat
# template (tokenizer_config.json, or the GGUF header) says, mistral_format as its file list shows.
MODELS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b-instruct": dict(
        name="meta-llama/Llama-3.1-8B-Instruct",
        architecture="LlamaForCausalLM",
        family="llama",
        parameter_count=8_030_000_000,
        context_length=131072,
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        hidden_size=4096,
        chat_template_tools=True,
    ),
    "llama-2-7b-chat": dict(
        name="meta-llama/Llama-2-7b-chat-hf",
        architecture="LlamaForCausalLM",
        family="llama",
        parameter_count=6_740_000_000,
        context_length=4096,
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=32,
        hidden_size=4096,
        chat_template_tools=False,
    ),
    "qwen2.5-7b-instruct-awq": dict(
        name="Qwen/Qwen2.5-7B-Instruct-AWQ",
        architecture="Qwen2ForCausalLM",
        family="qwen2",
        parameter_count=7_620_000_000,
        quantization=Quantization.AWQ,
        quantization_bits=4,
        context_length=32768,
        num_layers=28,
        num_attention_heads=28,
        num_kv_heads=4,
        hidden_size=3584,
        chat_template_tools=True,
    ),
    "mistral-7b-instruct-v0.3": dict(
        name="mistralai/Mistral-7B-Instruct-v0.3",
        architecture="MistralForCausalLM",
        family="mistral",
        parameter_count=7_250_000_000,
        context_length=32768,
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=4096,
        chat_template_tools=True,
        mistral_format=True,
    ),
    "llama-3.1-70b-instruct-fp8": dict(
        name="neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
        architecture="LlamaForCausalLM",
        family="llama",
        parameter_count=70_600_000_000,
        quantization=Quantization.FP8,
        quantization_bits=8,
        context_length=131072,
        num_layers=80,
        num_attention_heads=64,
        num_kv_heads=8,
        hidden_size=8192,
        chat_template_tools=True,
    ),
    "llama-3.1-8b-instruct-bnb": dict(
        name="unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit",
        architecture="LlamaForCausalLM",
        family="llama",
        parameter_count=8_030_000_000,
        quantization=Quantization.BITSANDBYTES,
        quantization_bits=4,
        context_length=131072,
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        hidden_size=4096,
        chat_template_tools=True,
    ),
    "bge-m3": dict(
        name="BAAI/bge-m3",
        architecture="XLMRobertaModel",
        family="xlm-roberta",
        parameter_count=568_000_000,
        context_length=8192,
        num_layers=24,
        num_attention_heads=16,
        hidden_size=1024,
    ),
    "bge-reranker-v2-m3": dict(
        name="BAAI/bge-reranker-v2-m3",
        architecture="XLMRobertaForSequenceClassification",
        family="xlm-roberta",
        parameter_count=568_000_000,
        context_length=8192,
        num_layers=24,
        num_attention_heads=16,
        hidden_size=1024,
    ),
    "qwen3-embedding-0.6b": dict(
        name="Qwen/Qwen3-Embedding-0.6B",
        architecture="Qwen3ForCausalLM",
        family="qwen3",
        parameter_count=596_000_000,
        context_length=32768,
        num_layers=28,
        num_attention_heads=16,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=1024,
        endpoint_types=["Embeddings"],
    ),
    "qwen2.5-7b-instruct-gguf": dict(
        name="Qwen/Qwen2.5-7B-Instruct-GGUF",
        format="GGUF",
        family="qwen2",
        parameter_count=7_620_000_000,
        quantization=Quantization.GGUF,
        quantization_bits=5,
        context_length=32768,
        num_layers=28,
        num_attention_heads=28,
        num_kv_heads=4,
        hidden_size=3584,
        chat_template_tools=True,
        # the Q5_K_M variant of the repository, split in two files
        gguf_files=[
            "qwen2.5-7b-instruct-q5_k_m-00001-of-00002.gguf",
            "qwen2.5-7b-instruct-q5_k_m-00002-of-00002.gguf",
        ],
    ),
    "phi-3-mini-bnb-unknown-arch": dict(
        name="someone/model-without-facts",
    ),
    # a catalog object's facts: size and context, no attention geometry (issue 45)
    "catalog-chat-without-geometry": dict(
        name="team-models/chat-7b",
        architecture="LlamaForCausalLM",
        family="llama",
        parameter_count=7_000_000_000,
        context_length=32768,
    ),
}

# (placement, what else is known of the card). Card memory as the NVIDIA DRA driver publishes it (NVML
# memory.total; packages/isvc-api/tests/data/models.yaml): H100 81559Mi = 79.65 GiB, A100 80GB 80Gi,
# L4 23034Mi = 22.49 GiB, T4 15360Mi = 15.0 GiB (modal-labs/modal-client PR #2797).
HARDWARE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "a100-80gb-whole": (
        dict(
            placement_mode="WholeDevice",
            sharing_mode="None",
            device_count=1,
            accelerator_product_name="NVIDIA A100-SXM4-80GB",
            accelerator_memory_gi_b=80,
        ),
        dict(compute_capability="8.0"),
    ),
    "a100-80gb-share-50": (
        dict(
            placement_mode="Shared",
            sharing_mode="Shares",
            share_percent=50,
            device_count=1,
            accelerator_product_name="NVIDIA A100-SXM4-80GB",
            accelerator_memory_gi_b=80,
            memory_gi_b=40,
        ),
        dict(compute_capability="8.0"),
    ),
    "a100-80gb-mig-3g.40gb": (
        dict(
            placement_mode="Shared",
            sharing_mode="Partition",
            share_percent=50,
            device_count=1,
            accelerator_product_name="NVIDIA A100-SXM4-80GB",
            accelerator_memory_gi_b=80,
            memory_gi_b=40,
        ),
        dict(compute_capability="8.0"),
    ),
    "l4-24gb-whole": (
        dict(
            placement_mode="WholeDevice",
            sharing_mode="None",
            device_count=1,
            accelerator_product_name="NVIDIA L4",
            accelerator_memory_gi_b=22.49,
        ),
        dict(compute_capability="8.9"),
    ),
    "t4-16gb-whole": (
        dict(
            placement_mode="WholeDevice",
            sharing_mode="None",
            device_count=1,
            accelerator_product_name="Tesla T4",
            accelerator_memory_gi_b=15.0,
        ),
        dict(compute_capability="7.5"),
    ),
    "h100-80gb-x2": (
        dict(
            placement_mode="MultiDevice",
            sharing_mode="None",
            device_count=2,
            accelerator_product_name="NVIDIA H100 80GB HBM3",
            accelerator_memory_gi_b=79.65,
        ),
        dict(compute_capability="9.0"),
    ),
}

_BYTES_PER_PARAM = {
    Quantization.NONE: 2.0,
    Quantization.AWQ: 0.5,
    Quantization.GPTQ: 0.5,
    Quantization.FP8: 1.0,
    Quantization.BITSANDBYTES: 0.5,
}


def facts_of(key: str) -> ModelFacts:
    """The facts of one model of MODELS."""
    return ModelFacts(source="HuggingFace", **MODELS[key])


def hardware_of(key: str) -> tuple[Placement, AcceleratorFacts]:
    """The placement and card facts of one entry of HARDWARE."""
    placement, card = HARDWARE[key]
    return Placement(**placement), AcceleratorFacts(**card)


def estimates_for(facts: ModelFacts, context_length: int = 8192) -> Estimates:
    """A plausible planner estimate: weights by bytes per parameter, an 8k KV cache, 1.5 GiB overhead."""
    params = facts.parameter_count or 1_000_000_000
    per_param = (
        (facts.quantization_bits or 16) / 8
        if facts.quantization == Quantization.GGUF
        else (_BYTES_PER_PARAM[facts.quantization])
    )
    weights = round(params * per_param / GIB, 2)
    kv = 1.0
    return Estimates(
        required_memory_gi_b=round(weights + kv + 1.5, 2),
        weights_gi_b=weights,
        kv_cache_gi_b=kv,
        overhead_gi_b=1.5,
        context_length=context_length,
        cpu="4",
        memory="16Gi",
        model_volume=f"{int(weights * 1.2) + 1}Gi",
    )


@pytest.fixture(scope="session")
def book() -> RecipeBook:
    return load_recipes()


@pytest.fixture(scope="session")
def facts() -> Callable[[str], ModelFacts]:
    return facts_of


@pytest.fixture(scope="session")
def hardware() -> Callable[[str], tuple[Placement, AcceleratorFacts]]:
    return hardware_of


@pytest.fixture(scope="session")
def estimates() -> Callable[..., Estimates]:
    return estimates_for


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """matrix_model and matrix_hardware parametrize over the whole matrix."""
    if "matrix_model" in metafunc.fixturenames:
        metafunc.parametrize("matrix_model", sorted(MODELS))
    if "matrix_hardware" in metafunc.fixturenames:
        metafunc.parametrize("matrix_hardware", sorted(HARDWARE))
