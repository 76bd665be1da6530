"""Issue 44, the tenant boundary round three, against the real API server: alice with Kubernetes' `edit` and the
module's editor role in tb-alice, a pod's ServiceAccount bob with the same in tb-bob (conftest's `tenants`).

- A host of the module's form is the order's alone: an Ingress of another namespace naming it — a later one
  with a longer path, which ingress-nginx would merge into the order's host, or an earlier squat — is refused by
  the API server (the chart's ValidatingAdmissionPolicy). The bed runs no ingress controller, so the test reads
  what one would: every Ingress of the cluster naming the host.
- The seal holds for good: ten edits of the image in a minute are all undone, a `kubectl scale` of an order
  without an autoscaler is undone, a user's autoscaler aimed at the order's set is deleted and its replicas
  undone, and the order's claim template can be neither deleted nor changed by her.
- Issue 45 (1): twenty new orders give no tamper warning; one edit by another field manager gives exactly one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.module import ModuleProcesses
from isvc_testbed.orders import Orders, hf
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

NS, OTHER = "tb-alice", "tb-bob"  # conftest's tenants
QWEN = "Qwen/Qwen2.5-7B-Instruct"
SMALL = "Qwen/Qwen2.5-3B-Instruct"
DOMAIN = "example.test"  # the bed's publicDomainTemplate: %s.example.test


@pytest.fixture
def bed(
    module: ModuleProcesses, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, tenants: Any
) -> Iterator[Orders]:
    with Orders(module, admin_api, alice_api, NS, timeout=120) as b:
        yield b


@contextmanager
def _as(kubeconfig: Path) -> Iterator[k8s.ApiClient]:
    with k8s_config.new_client_from_config(config_file=str(kubeconfig)) as api:
        yield api


def _refused(call: Callable[[], object]) -> str:
    """The API server's refusal of a write (403 or 422), its body."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status in (403, 422), refused.value
    return str(refused.value.body)


