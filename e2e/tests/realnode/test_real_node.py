"""A real pod on the real node: local busybox goes Running; its logs and exec work through the API server."""

from __future__ import annotations

from typing import Any

from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import wait_for
from isvc_testbed.realnode import BUSYBOX_IMAGE, REAL_NODE_LABEL, REAL_NODE_TOLERATION
from kubernetes import client as k8s
from kubernetes.stream import stream


def _busybox_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [REAL_NODE_TOLERATION],
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "echo hello from the real node; exec sleep 3600"],
                }
            ],
        },
    }


def test_node_is_real_tainted_and_addressed_inside_its_namespace(
    cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    node = k8s.CoreV1Api(admin_api).read_node(cluster.node.name)
    assert node.status is not None and node.spec is not None
    addresses = {a.type: a.address for a in node.status.addresses or []}
    assert addresses["InternalIP"] == cluster.node.node_ip
    assert addresses["InternalIP"].startswith("10.253.")
    assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
    taints = [(t.key, t.effect) for t in node.spec.taints or []]
    assert (REAL_NODE_LABEL, "NoSchedule") in taints
    assert node.status.node_info.kubelet_version == "v1.36.3"


def test_busybox_runs_and_logs_and_exec_work_through_the_api_server(
    cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(admin_api)
    core.create_namespaced_pod("default", _busybox_pod("busybox"))  # type: ignore[arg-type]

    def running() -> bool:
        pod = core.read_namespaced_pod("busybox", "default")
        return pod.status is not None and pod.status.phase == "Running"

    wait_for(running, 90, what="busybox Running on the real node")
    pod = core.read_namespaced_pod("busybox", "default")
    assert pod.spec is not None and pod.spec.node_name == cluster.node.name
    assert pod.status is not None and str(pod.status.pod_ip).startswith("10.254.")

    wait_for(
        lambda: "hello from the real node" in core.read_namespaced_pod_log("busybox", "default"),
        30,
        what="the pod's log line through the API server",
    )

    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "busybox",
        "default",
        command=["sh", "-c", "echo exec-ok; cat /etc/resolv.conf"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    try:
        ws.run_forever(timeout=30)
        out = ws.read_stdout()
        assert ws.returncode == 0
    finally:
        ws.close()
        ws.sock.shutdown()  # websocket-client's close() leaves the socket open once the server has closed
    assert "exec-ok" in out
    assert "nameserver" not in out  # the network rule: pods get no resolver


def test_a_pod_cannot_leave_the_namespace_and_the_drop_is_counted(
    cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    """The host's end of the veth is the one address a pod could leave by: dropped, and counted (the chart
    tests assert that count does not move while the chart's pods run)."""
    core = k8s.CoreV1Api(admin_api)
    if not _exists(core, "busybox"):
        core.create_namespaced_pod("default", _busybox_pod("busybox"))  # type: ignore[arg-type]
    wait_for(
        lambda: core.read_namespaced_pod("busybox", "default").status.phase == "Running",
        90,
        what="busybox Running",
    )
    before = cluster.node.forward_dropped()
    host_end = cluster.node.node_ip.rsplit(".", 1)[0] + ".1"
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "busybox",
        "default",
        command=["nc", "-w", "2", host_end, "9"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    try:
        ws.run_forever(timeout=30)
        assert ws.returncode != 0
    finally:
        ws.close()
        ws.sock.shutdown()
    assert cluster.node.forward_dropped() > before


def _exists(core: k8s.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, "default")
        return True
    except k8s.ApiException:
        return False
