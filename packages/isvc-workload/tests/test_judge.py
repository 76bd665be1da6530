"""WorkloadReady and ScalingHealthy from what the cluster reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import isvc_workload
import pytest
from isvc_api import ConditionType, Reason, StartupFailure, StatusReason, Verdict
from isvc_workload import (
    MAX_LOG_LINES,
    UnplacedReplica,
    settled_region_check,
    workload_error,
)
from workload_builders import claim, deployment, pod, running, waiting


@dataclass(frozen=True)
class Judged:
    """A judge's verdict with what it hands to the next pass (the startup failure, the unplaced replicas)."""

    verdict: Verdict
    memory: StartupFailure | None = None
    unplaced: tuple[UnplacedReplica, ...] = ()

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def reason(self) -> str:
        return self.verdict.reason

    @property
    def message(self) -> str:
        return self.verdict.message


def judge_workload(*args: Any) -> Judged:
    verdict, memory = isvc_workload.judge_workload(*args)
    return Judged(verdict, memory=memory)


def judge_growth(*args: Any, **kwargs: Any) -> Judged:
    verdict, unplaced = isvc_workload.judge_growth(*args, **kwargs)
    return Judged(verdict, unplaced=unplaced)


EXHAUSTED = (
    "Unschedulable",
    "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
)
CEL_RUNTIME = (
    "SchedulerError",
    "class gpu.nvidia.com: selector #0 on device gpu.nvidia.com/node-1/gpu-0: "
    "CEL runtime error: no such key: index",
)
CEL_COMPILE = ("SchedulerError", "claim team/llm-a-x-gpu-abc: selector #0: CEL compile error: undeclared ref")
NOT_CREATED = ("Unschedulable", 'pod "team/llm-a-x": ResourceClaim not created yet')
DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "llm-a-7c9f" has timed out progressing.',
}
REPLICA_FAILURE = {
    "type": "ReplicaFailure",
    "status": "True",
    "reason": "FailedCreate",
    "message": 'pods "llm-a-7c9f-" is forbidden: exceeded quota: gpu',
}


class Logs:
    """A read_log that records each call and answers from a table."""

    def __init__(self, texts: dict[tuple[str, str], str | None] | None = None) -> None:
        self.texts = texts or {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, pod_name: str, container: str) -> str | None:
        key = (pod_name, container)
        self.calls.append(key)
        return self.texts.get(key, "line one\nline two")


def no_logs(pod_name: str, container: str) -> str | None:
    raise AssertionError("read_log must not be called")


