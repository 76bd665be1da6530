"""Kubernetes condition conventions: one entry per type, transition time moves only on a flip."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from isvc_api._base import Wire

__all__ = [
    "Condition",
    "ConditionStatus",
    "condition_of",
    "conditions_of",
    "find_condition",
    "now",
    "set_condition",
]

ConditionStatus = str  # "True" | "False" | "Unknown"


def now() -> datetime:
    """The current time, second precision, as the API server stores it."""
    return datetime.now(UTC).replace(microsecond=0)


class Condition(Wire):
    """One observation of an object's state (metav1.Condition)."""

    type: str = Field(description="Type of condition, e.g. Ready.", max_length=64)
    status: str = Field(
        description="Status of the condition: True, False or Unknown.",
        pattern="^(True|False|Unknown)$",
    )
    reason: str = Field(
        description="One word in CamelCase saying why the status is what it is.", max_length=128
    )
    message: str = Field(
        default="",
        description="One sentence for a human: what happened, what to do.",
        max_length=32768,
    )
    last_transition_time: datetime | None = Field(default=None, description="When the status last changed.")
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the condition was set from.", ge=0
    )


def find_condition(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """The condition of the given type, or None."""
    return next((c for c in conditions if c.type == type_), None)


def conditions_of(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """`status.conditions` of any object as the API server gives it (a pod, a Deployment, an order, a catalog
    model): each a mapping, in order; none when it has none or they are not a list of mappings."""
    status = (obj or {}).get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def condition_of(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """`status.conditions[type=type_]` of any object as the API server gives it, or None."""
    return next((c for c in conditions_of(obj) if c.get("type") == type_), None)


def set_condition(conditions: list[Condition], new: Condition, at: datetime | None = None) -> list[Condition]:
    """Return conditions with `new` merged in; lastTransitionTime changes only when status flips."""
    at = at or now()
    out: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            out.append(old)
            continue
        replaced = True
        moved = old.status != new.status or old.last_transition_time is None
        out.append(
            new.model_copy(
                update={
                    "last_transition_time": at if moved else old.last_transition_time,
                }
            )
        )
    if not replaced:
        out.append(new.model_copy(update={"last_transition_time": at}))
    return out
