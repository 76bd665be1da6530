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
from isvc_ledger import capacity_view
from isvc_planner import (
    Inventory,
    Planner,
    create_app,
)
from isvc_planner._auth import CallerCheck, CallerVerdict, ReviewFailed
from isvc_planner._cli import openapi_document, parser
from isvc_planner_client import (
    OrderRef,
    PlannerClient,
    PlanRequest,
    SchedulerRefusal,
)
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_slice,
)
from prometheus_client import CollectorRegistry, generate_latest

CONTROLLER = "system:serviceaccount:d8-isvc:controller"
# What the API server would say of each token (TokenReview); any other token is not valid.
TOKENS = {"controller-token": CONTROLLER, "other-token": "system:serviceaccount:team-a:default"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sa") / "token"
    path.write_text("controller-token\n")
    return path


def _caller() -> CallerCheck:
    return CallerCheck(TOKENS.get, [CONTROLLER])


@contextmanager
def serve(
    inv: Inventory,
    registry: CollectorRegistry | None = None,
    caller: CallerCheck | None = None,
    reservation_ttl: float = 120.0,
) -> Iterator[str]:
    port = _free_port()
    app = create_app(
        Planner(inv, reservation_ttl=reservation_ttl), registry=registry, caller=caller or _caller()
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
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


def test_client_plans_over_http(base_url: str, token_file: Path, models: dict[str, ModelFacts]) -> None:
    with PlannerClient(base_url, timeout=5, token_file=token_file) as client:
        response = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=models["qwen7b"]))
    assert response.placement is not None and response.placement.devices == ["gpu-0"]
    assert response.estimates is not None and response.refusal is None


def test_client_plans_orders_together_over_http(token_file: Path, models: dict[str, ModelFacts]) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    requests = [
        PlanRequest(order=OrderRef(namespace="ns", name=f"t{i}"), facts=models["qwen7b"]) for i in range(9)
    ]
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        answers = client.plan_many(requests)
        assert client.plan_many([]) == []
    assert len(answers) == 9
    shares = [a.placement.share_percent for a in answers if a.placement is not None]
    assert 1 < len(shares) < 9 and sum(s or 0 for s in shares) <= 100  # as many as one H100 holds
    refused = [a.refusal.reason for a in answers if a.refusal is not None]
    assert refused and set(refused) == {Reason.NO_CAPACITY}


def test_client_releases_a_reservation_over_http(
    base_url: str, token_file: Path, models: dict[str, ModelFacts]
) -> None:
    with PlannerClient(base_url, timeout=5, token_file=token_file) as client:
        placed = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="r"), facts=models["qwen7b"]))
        assert placed.placement is not None
        assert client.release(OrderRef(namespace="ns", name="r")) is True
        assert client.release(OrderRef(namespace="ns", name="r")) is False


# Issue 15: a reservation of an order that is gone would hold devices until it lapses; the test bed lists
# them to count leaks, so they must be listable (by the allowed caller only).
def test_client_lists_reservations_with_devices_and_age_until_released(
    token_file: Path,
    models: dict[str, ModelFacts],
) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        assert client.reservations() == []
        placed = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="held"), facts=models["qwen7b"]))
        estimated = client.plan(
            PlanRequest(order=OrderRef(namespace="ns", name="dry"), facts=models["qwen7b"], dry_run=True)
        )
        time.sleep(0.05)
        held = client.reservations()
        client.release(OrderRef(namespace="ns", name="held"))
        after = client.reservations()

    assert placed.placement is not None and estimated.placement is not None
    assert [(r.order.namespace, r.order.name) for r in held] == [("ns", "held")]
    share = placed.placement.share_percent
    assert [(d.pool, d.device, d.units) for d in held[0].devices] == [("n1", "gpu-0", share)]
    assert 0 < held[0].age_seconds < 5 and 100 < held[0].expires_in_seconds <= 120
    assert after == []