@pytest.mark.parametrize(
    ("deploy", "pods", "claims", "reason", "status"),
    [
        pytest.param(None, [], [], Reason.WORKLOAD_NOT_READY, "False", id="not created yet"),
        pytest.param(
            deployment(),
            [pod("p1", ready=True)],
            [claim("c1", allocated=True)],
            StatusReason.WORKLOAD_AVAILABLE,
            "True",
            id="a pod up",
        ),
        pytest.param(
            deployment(replicas=2),
            [pod("p1", ready=True), pod("p2", scheduled=EXHAUSTED)],
            [],
            StatusReason.WORKLOAD_AVAILABLE,
            "True",
            id="one pod up is enough, growth is elsewhere",
        ),
        pytest.param(
            deployment(),
            [pod("p1", scheduled=CEL_RUNTIME)],
            [claim("c1", allocated=False)],
            Reason.PLACEMENT_UNDECIDABLE,
            "False",
            id="CEL runtime error",
        ),
        pytest.param(
            deployment(),
            [pod("p1", scheduled=CEL_COMPILE)],
            [claim("c1", allocated=False)],
            Reason.PLACEMENT_UNDECIDABLE,
            "False",
            id="CEL compile error",
        ),
        pytest.param(
            deployment(),
            [pod("p1", scheduled=EXHAUSTED)],
            [claim("c1", allocated=False)],
            Reason.RESOURCE_CLAIM_EXHAUSTED,
            "False",
            id="cannot allocate all claims",
        ),
        pytest.param(
            deployment(replicas=2),
            [pod("p1", scheduled=EXHAUSTED), pod("p2", scheduled=CEL_RUNTIME)],
            [],
            Reason.PLACEMENT_UNDECIDABLE,
            "False",
            id="undecidable is never hidden by exhausted",
        ),
        pytest.param(
            deployment(),
            [pod("p1", scheduled=("SchedulerError", "timed out trying to allocate devices"))],
            [claim("c1", allocated=False)],
            Reason.RESOURCE_CLAIM_PENDING,
            "False",
            id="a scheduler error without CEL is not undecidable",
        ),
        pytest.param(
            deployment(),
            [pod("p1", scheduled=NOT_CREATED)],
            [],
            Reason.RESOURCE_CLAIM_PENDING,
            "False",
            id="claim not created yet",
        ),
        pytest.param(
            deployment(),
            [pod("p1")],
            [claim("c1", allocated=False)],
            Reason.RESOURCE_CLAIM_PENDING,
            "False",
            id="claim awaits allocation",
        ),
        pytest.param(
            deployment(),
            [pod("p1", containers=[waiting("ContainerCreating")])],
            [claim("c1", allocated=True)],
            Reason.WORKLOAD_NOT_READY,
            "False",
            id="coming up",
        ),
        pytest.param(
            deployment(conditions=[REPLICA_FAILURE]),
            [],
            [],
            Reason.WORKLOAD_ERROR,
            "False",
            id="the cluster refuses to create pods",
        ),
        pytest.param(
            deployment(replicas=3, conditions=[REPLICA_FAILURE]),
            [pod("p1", ready=True)],
            [],
            StatusReason.WORKLOAD_AVAILABLE,
            "True",
            id="a refused extra replica does not unready the serving one",
        ),
        pytest.param(
            deployment(conditions=[DEADLINE]),
            [pod("p1", containers=[running()])],
            [claim("c1", allocated=True)],
            Reason.WORKLOAD_ERROR,
            "False",
            id="progress deadline",
        ),
        pytest.param(
            deployment(conditions=[DEADLINE]),
            [pod("p1", scheduled=EXHAUSTED)],
            [],
            Reason.RESOURCE_CLAIM_EXHAUSTED,
            "False",
            id="capacity is told before a deadline",
        ),
        pytest.param(
            deployment(),
            [pod("p1", ready=True, terminating=True), pod("p2", scheduled=EXHAUSTED)],
            [],
            Reason.RESOURCE_CLAIM_EXHAUSTED,
            "False",
            id="a terminating pod counts for nothing",
        ),
    ],
)
def test_the_workload_gives_one_reason(
    deploy: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    reason: str,
    status: str,
) -> None:
    verdict = judge_workload(deploy, pods, claims, None, no_logs)
    assert (verdict.reason, verdict.status) == (reason, status)


def test_exhausted_names_the_device_class_and_the_scheduler_words() -> None:
    verdict = judge_workload(
        deployment(),
        [pod("p1", scheduled=EXHAUSTED)],
        [claim("c1", allocated=False, device_class="mig.nvidia.com")],
        None,
        no_logs,
    )
    assert "mig.nvidia.com" in verdict.message
    assert "cannot allocate all claims" in verdict.message


def test_undecidable_says_waiting_will_not_help() -> None:
    verdict = judge_workload(deployment(), [pod("p1", scheduled=CEL_RUNTIME)], [], None, no_logs)
    assert "no such key: index" in verdict.message
    assert "waiting will not clear" in verdict.message


def test_workload_error_carries_the_apply_error() -> None:
    verdict = workload_error("Deployment llm-a: field is immutable")
    assert (verdict.status, verdict.reason, verdict.message) == (
        "False",
        Reason.WORKLOAD_ERROR,
        "Deployment llm-a: field is immutable",
    )
    assert verdict.condition(ConditionType.WORKLOAD_READY, 3).observed_generation == 3


# ---------------------------------------------------------------- WorkloadStartupFailed


