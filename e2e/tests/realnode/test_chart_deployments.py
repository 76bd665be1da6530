"""The chart's own Deployments run as real pods on the real node, from the module's images (`nox -s images`).

The chart is installed with `helm upgrade --install` (ServiceAccounts, RBAC, ConfigMap, webhook Secret, the
default class: all the chart's). Its planner and controller Deployments are then moved onto the real node and
nothing else about their pods is changed (args, probes, security context, ServiceAccount token, volumes):
the placement (a node selector and a toleration for the real node), `imagePullPolicy: Never` (the images are
imported with ctr, never pulled) and `hostAliases`, the test bed's stand-in for cluster DNS, which is not run.
When the module ends both get their pods back as the chart made them (on KWOK's node), so the next module's
`helm upgrade` finds the chart's own Deployments.

What the controller's arguments dial, and where the test bed sends it (never by a name lookup, never off the
machine):
- the API server: the kubelet's KUBERNETES_SERVICE_HOST (the `kubernetes` Service IP), DNAT'ed inside the
  node's namespace to the relay to the host's 127.0.0.1 (realnode.py);
- the planner, `https://isvc-planner.d8-isvc.svc:8080` (the chart's --planner-url, its certificate checked
  against the chart's isvc-planner-tls authority): a host alias naming the planner pod's IP, the pod on the
  same node's bridge;
- the Hugging Face endpoint (a chart setting): the stand-in hub on the host's loopback, relayed at the node's
  address;
- an order's inference API, `http://{order}.{namespace}.svc:8000` (the in-cluster prober): a host alias naming
  the node's address, relayed to the stand-in inference server, which answers by that Host header.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from isvc_testbed import ImagesMissing
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import give_back, wait_for
from isvc_testbed.images import image_archive, image_ref
from isvc_testbed.module import NAMESPACE, ModuleProcesses, install_chart
from isvc_testbed.orders import Orders, condition, hf
from isvc_testbed.realnode import REAL_NODE_LABEL, REAL_NODE_TOLERATION
from isvc_testbed.standin import StandIn
from isvc_testbed.volumes import STORAGE_CLASS
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

PLANNER_HOST = f"isvc-planner.{NAMESPACE}.svc"  # the chart's isvc_planner_url
APPS = ("isvc-controller", "isvc-planner")  # the chart's Deployments this module moves onto the real node
ORDER = "chat"


def _archive(name: str) -> Path:
    """The module's image archive `name` (isvc_testbed.images), or the test fails saying how to build it."""
    try:
        return image_archive(name)
    except ImagesMissing as e:
        pytest.fail(str(e), pytrace=False)


def _pods(core: k8s.CoreV1Api, app: str) -> list[Any]:
    return list(core.list_namespaced_pod(NAMESPACE, label_selector=f"app={app}").items)


def _ready(pod: Any) -> bool:
    conds = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def _diagnosis(core: k8s.CoreV1Api, pod: Any) -> str:
    name = pod.metadata.name
    events = core.list_namespaced_event(NAMESPACE, field_selector=f"involvedObject.name={name}").items
    try:
        log = core.read_namespaced_pod_log(name, NAMESPACE, tail_lines=30)
    except ApiException as e:
        log = str(e)
    states = pod.status.container_statuses if pod.status else None
    return f"{name}: {states}\nevents: {[f'{e.reason}: {e.message}' for e in events]}\nlog: {log}"


def _run_on_real_node(api: k8s.ApiClient, node: str, app: str, host_aliases: list[dict[str, Any]]) -> Any:
    """Move the chart's Deployment `app` onto the real node; its Ready pod there once the rollout is done."""
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    deployment: Any = apps.read_namespaced_deployment(app, NAMESPACE)
    spec = deployment.spec.template.spec
    spec.node_selector = {**(spec.node_selector or {}), REAL_NODE_LABEL: "true"}
    spec.tolerations = [*(spec.tolerations or []), k8s.V1Toleration(**REAL_NODE_TOLERATION)]
    spec.host_aliases = [k8s.V1HostAlias(**a) for a in host_aliases] or None
    for container in spec.containers:
        container.image_pull_policy = "Never"
    apps.replace_namespaced_deployment(app, NAMESPACE, deployment)

    def rolled_out() -> Any:
        pods = _pods(core, app)
        real = [p for p in pods if p.spec.node_name == node and p.metadata.deletion_timestamp is None]
        elsewhere = [p for p in pods if p.spec.node_name != node]
        return real[0] if len(real) == 1 and _ready(real[0]) and not elsewhere else None

    try:
        return wait_for(rolled_out, 180, interval=1, what=f"{app} rolled out onto the real node")
    except TimeoutError as e:
        notes = "\n".join(_diagnosis(core, p) for p in _pods(core, app) if p.spec.node_name == node)
        raise AssertionError(f"{e}\n{notes}") from None


@dataclass
class ChartOnNode:
    planner: Any
    controller: Any
    standin: StandIn
    module: ModuleProcesses


