"""DRA on the real node: the fake GPU driver's kubelet plugin publishes the node's card, and a claim on it is
prepared (CDI environment in the container) and unprepared by the kubelet for real; a real pod is reached
from the host through the API server's port-forward on 127.0.0.1."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from isvc_planner import Inventory
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import DRIVER, Fleet
from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.realnode import (
    BUSYBOX_IMAGE,
    REAL_NODE_GPU,
    REAL_NODE_GPU_SELECTOR,
    REAL_NODE_LABEL,
    REAL_NODE_TOLERATION,
)
from kubernetes import client as k8s
from kubernetes.stream import stream

NS = "default"


def _pod(name: str, command: str, claim: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    spec: dict[str, Any] = {
        "nodeSelector": {REAL_NODE_LABEL: "true"},
        "tolerations": [REAL_NODE_TOLERATION],
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if claim is not None:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _running(core: k8s.CoreV1Api, name: str) -> bool:
    pod = core.read_namespaced_pod(name, NS)
    return pod.status is not None and pod.status.phase == "Running"


def _gone(core: k8s.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, NS)
    except k8s.ApiException as e:
        return e.status == 404
    return False


def _exec(core: k8s.CoreV1Api, pod: str, command: list[str]) -> str:
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        NS,
        command=command,
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    try:
        ws.run_forever(timeout=30)
        out = str(ws.read_stdout())
        assert ws.returncode == 0, ws.read_stderr()
    finally:
        ws.close()
        ws.sock.shutdown()  # websocket-client's close() leaves the socket open once the server has closed
    return out


def _slices(api: k8s.ApiClient, node: str) -> list[Any]:
    return list(
        k8s.ResourceV1Api(api)
        .list_resource_slice(field_selector=f"spec.nodeName={node},spec.driver={DRIVER}")
        .items
    )


def test_the_plugin_publishes_the_real_nodes_card_in_the_fleets_shape(
    cluster: Cluster, admin_api: k8s.ApiClient, fleet: Fleet
) -> None:
    node = cluster.node
    log = (cluster.workdir / "logs" / "realnode-dra-plugin.log").read_text(errors="replace")
    assert f"registered {DRIVER} with the kubelet of {node.name}" in log
    slices = _slices(admin_api, node.name)
    assert len(slices) == 1
    published = admin_api.sanitize_for_serialization(slices[0])
    # written by the plugin (its ResourceSlice controller, under the node's credential), owned by the Node
    assert {m["manager"] for m in published["metadata"]["managedFields"]} == {"isvc-dra-plugin"}
    assert [(o["kind"], o["name"]) for o in published["metadata"]["ownerReferences"]] == [("Node", node.name)]
    assert published["spec"]["pool"]["name"] == node.name
    [device] = published["spec"]["devices"]
    expected = node.devices()
    assert [d.name for d in expected] == [device["name"]] == ["gpu-0"]
    assert device["attributes"]["uuid"]["string"] == expected[0].uuid
    assert device["attributes"]["productName"]["string"] == REAL_NODE_GPU.product
    assert device["capacity"]["memory"]["value"] == REAL_NODE_GPU.memory
    # the same shape as the fleet's shareable cards (the L4s: ConsumableShares N=100), so the planner and the
    # scheduler treat it alike
    [l4] = [d for d in _slices(admin_api, "gpu-l4-0")[0].spec.devices if d.name == "gpu-0"]
    fleet_card = admin_api.sanitize_for_serialization(l4)
    assert set(device["attributes"]) == set(fleet_card["attributes"])
    assert device["capacity"]["shares"] == fleet_card["capacity"]["shares"]
    assert set(device["capacity"]) == set(fleet_card["capacity"])
    assert device["allowMultipleAllocations"] is fleet_card["allowMultipleAllocations"] is True


@pytest.fixture
def claim(cluster: Cluster, admin_api: k8s.ApiClient, fleet: Fleet) -> Iterator[str]:
    """A ResourceClaim shaped like an order's (class `gpu.nvidia.com`, pinned to the card by its uuid, a tenth
    of its shares and some of its memory), with the fleet's cards published beside it."""
    name = "real-gpu"
    uuid = cluster.node.devices()[0].uuid
    pin = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].uuid == '{uuid}'"
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{"cel": {"expression": pin}}],
                            "capacity": {"requests": {"shares": "10", "memory": "512Mi"}},
                        },
                    }
                ]
            }
        },
    }
    k8s.ResourceV1Api(admin_api).create_namespaced_resource_claim(NS, body)  # type: ignore[arg-type]
    try:
        yield name
    finally:
        ignore_404(lambda: k8s.ResourceV1Api(admin_api).delete_namespaced_resource_claim(name, NS))


