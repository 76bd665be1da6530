"""Runtime recipes on a real control plane: recipe refusals, tool calling, and a plan that never rolls
its workload while nothing changes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import conditions_line, order_status
from isvc_workload import RUNTIME_HASH_ANNOTATION
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

GROUP, VERSION = "ai.deckhouse.io", "v1alpha1"
CATALOG = "ai-models.deckhouse.io"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
BGE = "BAAI/bge-m3"
GGUF = "Qwen/Qwen2.5-7B-Instruct-GGUF"
TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser")


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


class Bed:
    """Orders (as alice), classes and catalog models (as admin) made by one test, deleted after it."""

    def __init__(self, module: Any, admin: k8s.ApiClient, alice: k8s.ApiClient, namespace: str) -> None:
        self.module = module
        self.admin_api, self.alice_api = admin, alice
        self.admin, self.alice = k8s.CustomObjectsApi(admin), k8s.CustomObjectsApi(alice)
        self.ns = namespace
        self.orders: list[str] = []
        self.classes: list[str] = []
        self.models: list[str] = []

    def klass(self, name: str, endpoint_types: tuple[str, ...]) -> str:
        self.admin.create_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceServiceClass", "metadata": {"name": name},
            "spec": {"modelPolicy": {"allowedEndpointTypes": list(endpoint_types)},
                     "exposure": {"type": "ClusterLocal", "authentication": "Token"}}})
        self.classes.append(name)

        def ready() -> bool:
            obj = self.admin.get_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", name)
            return condition(obj.get("status") or {}, "Ready").get("status") == "True"

        wait_for(ready, 30, what=f"class {name} Ready")
        return name

    def catalog_model(self, name: str, spec: dict[str, Any]) -> str:
        """A namespaced catalog Model, Ready in the catalog."""
        self.admin.create_namespaced_custom_object(CATALOG, VERSION, self.ns, "models", {
            "apiVersion": f"{CATALOG}/{VERSION}", "kind": "Model", "metadata": {"name": name}, "spec": spec})
        self.models.append(name)
        self.admin.patch_namespaced_custom_object_status(CATALOG, VERSION, self.ns, "models", name, {
            "status": {"phase": "Ready", "conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "the model is ready"}]}})
        return name

    def order(self, name: str, klass: str, model: dict[str, Any]) -> str:
        self.alice.create_namespaced_custom_object(GROUP, VERSION, self.ns, "inferenceservices", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceService", "metadata": {"name": name},
            "spec": {"inferenceServiceClassName": klass, "model": model}})
        self.orders.append(name)
        return name

    def hf_order(self, name: str, klass: str, repo: str) -> str:
        return self.order(name, klass, {"src": "HuggingFace", "ref": {"name": repo}})

    def status(self, name: str) -> dict[str, Any]:
        return order_status(self.alice_api, self.ns, name)

    def wait(self, name: str, check: Callable[[dict[str, Any]], bool], timeout: float, what: str
             ) -> dict[str, Any]:
        seen: list[dict[str, Any]] = [{}]

        def probe() -> dict[str, Any] | None:
            self.module.check()
            seen[0] = self.status(name)
            return seen[0] if seen[0] and check(seen[0]) else None

        try:
            return wait_for(probe, timeout, interval=0.5, what=f"{name}: {what}")
        except TimeoutError as e:
            raise TimeoutError(f"{e}; status: {conditions_line(seen[0])}") from None

    def wait_reason(self, name: str, type_: str, reason: str, timeout: float = 60) -> dict[str, Any]:
        return self.wait(name, lambda s: condition(s, type_).get("reason") == reason, timeout,
                         f"{type_} reason {reason}")

    def wait_ready(self, name: str, timeout: float = 120) -> dict[str, Any]:
        return self.wait(name, lambda s: s.get("phase") == "Ready", timeout, "phase Ready")

    def deployment(self, name: str) -> Any:
        return k8s.AppsV1Api(self.admin_api).read_namespaced_deployment(name, self.ns)

    def close(self) -> None:
        for name in self.orders:
            try:
                self.alice.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "inferenceservices", name)
            except ApiException as e:
                if e.status != 404:
                    raise

        def gone() -> bool:
            left = {o["metadata"]["name"] for o in self.alice.list_namespaced_custom_object(
                GROUP, VERSION, self.ns, "inferenceservices")["items"]}
            items = k8s.ResourceV1Api(self.admin_api).list_namespaced_resource_claim(self.ns).items
            claims = [c for c in items if (c.metadata.labels or {}).get(LABEL_ORDER) in self.orders]
            return not (left & set(self.orders)) and not claims

        try:
            wait_for(gone, 90, what="orders and their claims gone")
        finally:
            for name in self.classes:
                self.admin.delete_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", name)
            for name in self.models:
                self.admin.delete_namespaced_custom_object(CATALOG, VERSION, self.ns, "models", name)


@pytest.fixture
def bed(module: Any, catalog_crds: list[str], admin_api: k8s.ApiClient, alice_api: k8s.ApiClient,
        team_a: str) -> Iterator[Bed]:
    b = Bed(module, admin_api, alice_api, team_a)
    try:
        yield b
    finally:
        b.close()


def assert_refused(status: dict[str, Any], reason: str, *words: str) -> str:
    planned = condition(status, "Planned")
    assert (planned["status"], planned["reason"]) == ("False", reason), planned
    assert (status["phase"], status["reason"]) == ("Pending", reason)
    for word in words:
        assert word in planned["message"], (word, planned["message"])
    return str(planned["message"])


# ---------------------------------------------------------------- refusals


def test_a_model_that_exists_only_in_another_quantization_says_quantization_mismatch(bed: Bed) -> None:
    klass = bed.klass("recipe-chat", ("Chat",))
    model = bed.catalog_model("llama-8b-bnb", {
        "source": {"url": "hf://unsloth/Llama-3.1-8B-Instruct-bnb-4bit"}, "format": "Safetensors",
        "architecture": "LlamaForCausalLM", "family": "llama", "parameterCount": 8030261248,
        "dtype": "bfloat16", "quantization": "BitsAndBytes", "quantizationBits": 4, "contextLength": 131072,
        "endpointTypes": ["Chat"], "size": "6Gi"})
    order = bed.order("bnb-chat", klass, {"src": "AIModels", "ref": {"name": model, "kind": "Model"}})
    status = bed.wait_reason(order, "Planned", "QuantizationMismatch")
    message = assert_refused(status, "QuantizationMismatch", "quantization BitsAndBytes",
                             "another quantization", "AWQ", "platform-side")
    # every candidate recipe, each with the first check it failed
    for recipe, check in [("vllm-chat", "quantization"), ("vllm-chat-turing", "quantization"),
                          ("tei-embed", "endpoint type"), ("llamacpp-chat", "format")]:
        assert f"{recipe} fails {check}" in message, (recipe, message)
    assert condition(status, "ModelResolved")["status"] == "True"
    assert status["model"]["quantization"] == "BitsAndBytes"


def test_a_gguf_model_on_a_rerank_only_class_says_no_compatible_runtime_available(bed: Bed) -> None:
    klass = bed.klass("recipe-rerank", ("Rerank",))
    order = bed.hf_order("gguf-rerank", klass, GGUF)
    status = bed.wait_reason(order, "Planned", "NoCompatibleRuntimeAvailable")
    message = assert_refused(status, "NoCompatibleRuntimeAvailable", "GGUF", "as Rerank",
                             "tei-rerank fails format", "llamacpp-chat fails endpoint type", "platform-side")
    assert "another quantization" not in message
    assert status["model"]["endpointType"] == "Rerank"


# ---------------------------------------------------------------- tool calling


def test_a_tool_calling_chat_model_says_so_and_its_runtime_carries_the_flags(bed: Bed) -> None:
    klass = bed.klass("recipe-chat-tools", ("Chat",))
    order = bed.hf_order("tools-chat", klass, QWEN)
    status = bed.wait_ready(order)
    assert status["endpoint"]["toolCallingSupported"] is True
    args = bed.deployment(order).spec.template.spec.containers[0].args
    for flag in TOOL_FLAGS:
        assert flag in args, args
    assert args[args.index("--tool-call-parser") + 1] == "hermes"


def test_an_embedding_model_reports_no_tool_calling(bed: Bed) -> None:
    klass = bed.klass("recipe-embeddings", ("Embeddings",))
    order = bed.hf_order("embed-bge", klass, BGE)
    status = bed.wait_ready(order)
    assert status["model"]["endpointType"] == "Embeddings"
    assert status["endpoint"]["toolCallingSupported"] is False
    args = bed.deployment(order).spec.template.spec.containers[0].args or []
    assert not any(flag in args for flag in TOOL_FLAGS), args


# ---------------------------------------------------------------- content hash


def test_an_unchanged_order_never_rolls_its_deployment(bed: Bed) -> None:
    klass = bed.klass("recipe-steady", ("Chat",))
    order = bed.hf_order("steady-chat", klass, QWEN)
    bed.wait_ready(order)
    first = bed.deployment(order)
    annotation = (first.spec.template.metadata.annotations or {}).get(RUNTIME_HASH_ANNOTATION)
    plan = bed.admin.get_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", order)
    assert annotation and annotation == plan["spec"]["runtime"]["contentHash"]
    pods = {p.metadata.name for p in k8s.CoreV1Api(bed.admin_api).list_namespaced_pod(
        bed.ns, label_selector=f"{LABEL_ORDER}={order}").items}
    # several passes: the health probe requeues every 3 s, and label edits wake the controller too
    for i in range(4):
        bed.alice.patch_namespaced_custom_object(GROUP, VERSION, bed.ns, "inferenceservices", order,
                                                 {"metadata": {"labels": {"touch": str(i)}}})
        time.sleep(3)
    later = bed.deployment(order)
    assert later.metadata.generation == first.metadata.generation
    assert (later.spec.template.metadata.annotations or {}).get(RUNTIME_HASH_ANNOTATION) == annotation
    assert bed.admin.get_namespaced_custom_object(
        GROUP, VERSION, bed.ns, "launchplans", order)["spec"]["plannedAt"] == plan["spec"]["plannedAt"]
    status = bed.status(order)
    assert status["phase"] == "Ready" and status["resolved"]["replanCount"] == 0
    left = {p.metadata.name for p in k8s.CoreV1Api(bed.admin_api).list_namespaced_pod(
        bed.ns, label_selector=f"{LABEL_ORDER}={order}").items}
    assert left == pods
