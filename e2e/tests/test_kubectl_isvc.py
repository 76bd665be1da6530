"""kubectl isvc on the test bed: the real `kubectl-isvc` entry point (and kubectl finding it as a plugin) run
as alice, with her namespace permissions only, and as the administrator. Issue 17."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from isvc_planner_client import PlannerClient
from isvc_testbed import bin_dir
from isvc_testbed.agreement import FLEETS
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import ignore_404, user_namespace, wait_for
from isvc_testbed.module import NAMESPACE, token_file
from isvc_testbed.orders import Orders, hf
from isvc_testbed.standin import StandIn
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
H100_ONLY = f"device.attributes['{GPU}'].productName == 'NVIDIA H100 80GB HBM3'"
GH200_ONLY = f"device.attributes['{GPU}'].productName == 'NVIDIA GH200 480GB'"
PLUGIN = Path(sys.executable).parent / "kubectl-isvc"


def plugin(kubeconfig: Path, *args: str, lang: str = "en_US.UTF-8", kubectl: bool = False) -> tuple[int, str]:
    """Run the installed console script (or `kubectl isvc`, which finds it on PATH): (exit code, stdout)."""
    env = {
        **os.environ,
        "LANG": lang,
        "LC_ALL": "",
        "LC_MESSAGES": "",
        "NO_COLOR": "1",
        "PATH": f"{PLUGIN.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if kubectl:  # kubectl takes no flags before a plugin's name: the kubeconfig comes from KUBECONFIG
        argv = [str(bin_dir() / "kubectl"), "isvc", *args]
        env["KUBECONFIG"] = str(kubeconfig)
    else:
        argv = [str(PLUGIN), *args, "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode in (0, 1, 2) and done.stdout, done.stderr
    return done.returncode, done.stdout


def plugin_json(kubeconfig: Path, *args: str, lang: str = "en_US.UTF-8") -> tuple[int, dict[str, Any]]:
    code, out = plugin(kubeconfig, *args, "-o", "json", lang=lang)
    return code, json.loads(out)


class Bed(Orders):
    def klass(self, name: str, selector: str) -> str:
        self.create_class(
            name,
            {
                "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                "acceleratorPolicy": {"deviceClassNames": [GPU], "selector": selector},
            },
        )
        return name


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


# ---------------------------------------------------------------- why, a refusal of each condition


def test_why_as_alice_names_class_not_found_as_hers_and_says_what_she_could_not_read(
    bed: Bed, cluster: Cluster
) -> None:
    bed.create("why-no-class", hf(QWEN), "no-such-class")
    bed.wait_reason("why-no-class", "ClassResolved", "ClassNotFound")
    code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-no-class", "-n", bed.ns)
    assert (code, d["verdict"], d["condition"], d["reason"]) == (
        1,
        "NotServing",
        "ClassResolved",
        "ClassNotFound",
    )
    assert (d["faq"]["who"], d["faq"]["whose"]) == ("user", "yours")
    assert d["faq"]["link"] == "module/docs/FAQ.md#my-order-says-classnotfound"
    assert [c["type"] for c in d["conditions"]] == [
        "ClassResolved",
        "ModelResolved",
        "Planned",
        "WorkloadReady",
        "Ready",
        "ScalingHealthy",
    ]
    # d8:user-authz:isvc:editor reads orders, plans and events; claims and pods are the namespace view role's
    unread = {u["what"]: u for u in d["unread"]}
    assert set(unread) == {f"ResourceClaims of {bed.ns}/why-no-class", f"Pods of {bed.ns}/why-no-class"}
    assert all(u["status"] == 403 and 'User "alice" cannot list' in u["why"] for u in unread.values())
    # kubectl finds the plugin on PATH and the screen says the same to a person
    code, text = plugin(cluster.alice_kubeconfig, "why", "why-no-class", "-n", bed.ns, kubectl=True)
    assert code == 1
    assert "ClassResolved is False: ClassNotFound" in text and "Whose fix: yours" in text
    assert "Could not read" in text and "\033[" not in text


def test_why_a_model_refusal_speaks_russian_in_a_russian_locale(bed: Bed, cluster: Cluster) -> None:
    bed.create("why-bad-model", hf("Qwen2.5-7B-Instruct"), "default-llm")
    bed.wait_reason("why-bad-model", "ModelResolved", "InvalidModelSource")
    code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-bad-model", "-n", bed.ns, lang="ru_RU.UTF-8")
    assert (code, d["condition"], d["reason"], d["lang"]) == (1, "ModelResolved", "InvalidModelSource", "ru")
    assert (d["faq"]["title"], d["faq"]["whose"]) == ("Заказ сообщает InvalidModelSource", "ваша")
    assert "owner/name" in d["message"]


def test_why_a_planned_refusal_for_an_administrator_and_capacity_lists_it_as_waiting(
    bed: Bed, cluster: Cluster
) -> None:
    klass = bed.klass("kis-gh200-only", GH200_ONLY)
    bed.create("why-no-profile", hf(QWEN), klass)
    bed.wait_reason("why-no-profile", "Planned", "NoCompatiblePlacement")
    code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-no-profile", "-n", bed.ns)
    assert (code, d["condition"], d["reason"], d["faq"]["who"]) == (
        1,
        "Planned",
        "NoCompatiblePlacement",
        "depends",
    )
    assert "memory profile of the hardware is incomplete" in d["message"]
    code, c = plugin_json(cluster.admin_kubeconfig, "capacity")
    assert code == 0 and c.get("unread", []) == []
    waiting = [(w["namespace"], w["name"], w["reason"]) for w in c["waiting"]]
    assert (bed.ns, "why-no-profile", "NoCompatiblePlacement") in waiting
    gh200 = next(x for x in c["devices"] if x["pool"] == "gpu-nomem-0")
    # NVML reports no memory: the driver publishes it with no capacity, so no shares to share it by
    assert ("memoryBytes" not in gh200, gh200["shareable"], gh200["product"]) == (
        True,
        False,
        "NVIDIA GH200 480GB",
    )


def test_why_a_workload_the_namespace_quota_refuses_reads_pods_where_alice_may(
    module: Any, cluster: Cluster, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient
) -> None:
    ns = user_namespace(admin_api, "kis-quota", user="alice", cluster_role="d8:user-authz:isvc:editor")
    rbac = k8s.RbacAuthorizationV1Api(admin_api)
    ignore_404(lambda: rbac.delete_namespaced_role_binding("alice-view", ns))
    rbac.create_namespaced_role_binding(
        ns,
        {  # type: ignore[arg-type]
            "metadata": {"name": "alice-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        },
    )
    core = k8s.CoreV1Api(admin_api)
    ignore_404(lambda: core.delete_namespaced_resource_quota("no-pods", ns))
    core.create_namespaced_resource_quota(
        ns,
        {
            "metadata": {"name": "no-pods"},  # type: ignore[arg-type]
            "spec": {"hard": {"pods": "0"}},
        },
    )
    with Bed(module, admin_api, alice_api, ns) as bed:
        klass = bed.klass("kis-h100-quota", H100_ONLY)
        bed.create("why-quota", hf(QWEN), klass)
        bed.wait_reason("why-quota", "WorkloadReady", "WorkloadError", timeout=90)
        code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-quota", "-n", ns)
        assert (code, d["condition"], d["reason"], d["faq"]["who"]) == (
            1,
            "WorkloadReady",
            "WorkloadError",
            "depends",
        )
        assert "exceeded quota" in d["message"] or "forbidden" in d["message"]
        assert d.get("unread", []) == []  # with the view role she reads claims and pods too
        assert d["plan"]["accelerator"] == "NVIDIA H100 80GB HBM3" and d["plan"]["flags"]
        assert d.get("pods", []) == []  # the quota let none be created
    core.delete_namespaced_resource_quota("no-pods", ns)


def test_why_a_failing_probe_then_serving_as_alice_and_as_the_administrator(
    bed: Bed, cluster: Cluster, standin: StandIn
) -> None:
    klass = bed.klass("kis-h100-probe", H100_ONLY)
    standin.fail(bed.ns, "why-probe")
    try:
        bed.create("why-probe", hf(QWEN), klass)
        bed.wait_reason("why-probe", "Ready", "HealthCheckFailed", timeout=120)
        code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-probe", "-n", bed.ns)
        assert (code, d["condition"], d["reason"], d["faq"]["who"]) == (
            1,
            "Ready",
            "HealthCheckFailed",
            "wait",
        )
        code, d = plugin_json(cluster.admin_kubeconfig, "why", "why-probe", "-n", bed.ns)
        assert code == 1 and d.get("unread", []) == []  # the administrator reads claims and pods
        assert [c["allocated"] for c in d["claims"]] == [True]
        assert d["claims"][0]["devices"][0].startswith("gpu-h100-0/gpu-")
        assert [p["phase"] for p in d["pods"]] == ["Running"]
    finally:
        standin.heal(bed.ns, "why-probe")
    bed.wait_ready("why-probe")
    code, d = plugin_json(cluster.alice_kubeconfig, "why", "why-probe", "-n", bed.ns)
    assert (code, d["verdict"], d["reason"]) == (0, "Serving", "Serving")
    assert d["plan"]["accelerator"] == "NVIDIA H100 80GB HBM3" and d["plan"]["runtime"]
    # capacity: the administrator sees the share it holds, on which card, by whom
    code, c = plugin_json(cluster.admin_kubeconfig, "capacity")
    holders = [
        (h.get("order", {}).get("namespace"), h.get("order", {}).get("name"), h["kind"], x["pool"])
        for x in c["devices"]
        for h in x["holders"]
    ]
    assert code == 0 and (bed.ns, "why-probe", "claim", "gpu-h100-0") in holders
    code, text = plugin(cluster.admin_kubeconfig, "capacity")
    assert code == 0 and f"{bed.ns}/why-probe p0" in text and "gpu.nvidia.com:" in text


def _planner_capacity(module: Any, cluster: Cluster) -> list[dict[str, Any]]:
    """The running planner's `GET /v1/capacity`, asked as the controller (the planner answers no one else)."""
    token = token_file(cluster.service_account_kubeconfig(NAMESPACE, "controller"))
    with PlannerClient(
        module.planner_url, timeout=10, token_file=token, ca_file=module.planner_ca
    ) as planner:
        return [
            d.model_dump(mode="json", by_alias=True, exclude_none=True) for d in planner.capacity().devices
        ]


