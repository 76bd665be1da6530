"""What a serving order publishes and runs, on a real control plane: only the token-guarded API routed,
hosts that cannot collide, an exposure change that removes what is no longer wanted, hardened pods."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_testbed.helpers import wait_for
from isvc_testbed.orders import GROUP, VERSION, Orders, hf
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

QWEN = "Qwen/Qwen2.5-7B-Instruct"


class Bed(Orders):
    """Orders (as alice) and classes (as admin) made by one test, deleted after it."""

    def klass(self, name: str, exposure: str) -> str:
        self.create_class(
            name,
            {
                "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                "exposure": {"type": exposure, "authentication": "Token"},
            },
        )
        return name

    def ingress(self, name: str) -> Any | None:
        try:
            return k8s.NetworkingV1Api(self.admin_api).read_namespaced_ingress(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


def test_an_external_endpoint_routes_only_the_guarded_api_to_a_host_of_its_own(bed: Bed) -> None:
    """Issue 12: the Ingress routed `/`, and vLLM answers /metrics or /invocations without a token."""
    klass = bed.klass("serve-external", "External")
    name = bed.create("serve-ext", hf(QWEN), klass)
    status = bed.wait_ready(name)
    assert status["endpoint"]["url"] == f"https://{name}--{bed.ns}.example.test"
    ingress = bed.ingress(name)
    assert ingress is not None
    [rule] = ingress.spec.rules
    assert rule.host == f"{name}--{bed.ns}.example.test"
    assert [(p.path, p.path_type) for p in rule.http.paths] == [("/v1/", "Prefix")]


def test_an_exposure_changed_to_cluster_local_takes_the_ingress_down_and_says_where_it_listens(
    bed: Bed,
) -> None:
    """Issue 12: switching External → ClusterLocal left the Ingress up, and the URL named HTTPS on a port
    where nothing terminated TLS."""
    klass = bed.klass("serve-switch", "External")
    name = bed.create("serve-switch", hf(QWEN), klass)
    bed.wait_ready(name)
    assert bed.ingress(name) is not None
    bed.admin.patch_cluster_custom_object(
        GROUP, VERSION, "inferenceserviceclasses", klass, {"spec": {"exposure": {"type": "ClusterLocal"}}}
    )
    status = bed.wait(
        name,
        lambda s: s.get("endpoint", {}).get("type") == "ClusterLocal",
        60,
        "the endpoint republished as ClusterLocal",
    )
    assert status["endpoint"]["url"] == f"http://{name}.{bed.ns}.svc:8000"
    wait_for(lambda: bed.ingress(name) is None, 30, what="the Ingress taken down")


def test_inference_pods_run_restricted_without_a_token_of_the_cluster(bed: Bed) -> None:
    """Issue 12: inference pods carried no securityContext, no limits, and the namespace's
    ServiceAccount token."""
    klass = bed.klass("serve-hardened", "ClusterLocal")
    name = bed.create("serve-hard", hf(QWEN), klass)
    bed.wait_ready(name)
    pod = k8s.AppsV1Api(bed.admin_api).read_namespaced_stateful_set(name, bed.ns).spec.template.spec
    assert pod.automount_service_account_token is False
    assert pod.security_context.run_as_non_root is True
    assert pod.security_context.seccomp_profile.type == "RuntimeDefault"
    [server] = pod.containers
    assert server.security_context.allow_privilege_escalation is False
    assert server.security_context.capabilities.drop == ["ALL"]
    assert server.resources.limits["memory"] == server.resources.requests["memory"]


def test_a_second_replica_without_a_device_waits_for_capacity_and_the_order_stays_ready_issue_28(
    bed: Bed,
) -> None:
    """GrowthClaimUnplaced from a real order: the class asks for two replicas of a model that takes most of
    an L4; the other L4 is held whole, so no device of the plan's shape has room anywhere on the class (issue
    40: a further replica takes any of them). Growth waits for capacity, ScalingHealthy stays True and the
    phase Ready; one event names the replica. When the other L4 frees up, the waiting replica lands there,
    and nothing is replanned. (ScaleUpBlocked, under preemption: test_isvc_growth.py.)"""
    gpu = "gpu.nvidia.com"
    l4 = f"device.attributes['{gpu}'].productName == 'NVIDIA L4'"
    bed.create_class(
        "serve-grow-hold",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": {"deviceClassNames": [gpu], "selector": l4, "allowedSharePercents": [100]},
        },
    )
    holder = bed.create("serve-grow-hold", hf(QWEN), "serve-grow-hold")
    held = bed.wait_ready(holder)["resolved"]["devices"]
    bed.create_class(
        "serve-grow",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "scalingPolicy": {"minReplicas": 2, "maxReplicas": 2},
            "acceleratorPolicy": {
                "deviceClassNames": [gpu],
                "selector": f"device.attributes['{gpu}'].productName == 'NVIDIA L4'",
            },
        },
    )
    name = bed.create("serve-grow", hf(QWEN), "serve-grow")
    bed.wait_ready(name)
    phases: list[str] = []

    def unplaced() -> list[tuple[str, str, str]]:
        phases.append(str(bed.status(name).get("phase")))
        return [e for e in bed.events(name) if e[1] == "GrowthClaimUnplaced"]

    [event] = wait_for(unplaced, 60, what="a GrowthClaimUnplaced event")
    assert f"{name}-1" in event[2] and "keeps serving" in event[2]
    status = bed.wait(
        name,
        lambda s: (
            "wait for capacity"
            in next(c for c in s["conditions"] if c["type"] == "ScalingHealthy")["message"]
        ),
        30,
        "ScalingHealthy saying the replica waits for capacity",
    )
    scaling = next(c for c in status["conditions"] if c["type"] == "ScalingHealthy")
    assert (scaling["status"], scaling["reason"]) == ("True", "ScalingOK")
    assert "the class asks for 2" in scaling["message"] and f"({name}-1)" in scaling["message"]
    assert status["phase"] == "Ready" and set(phases) == {"Ready"}, phases
    assert len([e for e in bed.events(name) if e[1] == "GrowthClaimUnplaced"]) == 1  # once per replica
    plan = bed.plan(name)
    assert plan is not None and held != status["resolved"]["devices"]
    bed.delete(holder)  # the other L4 frees up: the waiting replica takes it, nothing is replanned

    def allocated() -> set[str]:
        return {
            f"{r.pool}/{r.device}"
            for c in bed.claims(name)
            if c.status and c.status.allocation
            for r in c.status.allocation.devices.results
        }

    wait_for(lambda: len(allocated()) == 2, 90, what="the waiting replica placed")
    assert allocated() == {*held, *status["resolved"]["devices"]}, allocated()
    again = bed.plan(name)
    assert again is not None and again["metadata"]["resourceVersion"] == plan["metadata"]["resourceVersion"]


def test_an_autoscaler_within_the_class_bounds_and_gone_when_the_class_stops_asking(bed: Bed) -> None:
    """Issue 12: `autoscaler: true` made nothing that scaled; the StatefulSet now leaves its count to an
    autoscaler (autoscaling/v2) over it, which goes when the class no longer asks for one."""
    bed.create_class(
        "serve-autoscaled",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "scalingPolicy": {"minReplicas": 1, "maxReplicas": 3, "autoscaler": True},
        },
    )
    name = bed.create("serve-auto", hf(QWEN), "serve-autoscaled")
    bed.wait_ready(name)
    scaling = k8s.AutoscalingV2Api(bed.admin_api)

    def autoscaler() -> Any | None:
        try:
            return scaling.read_namespaced_horizontal_pod_autoscaler(name, bed.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    hpa = wait_for(autoscaler, 30, what="the order's autoscaler")
    assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (1, 3)
    assert (hpa.spec.scale_target_ref.kind, hpa.spec.scale_target_ref.name) == ("StatefulSet", name)
    assert hpa.metadata.owner_references[0].kind == "InferenceService"
    bed.admin.patch_cluster_custom_object(
        GROUP,
        VERSION,
        "inferenceserviceclasses",
        "serve-autoscaled",
        {"spec": {"scalingPolicy": {"autoscaler": False}}},
    )
    wait_for(lambda: autoscaler() is None, 60, what="the autoscaler taken down")
    workload = k8s.AppsV1Api(bed.admin_api).read_namespaced_stateful_set(name, bed.ns)
    assert workload.spec.replicas == 1  # the count is the class's minReplicas again


def _pod_status(bed: Bed, name: str, ready: bool, started: bool | None = None) -> None:
    """Write the order's pod status as a kubelet would: its server container running and ready, running
    and not ready yet (`started`), or never started (its image cannot be pulled: no output to read)."""
    core = k8s.CoreV1Api(bed.admin_api)
    [pod] = core.list_namespaced_pod(bed.ns, label_selector=f"ai.deckhouse.io/inference-service={name}").items
    server = next(c for c in pod.spec.containers if c.name == "server")
    pulling = f'Back-off pulling image "{server.image}"'
    started = ready if started is None else started
    state = (
        {"running": {"startedAt": pod.status.start_time.isoformat()}}
        if started
        else {"waiting": {"reason": "ImagePullBackOff", "message": pulling}}
    )
    word = "True" if ready else "False"
    core.patch_namespaced_pod_status(
        pod.metadata.name,
        bed.ns,
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": word},
                    {"type": "ContainersReady", "status": word},
                ],
                "containerStatuses": [
                    {
                        "name": "server",
                        "image": server.image,
                        "imageID": "",
                        "ready": ready,
                        "restartCount": 0,
                        "started": started,
                        "state": state,
                    }
                ],
            }
        },
    )


def test_a_claim_the_scheduler_has_not_allocated_yet_is_resource_claim_pending_and_lifts(
    bed: Bed, cluster: Any
) -> None:
    """Issue 12: ResourceClaimPending from a real order. With the scheduler stopped nothing allocates the
    pod's device claim, a stage the order names; the scheduler back, the claim is allocated and it serves."""
    if not cluster.runs_scheduler:
        pytest.skip("the cluster's scheduler is not the test bed's to stop")
    klass = bed.klass("serve-pending", "ClusterLocal")
    with cluster.scheduler_stopped():
        name = bed.create("serve-pending", hf(QWEN), klass)
        status = bed.wait_reason(name, "WorkloadReady", "ResourceClaimPending", timeout=90)
        message = next(c["message"] for c in status["conditions"] if c["type"] == "WorkloadReady")
        assert "waits for its device claim to be allocated" in message and "this is a stage" in message
        assert status["phase"] == "Pending"
    bed.wait_ready(name, timeout=120)