def test_a_claim_on_the_real_nodes_card_is_prepared_into_the_container_and_unprepared(
    cluster: Cluster, admin_api: k8s.ApiClient, claim: str
) -> None:
    node, core, resource = cluster.node, k8s.CoreV1Api(admin_api), k8s.ResourceV1Api(admin_api)
    card = node.devices()[0]
    core.create_namespaced_pod(NS, _pod("dra-busybox", "exec sleep 3600", claim))  # type: ignore[arg-type]
    try:
        wait_for(lambda: _running(core, "dra-busybox"), 90, what="the pod with the claim Running")
        allocated = admin_api.sanitize_for_serialization(resource.read_namespaced_resource_claim(claim, NS))
        [result] = allocated["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"], result["device"]) == (DRIVER, node.name, "gpu-0")
        assert result["consumedCapacity"] == {"shares": "10", "memory": "512Mi"}
        uid = allocated["metadata"]["uid"]
        record, spec = node.dra_state_dir / f"{uid}.json", node.cdi_dir / f"isvc-testbed-{uid}.json"
        assert record.is_file() and spec.is_file()  # the kubelet called NodePrepareResources

        env = _exec(core, "dra-busybox", ["env"])
        assert f"ISVC_TESTBED_GPU_0_UUID={card.uuid}" in env.splitlines()  # containerd applied the CDI edits
        assert f"NVIDIA_VISIBLE_DEVICES={card.uuid}" in env.splitlines()
    finally:
        core.delete_namespaced_pod("dra-busybox", NS, grace_period_seconds=0)
    wait_for(lambda: _gone(core, "dra-busybox"), 60, what="the pod deleted")
    # the kubelet called NodeUnprepareResources: the plugin dropped its record and the CDI spec
    wait_for(lambda: not record.exists() and not spec.exists(), 30, what="the claim unprepared")
    released = resource.read_namespaced_resource_claim(claim, NS)
    assert not (released.status.reserved_for if released.status else None)


def test_a_real_pod_is_reached_from_the_host_through_the_api_servers_port_forward(
    cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(admin_api)
    serve = (
        "mkdir -p /www && echo served from the real node > /www/index.html && exec httpd -f -p 8080 -h /www"
    )
    core.create_namespaced_pod(NS, _pod("httpd", serve))  # type: ignore[arg-type]
    forward: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: _running(core, "httpd"), 90, what="httpd Running on the real node")
        assert cluster.bin_dir is not None
        # kubectl listens on the host's 127.0.0.1 and tunnels through the API server (itself on 127.0.0.1),
        # which reaches the kubelet at the node's address inside the test bed's namespace
        forward = subprocess.Popen(
            [
                str(cluster.bin_dir / "kubectl"),
                f"--kubeconfig={cluster.admin_kubeconfig}",
                "-n",
                NS,
                "port-forward",
                "pod/httpd",
                ":8080",
                "--address=127.0.0.1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert forward.stdout is not None
        line = forward.stdout.readline()
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", line)
        assert match, f"kubectl port-forward said {line!r}"
        port = int(match.group(1))

        def fetched() -> httpx.Response | None:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
            except httpx.TransportError:
                return None

        response = wait_for(fetched, 30, interval=0.5, what="the page through the port-forward")
        assert response.status_code == 200
        assert response.text == "served from the real node\n"
    finally:
        if forward is not None:
            forward.terminate()
            forward.communicate(timeout=10)  # reaps it and closes its pipes
        core.delete_namespaced_pod("httpd", NS, grace_period_seconds=0)


def _planner_view(api: k8s.ApiClient) -> Inventory:
    """The planner's inventory of what the API server holds now (classes, every slice, the nodes' taints)."""
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)

    def items(plural: str) -> list[dict[str, Any]]:
        return list(custom.list_cluster_custom_object("resource.k8s.io", "v1", plural)["items"])

    nodes = [api.sanitize_for_serialization(n) for n in core.list_node().items]
    return Inventory.from_objects(items("deviceclasses"), items("resourceslices"), [], nodes=nodes)


def _card(inventory: Inventory, node: str) -> Any:
    [card] = [d for d in inventory.view.fleet.devices.values() if d.node == node]
    return card


def test_the_planner_sees_the_real_nodes_card_and_it_opens_while_the_taint_is_lifted(
    cluster: Cluster, admin_api: k8s.ApiClient, fleet: Fleet
) -> None:
    node = cluster.node
    inventory = _planner_view(admin_api)
    card = _card(inventory, node.name)
    assert (card.product, card.uuid, card.shareable) == (REAL_NODE_GPU.product, node.devices()[0].uuid, True)
    assert card.memory == 16 * 2**30
    assert "gpu.nvidia.com" in card.classes
    # the selector a class uses to keep an order to this card admits it and none of the fleet's
    matching = [
        d.node
        for d in inventory.view.fleet.devices.values()
        if inventory.view.classes.judge.matches(REAL_NODE_GPU_SELECTOR, d.activation)
    ]
    assert matching == [node.name] and len(inventory.view.fleet.devices) > 1
    assert card.tainted  # the node's NoSchedule taint closes it to the planner
    with node.untainted():
        assert not _card(_planner_view(admin_api), node.name).tainted
    assert _card(_planner_view(admin_api), node.name).tainted
