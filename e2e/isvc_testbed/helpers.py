"""Helpers for e2e tests: waiting, user namespaces, placeholder roles."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

__all__ = [
    "ensure_cluster_role",
    "give_back",
    "ignore_404",
    "namespace",
    "user_namespace",
    "wait_for",
    "wait_granted",
]

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.25, what: str = ""
) -> T:
    """Poll `check` until it returns something truthy and return that; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"timed out after {timeout:.0f}s waiting for {what or check!r}; last: {last!r}"
            )
        time.sleep(interval)


def ignore_404(call: Callable[..., object]) -> None:
    """Run a read or delete for which a 404 (already gone) is as good as success."""
    try:
        call()
    except ApiException as e:
        if e.status != 404:
            raise


def _create(call: Callable[[], Any]) -> bool:
    try:
        call()
        return True
    except ApiException as e:
        if e.status != 409:
            raise
        return False


def namespace(api: k8s.ApiClient, name: str) -> str:
    """Create namespace `name` unless it exists and wait for its default ServiceAccount."""
    core = k8s.CoreV1Api(api)
    _create(lambda: core.create_namespace(cast(Any, {"metadata": {"name": name}})))

    def default_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
            return True
        except ApiException as e:
            if e.status != 404:
                raise
            return False

    wait_for(default_sa, 30, what=f"ServiceAccount {name}/default")
    return name


def user_namespace(
    api: k8s.ApiClient, name: str, user: str = "alice", cluster_role: str = "d8:user-authz:isvc:editor"
) -> str:
    """Create namespace `name` (if needed) and bind `user` to `cluster_role` in it, granted when this returns."""
    namespace(api, name)
    binding = {
        "metadata": {"name": f"{user}-{cluster_role.replace(':', '-')}", "namespace": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    _create(lambda: k8s.RbacAuthorizationV1Api(api).create_namespaced_role_binding(name, cast(Any, binding)))
    wait_granted(api, name, user, cluster_role)
    return name


def wait_granted(api: k8s.ApiClient, namespace: str, user: str, cluster_role: str) -> None:
    """Return once the API server's authorizer grants `user` the first rule of `cluster_role` in `namespace`:
    its RBAC cache follows a new binding a moment late (a create right after one was refused once on a loaded
    machine). A ServiceAccount's user is `system:serviceaccount:<namespace>:<name>`."""
    try:
        role: Any = k8s.RbacAuthorizationV1Api(api).read_cluster_role(cluster_role)
    except ApiException as e:
        if e.status != 404:
            raise
        return  # bound before the role exists: nothing to be granted yet
    rules = [
        r
        for r in role.rules or []
        if r.resources and r.verbs and not r.resource_names and "/" not in r.resources[0]
    ]
    if not rules:
        return
    attributes = {
        "namespace": namespace,
        "group": (rules[0].api_groups or [""])[0],
        "resource": rules[0].resources[0],
        "verb": rules[0].verbs[0],
    }
    review = {"spec": {"user": user, "resourceAttributes": attributes}}
    authz = k8s.AuthorizationV1Api(api)
    wait_for(
        lambda: cast(Any, authz.create_subject_access_review(cast(Any, review))).status.allowed,
        30,
        0.1,
        f"{user} granted {cluster_role} in {namespace}",
    )


def ensure_cluster_role(api: k8s.ApiClient, name: str, rules: list[dict[str, Any]]) -> bool:
    """Create a ClusterRole unless one of that name exists; True when this call created it."""
    body = {"metadata": {"name": name}, "rules": rules}
    return _create(lambda: k8s.RbacAuthorizationV1Api(api).create_cluster_role(cast(Any, body)))


def give_back(api: k8s.ApiClient, namespace: str, charted: dict[str, Any], node: str) -> None:
    """The Deployments `charted` (as read before a test moved them onto `node`) given back their pod template and
    replicas, and their pods gone from `node`. Scaled to none there instead, a later `helm upgrade` scales them
    up again on that node without its toleration (the chart's), and its --wait times out."""
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    for name, deployment in charted.items():
        live: Any = apps.read_namespaced_deployment(name, namespace)
        live.spec.template, live.spec.replicas = deployment.spec.template, deployment.spec.replicas
        apps.replace_namespaced_deployment(name, namespace, live)
    selectors = [
        ",".join(f"{k}={v}" for k, v in d.spec.selector.match_labels.items()) for d in charted.values()
    ]

    def gone() -> bool:
        pods: list[Any] = [
            p for s in selectors for p in core.list_namespaced_pod(namespace, label_selector=s).items
        ]
        return not [p for p in pods if p.spec.node_name == node]

    wait_for(gone, 60, interval=1, what=f"the pods of {sorted(charted)} gone from {node}")
