"""WorkloadReady: what the cluster made of the order's workload, in one reason from the closed set."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from isvc_api import Reason, StartupFailure, StatusReason, Verdict, condition_of
from pydantic import BaseModel

from isvc_workload._kube import (
    claim_device_class,
    is_allocated,
    is_ready,
    is_terminating,
    name_of,
    unscheduled,
)
from isvc_workload._quota import quota_refusal

__all__ = [
    "IMAGE_NEVER_STARTED",
    "MAX_LOG_LINES",
    "STARTUP_FAILED_WAITING",
    "ClaimRefusal",
    "LogReader",
    "WorkloadJudgement",
    "cel_undecidable",
    "claim_refusal",
    "claims_exhausted",
    "judge_workload",
    "short_of_room",
    "workload_error",
]

LogReader = Callable[[str, str], str | None]
"""Reads a container's output: (pod name, container name) → text, or None when it cannot be had.

The tail is enough (the judge keeps the last 8 lines). While a container waits in
CrashLoopBackOff its log is that of the instance that fell over.
"""

MAX_LOG_LINES = 8
_MAX_LINE = 300
IMAGE_NEVER_STARTED = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})
STARTUP_FAILED_WAITING = IMAGE_NEVER_STARTED | {
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreStartHookError",
    "PostStartHookError",
}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


WorkloadJudgement = tuple[Verdict, StartupFailure | None]
"""The WorkloadReady verdict of one pass, and the startup failure to keep in status for the next."""


def workload_error(message: str) -> Verdict:
    """WorkloadError: the objects could not be applied or the cluster refuses them; `message` says what."""
    return Verdict.refuse(Reason.WORKLOAD_ERROR, message)


def cel_undecidable(reason: str, message: str) -> bool:
    """Whether a PodScheduled=False condition says the selector could not be judged at all."""
    return reason == "SchedulerError" and ("CEL runtime error" in message or "CEL compile error" in message)


# kube-scheduler's tally of nodes short of what a pod asks (NodeResourcesFit: "2 Insufficient cpu", "1 Too many
# pods"). A node reports only its first failing filter, so a node short of CPU says nothing of its devices.
_SHORT_OF_ROOM = re.compile(r"\b\d+ (?:Insufficient [\w./-]+|Too many pods)")


def short_of_room(reason: str, message: str) -> list[str]:
    """The nodes the scheduler found short of the CPU, memory or pod room the pod asks, as it tallied them
    ("1 Insufficient cpu"); empty when none was."""
    return _SHORT_OF_ROOM.findall(message) if reason == "Unschedulable" else []


def claims_exhausted(reason: str, message: str) -> bool:
    """Whether a PodScheduled=False condition says the device search happened and found no room: no node
    was short of anything else (issue 45: a replica asking 2 CPUs of a 2-CPU node was read as a full card)."""
    return (
        reason == "Unschedulable"
        and "cannot allocate all claims" in message
        and not short_of_room(reason, message)
    )


class ClaimRefusal(BaseModel):
    """kube-scheduler found no room for a pod's device claim: its words, and since when it has said so."""

    pod: str
    message: str
    since: datetime | None = None


def claim_refusal(pods: Sequence[Mapping[str, Any]]) -> ClaimRefusal | None:
    """The first live pod whose device claim the scheduler could not allocate ("cannot allocate all claims"),
    as the pods read now say it (never a word of an earlier pass: the scheduler may have placed it since)."""
    for pod in sorted((dict(p) for p in pods), key=name_of):
        said = unscheduled(pod) if not is_terminating(pod) else None
        if said is None or not claims_exhausted(*said):
            continue
        since = (condition_of(pod, "PodScheduled") or {}).get("lastTransitionTime")
        try:
            at = datetime.fromisoformat(str(since)) if since else None
        except ValueError:
            at = None
        return ClaimRefusal(pod=name_of(pod), message=said[1], since=at)
    return None


class _Failure(BaseModel):
    pod_name: str
    container: str
    node_reason: str
    restarts: int
    never_started: bool


def _last_exit(status: dict[str, Any]) -> dict[str, Any]:
    return dict((status.get("lastState") or {}).get("terminated") or {})


def _exit_text(terminated: dict[str, Any]) -> str:
    return f"{terminated.get('reason') or 'Error'}, exit code {terminated.get('exitCode', '?')}"


