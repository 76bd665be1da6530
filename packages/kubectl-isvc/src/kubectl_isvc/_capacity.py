"""`kubectl isvc capacity`: every published device as the planner's ledger counts it (free and held units,
who holds them) and the orders waiting for room.

The figures are the planner's own: the objects the caller reads build `isvc_ledger.Books`, the books the
planner keeps, and `isvc_ledger.capacity_view` (the function behind the planner's `GET /v1/capacity`) reads
them, so the device classes come from the same CEL evaluator and the room from the same arithmetic as the
planner's answers. What only the running planner knows (reservations of plans not stored yet) is not shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from isvc_api import GIB, WAITING_FOR_ROOM, conditions_of
from isvc_ledger import Books, capacity_view
from isvc_planner_client import DeviceRoom
from pydantic import Field

from kubectl_isvc._common import Exit, Out, Unread, unread
from kubectl_isvc._errors import ReadFailed
from kubectl_isvc._read import (
    Obj,
    Reader,
    claims_path,
    classes_path,
    device_classes_path,
    nodes_path,
    orders_path,
    plans_path,
    priority_classes_path,
    slices_path,
)
from kubectl_isvc._render import Style, gib, render_unread, table
from kubectl_isvc._why import age

__all__ = ["ADMIN_HINT", "Capacity", "Waiting", "capacity", "compute", "render_capacity"]

ADMIN_HINT = (
    "capacity reads cluster-wide objects (ResourceSlices, claims and orders of every namespace): "
    "it is a command for administrators"
)


class Waiting(Out):
    """An order waiting for room, with its reason."""

    namespace: str
    name: str
    priority: int | None
    priority_class_name: str | None
    condition: str | None
    reason: str
    message: str
    since: str | None


class Capacity(Out):
    """What capacity found, and what it could not read."""

    exit_code: int
    devices: list[DeviceRoom]
    waiting: list[Waiting]
    unread: list[Unread] = Field(default_factory=list)


def _waiting(orders: list[Obj], books: Books) -> list[Waiting]:
    """Orders whose reason says they wait for room, the highest priority and the longest waiting first."""
    out = []
    for order in orders:
        meta, status = order.get("metadata") or {}, order.get("status") or {}
        reason = status.get("reason")
        if reason not in WAITING_FOR_ROOM:
            continue
        cond: dict[str, Any] = next((c for c in conditions_of(order) if c.get("reason") == reason), {})
        key = (str(meta.get("namespace")), str(meta.get("name")))
        out.append(
            Waiting(
                namespace=key[0],
                name=key[1],
                priority=books.priorities.of_order(key),
                priority_class_name=(status.get("constraints") or {}).get("priorityClassName"),
                condition=cond.get("type"),
                reason=str(reason),
                message=str(cond.get("message", "")),
                since=cond.get("lastTransitionTime"),
            )
        )
    return sorted(out, key=lambda w: (-(w.priority or 0), w.since or "", w.namespace, w.name))


def compute(objects: dict[str, list[Obj]], unread: list[Unread] | None = None) -> Capacity:
    """The capacity picture from the objects read, by kind (pure: no cluster)."""
    books = Books.from_objects(
        device_classes=objects.get("deviceclasses", []),
        slices=objects.get("resourceslices", []),
        claims=objects.get("resourceclaims", []),
        priority_classes=objects.get("priorityclasses", []),
        orders=objects.get("inferenceservices", []),
        service_classes=objects.get("inferenceserviceclasses", []),
        nodes=objects.get("nodes", []),
        plans=objects.get("launchplans", []),
    )
    missing = list(unread or [])
    return Capacity(
        exit_code=Exit.UNKNOWN if missing else Exit.SERVING,
        devices=capacity_view(books.view).devices,
        waiting=_waiting(objects.get("inferenceservices", []), books),
        unread=missing,
    )


_READS = {
    "resourceslices": (slices_path(), "ResourceSlices"),
    "deviceclasses": (device_classes_path(), "DeviceClasses"),
    "resourceclaims": (claims_path(), "ResourceClaims in all namespaces"),
    "launchplans": (plans_path(), "LaunchPlans in all namespaces"),
    "inferenceservices": (orders_path(), "InferenceServices in all namespaces"),
    "inferenceserviceclasses": (classes_path(), "InferenceServiceClasses"),
    "priorityclasses": (priority_classes_path(), "PriorityClasses"),
    "nodes": (nodes_path(), "Nodes"),
}


def capacity(reader: Reader) -> Capacity:
    """Read the cluster-wide objects the planner watches, as the caller (an administrator's reads), and
    compute the picture; what could not be read is named and makes the exit code 2."""
    objects: dict[str, list[Obj]] = {}
    failed: list[Unread] = []
    for kind, (path, what) in _READS.items():
        try:
            objects[kind] = reader.items(path, what)
        except ReadFailed as e:
            failed.append(unread(e, ADMIN_HINT))
    return compute(objects, failed)


# ---------------------------------------------------------------- text

_HEADERS = ["NODE", "DEVICE", "PRODUCT", "GiB", "HELD", "FREE", "HELD BY (namespace/order priority units)"]


def _holders(device: DeviceRoom) -> str:
    parts = []
    for h in device.holders:
        who = f"{h.order.namespace}/{h.order.name}" if h.order is not None else "(not an order)"
        units = "whole" if h.units is None else f"{h.units}%"
        kind = "" if h.kind == "claim" else f" ({h.kind})"
        parts.append(f"{who} p{h.priority} {units}{kind}")
    return ", ".join(parts) or ("blocked by its card's partitions" if device.blocked else "-")


def _row(device: DeviceRoom) -> tuple[str, ...]:
    name = device.device + (f" [{device.out_of_service}]" if device.out_of_service else "")
    memory = device.memory_bytes / GIB if device.memory_bytes is not None else None
    return (
        device.node or "-",
        name,
        device.product or "-",
        gib(memory),
        f"{device.held_units}%",
        f"{device.free_units}%",
        _holders(device),
    )


def _devices(c: Capacity, style: Style, width: int) -> list[str]:
    """One table per device class (a device shows under each class that selects it), then the rest."""
    lines: list[str] = []
    groups = {name: [d for d in c.devices if name in d.device_classes] for name in _class_names(c)}
    groups["devices no DeviceClass selects"] = [d for d in c.devices if not d.device_classes]
    for name, devices in groups.items():
        if not devices:
            continue
        cards = len({(d.driver, d.pool, d.card) for d in devices})
        untouched = sum(1 for d in devices if not d.holders and not d.blocked)
        free = sum(d.free_units for d in devices) / 100
        lines.append(
            style.bold(
                f"{name}: {len(devices)} device(s) on {cards} card(s), {free:g} device(s) of room free, "
                f"{untouched} untouched"
            )
        )
        lines += table(_HEADERS, [_row(d) for d in devices], width, style, indent="  ")
        lines.append("")
    return lines


def _class_names(c: Capacity) -> list[str]:
    return sorted({name for d in c.devices for name in d.device_classes})


def render_capacity(c: Capacity, style: Style, width: int, now: datetime) -> str:
    """The administrator's picture of `capacity`: devices by class, then the orders waiting for room."""
    lines = _devices(c, style, width)
    if not c.devices and not c.unread:
        lines += ["No ResourceSlice publishes a device.", ""]
    lines.append(style.bold(f"Orders waiting for room: {len(c.waiting)}"))
    if c.waiting:
        rows = [
            (
                f"{w.namespace}/{w.name}",
                "-" if w.priority is None else str(w.priority),
                w.reason,
                age(w.since, now),
                w.message,
            )
            for w in c.waiting
        ]
        lines += table(["ORDER", "PRIORITY", "REASON", "AGE", "MESSAGE"], rows, width, style, indent="  ")
    lines.append("")
    render_unread(lines, c.unread, {"unread": "Could not read"}, style, width)
    return "\n".join(lines).rstrip() + "\n"
