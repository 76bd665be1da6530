"""Smoke tests of the test bed itself, against the real local control plane."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from isvc_testbed.agreement import FLEETS
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.fleet import DRIVER, POOL_LABEL, Fleet
from isvc_testbed.helpers import ensure_cluster_role, namespace, user_namespace, wait_for
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

RESOURCE = ("resource.k8s.io", "v1")


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"isvc.deckhouse.io/fleet-role": "system"},
                    "containers": [{"name": "c", "image": "registry.invalid/fake:1"}],
                },
            },
        },
    }


def pods(api: k8s.ApiClient, ns: str, selector: str) -> list[k8s.V1Pod]:
    return list(k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=selector).items)


def test_version_is_the_pinned_kubernetes(admin_api: k8s.ApiClient) -> None:
    assert k8s.VersionApi(admin_api).get_code().git_version == "v1.36.3"


def test_deployment_pods_become_running_and_ready_on_a_kwok_node(
    admin_api: k8s.ApiClient, fleet: Fleet
) -> None:
    ns = namespace(admin_api, "smoke-deploy")
    k8s.AppsV1Api(admin_api).create_namespaced_deployment(ns, cast(Any, deployment("web", 2)))

    def ready() -> int | None:
        d = k8s.AppsV1Api(admin_api).read_namespaced_deployment("web", ns)
        return d.status.ready_replicas if d.status and d.status.ready_replicas == 2 else None

    wait_for(ready, 60, what="2 ready replicas")
    running = pods(admin_api, ns, "app=web")
    assert [p.status.phase for p in running] == ["Running", "Running"]
    assert {p.spec.node_name for p in running} == {"system-0"}


def test_deleting_a_deployment_garbage_collects_its_pods(admin_api: k8s.ApiClient, fleet: Fleet) -> None:
    ns = namespace(admin_api, "smoke-gc")
    apps = k8s.AppsV1Api(admin_api)
    apps.create_namespaced_deployment(ns, cast(Any, deployment("gc", 1)))
    wait_for(lambda: len(pods(admin_api, ns, "app=gc")) == 1, 60, what="one pod")
    apps.delete_namespaced_deployment("gc", ns, propagation_policy="Background")
    wait_for(lambda: not pods(admin_api, ns, "app=gc"), 60, what="pods collected")
    assert apps.list_namespaced_replica_set(ns).items == []


def test_alice_is_forbidden_in_another_namespace_and_allowed_in_her_own(
    admin_api: k8s.ApiClient, alice_api: k8s.ApiClient
) -> None:
    # A role of the test bed's own, so the module's d8:user-authz:isvc:editor is never shadowed or deleted.
    created = ensure_cluster_role(
        admin_api,
        "testbed:pod-reader",
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    )
    try:
        user_namespace(admin_api, "team-t", user="alice", cluster_role="testbed:pod-reader")
        namespace(admin_api, "team-b")
        with pytest.raises(ApiException) as forbidden:
            k8s.CoreV1Api(alice_api).list_namespaced_pod("team-b")
        assert forbidden.value.status == 403
        wait_for(lambda: k8s.CoreV1Api(alice_api).list_namespaced_pod("team-t") is not None, 10)
    finally:
        if created:
            k8s.RbacAuthorizationV1Api(admin_api).delete_cluster_role("testbed:pod-reader")


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.testbed.isvc.deckhouse.io"},
    "spec": {
        "group": "testbed.isvc.deckhouse.io",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                                "x-kubernetes-validations": [
                                    {"rule": "self.min <= self.max", "message": "min must not exceed max"}
                                ],
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_a_cel_violating_object_is_rejected(admin_api: k8s.ApiClient, tmp_path: Path) -> None:
    import yaml

    crd_file = tmp_path / "widget.yaml"
    crd_file.write_text(yaml.safe_dump(WIDGET_CRD))
    install_crds(admin_api, [crd_file])
    ns = namespace(admin_api, "smoke-cel")
    custom = k8s.CustomObjectsApi(admin_api)
    body = {
        "apiVersion": "testbed.isvc.deckhouse.io/v1",
        "kind": "Widget",
        "metadata": {"name": "bad"},
        "spec": {"min": 5, "max": 1},
    }
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object("testbed.isvc.deckhouse.io", "v1", ns, "widgets", body)
    assert rejected.value.status == 422
    assert "min must not exceed max" in str(rejected.value.body)


def test_catalog_crds_are_established(catalog_crds: list[str]) -> None:
    assert sorted(catalog_crds) == ["clustermodels.ai-models.deckhouse.io", "models.ai-models.deckhouse.io"]


def slices(api: k8s.ApiClient, node: str) -> list[dict[str, Any]]:
    resp = k8s.CustomObjectsApi(api).list_cluster_custom_object(
        *RESOURCE, "resourceslices", label_selector=f"{POOL_LABEL}={node}"
    )
    return list(cast(dict[str, Any], resp)["items"])


def test_the_fleets_slices_are_published(admin_api: k8s.ApiClient, fleet: Fleet) -> None:
    published = {n.name: slices(admin_api, n.name) for n in fleet.nodes if n.gpus}
    assert {n: len(s) for n, s in published.items()} == {
        "gpu-h100-0": 1,
        "gpu-a100-0": 1,
        "gpu-l4-0": 1,
        "gpu-nomem-0": 1,
    }
    h100 = published["gpu-h100-0"][0]
    assert h100["spec"]["driver"] == DRIVER
    assert len(h100["spec"]["devices"]) == 8
    assert h100["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert h100["spec"]["devices"][0]["capacity"]["shares"]["value"] == "100"
    nomem = published["gpu-nomem-0"][0]["spec"]["devices"][0]
    assert "capacity" not in nomem and nomem["allowMultipleAllocations"] is True  # no memory: no shares
    classes = k8s.CustomObjectsApi(admin_api).list_cluster_custom_object(*RESOURCE, "deviceclasses")
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= {
        c["metadata"]["name"] for c in cast(Any, classes)["items"]
    }


def test_withdrawing_a_device_republishes_the_pool_under_a_new_generation(
    admin_api: k8s.ApiClient, fleet: Fleet
) -> None:
    before = slices(admin_api, "gpu-l4-0")[0]["spec"]["pool"]["generation"]
    fleet.withdraw(admin_api, "gpu-l4-0", "gpu-1")
    try:
        [after] = slices(admin_api, "gpu-l4-0")
        assert after["spec"]["pool"]["generation"] == before + 1
        assert [d["name"] for d in after["spec"]["devices"]] == ["gpu-0"]
    finally:
        fleet.restore(admin_api, "gpu-l4-0", "gpu-1")
    assert len(slices(admin_api, "gpu-l4-0")[0]["spec"]["devices"]) == 2


def half_gpu_claim(name: str, gpu_uuid: str) -> dict[str, Any]:
    return {
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
                            "selectors": [
                                {"cel": {"expression": f"device.attributes['{DRIVER}'].uuid == '{gpu_uuid}'"}}
                            ],
                            "capacity": {"requests": {"shares": "50"}},
                        },
                    }
                ]
            }
        },
    }


def claim_pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [
                {"name": "c", "image": "registry.invalid/fake:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


@pytest.fixture
def claims_namespace(admin_api: k8s.ApiClient) -> Iterator[Callable[[str], str]]:
    """Namespaces whose pods and claims are gone when the test ends: the devices they held are the next
    test's (files share a control plane per worker)."""
    made: list[str] = []

    def make(name: str) -> str:
        made.append(namespace(admin_api, name))
        return name

    yield make
    core, resource = k8s.CoreV1Api(admin_api), k8s.ResourceV1Api(admin_api)
    for ns in made:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        resource.delete_collection_namespaced_resource_claim(ns)
        wait_for(
            lambda ns=ns: not resource.list_namespaced_resource_claim(ns).items,
            60,
            what=f"the claims of {ns} gone",
        )


