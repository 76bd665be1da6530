"""WorkloadReady's own duties: the API server's words when it refuses, claim templates rolled, not edited."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from isvc_api import GROUP, LABEL_ORDER, VERSION, Reason, Verdict
from isvc_operator import SEAL, PlanOutcome

from .fakes import ESTIMATES, PLACEMENT, World, klass, order, owner

GV = f"{GROUP}/{VERSION}"
STATUS_422 = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": 'ResourceClaimTemplate.resource.k8s.io "support-llm" is invalid: spec: Invalid value: '
        '"object": field is immutable',
        "details": {
            "name": "support-llm",
            "kind": "ResourceClaimTemplate",
            "causes": [{"reason": "FieldValueInvalid", "message": "x" * 600, "field": "spec"}],
        },
    }
)


class Refused(Exception):
    def __init__(self) -> None:
        super().__init__("422")
        self.status = 422
        self.body = STATUS_422


@pytest.fixture
def world() -> World:
    return World()


def workload(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "WorkloadReady")


def test_a_refusal_ends_with_the_api_servers_own_words_and_is_logged_once(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 16: the message was the raw body cut at 400 characters, so the cause never showed."""
    real = world.cluster.apply

    def apply(manifest: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        if manifest["kind"] == "ResourceClaimTemplate":
            raise Refused
        return real(manifest, dry_run)

    monkeypatch.setattr(world.cluster, "apply", apply)
    with caplog.at_level(logging.WARNING):
        status = world.run()
        world.run()
    message = workload(status)["message"]
    assert workload(status)["reason"] == "WorkloadError"
    assert message.endswith(
        'the API server said: ResourceClaimTemplate.resource.k8s.io "support-llm" is '
        'invalid: spec: Invalid value: "object": field is immutable'
    )
    assert "{" not in message
    assert [r.message for r in caplog.records].count(f"team-a/support-llm: {message}") == 1


def templates(world: World) -> set[str]:
    owned = world.cluster.owned("ResourceClaimTemplate", "team-a", "support-llm")
    return {t["metadata"]["name"] for t in owned}


def test_a_new_share_rolls_onto_a_new_template_and_the_old_one_goes_once_no_pod_uses_it(world: World) -> None:
    world.run()
    [old] = world.cluster.owned("ResourceClaimTemplate", "team-a", "support-llm")
    world.cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p1",
                "namespace": "team-a",
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
            },
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": old["metadata"]["name"]}]
            },
        }
    )
    moved = PLACEMENT.model_copy(update={"node_name": "gpu-h100-1", "pool": "gpu-h100-1"})
    world.planner.outcome = PlanOutcome(placement=moved, estimates=ESTIMATES, refusal=None, preempt=[])
    edited = order(model="Qwen/Qwen2.5-14B-Instruct")
    world.cluster.put(
        {
            **edited,
            "metadata": {**edited["metadata"], "generation": 2},
            "status": world.cluster.status_of("team-a", "support-llm"),
        }
    )
    world.run(edited)
    names = templates(world)
    assert names == {old["metadata"]["name"], "support-llm-gpu-h100-1"}  # the old pod still uses the old one
    world.cluster.delete("v1", "Pod", "team-a", "p1")
    world.run(edited)
    names = templates(world)
    assert names == {"support-llm-gpu-h100-1"}


def test_an_order_no_longer_external_has_its_ingress_removed(world: World) -> None:
    """Issue 12: switching External → ClusterLocal left the Ingress up."""
    world.run()
    world.cluster.put(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "support-llm",
                "namespace": "team-a",
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
                "ownerReferences": [owner()],
            },
        }
    )
    world.run()
    assert world.cluster.owned("Ingress", "team-a", "support-llm")  # External: it stays
    world.cluster.put(klass(exposure={"type": "ClusterLocal", "authentication": "Token"}))
    world.run()
    assert world.cluster.owned("Ingress", "team-a", "support-llm") == []


