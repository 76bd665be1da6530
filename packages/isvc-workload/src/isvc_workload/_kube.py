"""Reading pods, claims and workloads as the API returns them (plain dicts, camelCase)."""

from __future__ import annotations

from typing import Any

from isvc_api import condition_of, request_device_class

__all__ = [
    "awaits_claim",
    "claim_device_class",
    "is_allocated",
    "is_ready",
    "is_terminating",
    "name_of",
    "pod_claim_name",
    "serving",
    "unscheduled",
]


def name_of(obj: dict[str, Any]) -> str:
    """metadata.name, or '' when absent."""
    return str((obj.get("metadata") or {}).get("name") or "")


def is_terminating(pod: dict[str, Any]) -> bool:
    """Whether the pod is on its way out: it counts for nothing."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return bool(meta.get("deletionTimestamp")) or phase in {"Succeeded", "Failed"}


def is_ready(pod: dict[str, Any]) -> bool:
    """Whether the pod reports Ready=True."""
    cond = condition_of(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def serving(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods that report Ready and are not going: the endpoints the order's Service has ready."""
    return [p for p in pods if is_ready(p) and not is_terminating(p)]


def unscheduled(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a PodScheduled=False condition, or None once scheduled or not judged yet."""
    cond = condition_of(pod, "PodScheduled")
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("reason") or ""), str(cond.get("message") or "")


def pod_claim_name(pod: dict[str, Any], claim: str) -> str | None:
    """Name of the ResourceClaim generated for the pod's claim entry `claim`."""
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if entry.get("name") == claim and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    return None


def is_allocated(claim: dict[str, Any]) -> bool:
    """Whether the scheduler has allocated the claim."""
    return bool((claim.get("status") or {}).get("allocation"))


def claim_device_class(claims: list[dict[str, Any]]) -> str | None:
    """The device class the order's claims ask for, read from the first claim that says."""
    for claim in claims:
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            device_class = request_device_class(request)
            if device_class is not None:
                return device_class
    return None


def awaits_claim(pod: dict[str, Any]) -> bool:
    """Whether the pod waits for the cluster to create a claim from its template (the resourceclaim
    controller writes the claim's name into the pod's status once it made it)."""
    if is_terminating(pod):
        return False
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if (
            entry.get("resourceClaimTemplateName")
            and pod_claim_name(pod, str(entry.get("name") or "")) is None
        ):
            return True
    return False
