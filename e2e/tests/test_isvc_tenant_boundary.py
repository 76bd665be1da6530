"""Issue 29, the tenant boundary: what a hostile namespace user — Kubernetes' `edit` role and the module's
editor role in her namespace, and any pod she runs — can no longer do, against the real API server.

- The estimate webhook answers only the API server (its client certificate), and reads a token Secret only
  for a user who may read it herself; a flood of silent connections holds a bounded number of threads.
- Her edits of her order's children (the set's image and service-account token, the Service's selector, the
  Ingress's paths, the set's replicas) are undone.
- An External host another namespace published first is not published for the order.
- The runtime pods' NetworkPolicy admits the controller, the endpoint's callers and monitoring alone (judged by
  the rules of networking.k8s.io/v1: the bed's pods are simulated and its real node's CNI does not enforce
  NetworkPolicy).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.module import ModuleProcesses, estimate_webhook
from isvc_testbed.orders import Orders, hf
from isvc_testing import Endpoint, admits
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

NS, OTHER = "tb-alice", "tb-bob"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
GATED = "meta-llama/Llama-3.1-8B-Instruct"  # the stand-in Hub's token hf_test_token has access
PLUGIN = Path(sys.executable).parent / "kubectl-isvc"


@pytest.fixture
def bed(
    module: ModuleProcesses, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, tenants: Any
) -> Iterator[Orders]:
    with Orders(module, admin_api, alice_api, NS, timeout=90) as b:
        yield b


def _estimate(kubeconfig: Path, *args: str) -> dict[str, Any]:
    """kubectl isvc estimate as that user, once the API server calls the webhook (JSON)."""

    def answered() -> dict[str, Any] | None:
        done = subprocess.run(
            [str(PLUGIN), "estimate", *args, "-n", NS, "-o", "json", "--kubeconfig", str(kubeconfig)],
            env={**os.environ, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode in (0, 1, 2), done.stderr
        said = json.loads(done.stdout)
        return None if any("no estimate came with it" in n for n in said.get("notes") or []) else said

    return wait_for(answered, 60, interval=1, what="the estimate webhook answering")


# ---------------------------------------------------------------- the estimate webhook


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _forged(ns: str, secret: str) -> dict[str, Any]:
    """An AdmissionReview a pod writes itself, naming another namespace's token Secret."""
    order = {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {"model": {"src": "HuggingFace", "ref": {"name": GATED}, "authSecretRef": {"name": secret}}},
    }
    request = {"uid": "u", "operation": "CREATE", "dryRun": True, "namespace": ns, "object": order}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_the_webhook_answers_no_caller_but_the_api_server_issue_29(
    module: ModuleProcesses, cluster: Cluster, admin_api: k8s.ApiClient, tenants: Any
) -> None:
    """Before: any pod posted a review naming another team's Secret and got the gated model's estimate."""
    port, certs = estimate_webhook(cluster)
    wait_for(lambda: _listening(port), 60, what="the estimate webhook listening")
    k8s.CoreV1Api(admin_api).create_namespaced_secret(
        OTHER, {"metadata": {"name": "hf-forged"}, "stringData": {"token": "hf_test_token"}}
    )
    url, body = f"https://127.0.0.1:{port}/estimate", _forged(OTHER, "hf-forged")
    try:
        plain = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        with pytest.raises(httpx.HTTPError):  # no client certificate: no handshake
            httpx.post(url, json=body, verify=plain, timeout=10)
        as_alice = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        as_alice.load_cert_chain(cluster.workdir / "pki" / "alice.crt", cluster.workdir / "pki" / "alice.key")
        with pytest.raises(httpx.HTTPError):  # the API server's authority, not its name: closed (issue 44)
            httpx.post(url, json=body, verify=as_alice, timeout=10)
    finally:
        ignore_404(lambda: k8s.CoreV1Api(admin_api).delete_namespaced_secret("hf-forged", OTHER))


def test_an_estimate_reads_a_token_secret_only_for_a_user_who_may_read_it_issue_29(
    module: ModuleProcesses, admin_api: k8s.ApiClient, tenants: dict[str, Path]
) -> None:
    k8s.CoreV1Api(admin_api).create_namespaced_secret(
        NS, {"metadata": {"name": "hf"}, "stringData": {"token": "hf_test_token"}}
    )
    try:
        alice = _estimate(tenants["alice"], GATED, "--class", "default-llm", "--auth-secret", "hf")
        estimator = _estimate(tenants["estimator"], GATED, "--class", "default-llm", "--auth-secret", "hf")
    finally:
        ignore_404(lambda: k8s.CoreV1Api(admin_api).delete_namespaced_secret("hf", NS))

    assert alice["verdict"] == "Planned", (
        alice
    )  # `edit` reads Secrets: the gated model resolved with her token
    assert (estimator["verdict"], estimator["reason"]) == ("Unknown", "AuthSecretNotFound"), estimator
    assert "may not read Secret 'hf'" in estimator["message"]


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def test_a_thousand_silent_connections_hold_a_bounded_number_of_threads_issue_29(
    module: ModuleProcesses, cluster: Cluster, tenants: dict[str, Path]
) -> None:
    """Before: 1,000 slow TLS connections held 1,000 controller threads."""
    port, _ = estimate_webhook(cluster)
    pid = module.pid("controller")
    assert pid is not None
    before, most = _threads(pid), 0
    silent = []
    try:
        for _ in range(1000):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            silent.append(s)
        until = time.monotonic() + 3
        while time.monotonic() < until:
            most = max(most, _threads(pid))
            time.sleep(0.05)
    finally:
        for s in silent:
            s.close()
    answer = _estimate(tenants["alice"], QWEN, "--class", "default-llm")

    assert most - before <= 64 + 8, (before, most)  # the webhook's 64 connections, and the pool's own
    assert answer["verdict"] == "Planned"


