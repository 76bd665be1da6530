"""Whether applying a set recreates the pods of the one the cluster holds, and whether a set is still rolling.

The StatefulSet controller recreates a set's pods (one at a time, `RollingUpdate`) whenever its pod template
changes; for the module's sets that is a change of the compiled runtime or the endpoint's token (the template's
annotations), of the priority class (which the claim template's labels carry too, so it gets a new name), of
an image, or of the download step (the model cache switched on or off, another Hub endpoint). Pods that keep
their devices can wait for their turn; a claim template asking for other devices is a move to a new plan, which
is never held back (the devices it was planned on wait for it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from isvc_workload._statefulset import RUNTIME_HASH_ANNOTATION, TOKEN_HASH_ANNOTATION

__all__ = ["recreates_pods", "set_rolling"]


def _identity(statefulset: dict[str, Any]) -> tuple[object, ...]:
    template = (statefulset.get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    pod = template.get("spec") or {}
    images = [c.get("image") for key in ("initContainers", "containers") for c in pod.get(key) or []]
    # the download step's command and environment (the model cache set or unset, another Hub endpoint)
    fetch = [(c.get("command"), c.get("env")) for c in pod.get("initContainers") or []]
    return (
        annotations.get(RUNTIME_HASH_ANNOTATION),
        annotations.get(TOKEN_HASH_ANNOTATION),
        pod.get("priorityClassName"),
        tuple(images),
        json.dumps(fetch, sort_keys=True),
    )


def _claims(statefulset: dict[str, Any]) -> list[tuple[Any, Any]]:
    pod = ((statefulset.get("spec") or {}).get("template") or {}).get("spec") or {}
    return sorted(
        (c.get("name"), c.get("resourceClaimTemplateName")) for c in pod.get("resourceClaims") or []
    )


def _devices(
    statefulset: dict[str, Any], templates: Mapping[str, Mapping[str, Any]]
) -> list[tuple[Any, str]]:
    """What each claim of the pods asks for: its template's device request (the name, when it is not known)."""
    asked = []
    for claim, name in _claims(statefulset):
        template = templates.get(str(name))
        request = ((template.get("spec") or {}).get("spec") if template else None) or name
        asked.append((claim, json.dumps(request, sort_keys=True)))
    return asked


def recreates_pods(
    held: dict[str, Any] | None, wanted: dict[str, Any], templates: Mapping[str, Mapping[str, Any]]
) -> bool:
    """Whether applying `wanted` over the set the cluster holds recreates its pods on the same devices;
    `templates` are the claim templates of both, by name (the held ones as the cluster holds them)."""
    if not held or _devices(held, templates) != _devices(wanted, templates):
        return False
    return _identity(held) != _identity(wanted) or _claims(held) != _claims(wanted)


def set_rolling(statefulset: dict[str, Any] | None) -> bool:
    """Whether the set's controller has not yet brought every replica to its current template (or not yet
    seen the latest one): `status.currentRevision` becomes `updateRevision` once all are updated and ready."""
    if not statefulset:
        return False
    meta, status = statefulset.get("metadata") or {}, statefulset.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return True
    return status.get("currentRevision") != status.get("updateRevision")
