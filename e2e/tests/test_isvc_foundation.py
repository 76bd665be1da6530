"""The thin slice on a real control plane: write-time validation, RBAC, one order to Ready, deletion."""

from __future__ import annotations

import base64
import ssl
from typing import Any

import httpx
import pytest
from isvc_api import example_cases
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import order_status
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

GROUP, VERSION = "ai.deckhouse.io", "v1alpha1"
PLURALS = {
    "InferenceService": "inferenceservices",
    "InferenceServiceClass": "inferenceserviceclasses",
    "LaunchPlan": "launchplans",
}
CASES = example_cases()


def _create(
    api: k8s.ApiClient, obj: dict[str, Any], namespace: str, strict: bool = True, dry_run: bool = True
) -> dict[str, Any]:
    custom = k8s.CustomObjectsApi(api)
    plural = PLURALS[obj["kind"]]
    kwargs: dict[str, Any] = {"field_validation": "Strict" if strict else "Ignore"}
    if dry_run:
        kwargs["dry_run"] = "All"
    if obj["kind"] == "InferenceServiceClass":
        return dict(custom.create_cluster_custom_object(GROUP, VERSION, plural, obj, **kwargs))
    return dict(custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj, **kwargs))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_api_server_judges_each_example_like_the_models(
    module: Any, admin_api: k8s.ApiClient, team_a: str, case: dict[str, Any]
) -> None:
    obj = {**case["object"], "metadata": {"name": "example-" + case["object"]["metadata"]["name"]}}
    try:
        _create(admin_api, obj, team_a)
        accepted = True
    except ApiException as exc:
        assert exc.status in (400, 422), exc.body
        accepted = False
    assert case["valid"] == accepted


def test_a_runtime_block_is_pruned_without_strict_validation(
    module: Any, admin_api: k8s.ApiClient, team_a: str
) -> None:
    obj = next(c["object"] for c in CASES if c["name"] == "a runtime block")
    stored = _create(admin_api, obj, team_a, strict=False)
    assert "runtime" not in stored["spec"]
    assert stored["spec"]["model"]["ref"]["name"] == "Qwen/Qwen2.5-7B-Instruct"


def test_the_union_is_refused_with_the_rules_message(
    module: Any, admin_api: k8s.ApiClient, team_a: str
) -> None:
    obj = next(c["object"] for c in CASES if c["name"] == "a namespace with ClusterModel")
    with pytest.raises(ApiException) as refused:
        _create(admin_api, obj, team_a)
    assert "ref.namespace is allowed with kind Model only" in refused.value.body


def test_a_launch_plan_with_share_150_is_stored(module: Any, admin_api: k8s.ApiClient, team_a: str) -> None:
    obj = next(c["object"] for c in CASES if "share 150" in c["name"])
    stored = _create(admin_api, obj, team_a, dry_run=False)
    try:
        assert stored["spec"]["placement"]["sharePercent"] == 150
    finally:
        k8s.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
            GROUP, VERSION, team_a, "launchplans", obj["metadata"]["name"]
        )