CRASHING = waiting("CrashLoopBackOff", restarts=3, last_exit=1)


def test_startup_failed_names_pod_container_node_reason_restarts_and_output() -> None:
    logs = Logs({("p1", "server"): "loading\nCUDA out of memory. Tried to allocate 2.00 GiB"})
    verdict = judge_workload(deployment(), [pod("p1", containers=[CRASHING])], [], None, logs)
    assert verdict.reason == Reason.WORKLOAD_STARTUP_FAILED
    for part in (
        "pod p1",
        "container server",
        "CrashLoopBackOff",
        "exit code 1",
        "restarted 3 times",
        "CUDA out of memory",
    ):
        assert part in verdict.message
    assert logs.calls == [("p1", "server")]
    assert verdict.memory == StartupFailure(
        pod="p1",
        container="server",
        restart_count=3,
        output=["loading", "CUDA out of memory. Tried to allocate 2.00 GiB"],
        output_read=True,
    )


def test_the_output_is_read_once_while_counts_stay_current() -> None:
    logs = Logs()
    first = judge_workload(deployment(), [pod("p1", containers=[CRASHING])], [], None, logs)
    later = waiting("CrashLoopBackOff", restarts=7, last_exit=137, last_reason="OOMKilled")
    second = judge_workload(deployment(), [pod("p1", containers=[later])], [], first.memory, logs)
    assert logs.calls == [("p1", "server")]
    assert "restarted 7 times" in second.message
    assert "OOMKilled" in second.message
    assert "line two" in second.message


def test_a_different_container_failing_is_read_again() -> None:
    logs = Logs()
    first = judge_workload(deployment(), [pod("p1", containers=[CRASHING])], [], None, logs)
    other = waiting("CrashLoopBackOff", name="sidecar", restarts=1, last_exit=2)
    healthy = running(restarts=0)
    judge_workload(deployment(), [pod("p1", containers=[healthy, other])], [], first.memory, logs)
    assert logs.calls == [("p1", "server"), ("p1", "sidecar")]


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull", "InvalidImageName"])
def test_an_image_that_never_started_has_no_output_to_read(reason: str) -> None:
    verdict = judge_workload(deployment(), [pod("p1", containers=[waiting(reason)])], [], None, no_logs)
    assert verdict.reason == Reason.WORKLOAD_STARTUP_FAILED
    assert reason in verdict.message
    assert "no output" in verdict.message
    assert verdict.memory is not None and verdict.memory.output == []


def test_at_most_eight_lines_of_output_are_kept() -> None:
    text = "\n".join(f"line {i}" for i in range(30)) + "\n\n"
    verdict = judge_workload(
        deployment(), [pod("p1", containers=[CRASHING])], [], None, Logs({("p1", "server"): text})
    )
    assert verdict.memory is not None
    assert verdict.memory.output == [f"line {i}" for i in range(30 - MAX_LOG_LINES, 30)]


def test_unread_output_is_said_so() -> None:
    verdict = judge_workload(
        deployment(), [pod("p1", containers=[CRASHING])], [], None, Logs({("p1", "server"): None})
    )
    assert "could not be read" in verdict.message


def test_startup_failed_needs_every_pod_failing() -> None:
    pods = [pod("p1", containers=[CRASHING]), pod("p2", containers=[running()])]
    verdict = judge_workload(deployment(replicas=2), pods, [claim("c", allocated=True)], None, no_logs)
    assert verdict.reason == Reason.WORKLOAD_NOT_READY


def test_a_failing_init_container_fails_the_start() -> None:
    pods = [
        pod(
            "p1",
            init_containers=[waiting("CrashLoopBackOff", name="fetch-model", restarts=2, last_exit=1)],
            containers=[waiting("PodInitializing")],
        )
    ]
    verdict = judge_workload(deployment(), pods, [], None, Logs())
    assert (verdict.reason, verdict.memory and verdict.memory.container) == (
        Reason.WORKLOAD_STARTUP_FAILED,
        "fetch-model",
    )