def test_a_pass_over_a_steady_order_applies_nothing(world: World) -> None:
    """Issue 15: every order's children were re-applied about once a second at rest."""
    world.run()
    applied = len(world.cluster.applied)
    for _ in range(3):
        world.run()
    assert len(world.cluster.applied) == applied
    world.planner.outcome = PlanOutcome(
        placement=PLACEMENT.model_copy(update={"node_name": "gpu-h100-1"}),
        estimates=ESTIMATES,
        refusal=None,
        preempt=[],
    )
    world.cluster.delete("", "LaunchPlan", "team-a", "support-llm")  # a new plan: its children change
    world.run()
    assert len(world.cluster.applied) > applied


def test_a_secret_of_the_auth_name_the_module_did_not_make_is_never_adopted(world: World) -> None:
    """Issue 14: an existing `{order}-auth` (the user's Hugging Face token, say) became the bearer token."""
    world.cluster.secret("team-a", "support-llm-auth", {"token": "hf_users_own_token"})
    status = world.run()
    assert workload(status)["reason"] == "WorkloadError"
    assert "was not made by the module" in workload(status)["message"]
    assert world.health.tokens == []  # never probed with it


def _child(
    world: World, api_version: str, kind: str, name: str, owner_ref: dict[str, Any], **meta: Any
) -> None:
    """An object labelled as support-llm's, owned as `owner_ref` says."""
    metadata = {"name": name, "namespace": "team-a", "labels": {LABEL_ORDER: "support-llm"}, **meta}
    world.cluster.put(
        {"apiVersion": api_version, "kind": kind, "metadata": {**metadata, "ownerReferences": [owner_ref]}}
    )


def _of_set(uid: str, controller: bool | None = True) -> dict[str, Any]:
    """An owner reference to support-llm's StatefulSet of that uid."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "support-llm",
        "uid": uid,
        "controller": controller,
    }


def _sets_applied(world: World) -> list[dict[str, Any]]:
    return [m for m in world.cluster.applied if m["kind"] == "StatefulSet"]


def _left_by_earlier_order(world: World) -> None:
    """What `kubectl delete` of an order leaves for the garbage collector a moment: its set, the set's pod and
    model volume, and the endpoint's Secret, owned through the order's earlier uid."""
    earlier = {**owner(), "uid": "uid-deleted"}
    _child(world, "apps/v1", "StatefulSet", "support-llm", earlier, uid="set-of-deleted")
    _child(world, "v1", "Pod", "support-llm-0", _of_set("set-of-deleted"))
    _child(
        world, "v1", "PersistentVolumeClaim", "models-a000bb53-support-llm-0", _of_set("set-of-deleted", None)
    )
    world.cluster.secret("team-a", "support-llm-auth", {"token": "the-deleted-orders"})
    world.cluster.objects[("Secret", "team-a", "support-llm-auth")]["metadata"]["ownerReferences"] = [earlier]


def test_an_order_made_again_at_once_waits_for_its_earlier_workload_to_go_then_makes_its_own(
    world: World,
) -> None:
    """An order deleted and applied again at once took over the set, pods and model volumes the garbage
    collector was deleting: its pod waited on a volume deleted under it ("unbound immediate
    PersistentVolumeClaims"), and the earlier order's Secret read as one the module did not make."""
    _left_by_earlier_order(world)
    status = world.run()
    said = workload(status)
    assert said["reason"] == "WorkloadNotReady"
    assert said["message"] == (
        "an earlier workload of this name is still being removed by the cluster (StatefulSet support-llm, pod "
        "support-llm-0, model volume models-a000bb53-support-llm-0); the order's own is made once it is gone: "
        "this passes on its own."
    )
    assert not _sets_applied(world)
    assert world.last is not None and world.last.requeue_after is not None and world.last.requeue_after <= 1
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")
    world.cluster.delete("v1", "Pod", "team-a", "support-llm-0")
    world.run()  # its model volume is still there
    assert not _sets_applied(world)
    world.cluster.delete("v1", "PersistentVolumeClaim", "team-a", "models-a000bb53-support-llm-0")
    assert workload(world.run())["reason"] == "WorkloadNotReady"  # not "not made by the module": it goes
    assert not _sets_applied(world)
    assert world.last is not None and world.last.requeue_after is not None and world.last.requeue_after <= 1
    assert world.health.tokens == []  # the earlier order's token is never taken
    world.cluster.delete("v1", "Secret", "team-a", "support-llm-auth")
    world.run()
    assert _sets_applied(world)
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")
    secret = world.cluster.get_secret("team-a", "support-llm-auth")
    assert secret is not None and secret["metadata"]["ownerReferences"][0]["uid"] == "uid-support-llm"


def test_pods_of_the_orders_own_set_are_not_an_earlier_workload(world: World) -> None:
    """The set made for the order, and its pods, never read as what an earlier order left."""
    world.run()
    world.cluster.objects[("StatefulSet", "team-a", "support-llm")]["metadata"]["uid"] = "set-of-the-order"
    _child(world, "v1", "Pod", "support-llm-0", _of_set("set-of-the-order"))
    assert "earlier workload" not in workload(world.run())["message"]


def test_a_new_token_rolls_the_pods(world: World) -> None:
    """Issue 14: rotating `{order}-auth` left pods on the old token."""
    world.run()
    world.cluster.delete("v1", "Secret", "team-a", "support-llm-auth")
    world.workload.auth_secret = lambda order: {  # type: ignore[method-assign]
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "support-llm-auth",
            "namespace": "team-a",
            "ownerReferences": [order.owner_reference()],
        },
        "data": {"token": "bmV3LXRva2Vu"},
    }
    world.run()
    first, second = world.workload.digests[0], world.workload.digests[-1]
    assert first and second and first != second


