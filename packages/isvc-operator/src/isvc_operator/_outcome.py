"""What a step decided, returned to the reconciler, which applies it in one place (`_order`): the verdict of the
step's condition, the status fields it decided, the writes it intends, the events it records, and what it asks
of the controller (a pass again after a while, other orders passed now).

A status field a step does not name in `fields` keeps what the status said; one it names as None is cleared.
Writes here are those whose answer decides nothing in the pass (deletions, annotations, a pod's start permit);
a write whose answer the step judges (a child the API server may refuse, a Lease taken only if nobody changed
it, the stored plan, the endpoint's token Secret) is made by the step itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, Unpack

import attrs
from isvc_api import (
    Constraints,
    EndpointStatus,
    HealthStatus,
    ModelStatus,
    Obj,
    OrderKey,
    Resolved,
    ScalingStatus,
    StartupFailure,
    Verdict,
)

from isvc_operator._api import Cluster

__all__ = ["Annotate", "Apply", "Decisions", "Delete", "Event", "Outcome", "StatusFields", "Write"]


class StatusFields(TypedDict, total=False):
    """The fields of an order's status a step may decide (snake_case, as InferenceServiceStatus names them)."""

    constraints: Constraints | None
    model: ModelStatus | None
    resolved: Resolved | None
    launch_plan_name: str | None
    endpoint: EndpointStatus | None
    auth_secret_name: str | None
    startup_failure: StartupFailure | None
    scaling: ScalingStatus | None
    unplaced_replicas: list[str] | None
    health: HealthStatus | None


@attrs.frozen
class Delete:
    """Delete an object of the order's namespace; a missing one is already deleted."""

    api_version: str
    kind: str
    name: str

    def to(self, cluster: Cluster, namespace: str) -> None:
        cluster.delete(self.api_version, self.kind, namespace, self.name)


@attrs.frozen
class Annotate:
    """Set annotations on an object of the order's namespace (a merge patch of its metadata)."""

    api_version: str
    kind: str
    name: str
    annotations: Mapping[str, str]

    def to(self, cluster: Cluster, namespace: str) -> None:
        cluster.annotate(self.api_version, self.kind, namespace, self.name, dict(self.annotations))


@attrs.frozen
class Apply:
    """Server-side apply of a manifest."""

    manifest: Obj

    def to(self, cluster: Cluster, namespace: str) -> None:
        cluster.apply(self.manifest)


Write = Delete | Annotate | Apply


@attrs.frozen
class Event:
    """An event on the order, recorded once its status is written."""

    type: str  # Normal or Warning
    reason: str
    message: str


@attrs.frozen
class Outcome:
    """What one step decided."""

    verdict: Verdict
    fields: StatusFields = attrs.field(factory=lambda: StatusFields())
    writes: tuple[Write, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None  # another pass no later than this many seconds from now
    wake: tuple[OrderKey, ...] = ()  # other orders to pass now


@attrs.define
class Decisions:
    """An outcome as a step builds it, until its verdict is known."""

    fields: StatusFields = attrs.field(factory=lambda: StatusFields())
    writes: list[Write] = attrs.field(factory=list)
    events: list[Event] = attrs.field(factory=list)
    requeue_after: float | None = None
    wake: list[OrderKey] = attrs.field(factory=list)

    def decide(self, **fields: Unpack[StatusFields]) -> None:
        """Status fields this step decided (None clears one)."""
        self.fields.update(fields)

    def write(self, *writes: Write) -> None:
        self.writes.extend(writes)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def requeue(self, seconds: float) -> None:
        """Ask for another pass no later than `seconds` from now."""
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def outcome(self, verdict: Verdict) -> Outcome:
        return Outcome(
            verdict,
            StatusFields(**self.fields),
            tuple(self.writes),
            tuple(self.events),
            self.requeue_after,
            tuple(self.wake),
        )
