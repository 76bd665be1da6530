"""The HTTP service and its client, over loopback; the OpenAPI file does not drift."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from isvc_api import ModelFacts, Placement, PlacementMode, Reason
from isvc_planner import (
    Inventory,
    Planner,
    create_app,
)
from isvc_planner._cli import openapi_document
from isvc_planner_client import (
    OrderRef,
    PlannerClient,
    PlanRequest,
)
from isvc_testing import (
    fleet_device_classes,
    fleet_gpu,
    fleet_slice,
)
from prometheus_client import CollectorRegistry, generate_latest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(inv: Inventory, registry: CollectorRegistry | None = None) -> Iterator[str]:
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(Planner(inv), registry=registry), host="127.0.0.1", port=port, log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    with serve(inv) as url:
        yield url


def test_client_plans_over_http(base_url: str, models: dict[str, ModelFacts]) -> None:
    with PlannerClient(base_url, timeout=5) as client:
        response = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=models["qwen7b"]))
    assert response.placement is not None and response.placement.devices == ["gpu-0"]
    assert response.estimates is not None and response.refusal is None


def test_client_plans_orders_together_over_http(models: dict[str, ModelFacts]) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    requests = [PlanRequest(order=OrderRef(namespace="ns", name=f"t{i}"), facts=models["qwen7b"])
                for i in range(9)]
    with serve(inv) as url, PlannerClient(url, timeout=5) as client:
        answers = client.plan_many(requests)
        assert client.plan_many([]) == []
    assert len(answers) == 9
    shares = [a.placement.share_percent for a in answers if a.placement is not None]
    assert 1 < len(shares) < 9 and sum(s or 0 for s in shares) <= 100  # as many as one H100 holds
    refused = [a.refusal.reason for a in answers if a.refusal is not None]
    assert refused and set(refused) == {Reason.NO_CAPACITY}


def test_client_releases_a_reservation_over_http(base_url: str, models: dict[str, ModelFacts]) -> None:
    with PlannerClient(base_url, timeout=5) as client:
        placed = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="r"), facts=models["qwen7b"]))
        assert placed.placement is not None
        assert client.release(OrderRef(namespace="ns", name="r")) is True
        assert client.release(OrderRef(namespace="ns", name="r")) is False


def test_client_judges_over_http(base_url: str) -> None:
    bad = Placement(
        device_class_name="gpu.nvidia.com", placement_mode=PlacementMode.SHARED, share_percent=150
    )
    good = bad.model_copy(update={"share_percent": 50})
    with PlannerClient(base_url) as client:
        refusal = client.judge(bad)
        assert client.judge(good) is None
    assert refusal is not None and refusal.reason == Reason.LAUNCH_PLAN_NOT_A_PLACEMENT


def test_wire_is_camel_case(base_url: str, models: dict[str, ModelFacts]) -> None:
    body = PlanRequest(order=OrderRef(namespace="ns", name="b"), facts=models["qwen7b"]).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    answer = httpx.post(f"{base_url}/v1/plan", json=body).json()
    assert {"deviceClassName", "deviceUuids", "sharePercent", "memoryGiB"} <= set(answer["placement"])
    assert "requiredMemoryGiB" in answer["estimates"]


def test_health_and_readiness(base_url: str) -> None:
    assert httpx.get(f"{base_url}/healthz").status_code == 200
    assert httpx.get(f"{base_url}/readyz").status_code == 200


def test_readiness_waits_for_the_inventory() -> None:
    with serve(Inventory()) as url:
        assert httpx.get(f"{url}/readyz").status_code == 503
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_openapi_file_matches_the_app() -> None:
    stored = (Path(__file__).parent.parent / "openapi.json").read_text()
    assert json.loads(stored) == json.loads(openapi_document()), (
        "run: python -m isvc_planner openapi > openapi.json"
    )
    paths = json.loads(stored)["paths"]
    assert {"/v1/plan", "/v1/judge", "/healthz", "/readyz"} <= set(paths)


# Issue 11: the module's alerts and dashboard read these series.
def test_plans_are_counted_by_outcome_reason_and_device_class(models: dict[str, ModelFacts]) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    registry = CollectorRegistry()
    orders = [PlanRequest(order=OrderRef(namespace="ns", name=f"m{i}"), facts=models["qwen7b"])
              for i in range(9)]

    with serve(inv, registry) as url, PlannerClient(url, timeout=5) as client:
        for order in orders:
            client.plan(order)

    placed = registry.get_sample_value(
        "isvc_planner_plans_total", {"outcome": "Placed", "reason": "", "device_class": "gpu.nvidia.com"})
    refused = registry.get_sample_value(
        "isvc_planner_plans_total", {"outcome": "Refused", "reason": "NoCapacity", "device_class": ""})
    assert placed is not None and refused is not None
    assert placed + refused == 9
    assert registry.get_sample_value("isvc_planner_inventory_synced") == 1.0
    assert b"isvc_planner_plan_duration_seconds_bucket" in generate_latest(registry)
