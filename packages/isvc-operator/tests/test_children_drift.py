"""Issue 29: a child someone else changed is restored to what the module computes, and the order does not
read Ready over it; the judge counts only the pods of the order's own set.

The cluster is the in-memory fake: a change is made to the object it holds, as a namespace user's `kubectl
edit` would; what the module writes is read back from the fake. Tests against the API server itself are
e2e/tests/test_isvc_security.py's.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_operator import SEAL

from .fakes import RUNTIME, World, klass

KEY = ("StatefulSet", "team-a", "support-llm")


def _workload(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "WorkloadReady")


@pytest.fixture(autouse=True)
def _no_restores_remembered() -> None:
    from isvc_operator._steps import children

    children._RESTORED.clear()


@pytest.fixture
def world() -> World:
    w = World()
    w.run()
    return w


def _held(world: World) -> dict[str, Any]:
    return world.cluster.objects[KEY]


TAMPERING = {
    "image": lambda s: s["spec"]["template"]["spec"]["containers"][0].update(image="evil:latest"),
    "service account token": lambda s: s["spec"]["template"]["spec"].update(
        automountServiceAccountToken=True
    ),
    "a sidecar": lambda s: s["spec"]["template"]["spec"]["containers"].append({"name": "x", "image": "x"}),
    "an annotation": lambda s: s["metadata"]["annotations"].update({"nginx.ingress.kubernetes.io/x": "y"}),
    "a finalizer": lambda s: s["metadata"].update(finalizers=["example.com/keep"]),
    "the owner": lambda s: s["metadata"].update(ownerReferences=[]),
    "a forged seal": lambda s: (
        s["spec"]["template"]["spec"]["containers"][0].update(image="evil:latest"),
        s["metadata"]["annotations"].update({SEAL: s["metadata"]["annotations"][SEAL]}),
    ),
}


@pytest.mark.parametrize("change", list(TAMPERING))
def test_a_changed_child_is_restored_and_the_order_does_not_read_ready_meanwhile(
    world: World, change: str
) -> None:
    computed = copy.deepcopy(_held(world))
    TAMPERING[change](_held(world))

    status = world.run()

    assert (_workload(status)["status"], _workload(status)["reason"]) == ("False", "WorkloadNotReady")
    assert "StatefulSet support-llm of the order had been changed" in _workload(status)["message"]
    held = _held(world)
    assert held["spec"] == computed["spec"]
    assert held["metadata"]["ownerReferences"] == computed["metadata"]["ownerReferences"]
    assert "finalizers" not in held["metadata"]
    assert set(held["metadata"]["annotations"]) == set(computed["metadata"]["annotations"])
    assert world.sealer.holds(held)


def test_a_restored_child_costs_nothing_afterwards(world: World) -> None:
    TAMPERING["image"](_held(world))
    world.run()
    patched, applied = len(world.cluster.patched), len(world.cluster.applied)

    world.run()
    world.run()

    assert (len(world.cluster.patched), len(world.cluster.applied)) == (patched, applied)


def test_an_untouched_child_is_never_written_again(world: World) -> None:
    applied = len(world.cluster.applied)
    world.restart()  # the key is the chart's Secret: a restart keeps it
    world.run()
    assert (len(world.cluster.applied), world.cluster.patched) == (applied, [])


def test_every_sealed_write_was_sealed_with_what_the_api_server_would_make_of_it(world: World) -> None:
    sealed = [m for m in world.cluster.applied if m["kind"] == "StatefulSet"]
    assert sealed and all(world.sealer.holds(m) for m in sealed)


def test_an_autoscaled_set_scaled_past_the_class_bound_is_brought_back(world: World) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "support-llm", "namespace": "team-a", "labels": {LABEL_ORDER: "support-llm"}},
        "spec": {"minReplicas": 1, "maxReplicas": 2},
    }
    built = world.workload.manifests

    def manifests(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        out = built(*args, **kwargs)
        for m in out:
            if m["kind"] == "StatefulSet":
                m["spec"].pop("replicas")  # the autoscaler's
        return [*out, hpa]

    world.workload.manifests = manifests  # type: ignore[method-assign]
    world.run()
    _held(world)["spec"]["replicas"] = 8  # `kubectl scale`: the scale subresource, past the bound of 2

    status = world.run()

    assert _workload(status)["reason"] == "WorkloadNotReady"
    assert _held(world)["spec"]["replicas"] == 2


def test_a_set_a_user_labels_as_the_orders_is_not_the_orders(world: World) -> None:
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")
    world.workload.manifests = lambda *a, **k: []  # type: ignore[method-assign,assignment]
    world.cluster.put(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": "support-llm",
                "namespace": "team-a",
                "labels": {LABEL_ORDER: "support-llm"},
            },
            "spec": {"template": {"spec": {"containers": [RUNTIME]}}},
        }
    )

    world.run()

    assert world.workload.judged_sets[-1] is None  # no owner reference to the order: not its workload


def test_a_class_change_applies_without_mistaking_itself_for_tampering(world: World) -> None:
    world.cluster.put(klass(exposure={"type": "ClusterLocal", "authentication": "Token"}))
    world.run()
    assert world.cluster.patched == []


# ---- host ownership (issue 29): an External host is published only while nobody else published it first

HOST = "support-llm--team-a.example.com"


def _with_ingress(world: World) -> None:
    built = world.workload.manifests

    def manifests(order: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        ingress = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "support-llm",
                "namespace": "team-a",
                "labels": {LABEL_ORDER: "support-llm"},
                "ownerReferences": [order.owner_reference()],
            },
            "spec": {"rules": [{"host": HOST}]},
        }
        return [*built(order, *args, **kwargs), ingress]

    world.workload.manifests = manifests  # type: ignore[method-assign]


def _squatter(created: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "mine", "namespace": "team-b", "creationTimestamp": created},
        "spec": {"rules": [{"host": HOST}]},
    }


def test_a_host_another_namespace_published_first_is_not_published() -> None:
    world = World()
    _with_ingress(world)
    world.cluster.put(_squatter("2026-01-01T00:00:00Z"))

    status = world.run()

    assert (_workload(status)["reason"], "Ingress team-b/mine" in _workload(status)["message"]) == (
        "WorkloadError",
        True,
    )
    assert world.cluster.cached("Ingress", "team-a", "support-llm") is None


def test_a_host_published_first_by_the_order_stays_published(world: World) -> None:
    _with_ingress(world)
    world.run()
    world.cluster.objects[("Ingress", "team-a", "support-llm")]["metadata"]["creationTimestamp"] = (
        "2026-01-01T00:00:00Z"
    )
    world.cluster.put(_squatter("2026-01-02T00:00:00Z"))  # a later claim on the same host

    status = world.run()

    assert _workload(status)["reason"] != "WorkloadError"
    assert world.cluster.cached("Ingress", "team-a", "support-llm") is not None


def test_a_child_the_cluster_keeps_changing_is_left_and_said_not_rewritten_every_pass(world: World) -> None:
    """A mutating webhook or another controller that changes a child again and again must not make the module
    rewrite it on every pass: after three restores in five minutes it is left, and the order says so."""
    reasons = []
    for _ in range(4):
        TAMPERING["an annotation"](_held(world))
        reasons.append(_workload(world.run())["reason"])
    patched = len(world.cluster.patched)

    assert reasons == ["WorkloadNotReady"] * 3 + ["WorkloadError"]
    assert "keeps being changed" in _workload(world.cluster.status_of("team-a", "support-llm"))["message"]
    assert patched == 3


def test_the_quota_retry_mark_the_controller_writes_apart_is_no_tampering(world: World) -> None:
    _held(world)["metadata"]["annotations"]["ai.deckhouse.io/quota-retry"] = "pods@gone"

    world.run()

    assert world.cluster.patched == []