def test_two_half_shares_fit_one_gpu_and_a_third_stays_unschedulable(
    admin_api: k8s.ApiClient, fleet: Fleet, claims_namespace: Callable[[str], str]
) -> None:
    ns = claims_namespace("smoke-dra")
    gpu = fleet.idle(admin_api, "gpu-h100-0")
    custom, core = k8s.CustomObjectsApi(admin_api), k8s.CoreV1Api(admin_api)
    for i in range(3):
        custom.create_namespaced_custom_object(
            *RESOURCE, ns, "resourceclaims", half_gpu_claim(f"half-{i}", gpu.uuid)
        )
        core.create_namespaced_pod(ns, cast(Any, claim_pod(f"half-{i}", f"half-{i}")))
        if i < 2:  # the first two are placed before the third asks, so the outcome is deterministic
            wait_for(
                lambda i=i: core.read_namespaced_pod(f"half-{i}", ns).status.phase == "Running",
                60,
                what=f"pod half-{i} Running",
            )

    def unschedulable() -> str | None:
        conds = core.read_namespaced_pod("half-2", ns).status.conditions or []
        for c in conds:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return str(c.message)
        return None

    message = wait_for(unschedulable, 60, what="half-2 Unschedulable")
    assert "cannot allocate all claims" in message
    for i in range(2):
        claim = cast(
            dict[str, Any], custom.get_namespaced_custom_object(*RESOURCE, ns, "resourceclaims", f"half-{i}")
        )
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["pool"], result["device"]) == ("gpu-h100-0", gpu.name)
        assert core.read_namespaced_pod(f"half-{i}", ns).spec.node_name == "gpu-h100-0"
    third = cast(
        dict[str, Any], custom.get_namespaced_custom_object(*RESOURCE, ns, "resourceclaims", "half-2")
    )
    assert "allocation" not in third.get("status", {})


