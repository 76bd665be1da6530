"""An order as alice runs llama.cpp's server on the real node, end to end, and a real crash is reported.

The module's controller and planner run on the host (ModuleProcesses, as in the KWOK suite); everything of the
order runs for real on the real node: the planner places it on the node's card (published by the DRA kubelet
plugin; the class's selector admits that card alone), the scheduler allocates the claim and the kubelet
prepares it, the fetch init container (the module's modelFetcher image) downloads the generated tiny model
from the stand-in Hub into the model volume (the one variant the catalog chose of the repository's two),
`llama-server` (the image the llamacpp-chat recipe names, built from source) starts with the arguments the
controller compiled, the controller's probe passes with the order's token, the order goes Ready, and the
openai client gets a completion.

What the test bed supplies, and why:
- the node's NoSchedule taint is lifted for the module (`RealNode.untainted`): an order's pods carry no
  toleration, and the planner counts a tainted node's card as closed;
- the Hugging Face endpoint is the stand-in Hub relayed at the node's address (`RealNode.relay`): the same
  URL serves the controller on the host and the fetch container in the pod;
- the controller's probe URL is a loopback port carried to the order's pod by the API server's port-forward
  (`PodForwarder`): no Service IP is served on the host (no kube-proxy), and a service proxy would take the
  order's token as an API credential.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from isvc_api import LABEL_ORDER
from isvc_runtime_recipes import load_recipes
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import NAMESPACE, ModuleProcesses, install_chart
from isvc_testbed.orders import Orders, condition, hf
from isvc_testbed.realnode import REAL_NODE_GPU_SELECTOR, PodForwarder, llama_server_image
from isvc_testbed.standin import StandIn
from isvc_testbed.tinymodel import GGUF_FILE, hub_fixture, tiny_chat_model, truncated
from isvc_workload import AUTH_SECRET_KEY, CONTAINER_NAME, auth_secret_name
from kubernetes import client as k8s

from .test_chart_deployments import _archive, _ref

RECIPE = "llamacpp-chat"
REPO = "isvc-testbed/tiny-chat-GGUF"
CUT_REPO = "isvc-testbed/tiny-chat-cut-GGUF"  # the same model without its last 64 KiB
CLASS = "real-node-t4"
ORDER = "tiny-chat"


@dataclass
class Bed:
    """The module's processes on the host, alice's orders, and the loopback port the probes go through."""

    cluster: Cluster
    module: ModuleProcesses
    orders: Orders
    forwarder: PodForwarder
    good_model: Path

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.orders.admin_api)

    def token(self, order: str) -> str:
        secret = self.core.read_namespaced_secret(auth_secret_name(order), self.orders.ns)
        return base64.b64decode(secret.data[AUTH_SECRET_KEY]).decode()

    def diagnosis(self, order: str) -> str:
        """The order's status, its pods' states and events, and the controller's last lines."""
        lines = [f"status: {self.orders.status(order)}"]
        pods = self.core.list_namespaced_pod(self.orders.ns, label_selector=f"{LABEL_ORDER}={order}").items
        for pod in pods:
            events = self.core.list_namespaced_event(
                self.orders.ns, field_selector=f"involvedObject.name={pod.metadata.name}").items
            lines += [f"{pod.metadata.name} on {pod.spec.node_name}: {pod.status.container_statuses}",
                      f"events: {[f'{e.reason}: {e.message}' for e in events]}"]
        lines.append(f"controller: {self.module.log('controller')[-3000:]}")
        return "\n".join(lines)

    def model_dir(self, order: str, repo: str) -> Path:
        """Where the fetch container of the order's first replica put the repository, on the host."""
        claim = self.core.list_namespaced_persistent_volume_claim(
            self.orders.ns, label_selector=f"{LABEL_ORDER}={order}").items[0]
        volume = self.core.read_persistent_volume(claim.spec.volume_name)
        return Path(volume.spec.host_path.path) / repo

    def gone(self, order: str) -> None:
        """Delete the order and wait until its pods are gone (the node's CPUs are the next order's)."""
        self.orders.delete(order)
        wait_for(lambda: not self.core.list_namespaced_pod(self.orders.ns,
                                                           label_selector=f"{LABEL_ORDER}={order}").items,
                 90, interval=1, what=f"the pods of {order} gone")


def _chart_installed(api: k8s.ApiClient) -> bool:
    """Whether the chart's controller Deployment exists (an earlier module installed the chart)."""
    try:
        k8s.AppsV1Api(api).read_namespaced_deployment("isvc-controller", NAMESPACE)
    except k8s.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


