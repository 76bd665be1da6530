"""A ResourceQuota refusing part of the workload: WorkloadError naming the quota, until the quota changes."""

from __future__ import annotations

from typing import Any

import isvc_workload
import pytest
from isvc_api import Reason, StatusReason
from isvc_workload import awaits_claim, quota_refusal
from workload_builders import deployment, pod

DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
# As the resourceclaim controller records it on the pod (kubernetes v1.36.3, FailedResourceClaimCreation), with
# the API server's quota admission words inside.
CLAIM_SAID = (
    'PodResourceClaim gpu: create ResourceClaim : resourceclaims.resource.k8s.io "llm-a-0-gpu-x7k2p" is forbidden: '
    f"exceeded quota: gpus, requested: {DEVICES}=1, used: {DEVICES}=1, limited: {DEVICES}=1"
)
# As the StatefulSet controller records it on the set (FailedCreate).
POD_SAID = (
    'create Pod llm-a-0 in StatefulSet llm-a failed error: pods "llm-a-0" is forbidden: exceeded quota: pods, '
    "requested: pods=1, used: pods=2, limited: pods=2"
)
VOLUME_SAID = (
    "create Claim model-a1-llm-a-0 for Pod llm-a-0 in StatefulSet llm-a failed error: failed to create PVC "
    'model-a1-llm-a-0: persistentvolumeclaims "model-a1-llm-a-0" is forbidden: exceeded quota: storage, '
    "requested: requests.storage=40Gi, used: requests.storage=80Gi, limited: requests.storage=100Gi"
)


def quota(name: str, hard: dict[str, str], used: dict[str, str], version: str = "7") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team", "resourceVersion": version},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used},
    }


def waiting_pod(name: str = "llm-a-0") -> dict[str, Any]:
    obj = pod(name)
    obj["spec"] = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "llm-a-gpu-abc"}]}
    obj["metadata"]["namespace"] = "team"
    return obj


def test_the_api_servers_words_are_read_for_each_refused_kind() -> None:
    claim = quota_refusal(CLAIM_SAID)
    assert claim is not None
    assert (claim.quota, claim.kind, claim.what) == ("gpus", "exceeded quota", "device claim")
    assert (claim.requested, claim.used, claim.limited) == ({DEVICES: "1"}, {DEVICES: "1"}, {DEVICES: "1"})
    pods = quota_refusal(POD_SAID)
    assert pods is not None and (pods.quota, pods.what, pods.used) == ("pods", "pod", {"pods": "2"})
    volume = quota_refusal(VOLUME_SAID)
    assert volume is not None and (volume.quota, volume.what) == ("storage", "model volume")
    assert volume.limited == {"requests.storage": "100Gi"}
    aggregated = quota_refusal(f"(combined from similar events): {POD_SAID}")
    assert aggregated is not None and aggregated.quota == "pods"
    failed = quota_refusal(
        'pods "x" is forbidden: failed quota: compute: must specify limits.memory for: server'
    )
    assert failed is not None and (failed.quota, failed.kind, failed.requested) == (
        "compute",
        "failed quota",
        {},
    )


def test_words_without_a_quota_are_not_a_quota_refusal() -> None:
    assert quota_refusal('pods "x" is forbidden: unable to validate against any security policy') is None
    assert quota_refusal("") is None


def test_a_refusal_stands_while_the_quota_says_what_it_said() -> None:
    refusal = quota_refusal(CLAIM_SAID)
    assert refusal is not None
    assert refusal.stands([quota("gpus", {DEVICES: "1"}, {DEVICES: "1"})])
    assert not refusal.stands([quota("gpus", {DEVICES: "2"}, {DEVICES: "1"})]), "raised"
    assert not refusal.stands([quota("gpus", {DEVICES: "1"}, {DEVICES: "0"})]), "use freed"
    assert not refusal.stands([quota("other", {DEVICES: "1"}, {DEVICES: "1"})]), "deleted"
    assert not refusal.stands([quota("gpus", {"pods": "3"}, {"pods": "1"})]), "no longer limits devices"