SET_FORBIDDEN = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": 'StatefulSet.apps "support-llm" is invalid: spec: Forbidden: updates to statefulset spec for '
        "fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
        "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    }
)


def settled_events(world: World) -> list[str]:
    return [message for _, _, reason, message in world.cluster.events if reason == "SettledRegionTooSmall"]


def test_an_order_that_outgrew_its_set_is_refused_for_good_with_one_event_and_the_set_kept(
    world: World,
) -> None:
    """Issue 12: a volume cannot be resized; the set is not edited, the order says so and says what to do."""
    world.run()
    held = world.cluster.owned("StatefulSet", "team-a", "support-llm")
    assert held
    world.workload.outgrown = "the model volume (20Gi) is smaller than the order now needs (40Gi)"
    applied = len(world.cluster.applied)
    for template in world.cluster.owned("ResourceClaimTemplate", "team-a", "support-llm"):  # gone meanwhile
        world.cluster.delete("", "ResourceClaimTemplate", "team-a", template["metadata"]["name"])
    first = world.run()
    second = world.run()
    for status in (first, second):
        assert (workload(status)["status"], workload(status)["reason"]) == ("False", "WorkloadError")
        assert workload(status)["message"] == world.workload.outgrown
    assert settled_events(world) == [world.workload.outgrown]  # once, not once per pass
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm") == held  # left as it serves
    assert [m["kind"] for m in world.cluster.applied[applied:]] == ["ResourceClaimTemplate"]  # the rest: kept
    assert first["endpoint"]["url"]  # the held replicas still serve the endpoint
    world.workload.outgrown = None  # the set was taken down and made anew (the Release notes procedure)
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")
    assert workload(world.run())["status"] == "True"


def test_the_api_servers_refusal_to_change_a_set_is_the_same_refusal(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache may not hold the set yet: the API server's Forbidden answer leads to the same place."""
    real = world.cluster.apply

    def apply(manifest: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        if manifest["kind"] == "StatefulSet":
            error = Refused()
            error.body = SET_FORBIDDEN
            raise error
        return real(manifest, dry_run)

    monkeypatch.setattr(world.cluster, "apply", apply)
    status = world.run()
    world.run()
    message = workload(status)["message"]
    assert workload(status)["reason"] == "WorkloadError"
    assert "SettledRegionTooSmall procedure in the Release notes" in message
    assert message.endswith("'minReadySeconds' are forbidden")
    assert len(settled_events(world)) == 1


def test_the_deployment_an_earlier_version_made_goes_once_the_set_took_over(world: World) -> None:
    world.cluster.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "support-llm",
                "namespace": "team-a",
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
                "ownerReferences": [owner()],
            },
        }
    )
    world.run()
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")
    assert world.cluster.owned("Deployment", "team-a", "support-llm") == []