@pytest.fixture(scope="module")
def bed(cluster: Cluster, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, fleet: Fleet, standin: StandIn,
        team_a: str, catalog_crds: list[str]) -> Iterator[Bed]:
    """The images on the node, the Hub with the tiny model and its cut copy, the processes, a class for the
    node's card, and the node open to the orders' pods (taint lifted) until the module ends."""
    node = cluster.node
    recipe = load_recipes().get(RECIPE)
    assert recipe is not None and cluster.bin_dir is not None
    node.import_image(llama_server_image(cluster.bin_dir, recipe.image, recipe.command), recipe.image)
    fetcher = _archive("modelFetcher")
    node.ctr("images", "import", "--platform", "linux/amd64", str(fetcher))
    good = tiny_chat_model()
    hub_dir = hub_fixture(cluster.workdir / "tiny-hub-orders", {REPO: good, CUT_REPO: truncated(good)})
    # the chart's ServiceAccounts, RBAC and webhook configuration, which the processes run under; the chart
    # module may have installed it already (and scaled its Deployments to none)
    if not _chart_installed(admin_api):
        install_chart(cluster)
    module = ModuleProcesses(cluster, standin.url_template)
    dropped = node.forward_dropped()
    try:
        module.start_hub(hub_dir)
        module.start_volumes(cluster.workdir / "volumes")
        hub = node.relay("hub-orders", module.hub_port, module.hub_port)
        module.start_planner()
        with PodForwarder(admin_api, team_a, f"{ORDER}-0", recipe.ports.http) as forwarder, node.untainted():
            module.start_controller("--leader-elect", "false",  # the only controller of the module
                                    "--huggingface-endpoint", f"http://{hub}",
                                    "--model-fetch-image", _ref(fetcher),
                                    "--probe-url-template", f"http://127.0.0.1:{forwarder.port}")
            with Orders(module, admin_api, alice_api, team_a, timeout=120) as orders:
                orders.create_class(CLASS, {
                    "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                    "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                    "acceleratorPolicy": {"deviceClassNames": ["gpu.nvidia.com"],
                                          "selector": REAL_NODE_GPU_SELECTOR}})
                yield Bed(cluster, module, orders, forwarder, good)
        assert node.forward_dropped() == dropped, "an order's pod dialled out of the real node's namespace"
    finally:
        module.stop()


def test_an_order_by_alice_goes_ready_on_the_real_node_and_answers_a_chat_completion(bed: Bed) -> None:
    orders, core = bed.orders, bed.core
    orders.create(ORDER, hf(REPO), CLASS)
    try:
        status = orders.wait_ready(ORDER, timeout=180)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(ORDER)}") from None
    assert condition(status, "Ready").get("status") == "True"
    plan = orders.plan(ORDER)
    assert plan is not None
    runtime = plan["spec"]["runtime"]
    # placed on the real node's card, and the pod runs there with the arguments the controller compiled
    assert plan["spec"]["placement"]["nodeName"] == bed.cluster.node.name
    pod = core.read_namespaced_pod(f"{ORDER}-0", orders.ns)
    assert pod.spec.node_name == bed.cluster.node.name
    server = next(c for c in pod.spec.containers if c.name == CONTAINER_NAME)
    assert (server.image, server.command) == (runtime["image"], runtime["command"])
    assert server.args == runtime["args"]
    assert runtime["recipe"] == RECIPE
    assert [s.state.terminated.exit_code for s in pod.status.init_container_statuses] == [0]
    log = core.read_namespaced_pod_log(pod.metadata.name, orders.ns, container=CONTAINER_NAME)
    model_path = runtime["args"][runtime["args"].index("-m") + 1]
    assert model_path == f"/models/{REPO}/{GGUF_FILE}"  # the variant resolution chose, under its own name
    assert f"loading model '{model_path}'" in log and "model loaded" in log, log[-2000:]
    # the claim was allocated the node's card and prepared there for real (the DRA plugin's record of it)
    [ref] = pod.status.resource_claim_statuses
    resource = k8s.ResourceV1Api(orders.admin_api)
    claim = resource.read_namespaced_resource_claim(ref.resource_claim_name, orders.ns)
    [result] = claim.status.allocation.devices.results
    assert (result.pool, result.device) == (bed.cluster.node.name, bed.cluster.node.devices()[0].name)
    assert (bed.cluster.node.dra_state_dir / f"{claim.metadata.uid}.json").is_file()
    # the fetch downloaded that variant alone, not the repository's other one
    assert plan["spec"]["modelFiles"] == [GGUF_FILE]
    assert sorted(p.name for p in bed.model_dir(ORDER, REPO).glob("*.gguf")) == [GGUF_FILE]

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{bed.forwarder.port}/v1", api_key=bed.token(ORDER),
                           max_retries=0, timeout=60)
    reply = client.chat.completions.create(model=runtime["servedName"], max_tokens=8, temperature=0, seed=13,
                                           messages=[{"role": "user", "content": "Say something."}])
    assert reply.usage is not None and reply.usage.completion_tokens > 0, reply
    with pytest.raises(openai.AuthenticationError):  # a wrong token: llama-server itself says 401
        openai.OpenAI(base_url=f"http://127.0.0.1:{bed.forwarder.port}/v1", api_key="wrong",
                      max_retries=0, timeout=30).models.list()
    bed.gone(ORDER)


def test_a_crashing_runtime_is_reported_with_its_own_lines_and_the_report_lifts_when_it_comes_up(
        bed: Bed) -> None:
    orders = bed.orders
    name = "tiny-cut"
    bed.forwarder.pod = f"{name}-0"
    orders.create(name, hf(CUT_REPO), CLASS)
    try:
        status = orders.wait(name, lambda s: condition(s, "WorkloadReady").get("reason")
                             == "WorkloadStartupFailed", 180, "WorkloadStartupFailed")
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(name)}") from None
    message = condition(status, "WorkloadReady")["message"]
    # llama.cpp's own words about the file the fetch container downloaded
    assert "model is corrupted or incomplete" in message, message
    assert "failed to load model" in message, message
    assert status.get("phase") != "Ready"

    # the file is made whole on the model volume; the kubelet's next restart of the container loads it
    shutil.copyfile(bed.good_model, bed.model_dir(name, CUT_REPO) / GGUF_FILE)
    try:
        status = orders.wait_ready(name, timeout=240)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(name)}") from None
    ready = condition(status, "WorkloadReady")
    assert ready.get("status") == "True", ready
    bed.gone(name)

