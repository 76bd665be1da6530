"""The API server's refusals read the same whatever the client keeps its answer as (bytes before 37, text
after): a create in a namespace being deleted, or already gone, is told apart, not logged as a failed pass."""

from __future__ import annotations

import json

import pytest
from isvc_operator._api import ClusterRefusal, RefusalCause, namespace_terminating
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError

# The NamespaceLifecycle admission plugin's answer (k8s.io/apiserver), as a kube-apiserver 1.36 sent it.
TERMINATING = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'launchplans.ai.deckhouse.io "gone-0" is forbidden: unable to create new content in namespace '
    "day2-gone because it is being terminated",
    "reason": "Forbidden",
    "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
    "code": 403,
}


def _refused(body: bytes | str, dynamic: bool) -> Exception:
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = body
    return ForbiddenError(exc) if dynamic else exc


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_create_in_a_terminating_namespace_is_told_apart_however_the_body_is_kept(
    dynamic: bool, as_bytes: bool
) -> None:
    text = json.dumps(TERMINATING)
    exc = _refused(text.encode() if as_bytes else text, dynamic)
    assert namespace_terminating(exc)
    assert ClusterRefusal.of(exc) is None  # not a refusal of the manifest: the namespace goes


def test_another_forbidden_is_not_a_terminating_namespace() -> None:
    other = {**TERMINATING, "details": {}, "message": "forbidden: User cannot create"}
    exc = _refused(json.dumps(other).encode(), True)
    assert not namespace_terminating(exc)
    assert ClusterRefusal.of(exc) == ClusterRefusal("forbidden: User cannot create", RefusalCause.OTHER)


# A create into a namespace already deleted, as a kube-apiserver 1.36 answered an apply of a LaunchPlan.
GONE = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'namespaces "day2-gone" not found',
    "reason": "NotFound",
    "details": {"name": "day2-gone", "kind": "namespaces"},
    "code": 404,
}


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_create_in_a_namespace_already_gone_is_told_apart(as_bytes: bool) -> None:
    exc = ApiException(status=404, reason="Not Found")
    text = json.dumps(GONE)
    exc.body = text.encode() if as_bytes else text
    assert namespace_terminating(NotFoundError(exc))
    assert namespace_terminating(exc)


def test_an_object_not_found_is_not_a_namespace_gone() -> None:
    exc = ApiException(status=404, reason="Not Found")
    exc.body = json.dumps({**GONE, "details": {"name": "gone-0", "kind": "launchplans"}})
    assert not namespace_terminating(NotFoundError(exc))