def mig_claim(name: str, selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "mig.nvidia.com",
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }


def allocate(admin_api: k8s.ApiClient, ns: str, claim: dict[str, Any]) -> dict[str, Any]:
    """Create the claim and a pod on it; the claim's one result once the pod runs."""
    custom, core = k8s.CustomObjectsApi(admin_api), k8s.CoreV1Api(admin_api)
    name = claim["metadata"]["name"]
    custom.create_namespaced_custom_object(*RESOURCE, ns, "resourceclaims", claim)
    core.create_namespaced_pod(ns, cast(Any, claim_pod(name, name)))
    wait_for(lambda: core.read_namespaced_pod(name, ns).status.phase == "Running", 60, what="pod Running")
    got = cast(dict[str, Any], custom.get_namespaced_custom_object(*RESOURCE, ns, "resourceclaims", name))
    [result] = got["status"]["allocation"]["devices"]["results"]
    return cast(dict[str, Any], result)


def test_a_static_mig_device_is_allocated_from_the_a100s_in_mig_mode(
    admin_api: k8s.ApiClient, fleet: Fleet, claims_namespace: Callable[[str], str]
) -> None:
    """The default fleet's A100s in MIG mode publish their pre-made 3g.20gb devices (named with the profile's
    id and placement start) on the driver's class mig.nvidia.com."""
    ns = claims_namespace("smoke-mig")
    result = allocate(
        admin_api, ns, mig_claim("small", f"device.attributes['{DRIVER}'].profile == '3g.20gb'")
    )
    assert result["pool"] == "gpu-a100-0"
    assert result["device"].startswith(("gpu-2-mig-3g20gb-9-", "gpu-3-mig-3g20gb-9-"))