def test_pods_the_cluster_refuses_to_create_reach_the_judge_as_a_replica_failure(world: World) -> None:
    """A StatefulSet has no ReplicaFailure condition: its controller's FailedCreate event is read instead,
    and only while the set wants a replica and has no pod (a steady order reads no events)."""
    world.cluster.ready_pods = False
    world.run()
    held = world.cluster.objects[("StatefulSet", "team-a", "support-llm")]
    held["metadata"]["uid"] = "set-uid"
    held["spec"] = {"replicas": 1}
    held["metadata"]["annotations"][SEAL] = world.sealer.seal(held)  # as the API server answered the write
    said = 'pods "support-llm-0" is forbidden: exceeded quota: no-pods'
    world.cluster.failed_creates[("team-a", "support-llm")] = said
    world.run()
    [failure] = [
        c
        for c in world.workload.judged_sets[-1]["status"]["conditions"]  # type: ignore[index]
        if c["type"] == "ReplicaFailure"
    ]
    assert (failure["status"], failure["message"]) == ("True", said)
    assert world.cluster.failed_create_reads == [("team-a", "StatefulSet", "support-llm", "set-uid")]
    world.cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "support-llm-0",
                "namespace": "team-a",
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
            },
        }
    )
    world.run()
    assert len(world.cluster.failed_create_reads) == 1  # a pod exists: nothing to read
    assert "conditions" not in (world.workload.judged_sets[-1] or {}).get("status", {})


DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
CLAIM_SAID = (
    'PodResourceClaim gpu: create ResourceClaim : resourceclaims.resource.k8s.io "support-llm-0-gpu-x" is '
    f"forbidden: exceeded quota: gpus, requested: {DEVICES}=1, used: {DEVICES}=1, limited: {DEVICES}=1"
)


def quota(hard: str, used: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "team-a", "resourceVersion": version},
        "status": {"hard": {DEVICES: hard}, "used": {DEVICES: used}},
    }


def pod_awaiting_claim(world: World, created: str) -> None:
    [template] = templates(world)
    world.cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "support-llm-0",
                "namespace": "team-a",
                "uid": "pod-uid",
                "creationTimestamp": created,
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
            },
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]},
            "status": {"phase": "Pending"},
        }
    )


def test_a_device_claim_a_quota_refuses_reaches_the_judge_with_the_quotas_and_waits_for_them_not_a_timer(
    world: World,
) -> None:
    """Issue 27: the quota was only in the pod's events, and the order read "coming up ... passes on its own"."""
    world.workload.verdict = Verdict.refuse(
        Reason.WORKLOAD_ERROR, "ResourceQuota gpus of namespace team-a refuses"
    )
    world.run()
    world.cluster.put(quota("1", "1", "7"))
    world.cluster.said[("Pod", "support-llm-0", "FailedResourceClaimCreation")] = CLAIM_SAID
    pod_awaiting_claim(world, "2026-11-01T00:00:00Z")  # the clock reads T0: created this second
    world.run()
    assert world.cluster.said_reads == []  # a pod just made waits a moment for its claim: nothing read
    assert world.last is not None and world.last.requeue_after == 2.0
    world.clock_offset = timedelta(seconds=3)
    world.workload.verdict = Verdict.refuse(
        Reason.WORKLOAD_ERROR, "ResourceQuota gpus of namespace team-a refuses"
    )
    world.run()
    assert world.cluster.said_reads == [("Pod", "support-llm-0", "FailedResourceClaimCreation")]
    refusals, quotas = world.workload.judged_refusals[-1]
    assert refusals == {"support-llm-0": CLAIM_SAID}
    assert [q["metadata"]["name"] for q in quotas] == ["gpus"]
    assert world.last.requeue_after is None  # the quota is watched: no timer
    assert world.cluster.annotated == []  # the quota still says what it said: nothing to retry


