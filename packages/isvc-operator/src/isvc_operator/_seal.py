"""The seal on an order's children: proof that a child is what the controller wrote, which a user cannot forge.

Why: a namespace user (Kubernetes' `edit` role) can edit the children of her order — the StatefulSet's
image, its service-account token, the Service's selector, the Ingress's paths, the set's replicas — and a hash
annotation of the controller's own does not show it. Field managers do not tell who wrote what either: a
client names its own field manager, so a user can write as `isvc-controller`.

When the controller writes a child it asks the API server first what the object would then be (a dry run of
the same write) and stamps the real write with a seal: an HMAC, under a key only the controller holds, of the
child's *view* — its kind, labels, annotations (the seal aside), owner references, finalizers and spec, every
field the module decides. Two parts of a spec are left out: a set's replica count when its autoscaler owns it
(the set says so in a sealed annotation, REPLICAS_BY; the step bounds it apart), and the address the API
server allocates a Service (a dry run allocates another than the real write, so the seal of every new
Service broke on its first write). Any change by anyone else breaks the seal, and the controller restores
the child to what it computes. Fields the API server defaults are part of the view, as the dry run returned
them.

The informer computes each cached child's view digest from the object as it arrived, and who else wrote it
after the controller's last write (its managedFields, which the cache then drops), so that the cache may drop
what the controller does not read (users' annotations among them) and the seal is still checked against the
whole object. Field managers are names a client gives itself: they say whom to name in a warning, never
whether to restore (the seal decides that).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from isvc_api import MANAGER
from isvc_workload import QUOTA_RETRY_ANNOTATION, REPLICAS_BY, REPLICAS_BY_AUTOSCALER

__all__ = ["DIGEST", "EDITORS", "SEAL", "SEALED_KINDS", "WRITTEN_APART", "Sealer", "editors", "view_digest"]

SEAL = "ai.deckhouse.io/seal"
# Annotations the controller writes on a child apart from its manifest (a merge patch), which the seal leaves out
# and a restore keeps: the quota retry mark that makes the cluster try a refused pod again.
WRITTEN_APART = frozenset({QUOTA_RETRY_ANNOTATION})
DIGEST = "_isvcViewDigest"  # where the informer keeps a cached child's view digest, in its metadata
EDITORS = "_isvcEditors"  # where it keeps the field managers that wrote the child after the controller
# Every kind of child the module decides: an order's children are the module's, whatever kind.
SEALED_KINDS = frozenset(
    {
        "StatefulSet",
        "Service",
        "Ingress",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "ResourceClaimTemplate",
        "PodDisruptionBudget",
        "PodMonitor",
        "PodMetric",
    }
)  # not a ScaledObject: KEDA writes its own finalizer there
_ALLOCATED = ("clusterIP", "clusterIPs")  # what the API server allocates a Service: another on a dry run


def editors(obj: dict[str, Any]) -> list[str]:
    """The field managers other than the controller's that wrote the object (its status aside) at or after
    the controller's last write, from its managedFields (or as the informer kept them)."""
    meta = obj.get("metadata") or {}
    kept = meta.get(EDITORS)
    if isinstance(kept, list):
        return [str(m) for m in kept]
    entries = [
        e
        for e in meta.get("managedFields") or []
        if isinstance(e, dict) and e.get("subresource", "") != "status"
    ]
    ours = max((str(e.get("time") or "") for e in entries if e.get("manager") == MANAGER), default="")
    return sorted(
        {
            str(e.get("manager") or "(no name)")
            for e in entries
            if e.get("manager") != MANAGER and str(e.get("time") or "") >= ours
        }
    )


def view_digest(obj: dict[str, Any]) -> str:
    """The digest of what the seal covers of a child, from the object as the API server returns it."""
    meta = obj.get("metadata") or {}
    cached = meta.get(DIGEST)
    if isinstance(cached, str):
        return cached
    spec = dict(obj.get("spec") or {})
    annotations = meta.get("annotations") or {}
    if obj.get("kind") == "StatefulSet" and annotations.get(REPLICAS_BY) == REPLICAS_BY_AUTOSCALER:
        spec.pop("replicas", None)
    if obj.get("kind") == "Service":
        for field in _ALLOCATED:
            spec.pop(field, None)
    view = {
        "kind": obj.get("kind"),
        "labels": meta.get("labels") or {},
        "annotations": {k: v for k, v in annotations.items() if k != SEAL and k not in WRITTEN_APART},
        "ownerReferences": meta.get("ownerReferences") or [],
        "finalizers": meta.get("finalizers") or [],
        "spec": spec,
    }
    blob = json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


class Sealer:
    """Seals children with a key; `holds` tells whether a child still carries the seal of its own view."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a seal key has at least 16 bytes")
        self._key = key

    @classmethod
    def from_file(cls, path: Path | None) -> Sealer:
        """The key in `path` (the chart's Secret, mounted); None: a key of this process alone, so a restart
        finds every seal broken and writes each child again once."""
        return cls(path.read_bytes().strip() if path is not None else os.urandom(32))

    def seal(self, obj: dict[str, Any]) -> str:
        """The seal of a child's view."""
        return hmac.new(self._key, view_digest(obj).encode(), hashlib.sha256).hexdigest()[:32]

    def holds(self, obj: dict[str, Any]) -> bool:
        """Whether the child carries the seal of its own view: nobody but the controller changed it."""
        found = ((obj.get("metadata") or {}).get("annotations") or {}).get(SEAL)
        return isinstance(found, str) and hmac.compare_digest(found, self.seal(obj))
