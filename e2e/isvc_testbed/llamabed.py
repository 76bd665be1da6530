"""Alice's orders served by llama.cpp's server on the real node: the set-up the real-node order test and
`nox -s up -- --real-node` share.

The module's controller and planner run on the host (ModuleProcesses, as in the KWOK suite); everything of an
order runs for real on the real node: the planner places it on the node's card (published by the DRA kubelet
plugin; the class's selector admits that card alone), the scheduler allocates the claim and the kubelet
prepares it, the fetch init container (the module's modelFetcher image) downloads the generated tiny model
from the stand-in Hub into the model volume, and `llama-server` (the image the llamacpp-chat recipe names,
built from source) starts with the arguments the controller compiled.

What the test bed supplies, and why:
- the node's NoSchedule taint is lifted for the module (`RealNode.untainted`): an order's pods carry no
  toleration, and the planner counts a tainted node's card as closed;
- the Hugging Face endpoint is the stand-in Hub relayed at the node's address (`RealNode.relay`): the same
  URL serves the controller on the host and the fetch container in the pod;
- the controller's probe URL is a loopback port carried to a pod of the order its path names by the API
  server's port-forward (`OrderForwarder`, `http://127.0.0.1:<port>/{namespace}/{name}`): no Service IP is
  served on the host (no kube-proxy), and a service proxy would take the order's token as an API credential;
- with `model_cache`, the chart's model cache Deployment runs on the node from its image (moved there as the
  chart's other Deployments are in test_chart_deployments.py), its Hub the stand-in relayed at the node's
  address, and the controller's `--model-cache-endpoint` is the cache pod's address on the node's bridge (no
  Service IP is served there).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from isvc_api import LABEL_ORDER
from isvc_runtime_recipes import load_recipes
from isvc_workload import AUTH_SECRET_KEY, METER_PORT, auth_secret_name
from kubernetes import client as k8s

from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import give_back, wait_for
from isvc_testbed.images import image_archive, image_ref
from isvc_testbed.module import NAMESPACE, ModuleProcesses, install_chart
from isvc_testbed.orders import Orders
from isvc_testbed.realnode import (
    REAL_NODE_GPU_SELECTOR,
    REAL_NODE_LABEL,
    REAL_NODE_TOLERATION,
    OrderForwarder,
    llama_server_image,
)
from isvc_testbed.tinymodel import hub_fixture, tiny_chat_model, truncated
from isvc_testbed.volumes import STORAGE_CLASS

RECIPE = "llamacpp-chat"
REPO = "isvc-testbed/tiny-chat-GGUF"
CUT_REPO = "isvc-testbed/tiny-chat-cut-GGUF"  # the same model without its last 64 KiB
CLASS = "real-node-t4"
ORDER = "tiny-chat"
CACHE = "isvc-model-cache"  # the chart's Deployment


@dataclass
class Bed:
    """The module's processes on the host, alice's orders, and the loopback port the probes go through."""

    cluster: Cluster
    module: ModuleProcesses
    orders: Orders
    forwarder: OrderForwarder
    good_model: Path
    dropped: int  # the node's dropped forwarded packets when the bed came up (nothing may dial out)
    cache_pod: str | None = None  # the model cache's pod on the node (`model_cache`)

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.orders.admin_api)

    def token(self, order: str) -> str:
        secret: Any = self.core.read_namespaced_secret(auth_secret_name(order), self.orders.ns)
        return base64.b64decode(secret.data[AUTH_SECRET_KEY]).decode()

    def model_dir(self, order: str, repo: str) -> Path:
        """Where the fetch container of the order's first replica put the repository, on the host."""
        claim: Any = self.core.list_namespaced_persistent_volume_claim(
            self.orders.ns, label_selector=f"{LABEL_ORDER}={order}"
        ).items[0]
        volume: Any = self.core.read_persistent_volume(claim.spec.volume_name)
        return Path(volume.spec.host_path.path) / repo

    def client(self, order: str, api_key: str | None = None, timeout: float = 60) -> openai.OpenAI:
        """An openai client for the order's pod through the forwarder's loopback port (the order's token)."""
        return openai.OpenAI(
            base_url=f"{self.forwarder.url(self.orders.ns, order)}/v1",
            api_key=self.token(order) if api_key is None else api_key,
            max_retries=0,
            timeout=timeout,
        )

    def chat(self, order: str, served_name: str, content: str = "Say something.") -> Any:
        """A short deterministic chat completion from the order's llama-server."""
        return self.client(order).chat.completions.create(
            model=served_name,
            max_tokens=8,
            temperature=0,
            seed=13,
            messages=[{"role": "user", "content": content}],
        )

    def diagnosis(self, order: str) -> str:
        """The order's status, its pods' states and events, and the controller's last lines."""
        lines = [f"status: {self.orders.status(order)}"]
        pods: list[Any] = list(
            self.core.list_namespaced_pod(self.orders.ns, label_selector=f"{LABEL_ORDER}={order}").items
        )
        for pod in pods:
            events = self.core.list_namespaced_event(
                self.orders.ns, field_selector=f"involvedObject.name={pod.metadata.name}"
            ).items
            lines += [
                f"{pod.metadata.name} on {pod.spec.node_name}: {pod.status.container_statuses}",
                f"events: {[f'{e.reason}: {e.message}' for e in events]}",
            ]
        lines.append(f"controller: {self.module.log('controller')[-3000:]}")
        return "\n".join(lines)

    def gone(self, order: str) -> None:
        """Delete the order and wait until its pods are gone (the node's CPUs are the next order's)."""
        self.orders.delete(order)
        wait_for(
            lambda: (
                not self.core.list_namespaced_pod(
                    self.orders.ns, label_selector=f"{LABEL_ORDER}={order}"
                ).items
            ),
            90,
            interval=1,
            what=f"the pods of {order} gone",
        )