def test_a_dynamic_mig_placement_without_a_uuid_is_allocated_and_draws_on_its_cards_counters(
    admin_api: k8s.ApiClient, fleet: Fleet, claims_namespace: Callable[[str], str]
) -> None:
    """The dynamic-MIG fleet as the driver publishes it under DynamicMIG (counter sets in a slice of their
    own, placements without a uuid) is taken by the API server and allocated by kube-scheduler: a claim for
    the whole H100 beside a 1g.10gb placement of the same card finds no room, the card's counters drawn."""
    part = Fleet.load(FLEETS["partitioned"])
    part.publish(admin_api, ["part-h100-0"])
    ns = claims_namespace("smoke-dynamic-mig")
    core = k8s.CoreV1Api(admin_api)
    try:
        small = f"device.attributes['{DRIVER}'].profile == '1g.10gb'"
        result = allocate(admin_api, ns, mig_claim("small", f"{part.selector()} && {small}"))
        assert result["pool"] == "part-h100-0"
        assert re.fullmatch(r"gpu-[01]-mig-1g10gb-19-[0-6]", result["device"]), result["device"]
        card = part.device("part-h100-0", result["device"].split("-mig-")[0])
        whole = mig_claim(
            "whole", f"{part.selector()} && device.attributes['{DRIVER}'].uuid == '{card.uuid}'"
        )
        whole["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com"
        k8s.CustomObjectsApi(admin_api).create_namespaced_custom_object(
            *RESOURCE, ns, "resourceclaims", whole
        )
        core.create_namespaced_pod(ns, cast(Any, claim_pod("whole", "whole")))

        def unschedulable() -> str | None:
            for c in core.read_namespaced_pod("whole", ns).status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                    return str(c.message)
            return None

        assert "cannot allocate all claims" in wait_for(unschedulable, 60, what="the whole card refused")
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)  # before their node goes
        part.unpublish(admin_api)


def test_a_service_account_kubeconfig_authenticates_as_that_account(
    cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    ns = namespace(admin_api, "smoke-sa")
    k8s.CoreV1Api(admin_api).create_namespaced_service_account(ns, cast(Any, {"metadata": {"name": "ctrl"}}))
    path = cluster.service_account_kubeconfig(ns, "ctrl")
    with cluster.api_client(f"sa-{ns}-ctrl") as api:
        review = k8s.AuthenticationV1Api(api).create_self_subject_review(cast(Any, {}))
    assert path.exists()
    assert review.status.user_info.username == f"system:serviceaccount:{ns}:ctrl"


def test_stop_leaves_no_process_and_no_directory_behind() -> None:
    c = Cluster().start()
    pids, workdir = list(c.pids.values()), c.workdir
    assert len(pids) == 5
    c.stop()
    time.sleep(0.2)
    alive = [p for p in pids if Path(f"/proc/{p}").exists()]
    assert alive == []
    assert not workdir.exists()
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)


def running(pid: int) -> bool:
    """True while pid exists and is not a zombie waiting for a (foreign) parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_testbed(command: str, state_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m isvc_testbed <command> --state-dir <state_dir>`, with what it printed."""
    return subprocess.run(
        [sys.executable, "-m", "isvc_testbed", command, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_up_and_down_start_a_detached_cluster_and_stop_it_by_recorded_pids(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    up = run_testbed("up", state_dir, 180)
    assert up.returncode == 0, up.stderr
    state = json.loads((state_dir / "state.json").read_text())
    try:
        assert all(running(p) for p in state["pids"].values())
        with Cluster.attach(state_dir / "state.json").api_client() as api:
            assert k8s.VersionApi(api).get_code().git_version == "v1.36.3"
    finally:
        down = run_testbed("down", state_dir, 60)
    assert down.returncode == 0, down.stderr
    time.sleep(0.2)
    assert [p for p in state["pids"].values() if running(p)] == []
    assert not Path(state["workdir"]).exists()
    assert not (state_dir / "state.json").exists()