def test_reservations_are_camel_case_and_lapse_by_themselves(models: dict[str, ModelFacts]) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    auth = {"Authorization": "Bearer controller-token"}
    plan = PlanRequest(order=OrderRef(namespace="ns", name="brief"), facts=models["qwen7b"]).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    with serve(inv, reservation_ttl=0.5) as url:
        assert httpx.post(f"{url}/v1/plan", json=plan, headers=auth).status_code == 200
        body = httpx.get(f"{url}/v1/reservations", headers=auth).json()
        time.sleep(0.6)
        lapsed = httpx.get(f"{url}/v1/reservations", headers=auth).json()
    assert set(body["reservations"][0]) == {"order", "devices", "ageSeconds", "expiresInSeconds"}
    assert body["reservations"][0]["order"] == {"namespace": "ns", "name": "brief"}
    assert body["reservations"][0]["devices"][0]["driver"] == "gpu.nvidia.com"
    assert lapsed == {"reservations": []}


def test_capacity_is_the_ledger_read_by_the_view_that_kubectl_uses(
    token_file: Path, models: dict[str, ModelFacts]
) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        empty = client.capacity()
        placed = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="c"), facts=models["qwen7b"]))
        held = client.capacity()
    assert placed.placement is not None and placed.placement.share_percent is not None
    assert [(d.device, d.free_units, d.held_units, d.holders) for d in empty.devices] == [
        ("gpu-0", 100, 0, [])
    ]
    (device,) = held.devices
    assert device == capacity_view(inv.view).devices[0]  # one function answers the endpoint and kubectl
    assert (device.held_units, device.free_units) == (
        placed.placement.share_percent,
        100 - placed.placement.share_percent,
    )
    assert [(h.kind, h.order, h.units) for h in device.holders] == [
        ("reservation", OrderRef(namespace="ns", name="c"), placed.placement.share_percent)
    ]
    uuid = inv.view.fleet.devices[("gpu.nvidia.com", "n1", "gpu-0")].uuid
    assert (device.card, device.device_classes, device.shareable) == (uuid, ["gpu.nvidia.com"], True)


def test_client_judges_over_http(base_url: str, token_file: Path) -> None:
    bad = Placement(
        device_class_name="gpu.nvidia.com", placement_mode=PlacementMode.SHARED, share_percent=150
    )
    good = bad.model_copy(update={"share_percent": 50})
    with PlannerClient(base_url, token_file=token_file) as client:
        refusal = client.judge(bad)
        assert client.judge(good) is None
    assert refusal is not None and refusal.reason == Reason.LAUNCH_PLAN_NOT_A_PLACEMENT


def test_wire_is_camel_case(base_url: str, models: dict[str, ModelFacts]) -> None:
    body = PlanRequest(order=OrderRef(namespace="ns", name="b"), facts=models["qwen7b"]).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    answer = httpx.post(
        f"{base_url}/v1/plan", json=body, headers={"Authorization": "Bearer controller-token"}
    ).json()
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
    assert {"/v1/plan", "/v1/judge", "/v1/reservations", "/healthz", "/readyz"} <= set(paths)


# Issue 11: the module's alerts and dashboard read these series.
def test_plans_are_counted_by_outcome_reason_and_device_class(
    token_file: Path, models: dict[str, ModelFacts]
) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    registry = CollectorRegistry()
    orders = [
        PlanRequest(order=OrderRef(namespace="ns", name=f"m{i}"), facts=models["qwen7b"]) for i in range(9)
    ]

    with serve(inv, registry) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        for order in orders:
            client.plan(order)

    placed = registry.get_sample_value(
        "isvc_planner_plans_total", {"outcome": "Placed", "reason": "", "device_class": "gpu.nvidia.com"}
    )
    refused = registry.get_sample_value(
        "isvc_planner_plans_total", {"outcome": "Refused", "reason": "NoCapacity", "device_class": ""}
    )
    assert placed is not None and refused is not None
    assert placed + refused == 9
    assert registry.get_sample_value("isvc_planner_inventory_synced") == 1.0
    assert b"isvc_planner_plan_duration_seconds_bucket" in generate_latest(registry)


# Issue 14, finding 1: the planner API was open to anyone who reached the pod.
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Basic YWxpY2U6cGFzcw=="}, 401),
        ({"Authorization": "Bearer invented"}, 401),
        ({"Authorization": "Bearer other-token"}, 403),
    ],
)
@pytest.mark.parametrize(
    "path",
    ["/v1/plan", "/v1/plans", "/v1/release", "/v1/judge", "GET /v1/reservations", "GET /v1/capacity"],
)
def test_only_the_allowed_caller_may_call_the_api(
    base_url: str, path: str, headers: dict[str, str], status: int
) -> None:
    if path.startswith("GET "):
        assert status == httpx.get(f"{base_url}{path[4:]}", headers=headers).status_code
        return
    body = {"namespace": "ns", "name": "a"} if path == "/v1/release" else {}
    assert status == httpx.post(f"{base_url}{path}", json=body, headers=headers).status_code


