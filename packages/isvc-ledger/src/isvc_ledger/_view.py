"""The ledger as a read model: every published device with its free and held units and its holders.

`GET /v1/capacity` answers it from the running planner's books; `kubectl isvc capacity` computes it with
this same function over books built from what the caller reads, so both give the same figures.
"""

from __future__ import annotations

from isvc_planner_client import CapacityView, DeviceHolder, DeviceRoom, OrderRef

from isvc_ledger._books import View
from isvc_ledger._device import UNITS, Device

__all__ = ["capacity_view"]

_KIND_ORDER = {"claim": 0, "plan": 1, "reservation": 2}


def _room(view: View, device: Device) -> DeviceRoom:
    key = device.key
    ledger = view.ledger
    holders = sorted(ledger.holdings_on(key), key=lambda h: (_KIND_ORDER.get(h.kind, 3), h.source))
    free = ledger.room(key)
    return DeviceRoom(
        driver=device.driver,
        pool=device.pool,
        device=device.name,
        node=device.node,
        card=device.card,
        product=device.product,
        memory_bytes=device.memory,
        shareable=device.shareable,
        device_classes=sorted(device.classes),
        free_units=free,
        held_units=UNITS - free,
        blocked=ledger.blocked(key),
        out_of_service=view.fleet.out_of_service(key),
        holders=[
            DeviceHolder(
                order=OrderRef(namespace=h.order[0], name=h.order[1]) if h.order is not None else None,
                kind=h.kind,
                units=None if h.whole else h.units,
                priority=view.priorities.of_holding(h),
            )
            for h in holders
        ],
    )


def capacity_view(view: View) -> CapacityView:
    """Every published device of the books, sorted by node, pool, device and driver."""
    return CapacityView(
        devices=[_room(view, d) for d in sorted(view.fleet.devices.values(), key=Device.sort_key)]
    )