def _container_failure(
    pod: dict[str, Any], status: dict[str, Any], previous: StartupFailure | None
) -> _Failure | None:
    state = status.get("state") or {}
    restarts = int(status.get("restartCount") or 0)
    last = _last_exit(status)
    name = str(status.get("name") or "")
    pod_name = name_of(pod)

    def failure(node_reason: str, never_started: bool = False) -> _Failure:
        return _Failure(
            pod_name=pod_name,
            container=name,
            node_reason=node_reason,
            restarts=restarts,
            never_started=never_started,
        )

    waiting = state.get("waiting") or {}
    if waiting.get("reason") in STARTUP_FAILED_WAITING:
        reason = str(waiting["reason"])
        if last and last.get("exitCode", 0) != 0:
            return failure(f"{reason} (last exit: {_exit_text(last)})")
        return failure(reason, never_started=reason in IMAGE_NEVER_STARTED and restarts == 0)
    terminated = state.get("terminated") or {}
    if terminated and terminated.get("exitCode", 0) != 0 and restarts > 0:
        return failure(_exit_text(terminated))
    # Between two crashes the container runs for a moment: still the same refusal, not a recovery.
    remembered = previous is not None and (previous.pod, previous.container) == (pod_name, name)
    if state.get("running") and remembered and restarts > 0 and last.get("exitCode", 0) != 0:
        return failure(f"restarted after {_exit_text(last)}")
    return None


def _pod_failure(pod: dict[str, Any], previous: StartupFailure | None) -> _Failure | None:
    status = pod.get("status") or {}
    statuses = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    failures = [f for s in statuses if (f := _container_failure(pod, s, previous)) is not None]
    if not failures:
        return None
    if previous is not None:
        for f in failures:
            if (f.pod_name, f.container) == (previous.pod, previous.container):
                return f
    return failures[0]