def test_the_refusal_holds_between_two_crashes_and_lifts_when_a_pod_comes_up() -> None:
    logs = Logs()
    first = judge_workload(deployment(), [pod("p1", containers=[CRASHING])], [], None, logs)
    between = judge_workload(
        deployment(), [pod("p1", containers=[running(restarts=4, last_exit=1)])], [], first.memory, logs
    )
    assert between.reason == Reason.WORKLOAD_STARTUP_FAILED
    up = judge_workload(
        deployment(),
        [pod("p1", ready=True, containers=[running(restarts=4, last_exit=1)])],
        [],
        between.memory,
        logs,
    )
    assert (up.status, up.memory) == ("True", None)
    assert logs.calls == [("p1", "server")]


def test_a_container_restarted_once_is_not_a_failure_without_one_seen() -> None:
    verdict = judge_workload(
        deployment(),
        [pod("p1", containers=[running(restarts=1, last_exit=1)])],
        [claim("c", allocated=True)],
        None,
        no_logs,
    )
    assert verdict.reason == Reason.WORKLOAD_NOT_READY


def test_the_startup_failure_round_trips_through_the_status_wire() -> None:
    memory = StartupFailure(
        pod="p1", container="server", restart_count=2, output=["a", "b"], output_read=True
    )
    assert StartupFailure.model_validate(memory.to_wire()) == memory


# ---------------------------------------------------------------- growth and the settled volume


def test_a_replica_beyond_the_first_on_a_full_device_waits_for_capacity_and_growth_stays_healthy() -> None:
    """Issue 28: the card is simply full; the order stays Ready, the GrowthClaimUnplaced event says it."""
    pods = [pod("p1", ready=True), pod("p2", scheduled=EXHAUSTED, claim="p2-gpu-x4j2c")]
    asked: list[None] = []

    def outranked() -> tuple[str, ...]:
        asked.append(None)
        return ()

    verdict = judge_growth(
        deployment(replicas=2), pods, [claim("c", allocated=True)], autoscaler=True, outranked=outranked
    )
    assert (verdict.status, verdict.reason, len(asked)) == ("True", StatusReason.SCALING_OK, 1)
    assert "the autoscaler asked for 2" in verdict.message and "wait for capacity" in verdict.message
    assert "(p2)" in verdict.message  # the pods it reported on, so that each gets one event
    [unplaced] = verdict.unplaced
    assert unplaced.pod == "p2"
    assert "p2-gpu-x4j2c" in unplaced.event_message
    assert "cannot allocate all claims" in unplaced.event_message
    assert "gpu.nvidia.com" in unplaced.event_message


def test_a_replica_whose_room_orders_of_higher_priority_hold_is_blocked_by_preemption() -> None:
    """Issue 28: ScaleUpBlocked (phase Degraded) only under preemption, naming who holds the room."""
    pods = [pod("p1", ready=True), pod("p2", scheduled=EXHAUSTED, claim="p2-gpu-x4j2c")]
    holders = ("gpu.nvidia.com/node-1/gpu-0: team-b/urgent at priority 1000",)
    verdict = judge_growth(
        deployment(replicas=2), pods, [claim("c", allocated=True)], autoscaler=True, outranked=lambda: holders
    )
    assert (verdict.status, verdict.reason) == ("False", Reason.SCALE_UP_BLOCKED)
    assert "blocked by preemption" in verdict.message and holders[0] in verdict.message
    assert [r.pod for r in verdict.unplaced] == ["p2"]


def test_the_ledger_is_not_asked_while_every_replica_has_its_device() -> None:
    def outranked() -> tuple[str, ...]:
        raise AssertionError("asked")

    pods = [pod("p1", ready=True), pod("p2", ready=True)]
    verdict = judge_growth(deployment(replicas=2), pods, [], autoscaler=True, outranked=outranked)
    assert verdict.reason == StatusReason.SCALING_OK