def test_a_launch_plans_in_force_condition_is_written_on_status_alone_and_shown_in_its_column(
    module: Any, admin_api: k8s.ApiClient, team_a: str
) -> None:
    """Issue 11 item 7: the LaunchPlan CRD has a status subresource; InForce is its printer column."""
    obj = next(c["object"] for c in CASES if "share 150" in c["name"])
    obj = {**obj, "metadata": {"name": "in-force"}, "status": {"conditions": [{"type": "Ignored"}]}}
    custom = k8s.CustomObjectsApi(admin_api)
    stored = _create(admin_api, obj, team_a, dry_run=False)
    try:
        assert "status" not in stored  # the main resource drops status: only /status writes it
        generation = stored["metadata"]["generation"]
        condition = {
            "type": "InForce",
            "status": "True",
            "reason": "Planned",
            "message": "the order runs on this plan.",
            "observedGeneration": generation,
            "lastTransitionTime": "2026-11-30T08:00:00Z",
        }
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            team_a,
            "launchplans",
            "in-force",
            {"status": {"observedGeneration": generation, "conditions": [condition]}},
        )
        read = custom.get_namespaced_custom_object(GROUP, VERSION, team_a, "launchplans", "in-force")
        assert read["status"]["conditions"] == [condition]
        assert read["metadata"]["generation"] == generation  # a status write is not a new plan
        cfg = admin_api.configuration  # the columns as kubectl reads them: the Table API
        tls = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        tls.load_cert_chain(cfg.cert_file, cfg.key_file)
        table = httpx.get(
            f"{cfg.host}/apis/{GROUP}/{VERSION}/namespaces/{team_a}/launchplans/in-force",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            verify=tls,
            timeout=10,
        ).json()
        columns = [c["name"] for c in table["columnDefinitions"]]
        assert table["rows"][0]["cells"][columns.index("InForce")] == "True"
        assert all(c["description"] for c in table["columnDefinitions"])
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, team_a, "launchplans", "in-force")


def test_alice_manages_orders_in_her_namespace_and_nothing_else(
    module: Any, alice_api: k8s.ApiClient, admin_api: k8s.ApiClient, team_a: str
) -> None:
    custom = k8s.CustomObjectsApi(alice_api)
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceService",
        "metadata": {"name": "alice-probe"},
        "spec": {"model": {"src": "HuggingFace", "ref": {"name": "BAAI/bge-m3"}}},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, team_a, "inferenceservices", obj, dry_run="All")
    # A real one too, naming no class that exists, so that it holds nothing while she lists and deletes it.
    held = {
        **obj,
        "metadata": {"name": "alice-listed"},
        "spec": {**obj["spec"], "inferenceServiceClassName": "alice-no-such-class"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, team_a, "inferenceservices", held)
    try:
        names = [
            o["metadata"]["name"]
            for o in custom.list_namespaced_custom_object(GROUP, VERSION, team_a, "inferenceservices")[
                "items"
            ]
        ]
        assert "alice-listed" in names and "alice-probe" not in names  # the dry run stored nothing
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, team_a, "inferenceservices", "alice-listed")
    with pytest.raises(ApiException) as classes:
        custom.list_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses")
    assert classes.value.status == 403
    with pytest.raises(ApiException) as one_class:
        custom.get_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", "default-llm")
    assert one_class.value.status == 403
    k8s.CoreV1Api(admin_api).create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team-z"))
    ) if not _exists(admin_api, "team-z") else None
    with pytest.raises(ApiException) as other:
        custom.list_namespaced_custom_object(GROUP, VERSION, "team-z", "inferenceservices")
    assert other.value.status == 403


def _exists(api: k8s.ApiClient, namespace: str) -> bool:
    try:
        k8s.CoreV1Api(api).read_namespace(namespace)
        return True
    except ApiException:
        return False


