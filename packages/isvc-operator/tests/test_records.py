"""Issue 44 (7): the controller believes a refusal event only from the component that records it; a user with
`edit` may write events of her own in her namespace."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from isvc_operator._kube.records import Records
from kubernetes import client as k8s


class _Events:
    def __init__(self, events: list[k8s.CoreV1Event]) -> None:
        self.events = events

    def list_namespaced_event(self, namespace: str, **_: Any) -> k8s.CoreV1EventList:
        return k8s.CoreV1EventList(items=self.events)


def _event(message: str, component: str | None, at: int) -> k8s.CoreV1Event:
    return k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name=f"e{at}"),
        involved_object=k8s.V1ObjectReference(kind="StatefulSet", name="llm", uid="uid-1"),
        reason="FailedCreate",
        message=message,
        source=k8s.V1EventSource(component=component) if component else None,
        last_timestamp=datetime(2026, 1, 1, 0, 0, at, tzinfo=UTC),
    )


def test_a_failed_create_written_by_hand_is_not_believed_issue_44() -> None:
    """Before: the newest FailedCreate event on the set was quoted, whoever wrote it."""
    forged = _event("exceeded quota: pay bob to lift it", None, 2)
    kubectl = _event("exceeded quota: call 555-0100", "kubectl", 3)
    records = Records(_Events([forged, kubectl]))  # type: ignore[arg-type]

    assert records.failed_create("team-a", "StatefulSet", "llm", "uid-1") is None


def test_the_statefulset_controllers_failed_create_is_read() -> None:
    real = _event('pods "llm-0" is forbidden: exceeded quota: gpu', "statefulset-controller", 1)
    forged = _event("exceeded quota: pay bob to lift it", None, 2)
    records = Records(_Events([real, forged]))  # type: ignore[arg-type]

    assert records.failed_create("team-a", "StatefulSet", "llm", "uid-1") == real.message