def test_the_schedulers_refusal_of_a_claim_is_read_from_the_pods_as_they_are_now() -> None:
    refused = pod("p2", scheduled=EXHAUSTED)
    said = isvc_workload.claim_refusal([pod("p1", ready=True), refused])
    assert said is not None and (said.pod, said.message) == ("p2", EXHAUSTED[1])
    assert isvc_workload.claim_refusal([pod("p1", ready=True), pod("p3", scheduled=NOT_CREATED)]) is None


SHORT_OF_CPU = (
    "Unschedulable",
    "0/6 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), 4 cannot allocate all "
    "claims. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling.",
)


def test_a_replica_waiting_for_cpu_is_told_apart_from_one_waiting_for_a_device_issue_45() -> None:
    """On the real node a growth replica asking 2 CPUs of a 2-CPU node read "the device is full" (event
    GrowthClaimUnplaced) while the card had 90 of 100 shares free."""
    pods = [pod("p1", ready=True), pod("p2", scheduled=SHORT_OF_CPU, claim="p2-gpu-x4j2c")]

    def outranked() -> tuple[str, ...]:
        raise AssertionError("no device search failed: the ledger is not asked")

    verdict = judge_growth(deployment(replicas=2), pods, [], autoscaler=True, outranked=outranked)
    assert (verdict.status, verdict.reason, verdict.unplaced) == ("True", StatusReason.SCALING_OK, ())
    assert "p2 waits for a node with room for it (1 Insufficient cpu)" in verdict.message
    assert "the device is full" not in verdict.message
    assert isvc_workload.claim_refusal(pods) is None  # the planner learns no device refusal from it
    alone = judge_workload(deployment(), [pod("p1", scheduled=SHORT_OF_CPU)], [], None, no_logs)
    assert alone.reason == Reason.WORKLOAD_NOT_READY and "1 Insufficient cpu" in alone.message


@pytest.mark.parametrize(
    ("pods", "status", "reason"),
    [
        (
            [pod("p1", ready=True), pod("p2", containers=[waiting("ContainerCreating")])],
            "True",
            StatusReason.SCALING_OK,
        ),
        ([pod("p1", scheduled=EXHAUSTED)], "Unknown", StatusReason.WAITING),
        ([pod("p1", ready=True), pod("p2", scheduled=NOT_CREATED)], "True", StatusReason.SCALING_OK),
    ],
    ids=["a replica merely starting", "nothing serves yet", "a claim not created yet"],
)
def test_growth_is_blocked_only_by_a_failed_device_search(
    pods: list[dict[str, Any]], status: str, reason: str
) -> None:
    verdict = judge_growth(deployment(replicas=2), pods, [], autoscaler=True)
    assert (verdict.status, verdict.reason, verdict.unplaced) == (status, reason, ())


@pytest.mark.parametrize(
    ("current", "needed", "refused"),
    [
        (None, "40Gi", False),
        ("40Gi", "40Gi", False),
        ("64Gi", "40Gi", False),
        ("20Gi", "40Gi", True),
        ("40G", "40Gi", True),
    ],
)
def test_a_model_volume_smaller_than_needed_is_refused(
    current: str | None, needed: str, refused: bool
) -> None:
    refusal = settled_region_check(current, needed)
    assert (refusal is not None) == refused
    if refusal is not None:
        assert refusal.reason == Reason.WORKLOAD_ERROR
        assert current in refusal.message and needed in refusal.message


UNBOUND_VOLUME = (
    "Unschedulable",
    "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are "
    "available: 3 Preemption is not helpful for scheduling.",
)


def test_a_pod_waiting_for_its_model_volume_is_not_ready_yet_and_says_so() -> None:
    """The set's model volume is a claim: a pod whose claim is unbound waits for storage, not for a device."""
    pods = [pod("p1", scheduled=UNBOUND_VOLUME)]
    verdict = judge_workload(deployment(), pods, [claim("c", allocated=False)], None, no_logs).verdict
    assert verdict.reason == "WorkloadNotReady"
    assert "model volume" in verdict.message and "modelVolume.storageClassName" in verdict.message
