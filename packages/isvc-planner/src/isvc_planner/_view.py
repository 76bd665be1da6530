"""The ledger as a read model: every published device with its free and held units and its holders.

`GET /v1/capacity` answers it from the running planner's ledger; `kubectl isvc capacity` computes it with
this same function over an `Inventory` built from what the caller reads, so both give the same figures.
"""

from __future__ import annotations

from isvc_planner_client import CapacityView, DeviceHolder, DeviceRoom, OrderRef

from isvc_planner._inventory import UNITS, Device, Inventory

__all__ = ["capacity_view"]

_KIND_ORDER = {"claim": 0, "plan": 1, "reservation": 2}


def _card(device: Device) -> str:
    """The physical card a device is part of: a partition's parentUUID, else the device's uuid or name."""
    attributes = device.raw.get("attributes") or {}
    for name in ("parentUUID", f"{device.driver}/parentUUID"):
        value = attributes.get(name)
        if isinstance(value, dict) and value:
            return str(next(iter(value.values())))
    return device.uuid or device.name


def _room(inv: Inventory, device: Device) -> DeviceRoom:
    key = device.key
    holders = sorted(inv.holdings_on(key), key=lambda h: (_KIND_ORDER.get(h.kind, 3), h.source))
    free = inv.room(key)
    return DeviceRoom(
        driver=device.driver,
        pool=device.pool,
        device=device.name,
        node=device.node,
        card=_card(device),
        product=device.product,
        memory_bytes=device.memory,
        shareable=device.shareable,
        device_classes=sorted(device.classes),
        free_units=free,
        held_units=UNITS - free,
        blocked=inv.blocked(key),
        out_of_service=inv.out_of_service(key),
        holders=[
            DeviceHolder(
                order=OrderRef(namespace=h.order[0], name=h.order[1]) if h.order is not None else None,
                kind=h.kind,
                units=None if h.whole else h.units,
                priority=inv.priority_of_holding(h),
            )
            for h in holders
        ],
    )


def capacity_view(inv: Inventory) -> CapacityView:
    """Every published device of the ledger, sorted by node, pool, device and driver (read under its lock)."""
    with inv.lock:
        inv.expire()
        return CapacityView(
            devices=[_room(inv, d) for d in sorted(inv.devices.values(), key=Device.sort_key)]
        )