def test_a_container_that_never_starts_says_so_and_the_order_recovers_when_it_runs(bed: Bed) -> None:
    """Issue 12: WorkloadStartupFailed from a real order, with the pod, container and node reason, no output
    read for an image that never started, lifting by itself when the container runs; WorkloadNotReady while
    a running container is not ready yet."""
    klass = bed.klass("serve-startup", "ClusterLocal")
    name = bed.create("serve-start", hf(QWEN), klass)
    bed.wait_ready(name)
    _pod_status(bed, name, ready=False)
    status = bed.wait_reason(name, "WorkloadReady", "WorkloadStartupFailed", timeout=60)
    message = next(c["message"] for c in status["conditions"] if c["type"] == "WorkloadReady")
    assert f"pod {name}-" in message and "container server: ImagePullBackOff" in message
    failure = status["startupFailure"]
    assert (failure["container"], failure.get("output", []), failure.get("outputRead", False)) == (
        "server",
        [],
        False,
    )
    # it served before: no replica serving is a blip at first, a failure once it lasts
    failed = bed.wait(name, lambda s: s.get("phase") == "Failed", 60, "the order Failed")
    assert next(c for c in failed["conditions"] if c["type"] == "Ready")["reason"] == "ServiceUnhealthy"
    _pod_status(bed, name, ready=True)
    bed.wait_ready(name)
    _pod_status(bed, name, ready=False, started=True)  # running, not ready yet (loading the model)
    bed.wait_reason(name, "WorkloadReady", "WorkloadNotReady", timeout=60)
    _pod_status(bed, name, ready=True)
    bed.wait_ready(name)


