"""`kubectl isvc why NAME`: the first condition that is not True, whose fix it is, what to do, and the
evidence read with the caller's own permissions (and what could not be read, and why)."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from isvc_api import CONDITION_ORDER, READINESS, ConditionType, Reason, StatusReason
from pydantic import Field

from kubectl_isvc._common import Exit, Out, Unread, unread
from kubectl_isvc._errors import NotFound, ReadFailed
from kubectl_isvc._faq import Advice, Faq, Lang, Who
from kubectl_isvc._plan import PlanSummary, summarize_plan
from kubectl_isvc._read import (
    Obj,
    Reader,
    claims_path,
    events_path,
    log_path,
    order_path,
    plan_path,
    pods_path,
    selector_of_order,
)

__all__ = [
    "NAMESPACE_HINT",
    "ClaimEvidence",
    "ConditionRow",
    "ContainerEvidence",
    "Diagnosis",
    "EventRow",
    "FaqAdvice",
    "PodEvidence",
    "Verdict",
    "advice_for",
    "age",
    "diagnose",
    "why",
]

LOG_LINES = 12


class Verdict(StrEnum):
    """What `why` concluded."""

    SERVING = "Serving"
    NOT_SERVING = "NotServing"
    UNKNOWN = "Unknown"


class ConditionRow(Out):
    """One condition of the order."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class FaqAdvice(Out):
    """The FAQ's answer for the reason, in the caller's language."""

    who: Who
    whose: str
    passes: str
    title: str
    summary: str
    paragraphs: list[str]
    link: str


class StatusMeaning(Out):
    """The FAQ's meaning of a reason that is not a refusal (Unknown conditions)."""

    meaning: str
    link: str


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


class Diagnosis(Out):
    """Everything `why` found about one order."""

    namespace: str
    name: str
    lang: Lang
    verdict: Verdict
    exit_code: int
    phase: str | None = None
    condition: str | None = None  # the first of the five conditions that is not True (or ScalingHealthy)
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    faq: FaqAdvice | None = None
    meaning: StatusMeaning | None = None
    notes: list[str] = Field(default_factory=list)
    conditions: list[ConditionRow] = Field(default_factory=list)
    generation: int | None = None
    observed_generation: int | None = None
    events: list[EventRow] = Field(default_factory=list)
    plan: PlanSummary | None = None
    claims: list[ClaimEvidence] = Field(default_factory=list)
    pods: list[PodEvidence] = Field(default_factory=list)
    startup_output: list[str] = Field(default_factory=list)
    unread: list[Unread] = Field(default_factory=list)


# ---------------------------------------------------------------- judging the status


def _rows(status: Obj) -> list[ConditionRow]:
    by_type = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    rows = []
    for t in CONDITION_ORDER:
        c = by_type.get(t.value)
        if c is not None:
            rows.append(
                ConditionRow(
                    type=t.value,
                    status=str(c.get("status", "Unknown")),
                    reason=str(c.get("reason", "")),
                    message=str(c.get("message", "")),
                    last_transition_time=c.get("lastTransitionTime"),
                )
            )
    return rows


def advice_for(faq: Faq, reason: str, lang: Lang) -> FaqAdvice | None:
    entry = faq.entry(reason)
    if entry is None:
        return None
    advice: Advice = entry.advice[lang]
    return FaqAdvice(
        who=entry.who,
        whose=entry.whose[lang],
        passes=entry.passes[lang],
        title=advice.title,
        summary=advice.summary,
        paragraphs=advice.paragraphs,
        link=f"{faq.docs[lang]}#{advice.anchor}",
    )


def _meaning(faq: Faq, reason: str, lang: Lang) -> StatusMeaning | None:
    entry = faq.status_reasons.get(reason)
    if entry is None:
        return None
    anchor = (
        "reasons-that-are-not-refusals-and-the-reasons-of-a-class"
        if lang == Lang.EN
        else "причины-которые-не-отказы-и-причины-класса"
    )
    return StatusMeaning(meaning=entry.meaning[lang], link=f"{faq.docs[lang]}#{anchor}")