def test_quantities_compare_as_amounts() -> None:
    refusal = quota_refusal(VOLUME_SAID)
    assert refusal is not None
    assert refusal.stands([quota("storage", {"requests.storage": "102400Mi"}, {"requests.storage": "80Gi"})])


def test_the_verdict_names_the_quota_the_figures_and_whose_fix_it_is() -> None:
    refusal = quota_refusal(CLAIM_SAID)
    assert refusal is not None
    verdict = refusal.verdict("team", [quota("gpus", {DEVICES: "1"}, {DEVICES: "1"})])
    assert verdict.reason == Reason.WORKLOAD_ERROR.value
    for words in (
        "ResourceQuota gpus of namespace team refuses the device claim",
        f"It asks {DEVICES}=1 while {DEVICES}=1 is used of {DEVICES}=1",
        "whoever administers namespace team raises it",
        "kubectl -n team edit resourcequota gpus",
        "as soon as the quota changes",
        CLAIM_SAID,
    ):
        assert words in verdict.message, words
    lifted = refusal.verdict("team", [quota("gpus", {DEVICES: "2"}, {DEVICES: "1"})])
    assert lifted.reason == Reason.WORKLOAD_NOT_READY.value
    assert "has changed since" in lifted.message


def test_the_retry_token_changes_with_the_quota() -> None:
    refusal = quota_refusal(CLAIM_SAID)
    assert refusal is not None
    assert refusal.retry_token([quota("gpus", {DEVICES: "1"}, {DEVICES: "1"}, version="7")]) == "gpus@7"
    assert refusal.retry_token([quota("gpus", {DEVICES: "2"}, {DEVICES: "1"}, version="9")]) == "gpus@9"
    assert refusal.retry_token([]) == "gpus@gone"


def test_a_pod_whose_claim_a_quota_refuses_is_workload_error_naming_it() -> None:
    held = [quota("gpus", {DEVICES: "1"}, {DEVICES: "1"})]
    workload = deployment()
    workload["metadata"]["namespace"] = "team"
    verdict, _ = isvc_workload.judge_workload(
        workload, [waiting_pod()], [], None, lambda p, c: None, {"llm-a-0": CLAIM_SAID}, held
    )
    assert verdict.reason == Reason.WORKLOAD_ERROR.value and "ResourceQuota gpus" in verdict.message
    raised = [quota("gpus", {DEVICES: "2"}, {DEVICES: "1"})]
    verdict, _ = isvc_workload.judge_workload(
        workload, [waiting_pod()], [], None, lambda p, c: None, {"llm-a-0": CLAIM_SAID}, raised
    )
    assert verdict.reason == Reason.WORKLOAD_NOT_READY.value


def test_a_serving_replica_outweighs_a_refused_claim() -> None:
    verdict, _ = isvc_workload.judge_workload(
        deployment(replicas=2),
        [pod("llm-a-0", ready=True), waiting_pod("llm-a-1")],
        [],
        None,
        lambda p, c: None,
        {"llm-a-1": CLAIM_SAID},
        [quota("gpus", {DEVICES: "1"}, {DEVICES: "1"})],
    )
    assert verdict.reason == StatusReason.WORKLOAD_AVAILABLE.value


@pytest.mark.parametrize(("said", "quota_name"), [(POD_SAID, "pods"), (VOLUME_SAID, "storage")])
def test_pods_or_volumes_a_quota_refuses_name_it(said: str, quota_name: str) -> None:
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": said}
    verdict, _ = isvc_workload.judge_workload(
        deployment(conditions=[failure]), [], [], None, lambda p, c: None
    )
    assert verdict.reason == Reason.WORKLOAD_ERROR.value
    assert f"ResourceQuota {quota_name}" in verdict.message


def test_a_pod_awaits_its_claim_until_the_cluster_names_it() -> None:
    waiting = waiting_pod()
    assert awaits_claim(waiting)
    waiting["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "llm-a-0-gpu-x7k2p"}]
    assert not awaits_claim(waiting)
    assert not awaits_claim(pod("plain"))