def _ingress(name: str, host: str, path: str, tls: bool = False) -> dict[str, Any]:
    backend = {"service": {"name": "mine", "port": {"number": 80}}}
    spec: dict[str, Any] = {
        "rules": [
            {"host": host, "http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend}]}}
        ]
    }
    if tls:
        spec = {"tls": [{"hosts": [host], "secretName": "mine"}], "defaultBackend": backend}
    return {"metadata": {"name": name}, "spec": spec}


def _naming(admin: k8s.ApiClient, host: str) -> list[tuple[str, str, list[str]]]:
    """What an ingress controller reads for a host: every Ingress of the cluster naming it, with its paths."""
    found = []
    for ing in k8s.NetworkingV1Api(admin).list_ingress_for_all_namespaces().items:
        rules = [r for r in ing.spec.rules or [] if r.host == host]
        tls = [t for t in ing.spec.tls or [] if host in (t.hosts or [])]
        if rules or tls:
            paths = [p.path for r in rules for p in (r.http.paths if r.http else [])]
            found.append((ing.metadata.namespace, ing.metadata.name, paths))
    return found


# ---------------------------------------------------------------- hosts


def test_a_later_ingress_with_a_longer_path_for_an_orders_host_is_refused_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: bob's Ingress for alice's host with /v1/chat/completions was stored, and ingress-nginx merges the
    paths of one host across namespaces: her chats and bearer tokens would have gone to his pod."""
    name = bed.create("tb-chat", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    host = f"{name}--{NS}.{DOMAIN}"
    with _as(tenants["bob"]) as bob:
        net = k8s.NetworkingV1Api(bob)
        try:
            longer = _refused(
                lambda: net.create_namespaced_ingress(OTHER, _ingress("steal", host, "/v1/chat/completions"))
            )
            certificate = _refused(
                lambda: net.create_namespaced_ingress(OTHER, _ingress("steal-tls", host, "/", tls=True))
            )
        finally:
            for gone in ("steal", "steal-tls"):
                ignore_404(lambda gone=gone: net.delete_namespaced_ingress(gone, OTHER))

    assert "are the inference module's" in longer and "are the inference module's" in certificate
    assert _naming(bed.admin_api, host) == [(NS, name, ["/v1/"])]
    bed.wait_ready(name)


def test_a_host_of_another_namespaces_order_cannot_be_published_first_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: bob's Ingress for `tb-llm--tb-alice`, made first, kept alice's order `tb-llm` in WorkloadError
    until an administrator removed it."""
    host = f"tb-llm--{NS}.{DOMAIN}"
    with _as(tenants["bob"]) as bob:
        net = k8s.NetworkingV1Api(bob)
        try:
            squat = _refused(lambda: net.create_namespaced_ingress(OTHER, _ingress("squat", host, "/")))
        finally:
            ignore_404(lambda: net.delete_namespaced_ingress("squat", OTHER))
    name = bed.create("tb-llm", hf(QWEN), "default-llm")

    bed.wait_ready(name)
    assert "are the inference module's" in squat
    assert _naming(bed.admin_api, host) == [(NS, name, ["/v1/"])]


# ---------------------------------------------------------------- the seal


def test_ten_edits_of_the_image_in_a_minute_are_all_undone_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: after three restores in five minutes the fourth edit stayed; its image ran 50 s later."""
    name = bed.create("tb-image", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    started = time.monotonic()
    with _as(tenants["alice"]) as alice:
        apps = k8s.AppsV1Api(alice)
        image = apps.read_namespaced_stateful_set(name, NS).spec.template.spec.containers[0].image
        for i in range(10):
            evil = {
                "spec": {"template": {"spec": {"containers": [{"name": "server", "image": f"evil:{i}"}]}}}
            }
            apps.patch_namespaced_stateful_set(name, NS, evil, field_manager="alice-edit")
            wait_for(
                lambda: (
                    apps.read_namespaced_stateful_set(name, NS).spec.template.spec.containers[0].image
                    == image
                ),
                20,
                interval=0.2,
                what=f"edit {i + 1} of the image undone",
            )
            time.sleep(max(0.0, started + 5.0 * (i + 1) - time.monotonic()))
    took = time.monotonic() - started

    bed.wait_ready(name)

    def every_restore() -> list[tuple[str, str, str]] | None:
        restored = [e for e in bed.events(name) if e[1] == "ChildRestored"]
        return restored if len(restored) >= 10 else None

    restored = wait_for(every_restore, 15, what="an event per restore")
    pods = k8s.CoreV1Api(bed.admin_api).list_namespaced_pod(
        NS, label_selector=f"ai.deckhouse.io/inference-service={name}"
    )
    assert took <= 60
    assert len(restored) >= 10 and "alice-edit" in restored[-1][2]
    assert [c.image for p in pods.items for c in p.spec.containers] == [image]


def test_a_scale_of_an_order_without_an_autoscaler_is_undone_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: `kubectl scale --replicas=3` stayed, and the order read Ready."""
    name = bed.create("tb-scale", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    with _as(tenants["alice"]) as alice:
        apps = k8s.AppsV1Api(alice)
        apps.patch_namespaced_stateful_set_scale(name, NS, {"spec": {"replicas": 3}})
        wait_for(
            lambda: apps.read_namespaced_stateful_set(name, NS).spec.replicas == 1,
            30,
            interval=0.2,
            what="the set back to one replica",
        )
    bed.wait_ready(name)


def test_a_users_autoscaler_on_the_orders_set_is_undone_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: alice's own HPA (min 3) on the order's set got more replicas running, and the order read Ready."""
    name = bed.create("tb-hpa", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    target = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name}
    cpu = {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
    hpa = {
        "metadata": {"name": "mine"},
        "spec": {
            "scaleTargetRef": target,
            "minReplicas": 3,
            "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": cpu}],
        },
    }
    with _as(tenants["alice"]) as alice:
        scalers = k8s.AutoscalingV2Api(alice)
        scalers.create_namespaced_horizontal_pod_autoscaler(NS, hpa)
        try:

            def undone() -> bool:
                try:
                    scalers.read_namespaced_horizontal_pod_autoscaler("mine", NS)
                    return False
                except ApiException as e:
                    if e.status != 404:
                        raise
                return bool(k8s.AppsV1Api(alice).read_namespaced_stateful_set(name, NS).spec.replicas == 1)

            wait_for(undone, 30, interval=0.2, what="her autoscaler gone and the set at one replica")
        finally:
            ignore_404(lambda: scalers.delete_namespaced_horizontal_pod_autoscaler("mine", NS))

    bed.wait_ready(name)
    assert bed.wait_events(name, "ForeignAutoscalerRemoved")


def test_an_orders_claim_template_is_neither_deleted_nor_changed_by_the_user_issue_44(
    bed: Orders, tenants: dict[str, Path]
) -> None:
    """Before: alice deleted the template and made it anew asking two devices with no selector; a new claim got
    gpu-0 and gpu-1 while the LaunchPlan said gpu-0, and the order read Ready. Its restoration could not come
    before a claim made from it, so the API server refuses her the change."""
    name = bed.create("tb-claim", hf(QWEN), "default-llm")
    bed.wait_ready(name)
    (template,) = bed.templates(name)
    with _as(tenants["alice"]) as alice:
        res = k8s.ResourceV1Api(alice)
        held = res.read_namespaced_resource_claim_template(template, NS)
        deleted = _refused(lambda: res.delete_namespaced_resource_claim_template(template, NS))
        unowned = _refused(
            lambda: res.patch_namespaced_resource_claim_template(
                template, NS, [{"op": "remove", "path": "/metadata/ownerReferences"}]
            )
        )
    after = k8s.ResourceV1Api(bed.admin_api).read_namespaced_resource_claim_template(template, NS)

    assert "claim template is the module's" in deleted and "claim template is the module's" in unowned
    assert (after.metadata.uid, after.spec) == (held.metadata.uid, held.spec)
    assert [_count(c.spec.devices.requests[0]) for c in bed.claims(name)] == [1]


# ---------------------------------------------------------------- the planner's callers

FLOOD_THREADS = 8
FLOOD_PER_SECOND = 1000


def _flood(module: ModuleProcesses, stop: threading.Event, sent: list[int], statuses: dict[int, int]) -> None:
    """Junk bearer tokens, each new, at FLOOD_PER_SECOND / FLOOD_THREADS a second from this thread."""
    ident = threading.get_ident()
    with httpx.Client(verify=module.planner_verify(), timeout=5) as client:
        i = 0
        while not stop.is_set():
            second = time.monotonic() + 1.0
            for _ in range(FLOOD_PER_SECOND // FLOOD_THREADS):
                if stop.is_set() or time.monotonic() > second:
                    break
                try:
                    code = client.get(
                        f"{module.planner_url}/v1/reservations",
                        headers={"Authorization": f"Bearer junk-{ident}-{i}"},
                    ).status_code
                except httpx.HTTPError:
                    code = 0
                statuses[code] = statuses.get(code, 0) + 1
                sent[0] += 1
                i += 1
            time.sleep(max(0.0, second - time.monotonic()))


def test_an_order_is_planned_during_a_junk_token_flood_after_the_controllers_review_expired_issue_44(
    bed: Orders, module: ModuleProcesses
) -> None:
    """Before: once the controller's cached review expired (60 s), its own calls waited in the review budget
    (10 new tokens a second) behind the junk: an order created during a flood read PlannerRequestFailed
    ("HTTP 429 too many tokens to review") for 40 s."""
    # The controller's token vouched for first, whatever ran before in this bed (run alone, the file's first
    # planned order would be its first call, and a first review waits in the budget like any other).
    warm = bed.create("tb-flood-warm", hf(SMALL), "default-llm")
    bed.wait_true(warm, "Planned", timeout=60)
    bed.delete(warm)
    stop, sent = threading.Event(), [0]
    statuses: dict[int, int] = {}
    flooders = [
        threading.Thread(target=_flood, args=(module, stop, sent, statuses), daemon=True)
        for _ in range(FLOOD_THREADS)
    ]
    started = time.monotonic()
    for thread in flooders:
        thread.start()
    try:
        time.sleep(65)  # past the minute the controller's last review is remembered for
        rate = sent[0] / (time.monotonic() - started)
        created = time.monotonic()
        name = bed.create("tb-flood", hf(SMALL), "default-llm")
        bed.wait_true(name, "Planned", timeout=60)
        planned = time.monotonic() - created
    finally:
        stop.set()
        for thread in flooders:
            thread.join(10)
    print(f"junk tokens: {rate:.0f}/s ({statuses}); the order planned {planned:.1f}s after its create")

    assert statuses.get(429, 0) > 10 * statuses.get(401, 1)  # the budget was spent all along
    assert planned < 10


# ---------------------------------------------------------------- warnings that cry wolf (issue 45)


def _tamper_warnings(module: ModuleProcesses) -> int:
    return sum(
        1
        for line in module.log("controller").splitlines()
        if " WARNING " in line and "is restored to what the module computes" in line
    )


def test_new_orders_give_no_tamper_warning_and_an_edit_by_another_manager_exactly_one_issue_45(
    bed: Orders, module: ModuleProcesses, tenants: dict[str, Path]
) -> None:
    """Before: every new order logged its Service "changed by someone other than the module" (239 of 240 such
    warnings false): a dry run allocates the Service another address than its real create."""
    before = _tamper_warnings(module)
    names = [bed.create(f"tb-quiet-{i}", hf(SMALL), "default-llm") for i in range(20)]
    for name in names:
        bed.wait_ready(name, timeout=180)
    quiet = _tamper_warnings(module) - before
    with _as(tenants["alice"]) as alice:
        core = k8s.CoreV1Api(alice)
        core.patch_namespaced_service(
            names[0], NS, {"spec": {"selector": {"app": "mine"}}}, field_manager="alice-edit"
        )
        wait_for(
            lambda: core.read_namespaced_service(names[0], NS).spec.selector.get("app") is None,
            30,
            interval=0.2,
            what="her edit of the Service undone",
        )
    bed.wait_ready(names[0])
    time.sleep(2)  # the passes the restore itself caused

    assert (quiet, _tamper_warnings(module) - before - quiet) == (0, 1)


def _count(request: Any) -> int | None:
    """Devices one request of a claim asks: its own count, or its first choice's (a prioritized list)."""
    if request.exactly is not None:
        return int(request.exactly.count)
    return int(request.first_available[0].count) if request.first_available else None
