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

    children._PACES.clear()


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
    _edited_by(_held(world), "kubectl-edit")

    status = world.run()

    assert (_workload(status)["status"], _workload(status)["reason"]) == ("False", "WorkloadNotReady")
    assert (
        "StatefulSet support-llm (changed by kubectl-edit) had been changed" in _workload(status)["message"]
    )
    held = _held(world)
    assert held["spec"] == computed["spec"]
    assert held["metadata"]["ownerReferences"] == computed["metadata"]["ownerReferences"]
    assert "finalizers" not in held["metadata"]
    assert set(held["metadata"]["annotations"]) - {"managedFields"} == set(
        computed["metadata"]["annotations"]
    )
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
    _edited_by(_held(world), "kubectl")

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


def _edited_by(held: dict[str, Any], manager: str) -> None:
    """An edit as the API server records it: a managedFields entry of the editor, after the module's."""
    held["metadata"]["managedFields"] = [
        {"manager": "isvc-controller", "operation": "Apply", "time": "2026-01-01T00:00:00Z"},
        {"manager": manager, "operation": "Update", "time": "2026-01-01T00:00:05Z"},
    ]
    held["metadata"]["resourceVersion"] = str(int(held["metadata"].get("resourceVersion") or 0) + 1)


def test_a_child_changed_again_and_again_is_restored_every_time_never_left_issue_44(world: World) -> None:
    """Before: after three restores in five minutes the fourth edit stayed (an image ran 50 s later)."""
    image = _held(world)["spec"]["template"]["spec"]["containers"][0]["image"]
    for _ in range(10):
        TAMPERING["image"](_held(world))
        _edited_by(_held(world), "kubectl-edit")
        status = world.run()
        assert _held(world)["spec"]["template"]["spec"]["containers"][0]["image"] == image
        assert "changed by kubectl-edit" in _workload(status)["message"]

    assert world.restores == [("team-a", "support-llm", "StatefulSet")] * 10
    events = [e for e in world.cluster.events if e[2] == "ChildRestored"]
    assert len(events) == 10 and "kubectl-edit" in events[0][3]


def test_a_child_changed_faster_than_its_pace_is_restored_at_its_pace_not_every_pass_issue_44(
    world: World,
) -> None:
    """Something of the cluster fighting the module is answered at most ten times at once, then once every
    six seconds: never given up, never a write on every pass."""
    from isvc_operator._steps import children

    for _ in range(children.RESTORE_BURST + 1):
        TAMPERING["an annotation"](_held(world))
        _edited_by(_held(world), "another-controller")
        status = world.run()

    assert len(world.restores) == children.RESTORE_BURST
    assert _workload(status)["reason"] == "WorkloadNotReady"
    assert "restored again in" in _workload(status)["message"]
    assert world.last is not None and world.last.requeue_after is not None
    assert 0 < world.last.requeue_after <= children.RESTORE_EVERY


def test_a_restore_the_cache_has_not_caught_up_with_is_not_made_twice_issue_44(world: World) -> None:
    TAMPERING["image"](_held(world))
    _edited_by(_held(world), "kubectl-edit")
    stale = copy.deepcopy(_held(world))
    world.run()
    world.cluster.objects[KEY] = stale  # the informer has not seen the restore yet

    world.run()

    assert len(world.restores) == 1


def test_a_change_no_other_field_manager_made_is_restored_without_a_warning_issue_45(world: World) -> None:
    """Issue 45 (1): 239 of 240 tamper warnings were false; a warning names another field manager or is not
    given (the seal still decides the restore)."""
    TAMPERING["an annotation"](_held(world))  # no managedFields entry but the module's

    status = world.run()

    assert world.restores == [("team-a", "support-llm", "StatefulSet")]
    assert [e for e in world.cluster.events if e[2] == "ChildRestored"] == []
    assert (
        _workload(status)["reason"] != "WorkloadNotReady" or "changed by" not in _workload(status)["message"]
    )


def test_a_set_scaled_by_hand_without_an_autoscaler_is_scaled_back_issue_44(world: World) -> None:
    """Before: `kubectl scale --replicas=3` on an order without an autoscaler stayed, and it read Ready."""
    _held(world)["spec"]["replicas"] = 3
    _edited_by(_held(world), "kubectl")

    world.run()

    assert _held(world)["spec"]["replicas"] == 1


def test_a_users_autoscaler_aimed_at_the_orders_set_is_deleted_issue_44(world: World) -> None:
    """Before: alice's own HPA (min 3) on the order's set got a second H100 replica running."""
    world.cluster.put(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "mine", "namespace": "team-a"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "support-llm"},
                "minReplicas": 3,
                "maxReplicas": 3,
            },
        }
    )

    world.run()

    assert ("HorizontalPodAutoscaler", "team-a", "mine") not in world.cluster.objects
    assert any(e[2] == "ForeignAutoscalerRemoved" for e in world.cluster.events)


def test_a_claim_template_remade_by_someone_else_is_made_anew_issue_44(world: World) -> None:
    """Before: a template re-made asking two devices with no selector was compared by its applied hash only."""
    key = next(k for k in world.cluster.objects if k[0] == "ResourceClaimTemplate")
    computed = copy.deepcopy(world.cluster.objects[key]["spec"])
    remade = world.cluster.objects[key]
    remade["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    remade["spec"]["spec"]["devices"]["requests"][0]["exactly"].pop("selectors", None)
    _edited_by(remade, "kubectl-create")

    world.run()

    assert world.cluster.objects[key]["spec"] == computed
    assert world.sealer.holds(world.cluster.objects[key])


def test_the_quota_retry_mark_the_controller_writes_apart_is_no_tampering(world: World) -> None:
    _held(world)["metadata"]["annotations"]["ai.deckhouse.io/quota-retry"] = "pods@gone"

    world.run()

    assert world.cluster.patched == []
