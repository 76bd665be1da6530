"""Published model facts and small fleets in the exact resource.k8s.io/v1 shapes."""

from __future__ import annotations

import pytest
from isvc_api import ModelFacts, ModelSource, Quantization


def _facts(name: str, **kw: object) -> ModelFacts:
    return ModelFacts.model_validate({"source": ModelSource.HUGGING_FACE, "name": name, **kw})


# Architecture numbers are config.json / model-card facts, each with its source named.
MODELS: dict[str, ModelFacts] = {
    # huggingface.co/Qwen/Qwen2.5-7B-Instruct model card and config.json: 7.61B parameters,
    # 28 layers, 28 query / 4 KV heads, hidden 3584 (head dim 128), bf16, 32768 in config.
    "qwen7b": _facts(
        "Qwen/Qwen2.5-7B-Instruct",
        parameter_count=7_615_616_512,
        dtype="bfloat16",
        num_layers=28,
        num_attention_heads=28,
        num_kv_heads=4,
        hidden_size=3584,
        context_length=32768,
        architecture="Qwen2ForCausalLM",
        family="qwen2",
    ),
    # huggingface.co/meta-llama/Llama-3.1-8B config.json: 32 layers, 32 / 8 heads, hidden 4096,
    # 131072 context, bf16; 8.03B parameters (model card).
    "llama8b": _facts(
        "meta-llama/Llama-3.1-8B",
        parameter_count=8_030_261_248,
        dtype="bfloat16",
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=4096,
        intermediate_size=14336,
        vocab_size=128256,
        context_length=131072,
        architecture="LlamaForCausalLM",
    ),
    # huggingface.co/Qwen/Qwen2.5-32B-Instruct-AWQ config.json: 64 layers, 40 query / 8 KV heads,
    # hidden 5120, vocabulary 152064 (embeddings untied), AWQ 4-bit; 32,763,876,352 parameters from the
    # shapes (packages/isvc-api/tests/data/models.yaml).
    "qwen32b_awq": _facts(
        "Qwen/Qwen2.5-32B-Instruct-AWQ",
        parameter_count=32_763_876_352,
        vocab_size=152064,
        intermediate_size=27648,
        tie_word_embeddings=False,
        quantization=Quantization.AWQ,
        quantization_bits=4,
        num_layers=64,
        num_attention_heads=40,
        num_kv_heads=8,
        hidden_size=5120,
        context_length=32768,
    ),
    # huggingface.co/blog/llama31 and meta-llama/Llama-3.1-70B config.json: 70.6B parameters,
    # 80 layers, 64 / 8 heads, hidden 8192; FP8 checkpoint (e.g. Llama-3.1-70B-Instruct-FP8).
    "llama70b_fp8": _facts(
        "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
        parameter_count=70_553_706_496,
        quantization=Quantization.FP8,
        vocab_size=128256,
        intermediate_size=28672,
        tie_word_embeddings=False,
        num_layers=80,
        num_attention_heads=64,
        num_kv_heads=8,
        hidden_size=8192,
        context_length=131072,
    ),
    # huggingface.co/BAAI/bge-m3 model card: XLM-RoBERTa large, 568M parameters, 24 layers,
    # 16 heads, hidden 1024, 8192 tokens; pytorch_model.bin in fp32 is 2.27 GB.
    "bge_m3": _facts(
        "BAAI/bge-m3",
        parameter_count=568_000_000,
        dtype="float32",
        num_layers=24,
        num_attention_heads=16,
        hidden_size=1024,
        context_length=8192,
        architecture="XLMRobertaModel",
        family="xlm-roberta",
    ),
}


@pytest.fixture
def models() -> dict[str, ModelFacts]:
    """The published models, by short name."""
    return MODELS
