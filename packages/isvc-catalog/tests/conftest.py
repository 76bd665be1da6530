"""Shared fixtures: a stand-in Hub on 127.0.0.1 with the shipped models and a few test-only ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from isvc_catalog import HubClient
from isvc_testing.standin_hub import FixtureModel, StandinHub, load_fixtures, packaged_fixtures

_LLAMA_LIKE: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}

EXTRA_MODELS = [
    FixtureModel(
        repo="acme/private-llm",
        private=True,
        tokens=["hf_secret_private_token"],
        parameters=1_235_814_400,
        config=_LLAMA_LIKE,
    ),
    FixtureModel(
        repo="acme/headers-only",
        parameters=1_235_814_400,
        shards=3,
        info_safetensors=False,
        config=_LLAMA_LIKE,
    ),
    FixtureModel(
        repo="acme/single-file", parameters=1_235_814_400, info_safetensors=False, config=_LLAMA_LIKE
    ),
    FixtureModel(
        repo="acme/bin-only",
        format="pytorch",
        dtype="float16",
        parameters=1_000_000_000,
        shards=2,
        config={**_LLAMA_LIKE, "torch_dtype": "float16"},
    ),
    FixtureModel(repo="acme/no-weights", parameters=0, format="gguf", extra_files={"README.md": 100}),
    FixtureModel(
        repo="acme/lora",
        parameters=0,
        format="gguf",
        extra_files={"adapter_config.json": 600, "adapter_model.safetensors": 1000},
    ),
    FixtureModel(
        repo="acme/hqq",
        parameters=1_235_814_400,
        config={**_LLAMA_LIKE, "quantization_config": {"quant_method": "hqq", "nbits": 4}},
    ),
    FixtureModel(
        repo="acme/gptq-int4",
        parameters=7_000_000_000,
        dtype="float16",
        safetensors={"I32": 800_000_000, "F16": 600_000_000},
        config={**_LLAMA_LIKE, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}},
    ),
    FixtureModel(
        repo="acme/fp8",
        parameters=8_030_261_248,
        safetensors={"F8_E4M3": 7_000_000_000, "BF16": 1_030_261_248},
        config={
            **_LLAMA_LIKE,
            "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
        },
    ),
    # Mistral's own format beside the transformers one (as mistralai/Mistral-7B-Instruct-v0.3 holds it)
    FixtureModel(
        repo="acme/mistral-native",
        parameters=1_235_814_400,
        config={**_LLAMA_LIKE, "architectures": ["MistralForCausalLM"], "model_type": "mistral"},
        extra_files={
            "params.json": 202,
            "consolidated.safetensors": 2_471_628_800,
            "tokenizer.model.v3": 587_404,
        },
        texts={
            "tokenizer_config.json": '{"chat_template": "{%- if tools is not none %}'
            '[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}"}'
        },
    ),
    # a template in chat_template.jinja that renders no tools; one named in a list
    FixtureModel(
        repo="acme/template-file",
        parameters=1_235_814_400,
        config=_LLAMA_LIKE,
        texts={
            "chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}",
            "tokenizer_config.json": '{"chat_template": "{{ tools }}"}',
        },
    ),
    FixtureModel(
        repo="acme/template-list",
        parameters=1_235_814_400,
        config=_LLAMA_LIKE,
        texts={
            "tokenizer_config.json": '{"chat_template": [{"name": "tool_use", "template": '
            '"{{ tools }}"}, {"name": "default", "template": "{{ messages }}"}]}'
        },
    ),
    FixtureModel(
        repo="acme/option-named-gguf",
        parameters=1_000_000,
        format="gguf",
        gguf={
            "architecture": "llama",
            "context_length": 4096,
            "files": {"--local-dir=..-q4_k_m.gguf": 8192, "m-q8_0.gguf": 4096},
        },
    ),
    FixtureModel(
        repo="acme/not-gguf",
        parameters=1_000_000,
        format="gguf",
        gguf={"architecture": "llama", "context_length": 4096, "files": {"m.gguf": 4096}},
    ),
    FixtureModel(
        repo="acme/vlm",
        parameters=3_000_000_000,
        config={
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "text_config": {
                "hidden_size": 2560,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "head_dim": 256,
                "num_hidden_layers": 34,
                "max_position_embeddings": 131072,
            },
        },
    ),
]


@pytest.fixture(scope="session")
def _running_hub() -> Iterator[tuple[StandinHub, str]]:
    hub = StandinHub([*load_fixtures(packaged_fixtures()), *EXTRA_MODELS])
    url = hub.start()
    yield hub, url
    hub.stop()


@pytest.fixture
def standin(_running_hub: tuple[StandinHub, str]) -> tuple[StandinHub, str]:
    """The stand-in Hub with its knobs reset and an empty request log."""
    hub = _running_hub[0]
    hub.fail_with, hub.tree_page_size, hub.sizes_in_info = None, 1000, True
    hub.requests.clear()
    return _running_hub


@pytest.fixture
def client(standin: tuple[StandinHub, str]) -> Iterator[HubClient]:
    with HubClient(standin[1], timeout=5.0) as hub_client:
        yield hub_client
