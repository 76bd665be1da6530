"""`capacity` over the test bed's fleet as its fake DRA driver publishes it, with recorded claims, plans and
orders: shares and memory held per card and by whom, the room left, and who waits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubectl_isvc import Card, Exit, capacity, compute, parse_quantity
from kubectl_isvc._render import Style, render_capacity
from kubectl_isvc._why import age

NOW = datetime(2026, 5, 1, 10, 5, tzinfo=UTC)
ORDER, PRIORITY = "ai.deckhouse.io/inference-service", "ai.deckhouse.io/priority"


def _claim(
    ns: str,
    order: str,
    priority: str | None,
    device_class: str,
    pool: str,
    device: str,
    consumed: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {ORDER: order} | ({PRIORITY: priority} if priority is not None else {})
    result: dict[str, Any] = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}
    if consumed:
        result["consumedCapacity"] = consumed
    return {
        "metadata": {"name": f"{order}-gpu", "namespace": ns, "labels": labels},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def _order(
    ns: str, name: str, reason: str, priority_class: str | None = None, since: str = ""
) -> dict[str, Any]:
    cond = {
        "type": "Planned",
        "status": "False",
        "reason": reason,
        "message": f"{reason} message.",
        "lastTransitionTime": since or "2026-05-01T10:00:00Z",
    }
    status: dict[str, Any] = {"phase": "Pending", "reason": reason, "conditions": [cond]}
    if priority_class:
        status["constraints"] = {"minReplicas": 1, "maxReplicas": 1, "priorityClassName": priority_class}
    return {"metadata": {"name": name, "namespace": ns}, "status": status}


@pytest.fixture
def objects(fleet: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "slices": [o for o in fleet if o["kind"] == "ResourceSlice"],
        "device_classes": [o for o in fleet if o["kind"] == "DeviceClass"],
        "claims": [
            _claim("team-a", "half-1", "0", "gpu.nvidia.com", "gpu-h100-0", "gpu-0", {"shares": "30"}),
            _claim(
                "team-b",
                "half-2",
                "1000",
                "gpu.nvidia.com",
                "gpu-h100-0",
                "gpu-0",
                {"shares": "40", "memory": "30Gi"},
            ),
            _claim("team-b", "small", None, "mig.nvidia.com", "gpu-a100-0", "gpu-0-mig-3g20gb-0"),
            _claim("team-a", "static", "0", "mig.nvidia.com", "gpu-a100-0", "gpu-2-mig-3g20gb-1"),
            _claim("team-a", "whole", "0", "gpu.nvidia.com", "gpu-l4-0", "gpu-1", {"shares": "100"}),
        ],
        "plans": [
            {
                "metadata": {
                    "name": "next",
                    "namespace": "team-a",
                    "ownerReferences": [{"kind": "InferenceService", "name": "next"}],
                },
                "spec": {
                    "placement": {
                        "deviceClassName": "gpu.nvidia.com",
                        "driver": "gpu.nvidia.com",
                        "pool": "gpu-h100-0",
                        "devices": ["gpu-1"],
                        "placementMode": "Shared",
                        "sharingMode": "Shares",
                        "sharePercent": 50,
                    }
                },
            },
            # a plan whose claim is allocated already is not counted twice
            {
                "metadata": {"name": "half-1", "namespace": "team-a"},
                "spec": {
                    "placement": {
                        "pool": "gpu-h100-0",
                        "devices": ["gpu-0"],
                        "placementMode": "Shared",
                        "sharePercent": 30,
                    }
                },
            },
        ],
        "orders": [
            _order("team-a", "nocap", "NoCapacity", since="2026-05-01T10:01:00Z"),
            _order("team-b", "urgent", "NoAcceleratorWithEnoughMemory", "high", "2026-05-01T10:03:00Z"),
            _order("team-a", "typo", "ClassNotFound"),
            _order("team-b", "small", "Serving", "low"),
        ],
        "priority_classes": [
            {"metadata": {"name": "high"}, "value": 1000},
            {"metadata": {"name": "low"}, "value": 10},
        ],
    }


def _card(cards: list[Card], pool: str, card: str) -> Card:
    return next(c for c in cards if c.pool == pool and c.card == card)


def test_shares_and_memory_held_on_a_shared_h100_name_their_orders(objects: dict[str, Any]) -> None:
    c = compute(**objects)
    h100 = _card(c.cards, "gpu-h100-0", "gpu-0")
    assert (h100.product, h100.device_classes, h100.memory_gi_b) == (
        "NVIDIA H100 80GB HBM3",
        ["gpu.nvidia.com"],
        80,
    )
    assert (h100.shares_total, h100.shares_used) == (100, 70)
    # a share without a memory request holds its share of the card; one with a memory request holds that
    assert [(h.namespace, h.order, h.priority, h.share_percent, h.memory_gi_b) for h in h100.holders] == [
        ("team-a", "half-1", 0, 30.0, 24.0),
        ("team-b", "half-2", 1000, 40.0, 30.0),
    ]
    assert (h100.held_gi_b, h100.free_gi_b) == (54.0, 26.0)


def test_a_plan_not_yet_allocated_is_shown_as_planned_room(objects: dict[str, Any]) -> None:
    c = compute(**objects)
    card = _card(c.cards, "gpu-h100-0", "gpu-1")
    assert [(h.order, h.state, h.share_percent, h.memory_gi_b) for h in card.holders] == [
        ("next", "Planned", 50.0, 40.0)
    ]
    assert card.free_gi_b == 40.0


def test_a_partition_holds_its_memory_of_the_card_and_its_priority_comes_from_the_order(
    objects: dict[str, Any],
) -> None:
    c = compute(**objects)
    a100 = _card(c.cards, "gpu-a100-0", "gpu-0")
    assert a100.device_classes == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert (a100.memory_gi_b, a100.held_gi_b, a100.free_gi_b, a100.shares_total) == (40, 20, 20, None)
    assert [(h.order, h.priority, h.device) for h in a100.holders] == [
        ("small", 10, "gpu-a100-0/gpu-0-mig-3g20gb-0")
    ]
    static = _card(c.cards, "gpu-a100-0", "gpu-2")  # static MIG: only the partitions are published
    assert (static.device_classes, static.memory_gi_b, static.held_gi_b) == (["mig.nvidia.com"], 40, 20)


def test_a_card_without_a_memory_figure_says_so_rather_than_guessing(objects: dict[str, Any]) -> None:
    card = _card(compute(**objects).cards, "gpu-nomem-0", "gpu-0")
    assert (card.memory_gi_b, card.free_gi_b, card.shares_total) == (None, None, 100)


def test_device_classes_sum_their_cards(objects: dict[str, Any]) -> None:
    summaries = {s.name: s for s in compute(**objects).device_classes}
    assert set(summaries) == {"gpu.nvidia.com", "mig.nvidia.com"}
    gpu = summaries["gpu.nvidia.com"]
    assert gpu.cards == 8 + 2 + 2 + 1  # H100s, partitionable A100s, L4s, the GH200
    assert (
        gpu.held_gi_b == 54 + 40 + 20 + 24
    )  # the h100 pair, the planned one, the A100 partition, a whole L4


def test_orders_waiting_for_room_come_highest_priority_first(objects: dict[str, Any]) -> None:
    waiting = compute(**objects).waiting
    assert [(w.namespace, w.name, w.priority, w.reason) for w in waiting] == [
        ("team-b", "urgent", 1000, "NoAcceleratorWithEnoughMemory"),
        ("team-a", "nocap", 0, "NoCapacity"),
    ]
    assert (
        waiting[0].message == "NoAcceleratorWithEnoughMemory message." and waiting[0].condition == "Planned"
    )


def test_the_text_is_a_table_per_device_class(objects: dict[str, Any]) -> None:
    text = render_capacity(compute(**objects), Style(False), 160, NOW)
    assert "gpu.nvidia.com: 13 card(s), 138.0 of 768.0 GiB held, 630.0 GiB free" in text
    assert (
        "  gpu-h100-0   gpu-0  NVIDIA H100 80GB HBM3  70/100   54.0/80.0  26.0      "
        "team-a/half-1 p0 30%, team-b/half-2 p1000 40%\n"
    ) in text
    assert (
        "  gpu-h100-0   gpu-1  NVIDIA H100 80GB HBM3  50/100   40.0/80.0  40.0      "
        "team-a/next p? 50% (planned)" in text
    )
    assert "  gpu-nomem-0  gpu-0  NVIDIA GH200 480GB     0/100    0.0/-      -         -" in text
    assert "team-b/urgent  1000      NoAcceleratorWithEnoughMemory" in text
    assert age("2026-05-01T10:03:00Z", NOW) == "2m"


def test_capacity_as_a_namespace_user_reads_nothing_and_says_it_is_for_administrators(recorded: Any) -> None:
    denied = {
        p: f'{p} is forbidden: User "alice" cannot list'
        for p in (
            "/apis/resource.k8s.io/v1/resourceslices",
            "/apis/resource.k8s.io/v1/deviceclasses",
            "/apis/resource.k8s.io/v1/resourceclaims",
            "/apis/ai.deckhouse.io/v1alpha1/launchplans",
            "/apis/ai.deckhouse.io/v1alpha1/inferenceservices",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
        )
    }
    c = capacity(recorded({}, denied=denied))
    assert c.exit_code == Exit.UNKNOWN and len(c.unread) == 6
    assert "it is a command for administrators" in c.unread[0].why
    assert "Could not read" in render_capacity(c, Style(False), 110, NOW)


def test_capacity_with_everything_read_exits_0(recorded: Any, objects: dict[str, Any]) -> None:
    reader = recorded(
        {
            "/apis/resource.k8s.io/v1/resourceslices": objects["slices"],
            "/apis/resource.k8s.io/v1/deviceclasses": objects["device_classes"],
        }
    )
    c = capacity(reader)
    assert (c.exit_code, len(c.cards), c.unread) == (Exit.SERVING, 8 + 4 + 2 + 1, [])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", 80 * 2**30),
        ("81559Mi", 81559 * 2**20),
        ("100", 100.0),
        ("1.5", 1.5),
        ("500m", 0.5),
        ("2G", 2e9),
        (42, 42.0),
        ("ten", None),
        ("10Qi", None),
    ],
)
def test_quantities(text: Any, value: float | None) -> None:
    assert parse_quantity(text) == value
