"""Issue 14, "Closed to abuse": who may call the planner, and who may do what in the cluster."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import namespace
from isvc_testbed.module import NAMESPACE, ModuleProcesses, token_file
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

RELEASE = {"namespace": "team-a", "name": "nobody-holds-this"}


def _release(module: ModuleProcesses, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{module.planner_url}/v1/release", json=RELEASE, headers=headers, timeout=10)


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


def test_health_and_readiness_stay_open_and_docs_are_gone(module: ModuleProcesses) -> None:
    codes: dict[str, Any] = {p: httpx.get(f"{module.planner_url}{p}", timeout=5).status_code
                             for p in ("/healthz", "/readyz", "/docs", "/openapi.json")}
    assert codes == {"/healthz": 200, "/readyz": 200, "/docs": 404, "/openapi.json": 404}