@pytest.fixture(scope="module")
def chart_on_node(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    fleet: Fleet,
    standin: StandIn,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[ChartOnNode]:
    """The chart installed; its planner and controller Deployments running on the real node, Ready."""
    node = cluster.node
    archives = {name: _archive(name) for name in ("controller", "planner")}
    for archive in archives.values():
        node.ctr("images", "import", "--platform", "linux/amd64", str(archive))
    apps = k8s.AppsV1Api(admin_api)
    charted: dict[str, Any] = {}  # the Deployments as the chart made them, given back when the module ends
    module = ModuleProcesses(cluster, standin.url_template)
    module.start_hub()
    module.start_volumes()  # the orders' model volumes: the bed's stand-in provisioner and its StorageClass
    dropped = node.forward_dropped()
    try:
        hub = node.relay("hub", module.hub_port, module.hub_port)
        node.relay("standin", 8000, standin.port)  # the Service port of every order (isvc_workload)
        install_chart(
            cluster,
            {
                # the model fetcher keeps its default name: orders' pods run on KWOK's nodes, nothing pulls it
                "images": {name: image_ref(path) for name, path in archives.items()},
                "huggingFace": {"endpoint": f"http://{hub}"},
                "health": {"periodSeconds": 5, "failureThreshold": 2},
                "modelVolume": {"storageClassName": STORAGE_CLASS},
            },
        )
        charted.update({app: apps.read_namespaced_deployment(app, NAMESPACE) for app in APPS})
        planner = _run_on_real_node(admin_api, node.name, "isvc-planner", [])
        controller = _run_on_real_node(
            admin_api,
            node.name,
            "isvc-controller",
            [
                {"ip": planner.status.pod_ip, "hostnames": [PLANNER_HOST]},
                {"ip": node.node_ip, "hostnames": [f"{ORDER}.{team_a}.svc"]},
            ],
        )
        yield ChartOnNode(planner, controller, standin, module)
        # the network rule: neither pod sent anything out of the test bed's namespace (every stand-in is
        # relayed into it, every Service name is a host alias); the FORWARD rule that would drop it counted
        # nothing
        assert node.forward_dropped() == dropped, "a chart's pod dialled out of the real node's namespace"
    finally:
        module.stop()
        # off the node: its two CPUs are the next module's (a runtime's pod asks for both)
        give_back(admin_api, NAMESPACE, charted, node.name)


def test_the_charts_planner_deployment_runs_on_the_real_node_and_answers_readyz(
    chart_on_node: ChartOnNode, admin_api: k8s.ApiClient
) -> None:
    pod = chart_on_node.planner
    assert pod.spec.service_account_name == "planner"
    body = k8s.CoreV1Api(admin_api).connect_get_namespaced_pod_proxy_with_path(
        f"https:{pod.metadata.name}:8080",
        NAMESPACE,
        "readyz",  # HTTPS alone (issue 29)
    )
    assert "ok" in str(body)


def test_the_charts_controller_deployment_runs_ready_and_holds_the_lease(
    chart_on_node: ChartOnNode, admin_api: k8s.ApiClient
) -> None:
    pod = chart_on_node.controller
    core = k8s.CoreV1Api(admin_api)
    container = pod.spec.containers[0]
    assert "--planner-url=https://isvc-planner.d8-isvc.svc:8080" in container.args
    assert "--planner-ca-file=/etc/isvc/planner-ca/ca.crt" in container.args
    assert "--leader-elect=true" in container.args
    assert pod.spec.service_account_name == "controller"
    assert container.security_context.read_only_root_filesystem is True
    body = core.connect_get_namespaced_pod_proxy_with_path(f"{pod.metadata.name}:8081", NAMESPACE, "readyz")
    assert "ok" in str(body).lower()

    def held() -> Any:
        try:
            lease = k8s.CoordinationV1Api(admin_api).read_namespaced_lease("isvc-controller", NAMESPACE)
        except ApiException:
            return None
        holder = lease.spec.holder_identity or ""
        return lease if holder.startswith(f"{pod.metadata.name}_") else None

    first = wait_for(held, 60, what="the controller pod holding the isvc-controller Lease")

    def renewed() -> Any:
        now = held()
        return now if now is not None and now.spec.renew_time > first.spec.renew_time else None

    # the same holder renews it: the pod leads, it did not just take the Lease once
    again = wait_for(renewed, 30, what="the Lease renewed by the pod")
    assert again.spec.holder_identity == first.spec.holder_identity


def test_an_order_by_alice_is_planned_and_ready_through_the_controller_pod(
    chart_on_node: ChartOnNode, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str
) -> None:
    core = k8s.CoreV1Api(admin_api)
    with Orders(chart_on_node.module, admin_api, alice_api, team_a, timeout=120) as orders:
        orders.create(ORDER, hf("Qwen/Qwen2.5-7B-Instruct"), "default-llm")
        try:
            status = orders.wait_true(ORDER, "Planned")
            assert status["resolved"]["deviceClass"]
            plan = orders.plan(ORDER)
            assert plan is not None
            # the probe of the controller in its pod dialled http://chat.<ns>.svc:8000/v1/models
            status = orders.wait_ready(ORDER, timeout=120)
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{_diagnosis(core, chart_on_node.controller)}") from None
        assert condition(status, "Ready").get("status") == "True"
        assert chart_on_node.standin.requests(team_a, ORDER) > 0
