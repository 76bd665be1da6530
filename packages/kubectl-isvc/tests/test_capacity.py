"""`capacity` over the test bed's fleet as its fake DRA driver publishes it, with recorded claims, plans and
orders: the planner's own ledger read by its own view (free and held units per device, holders), and who
waits for room."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from isvc_ledger import Books, capacity_view
from isvc_planner_client import DeviceRoom
from kubectl_isvc import Exit, capacity, compute
from kubectl_isvc._capacity import render_capacity
from kubectl_isvc._render import Style
from kubectl_isvc._why import age

NOW = datetime(2026, 5, 1, 10, 5, tzinfo=UTC)
ORDER = "ai.deckhouse.io/inference-service"
GPU = "gpu.nvidia.com"


def _claim(ns: str, order: str, pool: str, device: str, shares: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": GPU, "pool": pool, "device": device}
    if shares is not None:  # a shared allocation, as kube-scheduler records it
        result |= {"shareID": f"{order}-share", "consumedCapacity": {"shares": shares}}
    return {
        "metadata": {
            "name": f"{order}-gpu",
            "namespace": ns,
            "uid": f"uid-{order}",
            "labels": {ORDER: order},
        },
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def _order(ns: str, name: str, reason: str, klass: str | None = None, since: str = "") -> dict[str, Any]:
    cond = {
        "type": "Planned",
        "status": "False",
        "reason": reason,
        "message": f"{reason} message.",
        "lastTransitionTime": since or "2026-05-01T10:00:00Z",
    }
    status: dict[str, Any] = {"phase": "Pending", "reason": reason, "conditions": [cond]}
    spec = {"inferenceServiceClassName": klass} if klass else {}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec, "status": status}


@pytest.fixture
def objects(fleet: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "resourceslices": [o for o in fleet if o["kind"] == "ResourceSlice"],
        "deviceclasses": [o for o in fleet if o["kind"] == "DeviceClass"],
        "resourceclaims": [
            _claim("team-a", "half-1", "gpu-h100-0", "gpu-0", "30"),
            _claim("team-b", "half-2", "gpu-h100-0", "gpu-0", "40"),
            _claim("team-b", "small", "part-h100-0", "gpu-0-mig-3g40gb-9-0"),
            _claim("team-a", "whole", "gpu-l4-0", "gpu-1"),
        ],
        "launchplans": [
            {
                "metadata": {"name": "next", "namespace": "team-a"},
                "spec": {
                    "placement": {
                        "deviceClassName": GPU,
                        "driver": GPU,
                        "pool": "gpu-h100-0",
                        "devices": ["gpu-1"],
                        "placementMode": "Shared",
                        "sharingMode": "Shares",
                        "sharePercent": 50,
                        "capacityRequests": {"shares": "50"},
                    }
                },
            },
        ],
        "inferenceservices": [
            _order("team-a", "nocap", "NoCapacity", since="2026-05-01T10:01:00Z"),
            _order("team-b", "urgent", "NoAcceleratorWithEnoughMemory", "urgent-llm", "2026-05-01T10:03:00Z"),
            _order("team-a", "typo", "ClassNotFound"),
            _order("team-b", "half-2", "Serving", "urgent-llm"),
        ],
        "inferenceserviceclasses": [
            {"metadata": {"name": "urgent-llm"}, "spec": {"priorityClassName": "high"}}
        ],
        "priorityclasses": [{"metadata": {"name": "high"}, "value": 1000}],
    }


def _device(devices: list[DeviceRoom], pool: str, name: str) -> DeviceRoom:
    return next(d for d in devices if d.pool == pool and d.device == name)


def test_the_figures_are_the_planners_own_ledger_read_by_its_own_view(objects: dict[str, Any]) -> None:
    planner = Books.from_objects(
        objects["deviceclasses"],
        objects["resourceslices"],
        objects["resourceclaims"],
        objects["priorityclasses"],
        objects["inferenceservices"],
        objects["inferenceserviceclasses"],
        plans=objects["launchplans"],
    )
    assert compute(objects).devices == capacity_view(planner.view).devices


def test_shares_held_on_a_shared_h100_name_their_orders_and_priorities(objects: dict[str, Any]) -> None:
    h100 = _device(compute(objects).devices, "gpu-h100-0", "gpu-0")
    assert (h100.product, h100.device_classes, h100.shareable) == ("NVIDIA H100 80GB HBM3", [GPU], True)
    assert (h100.held_units, h100.free_units) == (70, 30)
    # priority is the order's class's PriorityClass, never a label a namespace user writes
    assert [(h.order and h.order.name, h.kind, h.units, h.priority) for h in h100.holders] == [
        ("half-1", "claim", 30, 0),
        ("half-2", "claim", 40, 1000),
    ]


def test_a_plan_not_yet_allocated_holds_its_room(objects: dict[str, Any]) -> None:
    planned = _device(compute(objects).devices, "gpu-h100-0", "gpu-1")
    assert [(h.order and h.order.name, h.kind, h.units) for h in planned.holders] == [("next", "plan", 50)]
    assert (planned.held_units, planned.free_units) == (50, 50)


def test_a_partition_taken_leaves_its_whole_card_blocked_and_names_the_card(objects: dict[str, Any]) -> None:
    devices = compute(objects).devices
    mig = _device(devices, "part-h100-0", "gpu-0-mig-3g40gb-9-0")
    whole = _device(devices, "part-h100-0", "gpu-0")
    assert (mig.held_units, mig.device_classes, mig.card) == (100, ["mig.nvidia.com"], whole.card)
    assert (whole.blocked, whole.free_units, whole.holders) == (True, 0, [])
    assert _device(devices, "gpu-l4-0", "gpu-1").holders[0].units is None  # an unshared allocation: whole


def test_orders_waiting_for_room_come_highest_priority_first(objects: dict[str, Any]) -> None:
    waiting = compute(objects).waiting
    assert [(w.namespace, w.name, w.priority, w.reason) for w in waiting] == [
        ("team-b", "urgent", 1000, "NoAcceleratorWithEnoughMemory"),
        ("team-a", "nocap", 0, "NoCapacity"),
    ]
    assert (
        waiting[0].message == "NoAcceleratorWithEnoughMemory message." and waiting[0].condition == "Planned"
    )


def test_the_text_is_a_table_per_device_class(objects: dict[str, Any]) -> None:
    text = render_capacity(compute(objects), Style(False), 200, NOW)
    assert "mig.nvidia.com: " in text and "gpu.nvidia.com: " in text
    h100 = next(line for line in text.splitlines() if line.split()[:2] == ["gpu-h100-0", "gpu-0"])
    assert h100.split()[-9:] == [
        "79.6",  # 81559Mi, NVML's total of an H100 80GB HBM3
        "70%",
        "30%",
        "team-a/half-1",
        "p0",
        "30%,",
        "team-b/half-2",
        "p1000",
        "40%",
    ]
    assert "team-a/next p0 50% (plan)" in text
    assert "blocked by its card's partitions" in text
    assert "team-b/urgent  1000      NoAcceleratorWithEnoughMemory" in text
    assert age("2026-05-01T10:03:00Z", NOW) == "2m"


def test_capacity_as_a_namespace_user_reads_nothing_and_says_it_is_for_administrators(recorded: Any) -> None:
    paths = (
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/resource.k8s.io/v1/resourceclaims",
        "/apis/ai.deckhouse.io/v1alpha1/launchplans",
        "/apis/ai.deckhouse.io/v1alpha1/inferenceservices",
        "/apis/ai.deckhouse.io/v1alpha1/inferenceserviceclasses",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/api/v1/nodes",
    )
    c = capacity(recorded({}, denied={p: f'{p} is forbidden: User "alice" cannot list' for p in paths}))
    assert c.exit_code == Exit.UNKNOWN and len(c.unread) == len(paths)
    assert "it is a command for administrators" in c.unread[0].why
    assert "Could not read" in render_capacity(c, Style(False), 110, NOW)


def test_capacity_with_everything_read_exits_0(recorded: Any, objects: dict[str, Any]) -> None:
    reader = recorded(
        {
            "/apis/resource.k8s.io/v1/resourceslices": objects["resourceslices"],
            "/apis/resource.k8s.io/v1/deviceclasses": objects["deviceclasses"],
        }
    )
    c = capacity(reader)
    assert (c.exit_code, c.unread) == (Exit.SERVING, [])
    assert len(c.devices) == sum(len(s["spec"].get("devices", [])) for s in objects["resourceslices"])
    assert all(d.free_units == 100 for d in c.devices if not d.blocked)