def _tail(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    lines = [line[:_MAX_LINE] for line in lines if line.strip()]
    return tuple(lines[-MAX_LOG_LINES:])


def _startup_failed(
    failures: list[_Failure], previous: StartupFailure | None, read_log: LogReader
) -> WorkloadJudgement:
    chosen = failures[0]
    if previous is not None:
        chosen = next((f for f in failures if f.pod_name == previous.pod), chosen)
    same = previous is not None and (previous.pod, previous.container) == (chosen.pod_name, chosen.container)
    if same and previous is not None and previous.output_read:
        lines, read = tuple(previous.output), True
    elif chosen.never_started:
        lines, read = (), False
    else:
        lines, read = _tail(read_log(chosen.pod_name, chosen.container)), True
    times = "time" if chosen.restarts == 1 else "times"
    message = (
        f"Every pod of the order fails to start its container ({len(failures)} of {len(failures)}): "
        f"pod {chosen.pod_name}, container {chosen.container}: {chosen.node_reason}, "
        f"restarted {chosen.restarts} {times}. Waiting will not help: the image, the settings of the "
        f"order or its environment has to change."
    )
    if lines:
        message += " Its output:\n" + "\n".join(f"  {line}" for line in lines)
    elif chosen.never_started:
        message += " The image never started, so there is no output."
    elif read:
        message += " Its output could not be read."
    memory = StartupFailure(
        pod=chosen.pod_name,
        container=chosen.container,
        restart_count=chosen.restarts,
        output=list(lines),
        output_read=read,
    )
    return Verdict.refuse(Reason.WORKLOAD_STARTUP_FAILED, message), memory


def _desired(deployment: dict[str, Any]) -> int:
    replicas = (deployment.get("spec") or {}).get("replicas")
    return int(replicas) if replicas is not None else 1


def judge_workload(
    deployment: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    previous: StartupFailure | None,
    read_log: LogReader,
    claim_refusals: Mapping[str, str] | None = None,
    quotas: Sequence[Mapping[str, Any]] | None = None,
) -> WorkloadJudgement:
    """Judge the order's workload (its StatefulSet), pods and claims as read this pass.

    One pod up makes the workload ready (growth beyond it is ScalingHealthy's). Otherwise, most
    telling first: pods (or their model volumes) the cluster refuses to create, device claims a quota
    refuses (`claim_refusals`: pod name → what the cluster said when it did not create the pod's claim),
    a selector that cannot be judged, every pod failing to start, a device search that failed, a rollout
    the cluster gave up on, a claim awaiting allocation, and else: coming up. A quota refusal is judged
    against the namespace's `quotas` as they are now (None: not known): it stands (WorkloadError) until the
    quota changes.
    """
    if deployment is None:
        return Verdict.refuse(
            Reason.WORKLOAD_NOT_READY,
            "The workload has not been created yet; it is applied on the next pass.",
        ), None
    live = sorted((p for p in pods if not is_terminating(p)), key=name_of)
    if previous is not None and previous.pod not in {name_of(p) for p in live}:
        previous = None
    ready = [p for p in live if is_ready(p)]
    if ready:
        return Verdict.ok(
            StatusReason.WORKLOAD_AVAILABLE, f"{len(ready)} of {_desired(deployment)} replicas ready."
        ), None
    # Checked after readiness: a replica the quota refuses does not stop the ones that serve.
    refused = _refused_by_cluster(deployment, live, claim_refusals or {}, quotas)
    if refused is not None:
        return refused, previous
    scheduling = [(p, s) for p in live if (s := unscheduled(p)) is not None]
    undecidable = _undecidable(scheduling)
    if undecidable is not None:
        return undecidable, previous
    failures = [f for p in live if (f := _pod_failure(p, previous)) is not None]
    if live and len(failures) == len(live):
        return _startup_failed(failures, previous, read_log)
    return _not_up_yet(deployment, scheduling, claims), previous


def _refused_by_cluster(
    deployment: dict[str, Any],
    live: list[dict[str, Any]],
    claim_refusals: Mapping[str, str],
    quotas: Sequence[Mapping[str, Any]] | None,
) -> Verdict | None:
    """What the cluster refused to make: the set's pods (or their model volumes), or a pod's device claim;
    a quota's refusal judged against the namespace's quotas as they are now."""
    namespace = str((deployment.get("metadata") or {}).get("namespace") or "")
    failed_create = condition_of(deployment, "ReplicaFailure")
    if failed_create is not None and failed_create.get("status") == "True":
        quota = quota_refusal(str(failed_create.get("message") or ""))
        if quota is not None:
            return quota.verdict(namespace, quotas)
        return workload_error(
            f"The cluster refuses to create the pods of the workload ({failed_create.get('reason')}): "
            f"{failed_create.get('message')}"
        )
    for pod in live:
        quota = quota_refusal(claim_refusals.get(name_of(pod)) or "")
        if quota is not None:
            return quota.verdict(namespace, quotas)
    return None


def _undecidable(scheduling: list[tuple[dict[str, Any], tuple[str, str]]]) -> Verdict | None:
    """A device selector the scheduler cannot judge: the search for a device never started."""
    for pod, (reason, message) in scheduling:
        if cel_undecidable(reason, message):
            return Verdict.refuse(
                Reason.PLACEMENT_UNDECIDABLE,
                (
                    f"The scheduler cannot judge the device selector, so the search for a device never "
                    f"started (pod {name_of(pod)}): {message}. The selector of the class needs an "
                    f"administrator; waiting will not clear this."
                ),
            )
    return None


def _not_up_yet(
    deployment: dict[str, Any],
    scheduling: list[tuple[dict[str, Any], tuple[str, str]]],
    claims: list[dict[str, Any]],
) -> Verdict:
    """No replica serves and none fails to start: a failed device search, a stalled rollout, or a stage."""
    for pod, (reason, message) in scheduling:
        if claims_exhausted(reason, message):
            device_class = claim_device_class(claims)
            where = f" on device class {device_class}" if device_class else ""
            return Verdict.refuse(
                Reason.RESOURCE_CLAIM_EXHAUSTED,
                (
                    f"The search for a device happened and found no room{where} (pod {name_of(pod)}): "
                    f"{message}. This is capacity: free some, or wait; it passes on its own."
                ),
            )
    for pod, (reason, message) in scheduling:
        short = short_of_room(reason, message)
        if short:
            return Verdict.refuse(
                Reason.WORKLOAD_NOT_READY,
                (
                    f"The replicas wait for a node with the CPU, memory or pod room they ask (pod {name_of(pod)}: "
                    f"{', '.join(short)}): {message}. This passes when a node has room; a node smaller than what the "
                    "replica asks never will (its requests are in the LaunchPlan's estimates)."
                ),
            )
    for pod, (_, message) in scheduling:
        if "PersistentVolumeClaim" in message:
            return Verdict.refuse(
                Reason.WORKLOAD_NOT_READY,
                (
                    f"The workload waits for its model volume to be provisioned and bound (pod {name_of(pod)}): "
                    f"{message}. This passes once the StorageClass provides the volume; a cluster with no "
                    "default StorageClass needs the module setting modelVolume.storageClassName."
                ),
            )
    progressing = condition_of(deployment, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return workload_error(f"The cluster gave up rolling out the workload: {progressing.get('message')}")
    pending = [c for c in claims if not is_allocated(c)]
    if pending or scheduling:
        what = f"claim {name_of(pending[0])}" if pending else f"pod {name_of(scheduling[0][0])}"
        return Verdict.refuse(
            Reason.RESOURCE_CLAIM_PENDING,
            (f"The workload waits for its device claim to be allocated ({what}); this is a stage."),
        )
    return Verdict.refuse(
        Reason.WORKLOAD_NOT_READY,
        (
            f"0 of {_desired(deployment)} replicas ready: the replicas are coming up (pulling the image, "
            f"downloading the model); this passes on its own."
        ),
    )
