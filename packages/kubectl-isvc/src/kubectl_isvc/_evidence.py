"""The evidence `kubectl isvc why` reads beside an order's status, with the caller's own permissions: its events,
its LaunchPlan, its ResourceClaims and Pods, and the last lines of a container that restarted or stopped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from isvc_api import condition_of, request_device_class

from kubectl_isvc._common import Out, Unread, unread
from kubectl_isvc._errors import NotFound, ReadFailed
from kubectl_isvc._plan import summarize_plan
from kubectl_isvc._read import (
    Obj,
    Reader,
    claims_path,
    events_path,
    log_path,
    plan_path,
    pods_path,
    selector_of_order,
)

__all__ = [
    "LOG_LINES",
    "NAMESPACE_HINT",
    "ClaimEvidence",
    "ContainerEvidence",
    "EventRow",
    "PodEvidence",
    "read_evidence",
    "unread_in_namespace",
]

LOG_LINES = 12


class EventRow(Out):
    """An event on the order."""

    type: str
    reason: str
    count: int
    last_seen: str | None
    message: str


class ClaimEvidence(Out):
    """A ResourceClaim of the order: what the scheduler allocated, and to which pods."""

    name: str
    device_class: str | None
    allocated: bool
    devices: list[str]
    reserved_for: list[str]


class ContainerEvidence(Out):
    """A container of a pod, as the node reports it."""

    name: str
    state: str
    reason: str | None = None
    message: str | None = None
    restart_count: int = 0
    output: list[str] | None = None  # its last lines (of the previous run after a restart), when read


class PodEvidence(Out):
    """A pod of the order."""

    name: str
    phase: str
    node: str | None
    scheduled: bool
    scheduler_message: str | None  # the scheduler's own words while the pod is not scheduled
    containers: list[ContainerEvidence]


def _events(items: list[Obj]) -> list[EventRow]:
    def seen(e: Obj) -> str:
        return str(
            e.get("lastTimestamp")
            or e.get("eventTime")
            or (e.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    return [
        EventRow(
            type=str(e.get("type", "")),
            reason=str(e.get("reason", "")),
            count=int(e.get("count") or 1),
            last_seen=seen(e) or None,
            message=str(e.get("message", "")).strip(),
        )
        for e in sorted(items, key=seen)
    ]


def _claim(claim: Obj) -> ClaimEvidence:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    requests = (spec.get("devices") or {}).get("requests") or []
    device_class = next((c for r in requests if (c := request_device_class(r)) is not None), None)
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    devices = []
    for r in results:
        consumed = r.get("consumedCapacity") or {}
        extra = " ".join(f"{k}={v}" for k, v in sorted(consumed.items()))
        devices.append(f"{r.get('pool')}/{r.get('device')}" + (f" ({extra})" if extra else ""))
    reserved = [str(r.get("name")) for r in status.get("reservedFor") or []]
    return ClaimEvidence(
        name=str((claim.get("metadata") or {}).get("name", "")),
        device_class=device_class,
        allocated=bool(status.get("allocation")),
        devices=devices,
        reserved_for=reserved,
    )


def _container(status: Obj) -> ContainerEvidence:
    state = status.get("state") or {}
    kind = next(iter(state), "unknown")
    detail = state.get(kind) or {}
    return ContainerEvidence(
        name=str(status.get("name", "")),
        state=kind,
        reason=detail.get("reason"),
        message=detail.get("message"),
        restart_count=int(status.get("restartCount") or 0),
    )


def _pod(pod: Obj) -> PodEvidence:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    scheduled_cond = condition_of(pod, "PodScheduled")
    scheduled = bool(spec.get("nodeName")) or (scheduled_cond or {}).get("status") == "True"
    message = None if scheduled or scheduled_cond is None else scheduled_cond.get("message")
    containers = [
        _container(c)
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    ]
    return PodEvidence(
        name=str(meta.get("name", "")),
        phase=str(status.get("phase", "Unknown")),
        node=spec.get("nodeName"),
        scheduled=scheduled,
        scheduler_message=message,
        containers=containers,
    )


def _failing(container: ContainerEvidence) -> bool:
    """Worth reading the output of: restarted, or stopped."""
    return container.restart_count > 0 or container.state == "terminated"


NAMESPACE_HINT = (
    "your role in the namespace does not grant this read; the namespace's view (or edit) role "
    "does, the module's d8:user-authz:isvc:editor role alone does not"
)


def unread_in_namespace(e: ReadFailed) -> Unread:
    """A read the namespace role did not grant, with what would grant it."""
    return unread(e, NAMESPACE_HINT)


def _with_output(reader: Reader, namespace: str, pod: PodEvidence, failed: list[Unread]) -> None:
    """The last lines of each container of `pod` that restarted or stopped (the previous run's after a
    restart), put on the container."""
    for i, container in enumerate(pod.containers):
        if not _failing(container):
            continue
        query = {"container": container.name, "tailLines": str(LOG_LINES)}
        if container.restart_count > 0 and container.state != "terminated":
            query["previous"] = "true"
        try:
            text = reader.text(
                log_path(namespace, pod.name),
                query=query,
                what=f"the output of container {container.name} of pod {namespace}/{pod.name}",
            )
        except ReadFailed as e:
            failed.append(unread_in_namespace(e))
            continue
        pod.containers[i] = container.model_copy(update={"output": text.splitlines()[-LOG_LINES:]})


def _plan(reader: Reader, namespace: str, plan_name: str, found: dict[str, Any], notes: list[str]) -> None:
    try:
        found["plan"] = summarize_plan(
            reader.get(plan_path(namespace, plan_name), f"LaunchPlan {namespace}/{plan_name}")
        )
    except NotFound:
        notes.append(f"status.launchPlanName names {plan_name}, which is gone: it is recomputed.")


def read_evidence(
    reader: Reader, namespace: str, name: str, status: Obj, notes: list[str]
) -> tuple[dict[str, Any], list[Unread]]:
    """(the evidence by Diagnosis field, what could not be read); a note goes to `notes` for a plan gone."""
    failed: list[Unread] = []
    found: dict[str, Any] = {"pods": []}
    selector = selector_of_order(name)
    reads: dict[str, Callable[[], object]] = {
        "events": lambda: _events(
            reader.items(
                events_path(namespace),
                f"events of InferenceService {namespace}/{name}",
                fields=f"involvedObject.kind=InferenceService,involvedObject.name={name}",
            )
        ),
        "plan": lambda: _plan(reader, namespace, status["launchPlanName"], found, notes),
        "claims": lambda: [
            _claim(c)
            for c in reader.items(
                claims_path(namespace), f"ResourceClaims of {namespace}/{name}", labels=selector
            )
        ],
        "pods": lambda: [
            _pod(p)
            for p in reader.items(pods_path(namespace), f"Pods of {namespace}/{name}", labels=selector)
        ],
    }
    for key, read in reads.items():
        if key == "plan" and not status.get("launchPlanName"):
            continue
        try:
            value = read()
        except ReadFailed as e:
            failed.append(unread_in_namespace(e))
            continue
        if key != "plan":
            found[key] = value
    for pod in found["pods"]:
        _with_output(reader, namespace, pod, failed)
    startup = status.get("startupFailure") or {}
    found["startup_output"] = [str(line) for line in startup.get("output") or []]
    return found, failed
