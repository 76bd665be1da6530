"""The client maps transport failures to its two errors; quantities and selectors parse without a server."""

from __future__ import annotations

import os
import socket
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from isvc_api import ModelFacts, ModelSource, QuantityError, parse_quantity, quantity_bytes
from isvc_planner_client import (
    SERVICE_ACCOUNT_TOKEN,
    CelJudge,
    OrderRef,
    PlannerClient,
    PlannerProtocolError,
    PlannerUnavailableError,
    PlanRequest,
    SelectorError,
)

REQUEST = PlanRequest(
    order=OrderRef(namespace="ns", name="a"),
    facts=ModelFacts(source=ModelSource.HUGGING_FACE, name="Qwen/Qwen2.5-7B-Instruct"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_planner_is_temporary() -> None:
    with (
        PlannerClient(f"http://127.0.0.1:{_free_port()}", timeout=1) as client,
        pytest.raises(PlannerUnavailableError),
    ):
        client.plan(REQUEST)


@pytest.mark.parametrize(("status", "error"), [(503, PlannerUnavailableError), (422, PlannerProtocolError)])
def test_server_errors_are_typed(status: int, error: type[Exception]) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text="nope"))
    with PlannerClient("http://127.0.0.1:1", transport=transport) as client, pytest.raises(error):
        client.plan(REQUEST)


def test_a_timeout_is_temporary() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with (
        PlannerClient("http://127.0.0.1:1", transport=httpx.MockTransport(slow)) as client,
        pytest.raises(PlannerUnavailableError),
    ):
        client.plan(REQUEST)


def test_an_answer_off_the_contract_is_a_protocol_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"answers": [{}, {}]}))
    with (
        PlannerClient("http://127.0.0.1:1", transport=transport) as client,
        pytest.raises(PlannerProtocolError),
    ):
        client.plan_many([REQUEST])  # two answers for one order


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", Decimal(80 * 2**30)),
        ("500m", Decimal("0.5")),
        ("1.5e3", Decimal(1500)),
        ("100", Decimal(100)),
    ],
)
def test_quantities_parse_as_kubernetes_writes_them(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_a_quantity_rounds_up_to_whole_units_and_nonsense_is_refused() -> None:
    assert quantity_bytes("500m") == 1
    with pytest.raises(QuantityError):
        parse_quantity("eighty gigs")


def test_a_selector_that_does_not_compile_is_told_apart() -> None:
    judge = CelJudge()
    judge.check("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')")
    with pytest.raises(SelectorError):
        judge.check("device.attributes[")


# Issue 14: the planner answers only its allowed caller; the client sends the ServiceAccount token.
def test_each_call_carries_the_token_file_as_a_bearer_token_and_follows_its_rotation(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    seen: list[str | None] = []

    def planner(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json={"released": False})

    transport = httpx.MockTransport(planner)
    with PlannerClient("http://127.0.0.1:1", transport=transport, token_file=token) as client:
        client.release(OrderRef(namespace="ns", name="a"))
        replaced = tmp_path / "token.new"
        replaced.write_text("second")
        os.replace(replaced, token)  # as the kubelet rotates a projected token: a new file in its place
        client.release(OrderRef(namespace="ns", name="a"))

    assert seen == ["Bearer first", "Bearer second"]


def test_an_unreadable_token_file_is_temporary(tmp_path: Path) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=None))
    with (
        PlannerClient("http://127.0.0.1:1", transport=transport, token_file=tmp_path / "absent") as client,
        pytest.raises(PlannerUnavailableError, match="token file"),
    ):
        client.plan(REQUEST)


def test_the_default_token_file_is_the_pods_service_account_token() -> None:
    assert Path("/var/run/secrets/kubernetes.io/serviceaccount/token") == SERVICE_ACCOUNT_TOKEN


def test_reservations_are_read_with_a_get_and_an_answer_off_the_contract_is_a_protocol_error() -> None:
    seen: list[tuple[str, str]] = []
    body = {
        "reservations": [
            {
                "order": {"namespace": "ns", "name": "a"},
                "ageSeconds": 1.5,
                "expiresInSeconds": 118.5,
                "devices": [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0", "units": 40}],
            }
        ]
    }

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path))
        return httpx.Response(200, json=body if len(seen) == 1 else {"reservations": [{"order": "a"}]})

    with PlannerClient("http://127.0.0.1:1", transport=httpx.MockTransport(answer)) as client:
        [held] = client.reservations()
        with pytest.raises(PlannerProtocolError):
            client.reservations()

    assert seen == [("GET", "/v1/reservations")] * 2
    device = held.devices[0]
    assert (held.order.name, device.device, device.units, held.age_seconds) == ("a", "gpu-0", 40, 1.5)