def test_a_changed_quota_asks_the_cluster_to_retry_once_per_change(world: World) -> None:
    """Issue 27: a raised quota lifted the refusal only after the resourceclaim controller's backoff (~4 min)."""
    world.workload.verdict = Verdict.refuse(Reason.WORKLOAD_NOT_READY, "the quota changed")
    world.run()
    world.cluster.said[("Pod", "support-llm-0", "FailedResourceClaimCreation")] = CLAIM_SAID
    pod_awaiting_claim(world, "2026-10-31T23:59:00Z")
    world.cluster.put(quota("2", "1", "8"))  # raised since it refused
    world.run()
    world.run()
    assert world.cluster.annotated == [
        ("Pod", "team-a", "support-llm-0", {"ai.deckhouse.io/quota-retry": "gpus@8"})
    ]  # once for this change of the quota, not once per pass
    world.cluster.put(quota("3", "1", "9"))
    world.run()
    assert world.cluster.annotated[-1] == (
        "Pod",
        "team-a",
        "support-llm-0",
        {"ai.deckhouse.io/quota-retry": "gpus@9"},
    )


def test_a_set_whose_pods_a_quota_refuses_is_retried_when_the_quota_is_deleted(world: World) -> None:
    world.cluster.ready_pods = False
    world.workload.verdict = Verdict.refuse(
        Reason.WORKLOAD_ERROR, "ResourceQuota pods of namespace team-a refuses"
    )
    world.run()
    held = world.cluster.objects[("StatefulSet", "team-a", "support-llm")]
    held["metadata"]["uid"] = "set-uid"
    held["spec"] = {"replicas": 1}
    held["metadata"]["annotations"][SEAL] = world.sealer.seal(held)  # as the API server answered the write
    world.cluster.failed_creates[("team-a", "support-llm")] = (
        'create Pod support-llm-0 in StatefulSet support-llm failed error: pods "support-llm-0" is forbidden: '
        "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"
    )
    world.run()
    assert world.cluster.annotated == [
        ("StatefulSet", "team-a", "support-llm", {"ai.deckhouse.io/quota-retry": "pods@gone"})
    ]


def test_a_disruption_budget_no_longer_wanted_goes(world: World) -> None:
    """A class brought down to one replica: the order's budget goes (a one-replica order never holds a drain)."""
    world.run()
    world.cluster.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": "support-llm",
                "namespace": "team-a",
                "labels": {"ai.deckhouse.io/inference-service": "support-llm"},
            },
        }
    )
    world.run()
    assert world.cluster.owned("PodDisruptionBudget", "team-a", "support-llm") == []


class Terminating(Exception):
    """The API server's refusal to create anything in a namespace being deleted (NamespaceLifecycle, 403)."""

    def __init__(self) -> None:
        super().__init__("403")
        self.status = 403
        self.body = json.dumps(
            {
                "kind": "Status",
                "code": 403,
                "reason": "Forbidden",
                "message": "unable to create new content in namespace team-a because it is being terminated",
                "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
            }
        )


def test_an_order_whose_namespace_is_being_deleted_ends_its_pass_quietly_and_says_so_once(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27: deleting a namespace with orders logged ERROR tracebacks, 17 for 2 orders, 74 for 12."""
    world.run()
    statuses, events = len(world.cluster.statuses), len(world.cluster.events)
    del world.cluster.objects[("StatefulSet", "team-a", "support-llm")]  # the namespace controller took it

    def apply(manifest: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        raise Terminating

    monkeypatch.setattr(world.cluster, "apply", apply)
    with caplog.at_level(logging.DEBUG):
        world.run()
        world.run()
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO] == [
        ("INFO", "team-a/support-llm: its namespace is being deleted; the order goes with it")
    ]
    assert (len(world.cluster.statuses), len(world.cluster.events)) == (statuses, events)  # nothing written
    assert world.last is not None and (world.last.failed, world.last.requeue_after) == (False, None)
