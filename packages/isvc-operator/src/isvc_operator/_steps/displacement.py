"""Whether an order's plan was displaced by an order of higher priority, read from the LaunchPlans alone.

The planner answers a preemption by placing the higher-priority order on devices a lower one holds; it
names the lower orders, and the controller passes them at once. Each of them finds out here, in its
own pass, that the module's plans on one of its devices ask for more than the device carries and that
it is among the lowest priority ones: it takes its own plan and workload down. No pass ever touches
another order's objects, and a restarted controller reaches the same answer from the same objects.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
from isvc_api import MANAGER, InferenceService, LaunchPlanSpec, Placement, PlacementMode, SharingMode
from pydantic import ValidationError

from isvc_operator._ports import Cluster, DeviceKey, Obj, OrderKey, plan_devices

__all__ = ["PLAN_ANNOTATION", "displaced", "units"]

PLAN_ANNOTATION = "ai.deckhouse.io/computed-by"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def units(placement: Placement) -> int:
    """Units of 100 that one device gives the placement: its share, or the whole device."""
    shares = placement.placement_mode == PlacementMode.SHARED and placement.sharing_mode == SharingMode.SHARES
    return (placement.share_percent or 100) if shares else 100


@attrs.frozen
class _Holder:
    priority: int
    planned_at: datetime
    key: OrderKey
    units: int
    devices: frozenset[DeviceKey]


def _holder(cluster: Cluster, obj: Obj) -> _Holder | None:
    """A plan of the module whose order still exists, with that order's priority (from its class)."""
    meta = obj["metadata"]
    if (meta.get("annotations") or {}).get(PLAN_ANNOTATION) != MANAGER:
        return None
    key = (meta.get("namespace") or "", meta["name"])
    raw = cluster.order(*key)
    owners = {ref.get("uid") for ref in meta.get("ownerReferences") or []}
    if raw is None or raw["metadata"].get("deletionTimestamp") or raw["metadata"].get("uid") not in owners:
        return None
    try:
        spec = LaunchPlanSpec.model_validate(obj.get("spec") or {})
        order = InferenceService.model_validate(raw)
    except ValidationError:
        return None
    class_name = order.spec.inference_service_class_name
    klass = cluster.klass(class_name) if class_name else None
    priority = cluster.priority_value(((klass or {}).get("spec") or {}).get("priorityClassName"))
    return _Holder(
        priority, spec.planned_at or _EPOCH, key, units(spec.placement), frozenset(plan_devices(obj))
    )


def displaced(cluster: Cluster, key: OrderKey, plan: Obj) -> bool:
    """Whether, on some device `plan` holds, the module's plans ask for more than 100 units and this
    one is left out when the device is filled by priority, then by the earlier plan."""
    mine = plan_devices(plan)
    if not mine:
        return False
    others = [
        p
        for p in cluster.launch_plans_on(mine)
        if (p["metadata"].get("namespace"), p["metadata"]["name"]) != key
    ]
    plans = [plan, *others]
    for device in mine:
        on_device = [p for p in plans if device in plan_devices(p)]
        if sum(units(_placement(p)) for p in on_device) <= 100:
            continue  # the usual case: nothing to look up
        holders = sorted(
            (h for p in on_device if (h := _holder(cluster, p)) is not None),
            key=lambda h: (-h.priority, h.planned_at, h.key),
        )
        used = 0
        for holder in holders:
            if used + holder.units <= 100:
                used += holder.units
            elif holder.key == key:
                return True
    return False


def _placement(plan: Obj) -> Placement:
    try:
        return LaunchPlanSpec.model_validate(plan.get("spec") or {}).placement
    except ValidationError:
        return Placement.model_validate({"placementMode": "WholeDevice"})