def test_a_served_order_whose_api_stops_answering_fails_and_recovers(bed: Bed, standin: Any) -> None:
    """Issue 12: after Ready, sustained probe failures are ServiceUnhealthy (phase Failed); answers again,
    the order is Ready again, on the same endpoint."""
    klass = bed.klass("serve-unhealthy", "ClusterLocal")
    name = bed.create("serve-sick", hf(QWEN), klass)
    before = bed.wait_ready(name)
    standin.fail(bed.ns, name)
    try:
        status = bed.wait_reason(name, "Ready", "ServiceUnhealthy", timeout=60)
        assert status["phase"] == "Failed" and status["endpoint"] == before["endpoint"]
    finally:
        standin.heal(bed.ns, name)
    assert bed.wait_ready(name)["endpoint"] == before["endpoint"]


def test_a_sustained_rate_of_the_runtimes_own_5xx_is_said_on_the_order_issue_42(
    bed: Bed, standin: Any
) -> None:
    """The request meter in front of a replica counts the runtime's answers; the controller's probe reads the
    counts on /v1/models (the stand-in plays the meter here). A blip is not said; a sustained rate is, once,
    as a RuntimeErrors event, and the order stays Ready (its API answers)."""
    klass = bed.klass("serve-5xx", "ClusterLocal")
    name = bed.create("serve-5xx", hf(QWEN), klass)
    bed.wait_ready(name)
    standin.set_meter(bed.ns, name, f"{name}-0", 100, 0)
    time.sleep(4)  # a probe (every 3 s in the bed) reads the counts before they move
    standin.set_meter(bed.ns, name, f"{name}-0", 110, 2)  # a blip: 2 of 10
    time.sleep(4)
    assert [e for e in bed.events(name) if e[1] == "RuntimeErrors"] == []
    standin.set_meter(bed.ns, name, f"{name}-0", 140, 9)  # 9 of 40 within the window, grown at two probes
    said = wait_for(
        lambda: [e for e in bed.events(name) if e[1] == "RuntimeErrors"], 30, what="the RuntimeErrors event"
    )
    assert said[0][0] == "Warning" and "9 of 40 requests with HTTP 5xx" in said[0][2], said
    assert f"{name}-0" in said[0][2]
    standin.set_meter(bed.ns, name, f"{name}-0", 180, 17)  # the same episode: not said again
    time.sleep(8)
    assert len([e for e in bed.events(name) if e[1] == "RuntimeErrors"]) == 1
    assert bed.status(name)["phase"] == "Ready"
