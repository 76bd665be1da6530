"""`kubectl isvc why NAME`: the first condition that is not True, whose fix it is, what to do, and the
evidence read with the caller's own permissions (and what could not be read, and why)."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from isvc_api import CONDITION_ORDER, READINESS, ConditionType, Reason, StatusReason, conditions_of
from pydantic import Field

from kubectl_isvc._common import Exit, Out, Unread
from kubectl_isvc._errors import NotFound, ReadFailed
from kubectl_isvc._evidence import (
    ClaimEvidence,
    EventRow,
    PodEvidence,
    read_evidence,
    unread_in_namespace,
)
from kubectl_isvc._faq import Advice, Faq, Lang, Who
from kubectl_isvc._plan import PlanSummary
from kubectl_isvc._read import Obj, Reader, order_path

__all__ = [
    "ConditionRow",
    "Diagnosis",
    "FaqAdvice",
    "Verdict",
    "advice_for",
    "age",
    "diagnose",
    "why",
]


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
    by_type = {c.get("type"): c for c in conditions_of({"status": status})}
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


def _notes_on_generation(meta: Obj, status: Obj) -> list[str]:
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return [
            f"The status describes generation {observed}; the order is at {generation}: the controller has "
            "not judged the latest edit yet."
        ]
    return []


def _on(row: ConditionRow, faq: Faq, lang: Lang, meaning: bool = False) -> dict[str, Any]:
    """The Diagnosis fields naming one condition, with the FAQ's advice (and meaning) for its reason."""
    return {
        "condition": row.type,
        "status": row.status,
        "reason": row.reason,
        "message": row.message,
        "faq": advice_for(faq, row.reason, lang),
        "meaning": _meaning(faq, row.reason, lang) if meaning else None,
    }


def _all_true(by_type: dict[str, ConditionRow], faq: Faq, lang: Lang, notes: list[str]) -> dict[str, Any]:
    """Every condition of readiness holds: serving; ScalingHealthy False names what blocks growth."""
    planned = by_type[ConditionType.PLANNED.value]
    if planned.reason == Reason.LAUNCH_PLAN_IN_FORCE:
        notes.append(
            f"Planned says {planned.reason}: the order serves on the plan it holds. {planned.message}"
        )
    scaling = by_type.get(ConditionType.SCALING_HEALTHY.value)
    if scaling is not None and scaling.status == "False":
        return _on(scaling, faq, lang)
    ready = by_type[ConditionType.READY.value]
    return {"condition": ready.type, "status": "True", "reason": ready.reason, "message": ready.message}


def _first_not_true(
    first: ConditionRow, by_type: dict[str, ConditionRow], faq: Faq, lang: Lang, notes: list[str]
) -> tuple[Verdict, dict[str, Any]]:
    """The verdict when `first` is the first condition of readiness that is not True."""
    ready = by_type.get(ConditionType.READY.value)
    if ready is not None and ready.status == "True":  # Degraded: it serves, and an earlier condition refuses
        notes.append(
            f"The endpoint answers (Ready is True): the order serves on the workload it had, while {first.type} "
            "says what does not hold."
        )
        return Verdict.SERVING, _on(first, faq, lang, meaning=first.status != "False")
    if first.status == "False":
        return Verdict.NOT_SERVING, _on(first, faq, lang)
    if first.reason == StatusReason.WAITING:
        notes.append(
            f"{first.type} waits for an earlier condition that is True: the status is inconsistent, "
            "or being written."
        )
    return Verdict.UNKNOWN, _on(first, faq, lang, meaning=True)


_EXIT = {Verdict.SERVING: Exit.SERVING, Verdict.NOT_SERVING: Exit.REFUSED, Verdict.UNKNOWN: Exit.UNKNOWN}


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
        "notes": _notes_on_generation(meta, status),
    }
    by_type = {r.type: r for r in rows}
    # the first condition of readiness that is missing or not True; a missing one: not judged yet
    gap = next(
        (t.value for t in READINESS if t.value not in by_type or by_type[t.value].status != "True"), None
    )
    first = by_type.get(gap) if gap is not None else None
    if gap is not None and first is None:
        base["notes"].append(
            "The order has no conditions yet: the controller has not judged it (is the module's "
            "controller running?)."
        )
        return Diagnosis(**base, verdict=Verdict.UNKNOWN, exit_code=Exit.UNKNOWN)
    if first is None:
        return Diagnosis(
            **base,
            verdict=Verdict.SERVING,
            exit_code=Exit.SERVING,
            **_all_true(by_type, faq, lang, base["notes"]),
        )
    verdict, fields = _first_not_true(first, by_type, faq, lang, base["notes"])
    return Diagnosis(**base, verdict=verdict, exit_code=_EXIT[verdict], **fields)


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
            unread=[unread_in_namespace(e)],
        )
    diagnosis = diagnose(order, faq, lang)
    found, failed = read_evidence(reader, namespace, name, order.get("status") or {}, diagnosis.notes)
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
