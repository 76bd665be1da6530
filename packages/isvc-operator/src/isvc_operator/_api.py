"""What a pass needs of the API server (the Cluster port), and how its refusals read: parsed once, here, into
typed values (the cluster's own words are kept for the messages that quote them).

Production binds the port in `_kube`; unit tests bind an in-memory fake. Nothing here imports a client library.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
from isvc_api import Obj

__all__ = ["NAMESPACE_TERMINATING", "Cluster", "ClusterRefusal", "RefusalCause", "namespace_terminating"]

# The API server's cause of a refused create in a namespace being deleted (k8s.io/api v0.36.3, core/v1
# NamespaceTerminatingCause; the NamespaceLifecycle admission plugin of k8s.io/apiserver adds it to its 403).
NAMESPACE_TERMINATING = "NamespaceTerminating"


# How the API server words its refusal of a change to a StatefulSet's fields other than the few it lets change
# (k8s.io/kubernetes v1.36.3 pkg/apis/apps/validation ValidateStatefulSetUpdate): for the module's sets, only the
# claim template of the model volume ever differs.
SET_SPEC_FIXED = "updates to statefulset spec for fields other than"


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return int(status) if isinstance(status, int | str) and str(status).isdigit() else None


def _answer(exc: BaseException) -> tuple[str, dict[str, Any] | None]:
    """The body of the API server's answer to a failed request, and the Status object it holds (if any)."""
    raw = getattr(exc, "body", "") or exc
    # clients before 37 keep the body as bytes (their dynamic client's errors too)
    body = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
    try:
        said = json.loads(body)
    except ValueError:
        return body, None
    return body, said if isinstance(said, dict) else None


def namespace_terminating(exc: BaseException) -> bool:
    """Whether an API error is the refusal to create anything in a namespace that is being deleted (403,
    NamespaceTerminating), or that is gone already (404 naming the namespace, not the object written)."""
    status = _status(exc)
    if status not in (403, 404):
        return False
    _, said = _answer(exc)
    details = (said.get("details") or {}) if said is not None else {}
    if status == 404:
        return isinstance(details, dict) and details.get("kind") == "namespaces"
    causes = details.get("causes") or [] if isinstance(details, dict) else []
    return any(isinstance(c, dict) and c.get("reason") == NAMESPACE_TERMINATING for c in causes)


class RefusalCause(enum.Enum):
    """Why the API server refused a write, as far as a pass acts on it."""

    SET_SPEC_FIXED = "set spec fixed"  # a StatefulSet's spec beyond its changeable fields
    OTHER = "other"


@attrs.frozen
class ClusterRefusal:
    """The API server's refusal of one of our manifests (4xx, not a conflict, a throttle or a namespace going):
    the `message` of the Status it answered (not the raw body), and its cause."""

    words: str
    cause: RefusalCause

    @classmethod
    def of(cls, exc: BaseException) -> ClusterRefusal | None:
        """The refusal an API error is, or None when it is none (a server error, a conflict, anything else)."""
        status = _status(exc)
        if status is None or not 400 <= status < 500 or status in (409, 429) or namespace_terminating(exc):
            return None
        body, said = _answer(exc)
        words = str(said.get("message") or body) if said is not None else body
        cause = RefusalCause.SET_SPEC_FIXED if SET_SPEC_FIXED in words else RefusalCause.OTHER
        return cls(words, cause)


class Cluster(Protocol):
    """What a pass needs of the API server (KubeCluster in production, a fake in unit tests)."""

    def order(self, namespace: str, name: str) -> Obj | None: ...
    def klass(self, name: str) -> Obj | None: ...
    def priority_class_exists(self, name: str) -> bool: ...
    def priority_value(self, name: str | None) -> int: ...
    def get_secret(self, namespace: str, name: str) -> Obj | None: ...
    def launch_plan(self, namespace: str, name: str) -> Obj | None: ...
    def ingresses_naming(self, host: str) -> list[Obj]:
        """Every Ingress of the cluster that publishes `host` (from the cache)."""
        ...

    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]: ...
    def autoscalers_of(self, namespace: str, kind: str, names: set[str]) -> list[Obj]:
        """Every HorizontalPodAutoscaler of a namespace aimed at an object of `kind` named in `names` (its
        metadata and `target`, from the cache)."""
        ...

    def cached(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A child as the cache holds it; None when the kind is not watched or the object is absent."""
        ...

    def apply(self, manifest: Obj, dry_run: bool = False) -> Obj:
        """Server-side apply; `dry_run`: what the object would be, nothing written."""
        ...

    def patch(self, manifest: Obj, ops: list[Obj], dry_run: bool = False) -> Obj:
        """A JSON patch (RFC 6902) of the object `manifest` names; `dry_run`: nothing written."""
        ...

    def apply_status(self, manifest: Obj) -> Obj: ...
    def lease(self, namespace: str, name: str) -> Obj | None:
        """A coordination Lease, read live (a device's start turn)."""
        ...

    def take_lease(self, manifest: Obj) -> bool:
        """Write a Lease only if nobody changed it since it was read (its resourceVersion; none: create it);
        False when someone did."""
        ...

    def create(self, manifest: Obj) -> Obj: ...
    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None: ...
    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None: ...
    def start_log(self, namespace: str, pod: str, container: str, lines: int = 200) -> str | None:
        """The output of a container's current instance: what the start under way said so far."""
        ...

    def failed_create(self, namespace: str, kind: str, name: str, uid: str) -> str | None:
        """The workload controller's last word on a pod of that object the cluster refused to create."""
        ...

    def refused(self, namespace: str, kind: str, name: str, uid: str, reason: str) -> str | None:
        """The message of the newest event `reason` a controller recorded on that object, or None."""
        ...

    def quotas_in(self, namespace: str) -> list[Obj]:
        """The ResourceQuotas of a namespace (from the cache)."""
        ...

    def annotate(
        self, api_version: str, kind: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        """Set annotations on an object (a metadata merge patch)."""
        ...

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None: ...
    def user_may(
        self,
        username: str,
        uid: str,
        groups: tuple[str, ...],
        extra: Mapping[str, tuple[str, ...]],
        verb: str,
        resource: str,
        namespace: str,
        name: str,
    ) -> bool:
        """Whether the API server lets that user `verb` the core `resource` namespace/name
        (SubjectAccessReview); False when it cannot be asked."""
        ...
