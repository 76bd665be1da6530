"""ResourceClaimTemplate `{order}`: the device request every replica's claim is made from."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from isvc_api import (
    LABEL_PRIORITY,
    Placement,
    PlacementMode,
    SharingMode,
    claim_capacity_requests,
    share_in_range,
)

from isvc_workload._common import WorkloadInputs, child_labels, child_metadata
from isvc_workload._errors import PlanNotExpressible

__all__ = [
    "ALIKE",
    "CLAIM_NAME",
    "PLANNED",
    "claim_template_name",
    "resource_claim_template",
    "uuid_selector",
]

CLAIM_NAME = "gpu"  # the request name, the pod's claim name and the container's claim reference
PLANNED = "planned"  # the first choice: the devices the planner placed the order on
ALIKE = "alike"  # the second: any device of their shape on the class (a further replica)


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def uuid_selector(driver: str, uuids: list[str]) -> str:
    """A CEL expression admitting exactly the devices of `driver` with the given uuid attributes.

    The driver guard comes first: a claim selector meets devices of every driver on the node, and
    one without the attribute would abort scheduling with a CEL runtime error.
    """
    attribute = f"device.attributes[{_cel_string(driver)}].uuid"
    if len(uuids) == 1:
        test = f"{attribute} == {_cel_string(uuids[0])}"
    else:
        test = f"{attribute} in [{', '.join(_cel_string(u) for u in uuids)}]"
    return f"device.driver == {_cel_string(driver)} && {test}"


def _claim_spec(inputs: WorkloadInputs) -> dict[str, Any]:
    placement = inputs.placement
    if not placement.device_class_name:
        raise PlanNotExpressible(
            "placement.deviceClassName", placement.device_class_name, "a device claim needs a device class"
        )
    if placement.device_count < 1:
        raise PlanNotExpressible("placement.deviceCount", placement.device_count, "at least one device")
    exactly: dict[str, Any] = {
        "deviceClassName": placement.device_class_name,
        "allocationMode": "ExactCount",
        "count": placement.device_count,
    }
    if placement.placement_mode == PlacementMode.SHARED and placement.sharing_mode != SharingMode.PARTITION:
        share = placement.share_percent
        if not share_in_range(share):
            raise PlanNotExpressible("placement.sharePercent", share, "a shared placement takes 1..100")
    requests = claim_capacity_requests(placement)
    if requests:
        exactly["capacity"] = {"requests": requests}
    labels = child_labels(inputs.name) | {LABEL_PRIORITY: str(inputs.priority)}
    return {"metadata": {"labels": labels}, "spec": {"devices": {"requests": [_request(placement, exactly)]}}}


def _request(placement: Placement, exactly: dict[str, Any]) -> dict[str, Any]:
    """The claim's one request: the planned devices first, else any of their shape, as a prioritized list
    (Kubernetes 1.36 DRAPrioritizedList, beta and on by default: `firstAvailable`, tried in order for each
    claim); a plan made before selectors were planned pins its devices by uuid, as it did."""
    chosen = placement.device_selectors
    if chosen is not None:
        return {
            "name": CLAIM_NAME,
            "firstAvailable": [
                {"name": name, **exactly, "selectors": [{"cel": {"expression": expression}}]}
                for name, expression in ((PLANNED, chosen.pinned), (ALIKE, chosen.alike))
            ],
        }
    if placement.device_uuids:
        if not placement.driver:
            raise PlanNotExpressible(
                "placement.driver", placement.driver, "pinning devices by uuid needs the driver's domain"
            )
        if len(placement.device_uuids) < placement.device_count:
            raise PlanNotExpressible(
                "placement.deviceUuids",
                placement.device_uuids,
                f"fewer devices pinned than placement.deviceCount={placement.device_count}",
            )
        exactly["selectors"] = [
            {"cel": {"expression": uuid_selector(placement.driver, placement.device_uuids)}}
        ]
    return {"name": CLAIM_NAME, "exactly": exactly}


def claim_template_name(inputs: WorkloadInputs) -> str:
    """`{order}-{hash of the claim spec}`: the API server never changes a template's spec, so a plan that
    needs another claim gets a new template (and the workload rolls onto it) instead of an edit it refuses."""
    blob = json.dumps(_claim_spec(inputs), sort_keys=True).encode()
    return f"{inputs.name}-{hashlib.sha256(blob).hexdigest()[:8]}"


def resource_claim_template(inputs: WorkloadInputs) -> dict[str, Any]:
    """The claim template of the order's workload: the planned devices first, else any of their shape."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": child_metadata(inputs.order, claim_template_name(inputs)),
        "spec": _claim_spec(inputs),
    }
