"""Issue 44 (6): a repository's facts are range-checked, and a GGUF header and config.json that disagree are
refused with InvalidModelSource naming the field. Before, a header of 28 layers beside a config.json of one
planned 0.05 GiB of KV cache where the runtime needs 1.31 GiB, and negative values planned negative memory."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import ModelFormat, Quantization, Reason
from isvc_catalog._gguf import GgufHeader
from isvc_catalog._hubfacts import Weights, _Quant, _Refused, model_facts
from isvc_catalog._refs import RepoRef

REF = RepoRef("someone/tiny-gguf")
HEADER = {
    "general.architecture": "qwen2",
    "qwen2.block_count": 28,
    "qwen2.attention.head_count": 12,
    "qwen2.attention.head_count_kv": 2,
    "qwen2.embedding_length": 1536,
    "qwen2.context_length": 32768,
}


def _facts(config: dict[str, Any], header: dict[str, Any] | None = None, params: int = 1_500_000_000) -> Any:
    fmt = ModelFormat.GGUF if header is not None else ModelFormat.SAFETENSORS
    weights = Weights(
        params,
        "bfloat16",
        _Quant(Quantization.GGUF if header is not None else Quantization.NONE),
        4,
        1_000_000_000,
        header=GgufHeader(values=dict(header)) if header is not None else None,
    )
    return model_facts(REF, "abc", fmt, config, {}, {}, ["m-q4_k_m.gguf"], weights, None)


def _refusal(config: dict[str, Any], header: dict[str, Any] | None = None, params: int = 1) -> str:
    with pytest.raises(_Refused) as refused:
        _facts(config, header, params)
    assert refused.value.refusal.reason == Reason.INVALID_MODEL_SOURCE
    return refused.value.refusal.message


def test_a_config_json_contradicting_the_gguf_header_is_refused_naming_the_field() -> None:
    message = _refusal({"num_hidden_layers": 1}, HEADER)

    assert "num_layers 1" in message and "qwen2.block_count) 28" in message


def test_the_gguf_header_is_the_models_geometry_where_config_json_is_silent_or_agrees() -> None:
    facts = _facts({"num_hidden_layers": 28, "head_dim": 64}, HEADER)

    assert (facts.num_layers, facts.num_kv_heads, facts.hidden_size) == (28, 2, 1536)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"num_hidden_layers": -28}, "num_layers -28"),
        ({"num_attention_heads": 0}, "num_attention_heads 0"),
        ({"hidden_size": -1536, "num_attention_heads": 12}, "hidden_size -1536"),
        ({"max_position_embeddings": -32768}, "context_length -32768"),
        ({"vocab_size": 1 << 40}, "vocab_size 1099511627776"),
        ({"num_attention_heads": 4, "num_key_value_heads": 8}, "num_kv_heads 8 over num_attention_heads 4"),
    ],
)
def test_a_fact_out_of_range_is_refused_naming_the_field(config: dict[str, Any], field: str) -> None:
    assert field in _refusal(config, params=1_000)


def test_a_negative_parameter_count_is_refused() -> None:
    assert "parameter_count -5" in _refusal({"num_hidden_layers": 2}, params=-5)


def test_a_negative_header_value_is_refused() -> None:
    assert "num_kv_heads -2" in _refusal({}, {**HEADER, "qwen2.attention.head_count_kv": -2})