def diagnose(order: Obj, faq: Faq, lang: Lang) -> Diagnosis:
    """The verdict on an order from its status alone: the first of the five conditions that is not True,
    else ScalingHealthy; the FAQ's answer for its reason. Ready True is serving, whatever refuses before it
    (the phase is then Degraded)."""
    meta, status = order.get("metadata") or {}, order.get("status") or {}
    rows = _rows(status)
    base: dict[str, Any] = {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "lang": lang,
        "phase": status.get("phase"),
        "conditions": rows,
        "generation": meta.get("generation"),
        "observed_generation": status.get("observedGeneration"),
    }
    notes: list[str] = []
    if (
        isinstance(base["generation"], int)
        and isinstance(base["observed_generation"], int)
        and base["observed_generation"] < base["generation"]
    ):
        notes.append(
            f"The status describes generation {base['observed_generation']}; the order is at "
            f"{base['generation']}: the controller has not judged the latest edit yet."
        )
    by_type = {r.type: r for r in rows}
    first = next(
        (
            by_type.get(t.value)
            for t in READINESS
            if t.value not in by_type or by_type[t.value].status != "True"
        ),
        None,
    )
    missing = next((t.value for t in READINESS if t.value not in by_type), None)
    if not rows or (first is None and missing is not None):
        notes.append(
            "The order has no conditions yet: the controller has not judged it (is the module's "
            "controller running?)."
        )
        return Diagnosis(**base, verdict=Verdict.UNKNOWN, exit_code=Exit.UNKNOWN, notes=notes)
    if first is None:
        scaling = by_type.get(ConditionType.SCALING_HEALTHY.value)
        planned = by_type[ConditionType.PLANNED.value]
        if planned.reason == Reason.LAUNCH_PLAN_IN_FORCE:
            notes.append(
                f"Planned says {planned.reason}: the order serves on the plan it holds. {planned.message}"
            )
        if scaling is not None and scaling.status == "False":
            return Diagnosis(
                **base,
                verdict=Verdict.SERVING,
                exit_code=Exit.SERVING,
                notes=notes,
                condition=scaling.type,
                status=scaling.status,
                reason=scaling.reason,
                message=scaling.message,
                faq=advice_for(faq, scaling.reason, lang),
            )
        return Diagnosis(
            **base,
            verdict=Verdict.SERVING,
            exit_code=Exit.SERVING,
            notes=notes,
            condition=ConditionType.READY.value,
            status="True",
            reason=by_type[ConditionType.READY.value].reason,
            message=by_type[ConditionType.READY.value].message,
        )
    ready = by_type.get(ConditionType.READY.value)
    if ready is not None and ready.status == "True":  # Degraded: it serves, and an earlier condition refuses
        notes.append(
            f"The endpoint answers (Ready is True): the order serves on the workload it had, while {first.type} "
            "says what does not hold."
        )
        return Diagnosis(
            **base,
            verdict=Verdict.SERVING,
            exit_code=Exit.SERVING,
            notes=notes,
            condition=first.type,
            status=first.status,
            reason=first.reason,
            message=first.message,
            faq=advice_for(faq, first.reason, lang),
            meaning=None if first.status == "False" else _meaning(faq, first.reason, lang),
        )
    if first.status == "False":
        return Diagnosis(
            **base,
            verdict=Verdict.NOT_SERVING,
            exit_code=Exit.REFUSED,
            notes=notes,
            condition=first.type,
            status=first.status,
            reason=first.reason,
            message=first.message,
            faq=advice_for(faq, first.reason, lang),
        )
    if first.reason == StatusReason.WAITING:
        notes.append(
            f"{first.type} waits for an earlier condition that is True: the status is inconsistent, "
            "or being written."
        )
    return Diagnosis(
        **base,
        verdict=Verdict.UNKNOWN,
        exit_code=Exit.UNKNOWN,
        notes=notes,
        condition=first.type,
        status=first.status,
        reason=first.reason,
        message=first.message,
        faq=advice_for(faq, first.reason, lang),
        meaning=_meaning(faq, first.reason, lang),
    )


# ---------------------------------------------------------------- the evidence


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
    device_class = next(
        (
            (r.get("exactly") or {}).get("deviceClassName")
            for r in requests
            if (r.get("exactly") or {}).get("deviceClassName")
        ),
        None,
    )
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
    scheduled_cond = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
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


def _unread(e: ReadFailed) -> Unread:
    return unread(e, NAMESPACE_HINT)


def why(reader: Reader, namespace: str, name: str, faq: Faq, lang: Lang) -> Diagnosis:
    """Read the order and its evidence as the caller, and diagnose it. Nothing read is written anywhere."""
    try:
        order = reader.get(order_path(namespace, name), f"InferenceService {namespace}/{name}")
    except ReadFailed as e:
        note = (
            f"There is no order {name} in namespace {namespace}."
            if isinstance(e, NotFound)
            else "The order itself could not be read, so nothing can be told about it."
        )
        return Diagnosis(
            namespace=namespace,
            name=name,
            lang=lang,
            verdict=Verdict.UNKNOWN,
            exit_code=Exit.UNKNOWN,
            notes=[note],
            unread=[_unread(e)],
        )
    diagnosis = diagnose(order, faq, lang)
    failed: list[Unread] = []
    found: dict[str, Any] = {}
    status = order.get("status") or {}
    try:
        found["events"] = _events(
            reader.items(
                events_path(namespace),
                f"events of InferenceService {namespace}/{name}",
                fields=f"involvedObject.kind=InferenceService,involvedObject.name={name}",
            )
        )
    except ReadFailed as e:
        failed.append(_unread(e))
    plan_name = status.get("launchPlanName")
    if plan_name:
        try:
            found["plan"] = summarize_plan(
                reader.get(plan_path(namespace, plan_name), f"LaunchPlan {namespace}/{plan_name}")
            )
        except NotFound:
            diagnosis.notes.append(
                f"status.launchPlanName names {plan_name}, which is gone: it is recomputed."
            )
        except ReadFailed as e:
            failed.append(_unread(e))
    selector = selector_of_order(name)
    try:
        found["claims"] = [
            _claim(c)
            for c in reader.items(
                claims_path(namespace), f"ResourceClaims of {namespace}/{name}", labels=selector
            )
        ]
    except ReadFailed as e:
        failed.append(_unread(e))
    try:
        pods = [
            _pod(p)
            for p in reader.items(pods_path(namespace), f"Pods of {namespace}/{name}", labels=selector)
        ]
    except ReadFailed as e:
        failed.append(_unread(e))
        pods = []
    for pod in pods:
        for container in pod.containers:
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
                lines = text.splitlines()[-LOG_LINES:]
                pod.containers[pod.containers.index(container)] = container.model_copy(
                    update={"output": lines}
                )
            except ReadFailed as e:
                failed.append(_unread(e))
    found["pods"] = pods
    startup = status.get("startupFailure") or {}
    found["startup_output"] = [str(line) for line in startup.get("output") or []]
    return diagnosis.model_copy(update={**found, "unread": failed})


def age(stamp: str | None, now: datetime) -> str:
    """`5m`, `3h`, `2d`: how long ago an RFC 3339 time was, as kubectl prints ages."""
    if not stamp:
        return ""
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = max(0, int((now - then.astimezone(UTC)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
