"""The seal on an order's children: proof that a child is what the controller wrote, which a user cannot forge.

Why: a namespace user (Kubernetes' `edit` role) can edit the children of her order — the StatefulSet's
image, its service-account token, the Service's selector, the Ingress's paths, the set's replicas — and a hash
annotation of the controller's own does not show it. Field managers do not tell who wrote what either: a
client names its own field manager, so a user can write as `isvc-controller`.

When the controller writes a child it asks the API server first what the object would then be (a dry run of
the same write) and stamps the real write with a seal: an HMAC, under a key only the controller holds, of the
child's *view* — its kind, labels, annotations (the seal aside), owner references, finalizers and spec (a
StatefulSet's replica count aside: an autoscaler owns it; the step bounds it apart). Any change by anyone
else breaks the seal, and the controller restores the child to what it computes. Fields the API server
defaults are part of the view, as the dry run returned them.

The informer computes each cached child's view digest from the object as it arrived, so that the cache may
drop what the controller does not read (users' annotations among them) and the seal is still checked against
the whole object.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from isvc_workload import QUOTA_RETRY_ANNOTATION

__all__ = ["DIGEST", "SEAL", "SEALED_KINDS", "WRITTEN_APART", "Sealer", "view_digest"]

SEAL = "ai.deckhouse.io/seal"
# Annotations the controller writes on a child apart from its manifest (a merge patch), which the seal leaves out
# and a restore keeps: the quota retry mark that makes the cluster try a refused pod again.
WRITTEN_APART = frozenset({QUOTA_RETRY_ANNOTATION})
DIGEST = "_isvcViewDigest"  # where the informer keeps a cached child's view digest, in its metadata
SEALED_KINDS = frozenset({"StatefulSet", "Service", "Ingress", "HorizontalPodAutoscaler", "NetworkPolicy"})


def view_digest(obj: dict[str, Any]) -> str:
    """The digest of what the seal covers of a child, from the object as the API server returns it."""
    meta = obj.get("metadata") or {}
    cached = meta.get(DIGEST)
    if isinstance(cached, str):
        return cached
    spec = dict(obj.get("spec") or {})
    if obj.get("kind") == "StatefulSet":
        spec.pop("replicas", None)
    view = {
        "kind": obj.get("kind"),
        "labels": meta.get("labels") or {},
        "annotations": {
            k: v for k, v in (meta.get("annotations") or {}).items() if k != SEAL and k not in WRITTEN_APART
        },
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