def test_an_anonymous_caller_cannot_reserve_or_release(
    models: dict[str, ModelFacts], token_file: Path
) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    body = PlanRequest(order=OrderRef(namespace="ns", name="invented"), facts=models["qwen7b"]).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        assert httpx.post(f"{url}/v1/plan", json=body).status_code == 401
        held = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="mine"), facts=models["qwen7b"]))
        assert httpx.post(f"{url}/v1/release", json={"namespace": "ns", "name": "mine"}).status_code == 401
        again = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="mine"), facts=models["qwen7b"]))
    assert held.placement is not None and again.placement == held.placement
    assert not inv.view.ledger.held_by(("ns", "invented"))


def test_health_readiness_stay_open_and_docs_are_not_served(base_url: str) -> None:
    assert httpx.get(f"{base_url}/healthz").status_code == 200
    assert httpx.get(f"{base_url}/readyz").status_code == 200
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(f"{base_url}{path}").status_code == 404


def test_reviews_are_cached_briefly_and_a_review_failure_is_temporary() -> None:
    asked: list[str] = []
    now = [0.0]
    broken = [False]

    def review(token: str) -> str | None:
        asked.append(token)
        if broken[0]:
            raise ReviewFailed("apiserver unreachable")
        return TOKENS.get(token)

    check = CallerCheck(review, [CONTROLLER], ttl=30, timer=lambda: now[0])
    tokens = ("controller-token", "controller-token", "x", "x")
    assert [check.verdict(t).status for t in tokens] == [200, 200, 401, 401]
    assert asked == ["controller-token", "x"]
    now[0] = 31.0
    broken[0] = True
    assert check.verdict("controller-token").status == 503


def test_a_token_reviewed_lately_is_answered_without_a_review_or_a_thread_issue_32() -> None:
    """`known` answers from the reviews remembered, never asking the API server (the app calls it on the
    event loop; only a review goes to a thread)."""
    asked: list[str] = []
    now = [0.0]

    def review(token: str) -> str | None:
        asked.append(token)
        return TOKENS.get(token)

    check = CallerCheck(review, [CONTROLLER], ttl=30, timer=lambda: now[0])
    assert check.known(None) == CallerVerdict(401, "a bearer token is required")
    assert check.known("controller-token") is None and asked == []
    check.verdict("controller-token")
    check.verdict("other-token")
    assert check.known("controller-token") == CallerVerdict(200, "ok", CONTROLLER)
    other = check.known("other-token")
    assert other is not None and other.status == 403
    assert asked == ["controller-token", "other-token"]
    now[0] = 31.0
    assert check.known("controller-token") is None


def test_a_plan_waits_for_a_listing_in_a_thread_and_the_loop_answers_meanwhile_issue_32(
    token_file: Path, models: dict[str, ModelFacts]
) -> None:
    """One order's plan runs on the event loop only when the ledger's lock is free: while a watch holds it
    (a listing applied), the plan waits in a thread and the loop still answers, then the plan goes."""
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    answers: list[bool] = []
    with serve(inv) as url, PlannerClient(url, timeout=10, token_file=token_file) as client:
        client.plan(PlanRequest(order=OrderRef(namespace="ns", name="warm"), facts=models["qwen7b"]))
        client.release(OrderRef(namespace="ns", name="warm"))  # the token reviewed: no review below
        holding, release = threading.Event(), threading.Event()

        def listing() -> None:
            with inv.applying():
                holding.set()
                release.wait(10)

        watch = threading.Thread(target=listing)
        watch.start()
        holding.wait(5)
        request = PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=models["qwen7b"])
        planning = threading.Thread(target=lambda: answers.append(client.plan(request).placement is not None))
        planning.start()
        time.sleep(0.3)
        assert not answers  # the plan waits for the ledger
        started = time.monotonic()
        assert httpx.get(f"{url}/healthz", timeout=2).status_code == 200  # the loop is not blocked
        assert time.monotonic() - started < 2
        assert not answers
        release.set()
        watch.join(5)
        planning.join(5)
    assert answers == [True]


