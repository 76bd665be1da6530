"""Runtime recipes on a real control plane: recipe refusals, tool calling, and a plan that never rolls
its workload while nothing changes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_testbed.module import install_chart
from isvc_testbed.orders import GROUP, VERSION, Orders, assert_refused, catalog, condition, hf
from isvc_workload import RUNTIME_HASH_ANNOTATION
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

QWEN = "Qwen/Qwen2.5-7B-Instruct"
BGE = "BAAI/bge-m3"
GGUF = "Qwen/Qwen2.5-7B-Instruct-GGUF"
TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser")


class Bed(Orders):
    """Orders (as alice), classes and catalog models (as admin) made by one test, deleted after it."""

    def klass(self, name: str, endpoint_types: tuple[str, ...]) -> str:
        self.create_class(
            name,
            {
                "modelPolicy": {"allowedEndpointTypes": list(endpoint_types)},
                "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            },
        )
        return name

    def catalog_model(self, name: str, spec: dict[str, Any]) -> str:
        """A namespaced catalog Model, Ready in the catalog."""
        return self.catalog_object(
            "Model",
            name,
            spec,
            {
                "phase": "Ready",
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Ready", "message": "the model is ready"}
                ],
            },
        )

    def order(self, name: str, klass: str, model: dict[str, Any]) -> str:
        return self.create(name, model, klass)

    def hf_order(self, name: str, klass: str, repo: str) -> str:
        return self.create(name, hf(repo), klass)

    def workload(self, name: str) -> Any:
        return k8s.AppsV1Api(self.admin_api).read_namespaced_stateful_set(name, self.ns)


@pytest.fixture
def bed(
    module: Any, catalog_crds: list[str], admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str
) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


# ---------------------------------------------------------------- refusals


def test_a_model_that_exists_only_in_another_quantization_says_quantization_mismatch(bed: Bed) -> None:
    klass = bed.klass("recipe-chat", ("Chat",))
    model = bed.catalog_model(
        "llama-8b-bnb",
        {
            "source": {"url": "hf://unsloth/Llama-3.1-8B-Instruct-bnb-4bit"},
            "format": "Safetensors",
            "architecture": "LlamaForCausalLM",
            "family": "llama",
            "parameterCount": 8030261248,
            "dtype": "bfloat16",
            "quantization": "BitsAndBytes",
            "quantizationBits": 4,
            "contextLength": 131072,
            "endpointTypes": ["Chat"],
            "size": "6Gi",
        },
    )
    order = bed.order("bnb-chat", klass, catalog("Model", model))
    status = bed.wait_reason(order, "Planned", "QuantizationMismatch")
    message = assert_refused(
        status,
        "Planned",
        "QuantizationMismatch",
        "quantization BitsAndBytes",
        "another quantization",
        "AWQ",
        "platform-side",
    )
    # every candidate recipe, each with the first check it failed
    for recipe, check in [
        ("vllm-chat", "quantization"),
        ("vllm-chat-turing", "quantization"),
        ("tei-embed", "endpoint type"),
        ("llamacpp-chat", "format"),
    ]:
        assert f"{recipe} fails {check}" in message, (recipe, message)
    assert condition(status, "ModelResolved")["status"] == "True"
    assert status["model"]["quantization"] == "BitsAndBytes"


def test_a_gguf_model_on_a_rerank_only_class_says_no_compatible_runtime_available(bed: Bed) -> None:
    klass = bed.klass("recipe-rerank", ("Rerank",))
    order = bed.hf_order("gguf-rerank", klass, GGUF)
    status = bed.wait_reason(order, "Planned", "NoCompatibleRuntimeAvailable")
    message = assert_refused(
        status,
        "Planned",
        "NoCompatibleRuntimeAvailable",
        "GGUF",
        "as Rerank",
        "tei-rerank fails format",
        "llamacpp-chat fails endpoint type",
        "llamacpp-chat serve(s) it as Chat",
        "allowedEndpointTypes names Chat alone",
    )
    assert "another quantization" not in message
    assert status["model"]["endpointType"] == "Rerank"


# ---------------------------------------------------------------- tool calling


def test_a_tool_calling_chat_model_says_so_and_its_runtime_carries_the_flags(bed: Bed) -> None:
    klass = bed.klass("recipe-chat-tools", ("Chat",))
    order = bed.hf_order("tools-chat", klass, QWEN)
    status = bed.wait_ready(order)
    assert status["endpoint"]["toolCallingSupported"] is True
    args = bed.workload(order).spec.template.spec.containers[0].args
    for flag in TOOL_FLAGS:
        assert flag in args, args
    assert args[args.index("--tool-call-parser") + 1] == "hermes"


def test_an_embedding_model_reports_no_tool_calling(bed: Bed) -> None:
    klass = bed.klass("recipe-embeddings", ("Embeddings",))
    order = bed.hf_order("embed-bge", klass, BGE)
    status = bed.wait_ready(order)
    assert status["model"]["endpointType"] == "Embeddings"
    assert status["endpoint"]["toolCallingSupported"] is False
    args = bed.workload(order).spec.template.spec.containers[0].args or []
    assert not any(flag in args for flag in TOOL_FLAGS), args


# ---------------------------------------------------------------- content hash


def test_an_unchanged_order_never_rolls_its_workload(bed: Bed) -> None:
    klass = bed.klass("recipe-steady", ("Chat",))
    order = bed.hf_order("steady-chat", klass, QWEN)
    bed.wait_ready(order)
    first = bed.workload(order)
    annotation = (first.spec.template.metadata.annotations or {}).get(RUNTIME_HASH_ANNOTATION)
    plan = bed.admin.get_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", order)
    assert annotation and annotation == plan["spec"]["runtime"]["contentHash"]
    pods = {
        p.metadata.name
        for p in k8s.CoreV1Api(bed.admin_api)
        .list_namespaced_pod(bed.ns, label_selector=f"{LABEL_ORDER}={order}")
        .items
    }
    # several passes: the health probe requeues every 3 s, and label edits wake the controller too
    for i in range(4):
        bed.alice.patch_namespaced_custom_object(
            GROUP, VERSION, bed.ns, "inferenceservices", order, {"metadata": {"labels": {"touch": str(i)}}}
        )
        time.sleep(3)
    later = bed.workload(order)
    assert later.metadata.generation == first.metadata.generation
    assert (later.spec.template.metadata.annotations or {}).get(RUNTIME_HASH_ANNOTATION) == annotation
    assert (
        bed.admin.get_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", order)["spec"][
            "plannedAt"
        ]
        == plan["spec"]["plannedAt"]
    )
    status = bed.status(order)
    assert status["phase"] == "Ready" and status["resolved"]["replanCount"] == 0
    left = {
        p.metadata.name
        for p in k8s.CoreV1Api(bed.admin_api)
        .list_namespaced_pod(bed.ns, label_selector=f"{LABEL_ORDER}={order}")
        .items
    }
    assert left == pods


# ---------------------------------------------------------------- administrator's recipes

BNB_RECIPE: dict[str, Any] = {
    "name": "vllm-chat-bnb",
    "runtime": "vllm",
    "priority": 15,
    "description": "vLLM for bitsandbytes 4-bit checkpoints, Ampere or newer.",
    "image": "registry.example.com/vllm/vllm-openai:v0.11.0",
    "command": ["vllm", "serve"],
    "serves": {
        "endpointTypes": ["Chat"],
        "formats": ["Safetensors"],
        "quantizations": ["BitsAndBytes"],
        "architectures": ["*ForCausalLM"],
    },
    "accelerator": {"minComputeCapability": "8.0"},
    "placement": {
        "modes": ["Shared", "WholeDevice"],
        "sharingModes": ["None", "Shares", "Partition"],
        "maxDevices": 1,
    },
    "ports": {"http": 8000, "metrics": 8000},
    "apiKeyEnv": "VLLM_API_KEY",
    "memory": {"margin": 0.05},
    "quantizationValues": {"BitsAndBytes": "bitsandbytes"},
    "env": {"HF_HUB_OFFLINE": "1"},
    "args": [
        ["{modelPath}"],
        ["--served-model-name", "{servedName}"],
        ["--port", "{httpPort}"],
        ["--gpu-memory-utilization", "{gpuMemoryUtilization}"],
        ["--max-model-len", "{maxContextLength}"],
        ["--quantization", "{quantization}"],
        ["--load-format", "bitsandbytes"],
    ],
}


def test_a_recipe_the_administrator_adds_in_the_module_settings_serves_what_none_did(
    bed: Bed, module: Any, tmp_path: Any
) -> None:
    klass = bed.klass("recipe-admin", ("Chat",))
    model = bed.catalog_model(
        "llama-8b-bnb-admin",
        {
            "source": {"url": "hf://unsloth/Llama-3.1-8B-Instruct-bnb-4bit"},
            "format": "Safetensors",
            "architecture": "LlamaForCausalLM",
            "family": "llama",
            "parameterCount": 8030261248,
            "dtype": "bfloat16",
            "quantization": "BitsAndBytes",
            "quantizationBits": 4,
            "contextLength": 131072,
            # its geometry (config.json): a launch's context is sized against its KV budget (issue 45)
            "numLayers": 32,
            "numAttentionHeads": 32,
            "numKVHeads": 8,
            "hiddenSize": 4096,
            "endpointTypes": ["Chat"],
            "size": "6Gi",
        },
    )
    order = bed.order("bnb-admin", klass, catalog("Model", model))
    bed.wait_reason(order, "Planned", "QuantizationMismatch")
    recipes = tmp_path / "recipes.yaml"
    try:
        install_chart(module.cluster, {"runtimeRecipes": [BNB_RECIPE]})
        # What the controller's pod mounts: the chart's ConfigMap, read back from the API server.
        config = k8s.CoreV1Api(bed.admin_api).read_namespaced_config_map("isvc-runtime-recipes", "d8-isvc")
        recipes.write_text(config.data["recipes.yaml"])
        module.restart_controller("--runtime-recipes", str(recipes))
        status = bed.wait_true(order, "Planned", timeout=90)
        assert status["resolved"]["runtime"] == "vllm-chat-bnb"
        generation = bed.read(order)["metadata"]["generation"]
        assert generation == 1  # lifted by the settings, the order was never edited
        args = bed.workload(order).spec.template.spec.containers[0].args
        assert "--load-format" in args and "bitsandbytes" in args
    finally:
        install_chart(module.cluster)
        module.restart_controller()


def test_an_embedding_model_by_bare_hub_reference_on_default_llm_is_told_the_class_to_use(bed: Bed) -> None:
    """Issue 16: it was told to ask for a recipe, while the FAQ's fix is a class naming one contract."""
    order = bed.hf_order("bge-on-chat", "default-llm", BGE)
    status = bed.wait_reason(order, "Planned", "NoCompatibleRuntimeAvailable")
    assert_refused(
        status,
        "Planned",
        "NoCompatibleRuntimeAvailable",
        "as Chat",
        "serve(s) it as Embeddings",
        "allowedEndpointTypes names Embeddings alone",
    )
    assert status["model"]["endpointType"] == "Chat"  # the class's first contract, as the FAQ says