def chart_installed(api: k8s.ApiClient) -> bool:
    """Whether the chart's controller Deployment exists (an earlier step installed the chart)."""
    try:
        k8s.AppsV1Api(api).read_namespaced_deployment("isvc-controller", NAMESPACE)
    except k8s.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def _cache_ready_on(core: k8s.CoreV1Api, node: str) -> Any:
    pods: list[Any] = core.list_namespaced_pod(NAMESPACE, label_selector=f"app={CACHE}").items
    here = [p for p in pods if p.spec.node_name == node and p.metadata.deletion_timestamp is None]
    ready = [
        p for p in here if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]
    return ready[0] if len(ready) == 1 and len(pods) == 1 else None


def model_cache_on_node(
    cluster: Cluster, admin_api: k8s.ApiClient, hub: str, image: str, charted: dict[str, Any]
) -> Any:
    """The chart's model cache (on the bed's StorageClass, its Hub the stand-in at `hub`) running on the real
    node from `image`: the Deployment moved there, nothing else of its pod changed but the placement and
    `imagePullPolicy: Never`. Its Ready pod; `charted` gets the Deployment as the chart made it (`give_back`)."""
    install_chart(
        cluster,
        {
            "images": {"modelCache": image},
            "huggingFace": {"endpoint": f"http://{hub}"},
            "modelCache": {"storageClassName": STORAGE_CLASS, "size": "1Gi"},
        },
    )
    placement = {
        "nodeSelector": {REAL_NODE_LABEL: "true"},
        "tolerations": [REAL_NODE_TOLERATION],
        "containers": [{"name": "model-cache", "imagePullPolicy": "Never"}],
    }
    apps, core = k8s.AppsV1Api(admin_api), k8s.CoreV1Api(admin_api)
    charted[CACHE] = apps.read_namespaced_deployment(CACHE, NAMESPACE)
    apps.patch_namespaced_deployment(CACHE, NAMESPACE, {"spec": {"template": {"spec": placement}}})
    return wait_for(
        lambda: _cache_ready_on(core, cluster.node.name), 180, interval=1, what=f"{CACHE} on the node"
    )


@contextlib.contextmanager
def llama_bed(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    standin_template: str,
    namespace: str,
    model_cache: bool = False,
) -> Iterator[Bed]:
    """The images on the node, the Hub with the tiny model and its cut copy, the module's processes, a class
    for the node's card, and the node open to the orders' pods (taint lifted) while the bed is in use.

    `cluster` runs a real node (`Cluster(real_node=True)`); `namespace` is alice's (bound to the module's
    editor role); `standin_template` is the stand-in inference server's URL template. On exit alice's orders
    are deleted and waited for, the taint comes back and the processes stop.
    """
    node = cluster.node
    recipe = load_recipes().get(RECIPE)
    assert recipe is not None and cluster.bin_dir is not None
    node.import_image(llama_server_image(cluster.bin_dir, recipe.image, recipe.command), recipe.image)
    fetcher = image_archive("modelFetcher")
    node.ctr("images", "import", "--platform", "linux/amd64", str(fetcher))
    meter = image_archive("controller")  # its isvc-meter counts llama-server's answers (issue 42)
    node.ctr("images", "import", "--platform", "linux/amd64", str(meter))
    cache_image = image_archive("modelCache") if model_cache else None
    if cache_image is not None:
        node.ctr("images", "import", "--platform", "linux/amd64", str(cache_image))
    good = tiny_chat_model()
    hub_dir = hub_fixture(cluster.workdir / "tiny-hub-orders", {REPO: good, CUT_REPO: truncated(good)})
    # the chart's ServiceAccounts, RBAC and webhook configuration, which the processes run under; an earlier
    # step may have installed it already (its Deployments on KWOK's node, as the chart places them)
    if not chart_installed(admin_api):
        install_chart(cluster)
    module = ModuleProcesses(cluster, standin_template)
    dropped = node.forward_dropped()
    charted: dict[str, Any] = {}  # the model cache's Deployment as the chart made it
    try:
        module.start_hub(hub_dir)
        module.start_volumes(cluster.workdir / "volumes")
        hub = node.relay("hub-orders", module.hub_port, module.hub_port)
        module.start_planner()
        cache = (
            model_cache_on_node(cluster, admin_api, hub, image_ref(cache_image), charted)
            if cache_image
            else None
        )
        cache_flags = ["--model-cache-endpoint", f"http://{cache.status.pod_ip}:8080"] if cache else []
        with (
            OrderForwarder(
                admin_api, METER_PORT
            ) as forwarder,  # the probes go through the meter, as the Service
            node.untainted(),
        ):
            module.start_controller(
                "--leader-elect",
                "false",  # the only controller of the module
                "--huggingface-endpoint",
                f"http://{hub}",
                "--model-fetch-image",
                image_ref(fetcher),
                "--meter-image",
                image_ref(meter),
                "--probe-url-template",
                forwarder.template(),
                *cache_flags,
            )
            with Orders(module, admin_api, alice_api, namespace, timeout=120) as orders:
                orders.create_class(
                    CLASS,
                    {
                        "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                        "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                        "acceleratorPolicy": {
                            "deviceClassNames": ["gpu.nvidia.com"],
                            "selector": REAL_NODE_GPU_SELECTOR,
                        },
                    },
                )
                yield Bed(
                    cluster, module, orders, forwarder, good, dropped, cache.metadata.name if cache else None
                )
    finally:
        module.stop()
        # the node's CPUs are the next module's: the cache back on KWOK's node, as the chart places it
        give_back(admin_api, NAMESPACE, charted, node.name)
