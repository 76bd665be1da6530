"""What the planner answers: a candidate as the wire's placement, the claim shapes an order could take, and
the judgement of a stored plan."""

from __future__ import annotations

from dataclasses import dataclass

from isvc_api import (
    GIB,
    DeviceSelectors,
    Placement,
    PlacementMode,
    QuantityError,
    Reason,
    Refusal,
    SharingMode,
    gib,
    parse_quantity,
    share_in_range,
)
from isvc_ledger import UNITS, Device, View, quantity_text
from isvc_planner_client import attribute_is, cel_literal, one_of

from isvc_planner._estimate import MemoryNeed
from isvc_planner._order import Candidate

__all__ = ["ClaimShape", "judge_plan", "placement_of", "profile_selector", "refuse"]


@dataclass(frozen=True)
class ClaimShape:
    """One kind of device claim the order could be given: a class, devices of one profile, units.

    Built for asking the scheduler directly whether a refusal is true: where the planner said no,
    a claim of each shape should find no room either.
    """

    device_class_name: str
    selectors: tuple[str, ...]
    count: int
    shares: int | None  # None: whole devices

    def claim_spec(self) -> dict[str, object]:
        """The resource.k8s.io/v1 ResourceClaimSpec of one request named `gpu`."""
        exactly: dict[str, object] = {
            "deviceClassName": self.device_class_name,
            "allocationMode": "ExactCount",
            "count": self.count,
            "selectors": [{"cel": {"expression": e}} for e in self.selectors],
        }
        if self.shares is not None:
            exactly["capacity"] = {"requests": {"shares": str(self.shares)}}
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def profile_selector(device: Device) -> str:
    """CEL admitting the devices of `device`'s shape on its driver: whether claims share it, its memory and
    shares, its type, product and MIG profile (each attribute guarded: a device without it is not admitted,
    never an error). A further replica's claim takes any of them (issue 40)."""
    d = device.driver
    caps = f"device.capacity[{cel_literal(d)}]"
    parts = [
        f"device.driver == {cel_literal(d)}",
        f"device.allowMultipleAllocations == {'true' if device.multi else 'false'}",
    ]
    for name in ("memory", "shares"):
        capacity = device.capacities.get(name)
        if capacity is None:
            parts.append(f"!({cel_literal(name)} in {caps})")
        else:
            amount = quantity_text(capacity.value)
            parts.append(
                f"{cel_literal(name)} in {caps} && {caps}.{name}.compareTo(quantity('{amount}')) == 0"
            )
    for name, value in (("type", device.type), ("productName", device.product), ("profile", device.profile)):
        if value is not None:
            parts.append(attribute_is(d, name, value))
    return " && ".join(parts)


def selectors_of(devices: tuple[Device, ...], policy: str | None = None) -> DeviceSelectors:
    """The claim's choices for devices planned: exactly those (by what names each alone), else any of their
    shape the class's accelerator policy admits (`policy`, its selector); devices nothing names are chosen by
    shape only."""
    first = devices[0]
    alike = profile_selector(first) + (f" && ({policy})" if policy else "")
    pins = [d.pin for d in devices]
    if any(p is None for p in pins):
        return DeviceSelectors(pinned=alike, alike=alike)
    return DeviceSelectors(pinned=one_of(first.driver, [p for p in pins if p is not None]), alike=alike)


def placement_of(found: Candidate, need: MemoryNeed, policy: str | None = None) -> Placement:
    """The placement a candidate is, as the wire carries it (`policy`: the class's accelerator selector,
    which a further replica's device must pass too)."""
    first = found.devices[0]
    memory = first.memory or 0
    uuids = [d.uuid for d in found.devices]
    if found.mode == PlacementMode.SHARED:
        per_device = found.units * memory // UNITS
    else:
        per_device = need.per_device(len(found.devices))
    return Placement(
        device_class_name=found.device_class,
        driver=first.driver,
        pool=first.pool,
        devices=[d.name for d in found.devices],
        device_uuids=uuids if all(uuids) else None,
        device_selectors=selectors_of(found.devices, policy),
        node_name=first.node,
        accelerator_product_name=first.product,
        accelerator_memory_gi_b=gib(memory),
        accelerator_compute_capability=_major_minor(first.compute_capability),
        placement_mode=found.mode,
        sharing_mode=found.sharing,
        share_percent=found.units if found.sharing == SharingMode.SHARES else None,
        device_count=len(found.devices),
        memory_gi_b=gib(per_device),
        capacity_requests=_requests(found),
    )


def _requests(found: Candidate) -> dict[str, str] | None:
    """What each device's claim asks of its consumable capacity: a share's part, or, on a device allowing
    several allocations taken whole, all of it (so no other claim fits beside it: issue 41)."""
    first = found.devices[0]
    shared = found.sharing == SharingMode.SHARES
    asked = first.share_request(found.units) if shared else first.whole_request() or {}
    return {n: quantity_text(v) for n, v in sorted(asked.items())} or None


def refuse(reason: Reason, message: str) -> Refusal:
    """A refusal of one reason."""
    return Refusal(reason=reason, message=message)


def _no(field_name: str, value: object, why: str) -> Refusal:
    # The fact only: whose fix it is (delete a hand-written plan, or report the module's) the caller says.
    return refuse(
        Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
        f"the launch plan is not a placement: {field_name}={value!r} {why}",
    )


def judge_plan(placement: Placement, view: View) -> Refusal | None:
    """LaunchPlanNotAPlacement when a stored placement is not one; None when it is."""
    for capacity, amount in (placement.capacity_requests or {}).items():
        try:
            parse_quantity(amount)
        except QuantityError:
            return _no(f"capacityRequests.{capacity}", amount, "is not a quantity")
    share = placement.share_percent
    if share is not None and not share_in_range(share):
        return _no("sharePercent", share, "is outside 1..100")
    if placement.placement_mode == PlacementMode.SHARED and share is None:
        return _no("sharePercent", None, "is missing for placementMode Shared")
    if placement.device_count < 1:
        return _no("deviceCount", placement.device_count, "is below 1")
    if placement.device_class_name is None:
        return _no("deviceClassName", None, "is missing: an accelerator asked for with no device class")
    if placement.device_class_name not in view.classes.selectors:
        return _no("deviceClassName", placement.device_class_name, "names a device class that does not exist")
    largest = max((d.memory or 0 for d in view.fleet.class_devices(placement.device_class_name)), default=0)
    for name, value in (
        ("memoryGiB", placement.memory_gi_b),
        ("acceleratorMemoryGiB", placement.accelerator_memory_gi_b),
    ):
        if value is not None and (value <= 0 or value * GIB > largest + GIB // 100):
            return _no(
                name,
                value,
                f"is memory the devices of class {placement.device_class_name} do not "
                f"carry (largest {gib(largest)} GiB)",
            )
    return None


def _major_minor(version: str | None) -> str | None:
    """A version attribute such as 8.9.0 as CUDA names compute capabilities: 8.9."""
    return ".".join(version.split(".")[:2]) if version else None
