"""The prober against a stand-in on loopback: token, outcomes, metrics."""

from __future__ import annotations

import socket

import pytest
from health_standin import StandIn
from isvc_health import (
    ProbeMetrics,
    ProbeOutcome,
    Prober,
    ServiceDNSResolver,
    TemplateInvalid,
    TemplateResolver,
    judge_response,
)
from prometheus_client import CollectorRegistry


def test_a_probe_with_the_right_token_succeeds(stand_in: StandIn) -> None:
    with Prober(TemplateResolver(stand_in.url + "/{namespace}/{name}")) as prober:
        result = prober.probe(
            "team", "llm-a", service="llm-a", port=8000, token="secret-token", model="org/model"
        )
    assert (result.ok, result.outcome, result.status_code) == (True, ProbeOutcome.OK, 200)
    assert stand_in.behaviour.seen_auth == ["Bearer secret-token"]
    assert stand_in.behaviour.seen_paths == ["/team/llm-a/v1/models"]


def test_a_wrong_token_is_a_failure_that_says_so(stand_in: StandIn) -> None:
    with Prober() as prober:
        result = prober.probe_url(stand_in.url, token="wrong")
    assert (result.ok, result.outcome, result.reason) == (
        False,
        ProbeOutcome.HTTP_STATUS,
        "HTTP 401 (token refused)",
    )


def test_no_token_sends_no_authorization_header(stand_in: StandIn) -> None:
    stand_in.behaviour.token = None
    with Prober() as prober:
        result = prober.probe_url(stand_in.url, token=None)
    assert result.ok
    assert stand_in.behaviour.seen_auth == [None]


def test_a_model_the_api_does_not_list_is_a_failure(stand_in: StandIn) -> None:
    with Prober() as prober:
        result = prober.probe_url(stand_in.url, token="secret-token", model="org/other")
    assert (result.outcome, result.reason) == (
        ProbeOutcome.MODEL_NOT_LISTED,
        "model org/other not listed (serves org/model)",
    )


def test_a_probe_through_the_service_fails_when_the_served_name_is_not_listed(stand_in: StandIn) -> None:
    """Issue 19: the operator probes by order with the name the recipe serves; a runtime serving
    another name must not count as healthy."""
    stand_in.behaviour.models = ["org/model", "org/model-lora"]
    with Prober(TemplateResolver(stand_in.url + "/{namespace}/{name}")) as prober:
        wrong = prober.probe(
            "team", "llm-a", service="llm-a", port=8000, token="secret-token", model="org/model@abc123"
        )
        right = prober.probe(
            "team", "llm-a", service="llm-a", port=8000, token="secret-token", model="org/model-lora"
        )
    assert (wrong.ok, wrong.outcome, wrong.reason) == (
        False,
        ProbeOutcome.MODEL_NOT_LISTED,
        "model org/model@abc123 not listed (serves org/model, org/model-lora)",
    )
    assert (right.ok, right.outcome) == (True, ProbeOutcome.OK)


def test_an_api_listing_no_model_fails_a_probe_that_expects_one(stand_in: StandIn) -> None:
    stand_in.behaviour.models = []
    with Prober() as prober:
        expecting = prober.probe_url(stand_in.url, token="secret-token", model="org/model")
        not_expecting = prober.probe_url(stand_in.url, token="secret-token")
    assert (expecting.outcome, expecting.reason) == (
        ProbeOutcome.MODEL_NOT_LISTED,
        "model org/model not listed (serves nothing)",
    )
    assert not_expecting.outcome == ProbeOutcome.OK


def test_a_slow_api_times_out(stand_in: StandIn) -> None:
    stand_in.behaviour.delay = 0.5
    with Prober(timeout=0.1) as prober:
        result = prober.probe_url(stand_in.url, token="secret-token")
    assert (result.outcome, result.reason) == (ProbeOutcome.TIMEOUT, "no answer within 0.1s")


def test_a_closed_port_is_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Prober(timeout=1.0) as prober:
        result = prober.probe_url(f"http://127.0.0.1:{port}", token=None)
    assert (result.ok, result.outcome, result.reason) == (
        False,
        ProbeOutcome.CONNECTION_REFUSED,
        "connection refused",
    )


@pytest.mark.parametrize(
    ("status", "body", "model", "outcome"),
    [
        (200, b'{"data": [{"id": "m"}]}', "m", ProbeOutcome.OK),
        (200, b'{"data": [{"id": "m"}]}', None, ProbeOutcome.OK),
        (200, b'{"data": []}', "m", ProbeOutcome.MODEL_NOT_LISTED),
        (200, b"<html>", None, ProbeOutcome.BAD_RESPONSE),
        (200, b'{"models": []}', None, ProbeOutcome.BAD_RESPONSE),
        (503, b"", None, ProbeOutcome.HTTP_STATUS),
    ],
)
def test_an_answer_is_judged_by_status_and_model_list(
    status: int, body: bytes, model: str | None, outcome: ProbeOutcome
) -> None:
    assert judge_response(status, body, model)[0] == outcome