def test_serve_takes_its_allowed_callers_and_refuses_anything_else() -> None:
    args = parser().parse_args(["serve", f"--allowed-caller={CONTROLLER}"])
    assert (args.allowed_callers, args.host) == ([CONTROLLER], "127.0.0.1")
    for bad in ([], ["--allowed-caller=alice"], ["--allowed-caller=system:serviceaccount:ns"]):
        with pytest.raises(SystemExit):
            parser().parse_args(["serve", *bad])


def test_a_plan_is_judged_standing_or_lost_over_http_issue_26(
    token_file: Path, models: dict[str, ModelFacts]
) -> None:
    inv = Inventory.from_objects(
        fleet_device_classes(),
        [fleet_slice("n1", [fleet_gpu("n1", 0, shares=False)])],
        [],
        [{"metadata": {"name": "gold"}, "value": 1000}],
        orders=[{"metadata": {"namespace": "ns", "name": "vip"}, "spec": {"inferenceServiceClassName": "c"}}],
        service_classes=[{"metadata": {"name": "c"}, "spec": {"priorityClassName": "gold"}}],
    )
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        low = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="low"), facts=models["qwen7b"]))
        assert low.placement is not None
        standing = client.hold(OrderRef(namespace="ns", name="low"), low.placement)
        vip = client.plan(
            PlanRequest(
                order=OrderRef(namespace="ns", name="vip"), facts=models["qwen7b"], priority_class_name="gold"
            )
        )
        lost = client.hold(OrderRef(namespace="ns", name="low"), low.placement)
        bad = client.hold(
            OrderRef(namespace="ns", name="low"), low.placement.model_copy(update={"share_percent": 150})
        )
    assert standing.lost == [] and standing.refusal is None and standing.outranked == []
    assert [(v.namespace, v.name) for v in vip.preempt] == [("ns", "low")]
    assert len(lost.lost) == 1 and "gpu.nvidia.com/n1/gpu-0" in lost.lost[0]
    assert lost.outranked == ["gpu.nvidia.com/n1/gpu-0: ns/vip at priority 1000"]  # preemption (issue 28)
    assert bad.refusal is not None and bad.refusal.reason == Reason.LAUNCH_PLAN_NOT_A_PLACEMENT


def test_the_room_token_moves_when_room_may_have_appeared_and_waits_otherwise(token_file: Path) -> None:
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    claim = fleet_claim("ns", "c", "o", [("n1", "gpu-0", 40)])
    inv.upsert_claim(claim)
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        token = client.room_changed(None, 0)
        started = time.monotonic()
        assert client.room_changed(token, 0.3) == token  # nothing changed: it waited, the token stands
        assert time.monotonic() - started >= 0.3
        inv.upsert_claim(fleet_claim("ns", "d", "o", [("n1", "gpu-0", 10)]))
        assert client.room_changed(token, 0.3) == token  # a holding added makes no room
        threading.Timer(0.2, lambda: inv.delete_claim(claim)).start()
        moved = client.room_changed(token, 30)
        assert moved != token and time.monotonic() - started < 10
        assert client.room_changed("another-planner:7", 30) == moved  # a token of an older planner: at once


def test_scheduler_disagreements_are_counted_once_each(
    token_file: Path, models: dict[str, ModelFacts]
) -> None:
    inv = Inventory.from_objects(
        fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0, shares=False)])], []
    )
    registry = CollectorRegistry()
    with serve(inv, registry) as url, PlannerClient(url, timeout=5, token_file=token_file) as client:
        first = client.plan(PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=models["qwen7b"]))
        assert first.placement is not None
        refused = PlanRequest(
            order=OrderRef(namespace="ns", name="a"),
            facts=models["qwen7b"],
            holding=first.placement,
            refused=SchedulerRefusal(
                placement=first.placement, message="0/1 nodes: cannot allocate all claims"
            ),
        )
        for _ in range(3):
            client.plan(refused)
    text = generate_latest(registry).decode()
    assert "isvc_planner_scheduler_disagreements_total 1.0" in text
