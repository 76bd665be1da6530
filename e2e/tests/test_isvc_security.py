"""Issue 14, "Closed to abuse": who may call the planner, and who may do what in the cluster."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import namespace, user_namespace
from isvc_testbed.module import NAMESPACE, ModuleProcesses, install_chart, token_file
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

RELEASE = {"namespace": "team-a", "name": "nobody-holds-this"}
AI = "ai.deckhouse.io"
RES = "resource.k8s.io"


def _release(module: ModuleProcesses, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{module.planner_url}/v1/release",
        json=RELEASE,
        headers=headers,
        timeout=10,
        verify=module.planner_verify(),
    )


def _bearer(cluster: Cluster, ns: str, name: str) -> dict[str, str]:
    token = token_file(cluster.service_account_kubeconfig(ns, name)).read_text()
    return {"Authorization": f"Bearer {token}"}


def test_the_planner_refuses_a_call_without_a_token(module: ModuleProcesses) -> None:
    assert _release(module, {}).status_code == 401
    assert _release(module, {"Authorization": "Bearer invented"}).status_code == 401


def test_the_planner_refuses_another_service_accounts_token(
    module: ModuleProcesses, cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    namespace(admin_api, "team-b")
    stranger = _bearer(cluster, "team-b", "default")
    planner = _bearer(cluster, NAMESPACE, "planner")  # the planner's own token is no caller either

    assert [_release(module, stranger).status_code, _release(module, planner).status_code] == [403, 403]


def test_the_planner_answers_the_controllers_token(module: ModuleProcesses, cluster: Cluster) -> None:
    answer = _release(module, _bearer(cluster, NAMESPACE, "controller"))

    assert (answer.status_code, answer.json()) == (200, {"released": False})


def test_only_the_controllers_token_lists_the_planners_reservations(
    module: ModuleProcesses, cluster: Cluster, admin_api: k8s.ApiClient
) -> None:
    namespace(admin_api, "team-b")
    url = f"{module.planner_url}/v1/reservations"
    codes = [
        httpx.get(url, headers=h, timeout=10, verify=module.planner_verify()).status_code
        for h in ({}, _bearer(cluster, "team-b", "default"), _bearer(cluster, NAMESPACE, "planner"))
    ]
    answer = httpx.get(
        url, headers=_bearer(cluster, NAMESPACE, "controller"), timeout=10, verify=module.planner_verify()
    )

    assert codes == [401, 403, 403]
    assert answer.status_code == 200 and isinstance(answer.json()["reservations"], list)


def test_the_planner_speaks_https_alone_with_a_certificate_of_its_own_authority_issue_29(
    module: ModuleProcesses,
) -> None:
    """The controller's token goes with every call: plain HTTP gets no answer, and a client that does not
    trust the planner's authority (the chart's isvc-planner-tls) does not get through the handshake."""
    plain = module.planner_url.replace("https://", "http://", 1)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{plain}/readyz", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{module.planner_url}/readyz", timeout=5)
    assert (
        httpx.get(f"{module.planner_url}/readyz", timeout=5, verify=module.planner_verify()).status_code
        == 200
    )


def test_health_and_readiness_stay_open_and_docs_are_gone(module: ModuleProcesses) -> None:
    codes: dict[str, Any] = {
        p: httpx.get(f"{module.planner_url}{p}", timeout=5, verify=module.planner_verify()).status_code
        for p in ("/healthz", "/readyz", "/docs", "/openapi.json")
    }
    assert codes == {"/healthz": 200, "/readyz": 200, "/docs": 404, "/openapi.json": 404}


# ---------------------------------------------------------------- who may do what (finding 7)


def _sa(ns: str, name: str) -> tuple[str, list[str]]:
    return f"system:serviceaccount:{ns}:{name}", [
        "system:serviceaccounts",
        f"system:serviceaccounts:{ns}",
        "system:authenticated",
    ]


SUBJECTS = {
    "alice": ("alice", ["team-a", "system:authenticated"]),  # d8:user-authz:isvc:editor in team-a
    "bob": ("bob", ["team-b", "system:authenticated"]),  # the same role, in team-b only
    "controller": _sa(NAMESPACE, "controller"),
    "planner": _sa(NAMESPACE, "planner"),
    "stranger": _sa("team-a", "default"),  # an unrelated pod's ServiceAccount
    # issue 29: a namespace owner as real clusters make one, Kubernetes' `edit` and the module's editor role
    "mallory": ("mallory", ["team-m", "system:authenticated"]),
}
# (subject, verb, group, resource, namespace or None for cluster scope, allowed): what module/docs promise
# (SECURITY.md, "Who may do what"), and nothing more.
MATRIX: list[tuple[str, str, str, str, str | None, bool]] = [
    # namespace users order in their own namespace, read and delete plans, never touch classes or status
    ("alice", "create", AI, "inferenceservices", "team-a", True),
    ("alice", "delete", AI, "inferenceservices", "team-a", True),
    ("alice", "get", AI, "launchplans", "team-a", True),
    ("alice", "delete", AI, "launchplans", "team-a", True),
    ("alice", "create", AI, "launchplans", "team-a", False),
    ("alice", "patch", AI, "inferenceservices/status", "team-a", False),
    ("alice", "list", AI, "inferenceserviceclasses", None, False),
    ("alice", "create", AI, "inferenceserviceclasses", None, False),
    ("alice", "create", AI, "inferenceservices", "team-b", False),
    ("alice", "get", "", "secrets", "team-a", False),
    ("bob", "create", AI, "inferenceservices", "team-b", True),
    ("bob", "get", AI, "inferenceservices", "team-a", False),
    ("bob", "get", AI, "launchplans", "team-a", False),
    # the controller: verb by verb what its code calls
    ("controller", "get", "", "secrets", "team-a", True),
    ("controller", "create", "", "secrets", "team-a", True),
    # listed and watched as metadata only (the code asks for PartialObjectMetadata; RBAC cannot say so)
    ("controller", "list", "", "secrets", "team-a", True),
    ("controller", "watch", "", "secrets", None, True),
    ("controller", "patch", "", "secrets", "team-a", False),
    ("controller", "update", "", "secrets", "team-a", False),
    ("controller", "delete", "", "secrets", "team-a", False),
    ("controller", "patch", "apps", "statefulsets", "team-a", True),
    ("controller", "delete", "apps", "statefulsets", "team-a", True),
    ("controller", "update", "apps", "statefulsets", "team-a", False),
    ("controller", "get", "apps", "statefulsets", "team-a", False),
    ("controller", "patch", "apps", "deployments", "team-a", False),  # an earlier version's: only removed
    ("controller", "delete", "apps", "deployments", "team-a", True),
    ("controller", "create", "", "persistentvolumeclaims", "team-a", False),  # the set controller's
    ("controller", "delete", "", "persistentvolumeclaims", "team-a", False),
    ("controller", "patch", "", "services", "team-a", True),
    ("controller", "delete", "", "services", "team-a", False),
    ("controller", "patch", "networking.k8s.io", "ingresses", "team-a", True),
    ("controller", "patch", RES, "resourceclaimtemplates", "team-a", True),
    ("controller", "list", RES, "resourceclaims", None, True),
    ("controller", "patch", RES, "resourceclaims", "team-a", False),
    ("controller", "patch", AI, "launchplans", "team-a", True),
    ("controller", "deletecollection", AI, "launchplans", "team-a", False),
    ("controller", "patch", AI, "inferenceservices", "team-a", False),
    ("controller", "patch", AI, "inferenceservices/status", "team-a", True),
    ("controller", "patch", AI, "inferenceserviceclasses", None, False),
    ("controller", "patch", AI, "inferenceserviceclasses/status", None, True),
    ("controller", "patch", "autoscaling", "horizontalpodautoscalers", "team-a", True),
    ("controller", "update", "autoscaling", "horizontalpodautoscalers", "team-a", False),
    ("controller", "patch", AI, "launchplans/status", "team-a", True),
    ("controller", "create", "authorization.k8s.io", "subjectaccessreviews", None, True),
    ("controller", "patch", "networking.k8s.io", "networkpolicies", "team-a", True),  # issue 29: per order
    ("controller", "update", "networking.k8s.io", "networkpolicies", "team-a", False),
    ("controller", "get", "", "pods/log", "team-a", True),
    ("controller", "delete", "", "pods", "team-a", True),  # issue 44: a replica whose permit it did not seal
    ("controller", "create", "", "events", "team-a", True),
    ("controller", "list", "", "events", "team-a", True),  # a set's FailedCreate, while it has no pod
    ("controller", "watch", "", "events", "team-a", False),
    ("controller", "update", "coordination.k8s.io", "leases", NAMESPACE, True),
    ("controller", "update", "coordination.k8s.io", "leases", "team-a", False),
    ("controller", "create", "authentication.k8s.io", "tokenreviews", None, False),  # no kube-rbac-proxy here
    # the planner: reads hardware, claims, orders, classes, priorities; reviews tokens; writes nothing
    ("planner", "list", RES, "resourceslices", None, True),
    ("planner", "watch", RES, "resourceclaims", None, True),
    ("planner", "list", AI, "inferenceservices", None, True),
    ("planner", "list", AI, "inferenceserviceclasses", None, True),
    ("planner", "watch", AI, "launchplans", None, True),  # issue 26: plans hold their devices in the ledger
    ("planner", "patch", AI, "launchplans", "team-a", False),
    ("planner", "create", "authentication.k8s.io", "tokenreviews", None, True),
    ("planner", "create", "authorization.k8s.io", "subjectaccessreviews", None, False),  # no kube-rbac-proxy
    ("planner", "watch", "", "nodes", None, True),
    ("planner", "patch", "", "nodes", None, False),
    ("planner", "patch", RES, "resourceclaims", "team-a", False),
    ("planner", "create", AI, "inferenceservices", "team-a", False),
    ("planner", "get", "", "secrets", "team-a", False),
    # anyone else: nothing of the module's
    ("stranger", "create", AI, "inferenceservices", "team-a", False),
    ("stranger", "list", AI, "launchplans", "team-a", False),
    ("stranger", "list", RES, "resourceclaims", None, False),
    ("stranger", "get", "", "secrets", "team-a", False),
    ("stranger", "create", "authentication.k8s.io", "tokenreviews", None, False),
]


# Issue 29, the abuse matrix: what Kubernetes' `edit` role lets a namespace owner do to what the module makes —
# claims, StatefulSets, Services, Ingresses, NetworkPolicies of her namespace she may write, which is why the
# controller seals and restores its children (e2e/tests/test_isvc_tenant_boundary.py shows the edits undone) —
# and what it still does not let her do.
EDIT: list[tuple[str, str, str, str, str | None, bool]] = [
    ("mallory", "create", RES, "resourceclaims", "team-m", True),
    ("mallory", "patch", "apps", "statefulsets", "team-m", True),
    ("mallory", "patch", "apps", "statefulsets/scale", "team-m", True),
    ("mallory", "patch", "", "services", "team-m", True),
    ("mallory", "create", "networking.k8s.io", "ingresses", "team-m", True),
    ("mallory", "delete", "networking.k8s.io", "networkpolicies", "team-m", True),
    ("mallory", "get", "", "secrets", "team-m", True),
    ("mallory", "patch", "", "pods", "team-m", True),
    ("mallory", "create", AI, "inferenceservices", "team-m", True),
    # and nothing of another namespace, of the module's, or of what only the controller writes
    ("mallory", "patch", "apps", "statefulsets", "team-a", False),
    ("mallory", "create", "networking.k8s.io", "ingresses", "team-a", False),
    ("mallory", "get", "", "secrets", NAMESPACE, False),  # the seal key, the webhook's certificate
    ("mallory", "patch", AI, "inferenceservices/status", "team-m", False),
    ("mallory", "create", AI, "launchplans", "team-m", False),
    ("mallory", "list", AI, "inferenceserviceclasses", None, False),
    ("mallory", "patch", RES, "resourceclaims/status", "team-m", False),
    ("mallory", "create", "authentication.k8s.io", "tokenreviews", None, False),
]


@pytest.fixture(scope="module")
def mallory_namespace(admin_api: k8s.ApiClient) -> str:
    user_namespace(admin_api, "team-m", user="mallory", cluster_role="d8:user-authz:isvc:editor")
    return user_namespace(admin_api, "team-m", user="mallory", cluster_role="edit")


@pytest.mark.parametrize(
    ("who", "verb", "group", "resource", "ns", "allowed"),
    EDIT,
    ids=[f"{r[0]}-{r[1]}-{r[3]}-{r[4] or 'cluster'}" for r in EDIT],
)
def test_a_namespace_owner_with_kubernetes_edit_may_do_exactly_this_issue_29(
    module: ModuleProcesses,
    admin_api: k8s.ApiClient,
    mallory_namespace: str,
    who: str,
    verb: str,
    group: str,
    resource: str,
    ns: str | None,
    allowed: bool,
) -> None:
    assert _allowed(admin_api, who, verb, group, resource, ns) == allowed


# With kube-rbac-proxy in front of the metrics (always under Deckhouse; plain Helm with
# images.kubeRbacProxy), the sidecar runs as its pod's ServiceAccount and reviews each reader's token and
# access: both ServiceAccounts may create both reviews, and nobody else gains anything.
PROXIED: list[tuple[str, str, str, str, str | None, bool]] = [
    ("controller", "create", "authentication.k8s.io", "tokenreviews", None, True),
    ("controller", "create", "authorization.k8s.io", "subjectaccessreviews", None, True),
    ("controller", "patch", "networking.k8s.io", "networkpolicies", "team-a", True),  # issue 29: per order
    ("controller", "update", "networking.k8s.io", "networkpolicies", "team-a", False),
    ("planner", "create", "authentication.k8s.io", "tokenreviews", None, True),
    ("planner", "create", "authorization.k8s.io", "subjectaccessreviews", None, True),
    ("controller", "delete", "", "secrets", "team-a", False),
    ("planner", "get", "", "secrets", "team-a", False),
    ("stranger", "create", "authentication.k8s.io", "tokenreviews", None, False),
    ("stranger", "create", "authorization.k8s.io", "subjectaccessreviews", None, False),
    ("alice", "create", "authentication.k8s.io", "tokenreviews", None, False),
]
PROXY_IMAGE = "localhost/isvc/kube-rbac-proxy:0.1.0"


def _allowed(
    admin_api: k8s.ApiClient, who: str, verb: str, group: str, resource: str, ns: str | None
) -> bool:
    user, groups = SUBJECTS[who]
    plural, _, sub = resource.partition("/")
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=user,
            groups=groups,
            resource_attributes=k8s.V1ResourceAttributes(
                verb=verb, group=group, resource=plural, subresource=sub or None, namespace=ns
            ),
        )
    )
    answer = k8s.AuthorizationV1Api(admin_api).create_subject_access_review(review)
    return bool(answer.status.allowed)


@pytest.fixture(scope="module")
def bob_namespace(admin_api: k8s.ApiClient) -> str:
    return user_namespace(admin_api, "team-b", user="bob", cluster_role="d8:user-authz:isvc:editor")


@pytest.mark.parametrize(
    ("who", "verb", "group", "resource", "ns", "allowed"),
    MATRIX,
    ids=[f"{r[0]}-{r[1]}-{r[3]}-{r[4] or 'cluster'}" for r in MATRIX],
)
def test_each_subject_may_do_exactly_what_the_docs_promise(
    module: ModuleProcesses,
    admin_api: k8s.ApiClient,
    team_a: str,
    bob_namespace: str,
    who: str,
    verb: str,
    group: str,
    resource: str,
    ns: str | None,
    allowed: bool,
) -> None:
    assert _allowed(admin_api, who, verb, group, resource, ns) == allowed


def test_the_kube_rbac_proxy_sidecars_may_review_tokens_and_access_and_nothing_more(
    module: ModuleProcesses,
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    team_a: str,
) -> None:
    rows = [r[:5] for r in PROXIED]
    assert [_allowed(admin_api, *r) for r in rows[:4]] == [False, True, True, False]  # before: can tell
    try:
        install_chart(cluster, {"images": {"kubeRbacProxy": PROXY_IMAGE}})
        found = {r: _allowed(admin_api, *r) for r in rows}
    finally:
        install_chart(cluster)
    assert found == {r[:5]: r[5] for r in PROXIED}
    assert [_allowed(admin_api, *r) for r in rows[:4]] == [False, True, True, False]  # and after