def test_every_probe_is_counted_and_timed(stand_in: StandIn) -> None:
    registry = CollectorRegistry()
    with Prober(metrics=ProbeMetrics(registry)) as prober:
        prober.probe_url(stand_in.url, token="secret-token", namespace="team", name="llm-a")
        prober.probe_url(stand_in.url, token="wrong", namespace="team", name="llm-a")
    labels = {"namespace": "team", "name": "llm-a"}
    assert registry.get_sample_value("isvc_health_probes_total", labels | {"outcome": "ok"}) == 1
    assert registry.get_sample_value("isvc_health_probes_total", labels | {"outcome": "http_status"}) == 1
    assert registry.get_sample_value("isvc_health_probe_duration_seconds_count", {"outcome": "ok"}) == 1


@pytest.mark.parametrize(
    ("resolver", "url"),
    [
        (ServiceDNSResolver(), "http://llm-a.team.svc:8000"),
        (ServiceDNSResolver("cluster.local"), "http://llm-a.team.svc.cluster.local:8000"),
        (TemplateResolver("http://127.0.0.1:18080/{namespace}/{name}/"), "http://127.0.0.1:18080/team/llm-a"),
        (TemplateResolver("http://127.0.0.1:{port}"), "http://127.0.0.1:8000"),
    ],
)
def test_resolvers_build_the_base_url(resolver: ServiceDNSResolver | TemplateResolver, url: str) -> None:
    assert resolver.base_url("team", "llm-a", "llm-a", 8000) == url


def test_a_template_naming_an_unknown_field_is_refused() -> None:
    with pytest.raises(TemplateInvalid, match="pod_ip"):
        TemplateResolver("http://{pod_ip}:8000")


def test_probes_of_one_origin_share_a_kept_alive_connection(kept_alive: StandIn) -> None:
    """A probe a period per order: a new connection each time would cost more than the probe itself."""
    with Prober() as prober:
        results = [prober.probe_url(kept_alive.url, token="secret-token") for _ in range(3)]
    assert [r.ok for r in results] == [True, True, True]
    assert kept_alive.behaviour.connections == 1


def test_a_connection_idle_longer_than_keep_alive_is_not_used_again(kept_alive: StandIn) -> None:
    """Servers close idle connections after a few seconds: an older one is replaced, not tried."""
    with Prober(keep_alive=0) as prober:
        results = [prober.probe_url(kept_alive.url, token="secret-token") for _ in range(3)]
    assert [r.ok for r in results] == [True, True, True]
    assert kept_alive.behaviour.connections == 3
    assert len(kept_alive.behaviour.seen_paths) == 3  # each asked once: no attempt on a closed connection


def test_idle_connections_past_keep_alive_are_replaced_however_many_there_are() -> None:
    from isvc_health._probe import _Connections

    pool = _Connections(timeout=1.0, max_idle=0.0)
    origin = ("http", "127.0.0.1", 9)
    kept = [pool.take(origin)[0] for _ in range(3)]
    for conn in kept:
        pool.give(origin, conn)
    conn, reused = pool.take(origin)
    assert not reused and conn not in kept
    fresh = _Connections(timeout=1.0)
    fresh.give(origin, kept[0])
    assert fresh.take(origin) == (kept[0], True)


def test_a_kept_alive_connection_the_server_closed_is_replaced_without_a_failure(kept_alive: StandIn) -> None:
    kept_alive.behaviour.drop_after_answer = True
    with Prober() as prober:
        results = [prober.probe_url(kept_alive.url, token="secret-token") for _ in range(3)]
    assert [r.outcome for r in results] == [ProbeOutcome.OK] * 3
    assert kept_alive.behaviour.connections == 3
    assert len(kept_alive.behaviour.seen_paths) == 3


def test_an_answer_longer_than_a_model_list_is_cut_and_its_connection_not_kept(kept_alive: StandIn) -> None:
    from isvc_health._probe import MAX_BODY

    kept_alive.behaviour.body = b"x" * (MAX_BODY + 10)
    with Prober() as prober:
        first = prober.probe_url(kept_alive.url, token="secret-token")
        kept_alive.behaviour.body = None
        second = prober.probe_url(kept_alive.url, token="secret-token")
    assert (first.outcome, second.outcome) == (ProbeOutcome.BAD_RESPONSE, ProbeOutcome.OK)
    assert kept_alive.behaviour.connections == 2


def test_a_url_that_is_not_http_is_a_failure_not_an_exception() -> None:
    with Prober() as prober:
        result = prober.probe_url("ftp://127.0.0.1:21", token=None)
    assert result.outcome == ProbeOutcome.CONNECTION_FAILED