def test_the_readme_order_reaches_ready_answers_with_its_token_and_goes_with_its_children(
    module: Any, alice_api: k8s.ApiClient, admin_api: k8s.ApiClient, team_a: str, standin: Any
) -> None:
    core = k8s.CoreV1Api(admin_api)
    core.create_namespaced_secret(
        team_a,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="hf-token"), string_data={"token": "hf_test_token"}),
    )
    order = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceService",
        "metadata": {"name": "support-llm"},
        "spec": {
            "inferenceServiceClassName": "default-llm",
            "model": {
                "src": "HuggingFace",
                "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"},
                "authSecretRef": {"name": "hf-token"},
            },
        },
    }
    k8s.CustomObjectsApi(alice_api).create_namespaced_custom_object(
        GROUP, VERSION, team_a, "inferenceservices", order
    )

    def ready() -> dict[str, Any] | None:
        module.check()
        status = order_status(alice_api, team_a, "support-llm")
        return status if status.get("phase") == "Ready" else None

    status = wait_for(ready, 120, what="support-llm Ready")
    assert [c["type"] for c in status["conditions"]][:5] == [
        "ClassResolved",
        "ModelResolved",
        "Planned",
        "WorkloadReady",
        "Ready",
    ]
    assert status["model"]["endpointType"] == "Chat"
    assert status["authSecretName"] == "support-llm-auth"
    assert status["endpoint"]["url"].startswith("https://") and status["endpoint"]["type"] == "External"
    assert status["endpoint"]["toolCallingSupported"] is True
    assert status["resolved"]["deviceClass"] and status["resolved"]["acceleratorProductName"]

    claims = k8s.ResourceV1Api(admin_api).list_namespaced_resource_claim(team_a).items
    mine = [
        c
        for c in claims
        if (c.metadata.labels or {}).get("ai.deckhouse.io/inference-service") == "support-llm"
    ]
    assert mine and all(c.status and c.status.allocation for c in mine)

    secret = core.read_namespaced_secret("support-llm-auth", team_a)
    token = base64.b64decode(secret.data["token"]).decode()
    url = standin.url_for(team_a, "support-llm") + "/v1/models"
    assert httpx.get(url, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401

    # Rotation as the security guide tells it: the endpoint token Secret deleted is made again with a new
    # token. Its deletion passes the order (the Secret watch; which orders a Secret's event passes is
    # pinned by packages/isvc-operator/tests/test_secret_refs.py); the order's own replay is an hour off.
    core.delete_namespaced_secret("support-llm-auth", team_a)

    def remade() -> str | None:
        module.check()
        try:
            again = core.read_namespaced_secret("support-llm-auth", team_a)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return base64.b64decode(again.data["token"]).decode() if again.data else None

    rotated = wait_for(remade, 30, what="support-llm-auth made again")
    assert rotated != token
    assert order_status(alice_api, team_a, "support-llm")["authSecretName"] == "support-llm-auth"

    k8s.CustomObjectsApi(alice_api).delete_namespaced_custom_object(
        GROUP, VERSION, team_a, "inferenceservices", "support-llm"
    )

    def children_gone() -> bool:
        apps = k8s.AppsV1Api(admin_api)
        left = [
            d.metadata.name
            for d in apps.list_namespaced_stateful_set(team_a).items
            if d.metadata.name == "support-llm"
        ]
        left += [
            s.metadata.name
            for s in core.list_namespaced_secret(team_a).items
            if s.metadata.name == "support-llm-auth"
        ]
        left += [
            s.metadata.name
            for s in core.list_namespaced_service(team_a).items
            if s.metadata.name == "support-llm"
        ]
        plans = k8s.CustomObjectsApi(admin_api).list_namespaced_custom_object(
            GROUP, VERSION, team_a, "launchplans"
        )["items"]
        left += [p["metadata"]["name"] for p in plans if p["metadata"]["name"] == "support-llm"]
        return not left

    wait_for(children_gone, 90, what="children of support-llm garbage-collected")
    assert core.read_namespaced_secret("hf-token", team_a).data["token"]
    core.delete_namespaced_secret("hf-token", team_a)  # the user's, not the order's: gone only now, so the
    # test runs again on a cluster that outlives the session (--kubeconfig)


def test_the_controller_leads_through_its_lease_with_the_charts_permissions(
    module: Any, admin_api: k8s.ApiClient
) -> None:
    def held() -> Any:
        try:
            lease = k8s.CoordinationV1Api(admin_api).read_namespaced_lease("isvc-controller", "d8-isvc")
        except ApiException:
            return None
        return lease if lease.spec.holder_identity else None

    lease = wait_for(held, 30, what="the controller's lease")
    first = (lease.spec.holder_identity, lease.spec.renew_time)

    def renewed() -> Any:
        now = held()
        return now if now is not None and now.spec.renew_time > first[1] else None

    # The same holder renews it (every 5 s, 15 s lease): it leads, it did not just take the lease once.
    again = wait_for(renewed, 30, what="the controller's lease renewed")
    assert again.spec.holder_identity == first[0]
