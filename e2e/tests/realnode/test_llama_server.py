"""llama.cpp's server as a real pod on the real node: the workload the platform makes for a tiny GGUF model.

The model is generated here (isvc_testbed.tinymodel: llama architecture, random weights, ChatML template) and
served whole by the stand-in Hub under a variant's name, beside another variant. Its facts come from the
catalog's Hub client reading that repository; the launch plan from the planner's estimate and the recipe
book's `compile` on the real node's card; the StatefulSet from the workload package's `statefulset` over that
plan (`WorkloadInputs.from_plan`). So the fetch init container (the module's modelFetcher image), the token
from the order's Secret, the ports, the readiness probe and llama-server's arguments are the platform's own.
Three things are changed, and only those: the pod template's device claim is dropped (this module proves what
does not depend on a device; test_llama_order.py runs an order with its claim), the pods carry the real node's
selector and toleration, and the set has no owner (no order object exists for it).

The host reaches the pod through the API server only (`kubectl port-forward` on 127.0.0.1).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    InferenceService,
    LaunchPlanSpec,
    ModelFacts,
    Placement,
    PlacementMode,
)
from isvc_catalog import HubClient
from isvc_health import ProbeOutcome, Prober
from isvc_planner import estimate, memory_need
from isvc_runtime_recipes import load_recipes
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import DRIVER
from isvc_testbed.helpers import ignore_404, namespace, wait_for
from isvc_testbed.images import image_ref
from isvc_testbed.module import ModuleProcesses
from isvc_testbed.realnode import (
    REAL_NODE_GPU,
    REAL_NODE_LABEL,
    REAL_NODE_NAME,
    REAL_NODE_TOLERATION,
    llama_server_image,
    port_forward,
)
from isvc_testbed.standin import StandIn
from isvc_testbed.tinymodel import GGUF_FILE, hub_fixture, tiny_chat_model
from isvc_testbed.volumes import STORAGE_CLASS
from isvc_workload import (
    AUTH_SECRET_KEY,
    CONTAINER_NAME,
    FETCH_CONTAINER_NAME,
    WorkloadInputs,
    WorkloadSettings,
    auth_secret,
    auth_secret_name,
    statefulset,
)
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .test_chart_deployments import _archive

REPO = "isvc-testbed/tiny-chat-GGUF"
RECIPE = "llamacpp-chat"
NS = "llama-on-node"
NAME = "tiny-chat"
# the whole of the real node's card (the DRA plugin's T4): the recipe compiles the same arguments for any card
# the tiny model fits on; the card itself is never touched (a CPU build), and its claim is not made here
PLACEMENT = Placement(
    placement_mode=PlacementMode.WHOLE_DEVICE,
    device_count=1,
    node_name=REAL_NODE_NAME,
    device_class_name="gpu.nvidia.com",
    driver=DRIVER,
    accelerator_product_name=REAL_NODE_GPU.product,
    accelerator_memory_gi_b=float((REAL_NODE_GPU.memory or "0Gi").removesuffix("Gi")),
    accelerator_compute_capability=".".join(REAL_NODE_GPU.compute_capability.split(".")[:2]),
)


@dataclass
class Served:
    """The running pod, what it was compiled from, and where the host reaches it."""

    runtime: CompiledRuntime
    pod: Any
    token: str
    base_url: str


def _order() -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {"name": NAME, "namespace": NS, "uid": "00000000-0000-0000-0000-000000000013"},
            "spec": {"model": {"src": "HuggingFace", "ref": {"name": REPO}}},
        }
    )


def _on_real_node(set_: dict[str, Any]) -> dict[str, Any]:
    """The set, without its device claim and owner, its pods placed on the real node."""
    set_["metadata"].pop("ownerReferences", None)
    pod = set_["spec"]["template"]["spec"]
    pod.pop("resourceClaims")
    for container in pod["containers"]:
        container["resources"].pop("claims")
    pod["nodeSelector"] = {REAL_NODE_LABEL: "true"}
    pod["tolerations"] = [REAL_NODE_TOLERATION]
    return set_


@pytest.fixture(scope="module")
def served(cluster: Cluster, admin_api: k8s.ApiClient, standin: StandIn) -> Iterator[Served]:
    node = cluster.node
    recipe = load_recipes().get(RECIPE)
    assert recipe is not None
    assert cluster.bin_dir is not None
    node.import_image(llama_server_image(cluster.bin_dir, recipe.image, recipe.command), recipe.image)
    fetcher = _archive("modelFetcher")
    node.ctr("images", "import", "--platform", "linux/amd64", str(fetcher))
    hub_dir = hub_fixture(cluster.workdir / "tiny-hub", {REPO: tiny_chat_model()})
    module = ModuleProcesses(cluster, standin.url_template)
    module.start_hub(hub_dir)
    module.start_volumes(cluster.workdir / "volumes")
    dropped = node.forward_dropped()
    core, apps = k8s.CoreV1Api(admin_api), k8s.AppsV1Api(admin_api)
    try:
        hub = node.relay("hub-tiny", module.hub_port, module.hub_port)
        with HubClient(module.hub_url) as hub_client:
            facts = hub_client.resolve(REPO)
        assert isinstance(facts, ModelFacts), facts
        need = memory_need(facts)
        assert need is not None
        estimates = estimate(facts, need)
        runtime = load_recipes().compile(facts, EndpointType.CHAT, PLACEMENT, estimates, REPO)
        assert isinstance(runtime, CompiledRuntime), runtime
        plan = LaunchPlanSpec(
            placement=PLACEMENT,
            estimates=estimates,
            runtime=runtime,
            model_commit=facts.commit,
            model_files=facts.gguf_files,
        )
        order = _order()
        settings = WorkloadSettings(
            model_fetch_image=image_ref(fetcher),
            huggingface_endpoint=f"http://{hub}",
            model_volume_storage_class=STORAGE_CLASS,
        )
        inputs = WorkloadInputs.from_plan(order, plan, None)
        set_ = _on_real_node(statefulset(inputs, settings))
        secret = auth_secret(order)
        secret["metadata"].pop("ownerReferences", None)
        namespace(admin_api, NS)
        core.create_namespaced_secret(NS, secret)
        apps.create_namespaced_stateful_set(NS, set_)
        token = base64.b64decode(secret["data"][AUTH_SECRET_KEY]).decode()

        def ready() -> Any:
            try:
                pod = core.read_namespaced_pod(f"{NAME}-0", NS)
            except ApiException as e:
                if e.status == 404:  # the StatefulSet controller has not made it yet
                    return None
                raise
            conds = (pod.status.conditions if pod.status else None) or []
            return pod if any(c.type == "Ready" and c.status == "True" for c in conds) else None

        try:
            pod = wait_for(ready, 180, interval=1, what="the llama-server pod Ready")
        except TimeoutError as e:
            pods = core.list_namespaced_pod(NS).items
            raise AssertionError(f"{e}\n" + "\n".join(_diagnosis_in(core, p) for p in pods)) from None
        http = runtime.ports[0].container_port
        with port_forward(cluster.admin_kubeconfig, NS, pod.metadata.name, http) as port:
            yield Served(runtime, pod, token, f"http://127.0.0.1:{port}")
        assert node.forward_dropped() == dropped, "the llama-server pod dialled out of the namespace"
    finally:
        ignore_404(lambda: apps.delete_namespaced_stateful_set(NAME, NS))
        for claim in core.list_namespaced_persistent_volume_claim(NS).items:
            ignore_404(lambda c=claim: core.delete_namespaced_persistent_volume_claim(c.metadata.name, NS))
        ignore_404(lambda: core.delete_namespaced_secret(auth_secret_name(NAME), NS))
        module.stop()
        # the pod's two CPUs are the next module's
        wait_for(lambda: not core.list_namespaced_pod(NS).items, 60, interval=1, what="the pod gone")


def _diagnosis_in(core: k8s.CoreV1Api, pod: Any) -> str:
    """A pod of this module's namespace: its state, events and each container's last lines."""
    name = pod.metadata.name
    events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}").items
    lines = [f"{name}: {pod.status}", f"events: {[f'{e.reason}: {e.message}' for e in events]}"]
    for container in (FETCH_CONTAINER_NAME, CONTAINER_NAME):
        try:
            lines.append(
                f"{container}: " + core.read_namespaced_pod_log(name, NS, container=container, tail_lines=30)
            )
        except ApiException as e:
            lines.append(f"{container}: {e.reason}")
    return "\n".join(lines)


def test_the_model_is_fetched_by_the_init_container_and_llama_server_runs_the_compiled_arguments(
    served: Served, admin_api: k8s.ApiClient
) -> None:
    runtime = served.runtime
    assert runtime.recipe == RECIPE
    container = served.pod.spec.containers[0]
    assert container.command == runtime.command and container.args == runtime.args  # a whole card: no gate
    assert container.image == load_recipes().get(RECIPE).image  # type: ignore[union-attr]
    # the variant the catalog chose in the repository, under its own name (the repository has no model.gguf)
    assert runtime.model_path == f"{runtime.model_dir}/{GGUF_FILE}" and runtime.model_path in runtime.args
    core = k8s.CoreV1Api(admin_api)
    init = served.pod.status.init_container_statuses[0]
    assert init.name == FETCH_CONTAINER_NAME and init.state.terminated.exit_code == 0
    log = core.read_namespaced_pod_log(served.pod.metadata.name, NS, container=CONTAINER_NAME)
    # llama.cpp's own loader read the file the fetch container wrote, at the path the recipe compiled
    assert f"loading model '{runtime.model_path}'" in log, log[-3000:]
    assert "model loaded" in log, log[-3000:]


def test_the_platforms_probe_succeeds_with_the_token(served: Served) -> None:
    with Prober() as prober:
        result = prober.probe_url(served.base_url, token=served.token, model=served.runtime.served_name)
    assert result.ok, result


def test_a_wrong_token_is_refused_by_llama_server(served: Served) -> None:
    with Prober() as prober:
        wrong = prober.probe_url(served.base_url, token=served.token + "x", model=served.runtime.served_name)
        none = prober.probe_url(served.base_url, token=None)
    assert (wrong.outcome, wrong.status_code) == (ProbeOutcome.HTTP_STATUS, 401), wrong
    assert none.status_code == 401, none
    answer = httpx.post(
        f"{served.base_url}/v1/chat/completions",
        json={"messages": []},
        headers={"Authorization": "Bearer nope"},
        timeout=10,
    )
    assert answer.status_code == 401, answer.text


def test_the_openai_client_gets_a_chat_completion_with_tokens(served: Served) -> None:
    client = openai.OpenAI(base_url=f"{served.base_url}/v1", api_key=served.token, max_retries=0, timeout=60)
    reply = client.chat.completions.create(
        model=served.runtime.served_name,
        messages=[{"role": "user", "content": "Say something."}],
        max_tokens=8,
        temperature=0,
        seed=13,
    )
    assert reply.usage is not None and reply.usage.completion_tokens > 0, reply
    assert reply.usage.prompt_tokens > 0
    assert reply.choices[0].message.role == "assistant"
    assert reply.model == served.runtime.served_name or reply.model, reply