# ---------------------------------------------------------------- the order's children


def test_a_users_edits_of_her_orders_children_are_undone_issue_29(
    bed: Orders, module: ModuleProcesses, cluster: Cluster, tenants: dict[str, Path]
) -> None:
    """Before: the controller compared only its own hash annotation, so every edit below stayed, and the
    order read Ready."""
    name = bed.create("tb-edit", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    from kubernetes import config as k8s_config

    with k8s_config.new_client_from_config(config_file=str(tenants["alice"])) as alice:
        apps, core, net = k8s.AppsV1Api(alice), k8s.CoreV1Api(alice), k8s.NetworkingV1Api(alice)
        computed = apps.read_namespaced_stateful_set(name, NS)
        image = computed.spec.template.spec.containers[0].image
        selector = core.read_namespaced_service(name, NS).spec.selector
        paths = [p.path for p in net.read_namespaced_ingress(name, NS).spec.rules[0].http.paths]
        root = {
            "path": "/",
            "pathType": "Prefix",
            "backend": {"service": {"name": name, "port": {"name": "http"}}},
        }
        edits = [
            lambda: apps.patch_namespaced_stateful_set(
                name,
                NS,
                {
                    "spec": {
                        "replicas": 5,
                        "template": {
                            "spec": {
                                "automountServiceAccountToken": True,
                                "containers": [
                                    {"name": "server", "image": "registry.example.test/anything:1"}
                                ],
                            }
                        },
                    }
                },
            ),
            lambda: core.patch_namespaced_service(name, NS, {"spec": {"selector": {"app": "mine"}}}),
        ]
        for edit in edits:
            edit()  # `edit` lets her: what stops her is the controller
        with pytest.raises(ApiException) as refused:  # her order's host: the API server refuses (issue 44)
            net.patch_namespaced_ingress(
                name,
                NS,
                {"spec": {"rules": [{"host": f"{name}--{NS}.example.test", "http": {"paths": [root]}}]}},
            )
        assert refused.value.status == 403

        def undone() -> bool:
            s = apps.read_namespaced_stateful_set(name, NS).spec
            return (
                s.replicas == 1
                and s.template.spec.containers[0].image == image
                and not s.template.spec.automount_service_account_token
                and core.read_namespaced_service(name, NS).spec.selector == selector
                and [p.path for p in net.read_namespaced_ingress(name, NS).spec.rules[0].http.paths] == paths
            )

        wait_for(undone, 60, interval=1, what="every edit of the order's children undone")
    assert "and is restored to what the module computes" in module.log("controller")
    bed.wait_ready(name)


# ---------------------------------------------------------------- hosts


def test_a_host_another_namespace_published_first_is_not_published_issue_29(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: bob's Ingress for alice's predictable host, made first, was never noticed. Since issue 44 the API
    server refuses such an Ingress to a namespace user (test_isvc_tenant_boundary_hosts.py); one an
    administrator made, or made before the module's admission policy, is still found here."""
    name, host = "tb-squat", f"tb-squat--{NS}.example.test"
    squat = {
        "metadata": {"name": "catch-all"},
        "spec": {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "mine", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }
    net = k8s.NetworkingV1Api(bed.admin_api)
    net.create_namespaced_ingress(OTHER, squat)
    try:
        bed.create(name, hf(QWEN), "default-llm")
        status = bed.wait_reason(name, "WorkloadReady", "WorkloadError")
        message = next(c for c in status["conditions"] if c["type"] == "WorkloadReady")["message"]
        published = net.list_namespaced_ingress(NS).items
    finally:
        ignore_404(lambda: net.delete_namespaced_ingress("catch-all", OTHER))

    assert f"host {host} is already published by Ingress {OTHER}/catch-all" in message
    assert [i.metadata.name for i in published] == []
    bed.wait_ready(name, timeout=90)  # bob's gone: the order's host is its own


# ---------------------------------------------------------------- who reaches the runtime


def test_the_runtime_admits_the_controller_the_callers_and_monitoring_alone_issue_29(bed: Orders) -> None:
    name = bed.create("tb-netpol", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    policy = k8s.NetworkingV1Api(bed.admin_api).read_namespaced_network_policy(name, NS)
    as_read = bed.admin_api.sanitize_for_serialization(policy)
    pod = k8s.CoreV1Api(bed.admin_api).list_namespaced_pod(
        NS, label_selector=f"ai.deckhouse.io/inference-service={name}"
    )
    container = pod.items[0].spec.containers[0]
    ports = {p.name: p.container_port for p in container.ports or [] if p.name}
    runtime = Endpoint(NS, pod.items[0].metadata.labels, {"kubernetes.io/metadata.name": NS}, ports=ports)

    def ns(n: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": n}

    sources = {
        "controller": Endpoint("d8-isvc", {"app": "isvc-controller"}, ns("d8-isvc")),
        "ingress controller": Endpoint("d8-ingress-nginx", {"app": "controller"}, ns("d8-ingress-nginx")),
        "monitoring": Endpoint("d8-monitoring", {"app": "prometheus"}, ns("d8-monitoring")),
        "a pod of another namespace": Endpoint(OTHER, {"app": "x"}, ns(OTHER)),
        "the planner": Endpoint("d8-isvc", {"app": "isvc-planner"}, ns("d8-isvc")),
    }
    http = ports["http"]
    admitted = {who for who, src in sources.items() if admits([as_read], src, runtime, http)}

    assert admitted == {"controller", "ingress controller", "monitoring"}  # vLLM: /metrics on its API port