def test_capacity_gives_the_planners_free_and_held_figures_on_both_fleets_issue_30(
    bed: Bed, cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    bed.create("cap-held", hf(QWEN), bed.klass("kis-h100-cap", H100_ONLY))
    bed.wait_reason("cap-held", "Planned", "Planned")
    seen: dict[str, Any] = {}

    def same(pools: set[str]) -> bool:
        code, c = plugin_json(cluster.admin_kubeconfig, "capacity")
        seen.update(kubectl=c["devices"], planner=_planner_capacity(bed.module, cluster))
        seen["differ"] = [(a, b) for a, b in zip(c["devices"], seen["planner"], strict=False) if a != b][:2]
        seen["counts"] = (len(c["devices"]), len(seen["planner"]), code)
        return code == 0 and {d["pool"] for d in c["devices"]} >= pools and c["devices"] == seen["planner"]

    for name in ("default", "partitioned"):
        fleet = Fleet.load(FLEETS[name])
        fleet.publish(admin_api)
        try:
            try:
                wait_for(
                    lambda f=fleet: same({n.name for n in f.nodes if n.gpus}),
                    60,
                    what=f"the same figures on {name}",
                )
            except TimeoutError as e:
                raise AssertionError(f"{seen['counts']} {seen['differ']}") from e
        finally:
            if name != "default":  # the other tests of the session see the default fleet only
                fleet.unpublish(admin_api)
    # the order's share, on the default fleet: the last comparison saw both fleets
    (device,) = [
        d for d in seen["kubectl"] if any(h.get("order", {}).get("name") == "cap-held" for h in d["holders"])
    ]
    assert device["heldUnits"] > 0 and device["freeUnits"] == 100 - device["heldUnits"]


def test_why_an_order_that_is_not_there_cannot_be_told(module: Any, cluster: Cluster, team_a: str) -> None:
    code, d = plugin_json(cluster.alice_kubeconfig, "why", "no-such-order", "-n", team_a)
    assert (code, d["verdict"], d["unread"][0]["status"]) == (2, "Unknown", 404)
    code, _ = plugin(cluster.alice_kubeconfig, "why", "no-such-order", "-n", "kube-system")
    assert code == 2  # not her namespace: forbidden, could not tell


def test_capacity_as_alice_says_it_is_for_administrators(module: Any, cluster: Cluster) -> None:
    code, c = plugin_json(cluster.alice_kubeconfig, "capacity")
    assert code == 2
    assert {u["what"] for u in c["unread"]} >= {"ResourceSlices", "ResourceClaims in all namespaces"}
    assert all(u["status"] == 403 and "a command for administrators" in u["why"] for u in c["unread"])


# ---------------------------------------------------------------- estimate through a server-side dry run


NAME = "isvc-estimate.ai.deckhouse.io"


@pytest.fixture
def without_estimates(module: Any, admin_api: k8s.ApiClient) -> Iterator[None]:
    """The chart's estimate webhook configuration taken away for one test, then put back as it was."""
    admission = k8s.AdmissionregistrationV1Api(admin_api)
    saved = admin_api.sanitize_for_serialization(admission.read_validating_webhook_configuration(NAME))
    admission.delete_validating_webhook_configuration(NAME)
    try:
        yield
    finally:
        meta = saved["metadata"]
        saved["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
        admission.create_validating_webhook_configuration(saved)


def _stored(api: k8s.ApiClient, namespace: str, plural: str) -> int:
    return len(
        k8s.CustomObjectsApi(api).list_namespaced_custom_object(
            "ai.deckhouse.io", "v1alpha1", namespace, plural
        )["items"]
    )


def test_estimate_without_the_webhook_is_accepted_as_a_dry_run_and_cannot_tell(
    cluster: Cluster, team_a: str, alice_api: k8s.ApiClient, without_estimates: None
) -> None:
    before = _stored(alice_api, team_a, "inferenceservices")

    def unanswered() -> dict[str, Any] | None:  # the API server forgets a deleted webhook in a moment
        code, e = plugin_json(
            cluster.alice_kubeconfig, "estimate", QWEN, "--class", "default-llm", "-n", team_a
        )
        return e if (code, e["verdict"]) == (2, "Unknown") else None

    e = wait_for(unanswered, 30, interval=1, what="the dry run answered without an estimate")
    assert "no estimate came with it" in e["notes"][0]
    assert _stored(alice_api, team_a, "inferenceservices") == before  # a dry run stores nothing


def test_estimate_as_alice_is_what_the_order_then_gets_and_the_estimate_writes_nothing(
    bed: Bed, cluster: Cluster, alice_api: k8s.ApiClient
) -> None:
    """The module's own webhook, reached by the API server: the dry run's warnings are the planner's answer
    for alice's namespace, and creating the order for real gets the placement it was told."""
    orders, plans = _stored(alice_api, bed.ns, "inferenceservices"), _stored(alice_api, bed.ns, "launchplans")

    def answered() -> tuple[int, dict[str, Any]] | None:  # the API server learns of a webhook in a moment
        code, e = plugin_json(
            cluster.alice_kubeconfig, "estimate", QWEN, "--class", "default-llm", "-n", bed.ns
        )
        return (code, e) if code != 2 else None

    code, e = wait_for(answered, 60, interval=1, what="the estimate webhook answering")
    assert (code, e["verdict"], e["endpointType"], e["className"]) == (0, "Planned", "Chat", "default-llm")
    assert (_stored(alice_api, bed.ns, "inferenceservices"), _stored(alice_api, bed.ns, "launchplans")) == (
        orders,
        plans,
    )

    bed.create("kis-estimated", hf(QWEN), "default-llm")
    plan = wait_for(lambda: bed.plan("kis-estimated"), 90, what="the order's LaunchPlan")["spec"]
    assert (e["plan"]["accelerator"], e["plan"]["sharePercent"], e["plan"]["requiredMemoryGiB"]) == (
        plan["placement"]["acceleratorProductName"],
        plan["placement"].get("sharePercent"),
        plan["estimates"]["requiredMemoryGiB"],
    )
    in_force = wait_for(
        lambda: next(
            (
                c
                for c in (bed.plan("kis-estimated") or {}).get("status", {}).get("conditions", [])
                if c["type"] == "InForce" and c["status"] == "True"
            ),
            None,
        ),
        60,
        what="InForce",
    )
    assert in_force["reason"] == "Planned"  # the controller mirrors the order's Planned onto its plan
    args = " ".join(plan["runtime"]["args"])
    assert e["plan"]["flags"] and all(flag in args for flag in e["plan"]["flags"])

    code, admin = plugin_json(
        cluster.admin_kubeconfig, "estimate", QWEN, "--class", "default-llm", "-n", bed.ns
    )
    assert (code, admin["verdict"]) == (0, "Planned")  # the administrator asks the same way
    code, e = plugin_json(
        cluster.alice_kubeconfig, "estimate", QWEN, "--class", "no-such-class", "-n", bed.ns
    )
    assert (code, e["verdict"], e["reason"], e["faq"]["who"]) == (1, "Refused", "ClassNotFound", "user")
    code, text = plugin(cluster.alice_kubeconfig, "estimate", QWEN, "--class", "default-llm", "-n", bed.ns)
    assert code == 0 and f"Accelerator: {plan['placement']['acceleratorProductName']}" in text
