"""Model resolution and class policy, as alice sees them: every refusal from a real order, and what lifts it.

Alice writes orders; the administrator writes classes and catalog objects. Each refusal is checked on its
condition (type, status, reason), on the order's phase and status.reason, and on the words its message owes
the reader. Tests that change the module (chart settings, controller flags, catalog CRDs, default-llm) run
last and put everything back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_testbed.bench import parse_metrics
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import IMAGES, ModuleProcesses, install_chart
from isvc_testbed.orders import CATALOG, GROUP, VERSION, Obj, Orders, assert_refused, catalog, condition, hf
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

CATALOG_CRDS = Path(__file__).resolve().parents[1] / "crds"
CONTROLLER_SA = "system:serviceaccount:d8-isvc:controller"


# ---------------------------------------------------------------- objects


BGE_FACTS: Obj = {
    "source": {"url": "hf://BAAI/bge-m3"},
    "format": "Safetensors",
    "architecture": "XLMRobertaModel",
    "family": "xlm-roberta",
    "parameterCount": 567754752,
    "dtype": "float32",
    "quantization": "None",
    "contextLength": 8192,
    "endpointTypes": ["Embeddings"],
    "size": "2Gi",
}
READY_STATUS: Obj = {
    "phase": "Ready",
    "conditions": [
        {"type": "Ready", "status": "True", "reason": "Downloaded", "message": "weights are in place"}
    ],
}


class Bed(Orders):
    """What one test made, deleted again at its end (orders first, so nothing they hold outlives them)."""

    def order(self, name: str, model: Obj, klass: str | None = None) -> str:
        return self.create(name, model, klass)

    def klass(self, name: str, spec: Obj, ready: bool = True) -> Obj:
        """Create a class and wait until the class controller has judged it."""
        return self.create_class(name, spec, ready)

    def cluster_model(self, name: str, spec: Obj, status: Obj | None = READY_STATUS) -> None:
        self.catalog_object("ClusterModel", name, spec, status)

    def model(self, name: str, spec: Obj, status: Obj) -> None:
        self.catalog_object("Model", name, spec, status)


@pytest.fixture
def bed(
    module: ModuleProcesses,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a, timeout=30) as b:
        yield b


# ---------------------------------------------------------------- ClassResolved


def test_an_order_naming_a_missing_class_says_class_not_found(bed: Bed) -> None:
    bed.order("cls-missing", hf("Qwen/Qwen2.5-7B-Instruct"), klass="default-llm-v0")
    status = bed.wait_reason("cls-missing", "ClassResolved", "ClassNotFound")
    assert_refused(
        status, "ClassResolved", "ClassNotFound", "spec.inferenceServiceClassName", "'default-llm-v0'"
    )
    assert condition(status, "ModelResolved")["status"] == "Unknown"

    bed.klass("default-llm-v0", {"modelPolicy": {"allowedEndpointTypes": ["Chat"]}})  # the class appears
    status = bed.wait_true("cls-missing", "ClassResolved", timeout=10)  # by watch, not by a requeue
    assert status["model"]["endpointType"] == "Chat"


def test_a_class_with_no_endpoint_types_is_not_ready_and_its_orders_say_class_not_ready(bed: Bed) -> None:
    klass = bed.klass("e2e-no-types", {"modelPolicy": {"allowedEndpointTypes": []}}, ready=False)
    ready = condition(klass["status"], "Ready")
    assert ready and ready["reason"] == "NoEndpointTypes"
    assert "allowedEndpointTypes is empty" in ready["message"]
    bed.order("cls-not-ready", hf("Qwen/Qwen2.5-7B-Instruct"), klass="e2e-no-types")
    status = bed.wait_reason("cls-not-ready", "ClassResolved", "ClassNotReady")
    assert_refused(status, "ClassResolved", "ClassNotReady", "'e2e-no-types'", "not ready", "administrator")


def test_widening_allowed_namespaces_lifts_namespace_not_allowed_without_editing_the_order(bed: Bed) -> None:
    bed.klass(
        "e2e-team-b-only",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "admissionPolicy": {"allowedNamespaces": ["team-b"]},
        },
    )
    bed.order("ns-refused", hf("Qwen/Qwen2.5-7B-Instruct"), klass="e2e-team-b-only")
    status = bed.wait_reason("ns-refused", "ClassResolved", "NamespaceNotAllowed")
    assert_refused(
        status,
        "ClassResolved",
        "NamespaceNotAllowed",
        "'e2e-team-b-only'",
        "'team-a'",
        "admissionPolicy.allowedNamespaces",
    )
    generation = bed.read("ns-refused")["metadata"]["generation"]

    bed.admin.patch_cluster_custom_object(
        GROUP,
        VERSION,
        "inferenceserviceclasses",
        "e2e-team-b-only",
        {"spec": {"admissionPolicy": {"allowedNamespaces": ["team-b", "team-a"]}}},
    )
    status = bed.wait_true("ns-refused", "ClassResolved", timeout=10)  # a watch, not the 15 s requeue
    assert status.get("reason") != "NamespaceNotAllowed"
    assert bed.read("ns-refused")["metadata"]["generation"] == generation


def test_what_the_class_decided_is_echoed_into_the_order(bed: Bed) -> None:
    scheduling = k8s.SchedulingV1Api(bed.admin_api)
    scheduling.create_priority_class(
        k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name="e2e-isvc-high"), value=100000)
    )
    bed.cleanup.append(lambda: scheduling.delete_priority_class("e2e-isvc-high"))
    bed.klass(
        "e2e-scaled",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Embeddings", "Chat"]},
            "scalingPolicy": {"minReplicas": 1, "maxReplicas": 3, "autoscaler": True},
            "priorityClassName": "e2e-isvc-high",
        },
    )
    bed.order("echo", hf("BAAI/bge-m3"), klass="e2e-scaled")
    status = bed.wait_true("echo", "ModelResolved")
    assert status["constraints"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "autoscaler": True,
        "priorityClassName": "e2e-isvc-high",
    }
    assert status["model"]["endpointType"] == "Embeddings"


# ---------------------------------------------------------------- ModelResolved: the Hub


def test_a_hub_repository_that_does_not_exist_says_model_not_found(bed: Bed) -> None:
    bed.order("hub-missing", hf("Qwen/Qwen9-1B-Nonexistent"), klass="default-llm")
    status = bed.wait_reason("hub-missing", "ModelResolved", "ModelNotFound")
    assert_refused(status, "ModelResolved", "ModelNotFound", "Qwen/Qwen9-1B-Nonexistent")
    assert condition(status, "ClassResolved")["status"] == "True"


def test_a_repository_id_without_an_owner_says_invalid_model_source(bed: Bed) -> None:
    bed.order("hub-invalid", hf("Qwen2.5-7B-Instruct"), klass="default-llm")
    status = bed.wait_reason("hub-invalid", "ModelResolved", "InvalidModelSource")
    assert_refused(status, "ModelResolved", "InvalidModelSource", "'Qwen2.5-7B-Instruct'", "owner/name")


def test_a_gated_model_naming_a_missing_secret_resumes_once_the_secret_exists(bed: Bed) -> None:
    bed.order("gated", hf("meta-llama/Llama-3.1-8B-Instruct", secret="e2e-hf-token"), klass="default-llm")
    status = bed.wait_reason("gated", "ModelResolved", "AuthSecretNotFound")
    assert_refused(
        status, "ModelResolved", "AuthSecretNotFound", "'e2e-hf-token'", "spec.model.authSecretRef", "team-a"
    )
    generation = bed.read("gated")["metadata"]["generation"]

    core = k8s.CoreV1Api(bed.admin_api)
    core.create_namespaced_secret(
        bed.ns,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="e2e-hf-token"), string_data={"token": "hf_test_token"}),
    )
    bed.cleanup.append(lambda: core.delete_namespaced_secret("e2e-hf-token", bed.ns))
    status = bed.wait_true("gated", "ModelResolved", timeout=30)
    assert status["model"]["parameterCount"] == 8030261248
    assert bed.read("gated")["metadata"]["generation"] == generation


def _timed_requeues(bed: Bed, reason: str) -> float:
    """How many passes of orders with that status reason asked the controller to come back on a timer."""

    def scrape() -> str | None:  # a controller just (re)started may not serve /metrics yet
        bed.module.check("controller")
        try:
            r = httpx.get(bed.module.metrics_url, timeout=10)
        except httpx.TransportError:
            return None
        return r.text if r.status_code == 200 else None

    text = wait_for(scrape, 30, what="the controller's /metrics")
    return sum(
        v
        for (_, labels), v in parse_metrics(text, ["isvc_order_timed_requeues_total"]).items()
        if dict(labels).get("reason") == reason
    )


def test_a_missing_secret_and_then_a_missing_key_lift_on_the_secrets_own_change_not_on_a_timer(
    bed: Bed,
) -> None:
    """Nothing polls for the Secret: no pass of an order refused with AuthSecretNotFound asks to be passed
    again later (the controller counts every timed requeue by the order's reason), and the order's own
    replay is an hour away. So the order can move only on the Secret's watch event, whatever the age
    of the refusal: a refusal an hour old lifts as one a second old does."""
    core = k8s.CoreV1Api(bed.admin_api)
    before = _timed_requeues(bed, "AuthSecretNotFound")
    bed.order(
        "gated-watch", hf("meta-llama/Llama-3.1-8B-Instruct", secret="e2e-hf-watch"), klass="default-llm"
    )
    status = bed.wait_reason("gated-watch", "ModelResolved", "AuthSecretNotFound")
    assert (
        "'e2e-hf-watch' named in spec.model.authSecretRef does not exist"
        in condition(status, "ModelResolved")["message"]
    )
    assert _timed_requeues(bed, "AuthSecretNotFound") == before

    # The Secret appears, without the key the order names: the refusal changes to say so.
    core.create_namespaced_secret(
        bed.ns,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="e2e-hf-watch"), string_data={"hf": "hf_test_token"}),
    )
    bed.cleanup.append(lambda: core.delete_namespaced_secret("e2e-hf-watch", bed.ns))
    status = bed.wait(
        "gated-watch",
        lambda s: "has no key 'token'" in condition(s, "ModelResolved")["message"],
        bed.timeout,
        "ModelResolved names the missing key",
    )
    assert condition(status, "ModelResolved")["reason"] == "AuthSecretNotFound"
    assert _timed_requeues(bed, "AuthSecretNotFound") == before

    # The key is added: the order resolves, unedited.
    core.patch_namespaced_secret("e2e-hf-watch", bed.ns, {"stringData": {"token": "hf_test_token"}})
    status = bed.wait_true("gated-watch", "ModelResolved")
    assert status["model"]["parameterCount"] == 8030261248
    assert bed.read("gated-watch")["metadata"]["generation"] == 1
    assert _timed_requeues(bed, "AuthSecretNotFound") == before


# ---------------------------------------------------------------- ModelResolved: the class's model policy


def test_a_parameter_count_over_the_class_limit_says_parameter_count_not_allowed(bed: Bed) -> None:
    bed.klass(
        "e2e-small-models",
        {"modelPolicy": {"allowedEndpointTypes": ["Chat"], "maxParameterCount": 3000000000}},
    )
    bed.order("too-big", hf("Qwen/Qwen2.5-7B-Instruct"), klass="e2e-small-models")
    status = bed.wait_reason("too-big", "ModelResolved", "ParameterCountNotAllowed")
    assert_refused(status, "ModelResolved", "ParameterCountNotAllowed", "7,615,616,512", "3,000,000,000")


def test_a_format_outside_the_class_list_says_format_not_allowed(bed: Bed) -> None:
    bed.klass(
        "e2e-safetensors-only",
        {"modelPolicy": {"allowedEndpointTypes": ["Chat"], "allowedFormats": ["Safetensors"]}},
    )
    bed.order("gguf", hf("Qwen/Qwen2.5-7B-Instruct-GGUF"), klass="e2e-safetensors-only")
    status = bed.wait_reason("gguf", "ModelResolved", "FormatNotAllowed")
    assert_refused(status, "ModelResolved", "FormatNotAllowed", "Safetensors", "GGUF")


def test_a_model_that_serves_nothing_the_class_allows_says_endpoint_type_policy_conflict(bed: Bed) -> None:
    bed.klass("e2e-chat-only", {"modelPolicy": {"allowedEndpointTypes": ["Chat"]}})
    bed.cluster_model("e2e-bge-conflict", BGE_FACTS)
    bed.order("conflict", catalog("ClusterModel", "e2e-bge-conflict"), klass="e2e-chat-only")
    status = bed.wait_reason("conflict", "ModelResolved", "EndpointTypePolicyConflict")
    assert_refused(
        status, "ModelResolved", "EndpointTypePolicyConflict", "Chat", "Embeddings", "different class"
    )


def test_an_embedding_model_gets_chat_from_a_bare_hub_reference_and_embeddings_from_facts(bed: Bed) -> None:
    bed.klass("e2e-embeddings", {"modelPolicy": {"allowedEndpointTypes": ["Embeddings"]}})
    bed.cluster_model("e2e-bge", BGE_FACTS)
    bed.order("bge-hub-default", hf("BAAI/bge-m3"), klass="default-llm")
    bed.order("bge-hub-embeddings", hf("BAAI/bge-m3"), klass="e2e-embeddings")
    bed.order("bge-catalog-default", catalog("ClusterModel", "e2e-bge"), klass="default-llm")
    got = {
        name: bed.wait_true(name, "ModelResolved")["model"]["endpointType"]
        for name in ("bge-hub-default", "bge-hub-embeddings", "bge-catalog-default")
    }
    assert got == {
        "bge-hub-default": "Chat",
        "bge-hub-embeddings": "Embeddings",
        "bge-catalog-default": "Embeddings",
    }


# ---------------------------------------------------------------- ModelResolved: the catalog


def test_a_catalog_model_not_ready_says_model_not_ready_and_resumes_once_it_is(bed: Bed) -> None:
    bed.model(
        "e2e-bge-pending",
        BGE_FACTS,
        {
            "phase": "Pending",
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Downloading", "message": "41% of the weights"}
            ],
        },
    )
    bed.order("pending", catalog("Model", "e2e-bge-pending"), klass="default-llm")
    status = bed.wait_reason("pending", "ModelResolved", "ModelNotReady")
    assert_refused(
        status, "ModelResolved", "ModelNotReady", "team-a/e2e-bge-pending", "Pending", "41% of the weights"
    )
    generation = bed.read("pending")["metadata"]["generation"]

    bed.admin.patch_namespaced_custom_object_status(
        CATALOG, "v1alpha1", bed.ns, "models", "e2e-bge-pending", {"status": READY_STATUS}
    )
    status = bed.wait_true("pending", "ModelResolved", timeout=30)
    assert status["model"]["endpointType"] == "Embeddings"
    assert bed.read("pending")["metadata"]["generation"] == generation


def test_a_catalog_object_missing_its_facts_says_invalid_model_source(bed: Bed) -> None:
    bed.cluster_model("e2e-shapeless", {"source": {"url": "hf://BAAI/bge-m3"}, "family": "xlm-roberta"})
    bed.order("shapeless", catalog("ClusterModel", "e2e-shapeless"), klass="default-llm")
    status = bed.wait_reason("shapeless", "ModelResolved", "InvalidModelSource")
    assert_refused(status, "ModelResolved", "InvalidModelSource", "ClusterModel e2e-shapeless", "spec.format")


def test_a_catalog_object_that_does_not_exist_says_model_not_found(bed: Bed) -> None:
    bed.order("cat-missing", catalog("ClusterModel", "e2e-nothing-here"), klass="default-llm")
    status = bed.wait_reason("cat-missing", "ModelResolved", "ModelNotFound")
    assert_refused(status, "ModelResolved", "ModelNotFound", "ClusterModel e2e-nothing-here")


# ---------------------------------------------------------------- changes to the module itself (last)


def test_a_class_less_order_has_no_endpoint_type_and_works_without_default_llm(
    bed: Bed, module: ModuleProcesses, cluster: Cluster
) -> None:
    custom = bed.admin
    saved: Any = custom.get_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", "default-llm")
    custom.delete_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", "default-llm")

    def restore() -> None:
        meta = saved["metadata"]
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "inferenceserviceclasses",
            {
                "apiVersion": saved["apiVersion"],
                "kind": saved["kind"],
                "spec": saved["spec"],
                "metadata": {
                    "name": "default-llm",
                    "labels": meta.get("labels"),
                    "annotations": meta.get("annotations"),
                },
            },
        )
        wait_for(lambda: bed.class_judged("default-llm", True), 30, what="default-llm Ready again")

    bed.cleanup.append(restore)
    bed.order("classless", hf("BAAI/bge-m3"))
    status = bed.wait_ready("classless", 120)
    assert "endpointType" not in (status.get("model") or {})
    assert condition(status, "ClassResolved")["reason"] == "Resolved"
    assert status["constraints"] == {"minReplicas": 1, "maxReplicas": 1, "autoscaler": False}
    assert status["endpoint"]["type"] == "External" and status["authSecretName"] == "classless-auth"


def test_a_catalog_kind_the_cluster_does_not_serve_says_catalog_kind_not_served(bed: Bed) -> None:
    ext = k8s.ApiextensionsV1Api(bed.admin_api)
    crd = f"clustermodels.{CATALOG}"
    ext.delete_custom_resource_definition(crd)

    def gone() -> bool:
        try:
            ext.read_custom_resource_definition(crd)
            return False
        except ApiException as exc:
            return bool(exc.status == 404)

    try:
        wait_for(gone, 60, what=f"CRD {crd} deleted")
        bed.order("kind-unserved", catalog("ClusterModel", "e2e-bge"), klass="default-llm")
        status = bed.wait_reason("kind-unserved", "ModelResolved", "CatalogKindNotServed")
        assert_refused(
            status,
            "ModelResolved",
            "CatalogKindNotServed",
            "ClusterModel",
            f"clustermodels.{CATALOG}/v1alpha1",
            "spec.model.ref.kind",
        )
    finally:
        wait_for(gone, 60, what=f"CRD {crd} deleted")
        install_crds(bed.admin_api, sorted(CATALOG_CRDS.glob("clustermodels*.yaml")))


def _may_read_cluster_models(admin: k8s.ApiClient) -> bool:
    review = k8s.AuthorizationV1Api(admin).create_subject_access_review(
        k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user=CONTROLLER_SA,
                resource_attributes=k8s.V1ResourceAttributes(
                    group=CATALOG, resource="clustermodels", verb="get"
                ),
            )
        )
    )
    return bool(review.status is not None and review.status.allowed)


def _catalog_rules(admin: k8s.ApiClient) -> list[Any]:
    role = k8s.RbacAuthorizationV1Api(admin).read_cluster_role("d8:isvc:controller")
    return [r for r in role.rules or [] if CATALOG in (r.api_groups or [])]


def test_a_failing_catalog_request_says_catalog_lookup_failed_until_it_succeeds(
    bed: Bed, module: ModuleProcesses, cluster: Cluster
) -> None:
    bed.cluster_model("e2e-bge-lookup", BGE_FACTS)
    try:
        install_chart(cluster, {"catalog": {"mode": "None"}})  # the controller keeps running with AIModels
        assert not _may_read_cluster_models(bed.admin_api)
        bed.order("lookup", catalog("ClusterModel", "e2e-bge-lookup"), klass="default-llm")
        status = bed.wait_reason("lookup", "ModelResolved", "CatalogLookupFailed")
        assert_refused(
            status,
            "ModelResolved",
            "CatalogLookupFailed",
            "clustermodels",
            "403",
            "catalog.mode",
            "the next pass asks again",
        )
        assert condition(status, "ModelResolved")["message"].count("again") == 1
        generation = bed.read("lookup")["metadata"]["generation"]
    finally:
        install_chart(cluster)
    assert _may_read_cluster_models(bed.admin_api)
    status = bed.wait_true("lookup", "ModelResolved", timeout=30)
    assert status["model"]["endpointType"] == "Embeddings"
    assert bed.read("lookup")["metadata"]["generation"] == generation


def test_catalog_mode_none_grants_no_catalog_permission_and_catalog_orders_say_catalog_disabled(
    bed: Bed, module: ModuleProcesses, cluster: Cluster
) -> None:
    assert _catalog_rules(bed.admin_api)  # the default mode grants it: this test can tell the difference
    try:
        install_chart(cluster, {"catalog": {"mode": "None"}})
        module.restart_controller("--catalog-mode", "None")
        assert _catalog_rules(bed.admin_api) == []
        apps = k8s.AppsV1Api(bed.admin_api)
        deployment: Any = apps.read_namespaced_deployment("isvc-controller", "d8-isvc")
        assert "--catalog-mode=None" in (deployment.spec.template.spec.containers[0].args or [])
        assert not _may_read_cluster_models(bed.admin_api)
        bed.order("cat-off", catalog("ClusterModel", "e2e-bge"), klass="default-llm")
        bed.order("hub-on", hf("BAAI/bge-m3"), klass="default-llm")
        status = bed.wait_reason("cat-off", "ModelResolved", "CatalogDisabled")
        assert_refused(status, "ModelResolved", "CatalogDisabled", "catalog.mode: None", "HuggingFace")
        assert bed.wait_true("hub-on", "ModelResolved")["model"]["endpointType"] == "Chat"
    finally:
        install_chart(cluster)
        module.restart_controller()
    assert _catalog_rules(bed.admin_api)


def test_a_catalog_models_workload_downloads_the_repository_its_object_names(
    bed: Bed, module: ModuleProcesses
) -> None:
    """With a model fetch image set (as the chart always sets it), the order names only the catalog object:
    its pods' download step fetches the object's Hugging Face repository at the object's revision, into the
    directory the runtime reads, with no token named; an object whose source is not on the Hub gets no
    download step."""
    sourced = {**BGE_FACTS, "source": {"url": "hf://BAAI/bge-m3", "revision": "5617a9f"}}
    bed.cluster_model("e2e-bge-fetch", sourced)
    bed.cluster_model("e2e-bge-nosource", {**BGE_FACTS, "source": {"url": "s3://models/bge-m3"}})
    apps = k8s.AppsV1Api(bed.admin_api)

    def pod_spec(name: str) -> Any | None:
        try:
            return apps.read_namespaced_stateful_set(name, bed.ns).spec.template.spec
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    try:
        module.restart_controller("--model-fetch-image", IMAGES["modelFetcher"])
        bed.order("bge-fetch", catalog("ClusterModel", "e2e-bge-fetch"), klass="default-llm")
        bed.order("bge-nosource", catalog("ClusterModel", "e2e-bge-nosource"), klass="default-llm")
        fetched = wait_for(lambda: pod_spec("bge-fetch"), 90, what="the StatefulSet of bge-fetch")
        unsourced = wait_for(lambda: pod_spec("bge-nosource"), 90, what="the StatefulSet of bge-nosource")
    finally:
        module.restart_controller()
    plan = bed.plan("bge-fetch")
    assert plan is not None
    assert (plan["spec"]["modelRepo"], plan["spec"]["modelCommit"]) == ("BAAI/bge-m3", "5617a9f")
    [init] = fetched.init_containers
    assert init.image == IMAGES["modelFetcher"]
    assert init.command == [
        "hf",
        "download",
        "BAAI/bge-m3",
        "--local-dir",
        "/models/e2e-bge-fetch",
        "--revision",
        "5617a9f",
    ]
    assert "HF_TOKEN" not in {e.name for e in init.env}
    [server] = fetched.containers
    assert "/models/e2e-bge-fetch" in [*(server.command or []), *(server.args or [])]  # the runtime reads it

    assert not unsourced.init_containers
    plan = bed.plan("bge-nosource")
    assert plan is not None and "modelRepo" not in plan["spec"]
