"""One probe of an OpenAI-compatible inference API: GET /v1/models with the endpoint's token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

import httpx
from isvc_api import now
from pydantic import BaseModel, ConfigDict, Field

from isvc_health._metrics import ProbeMetrics
from isvc_health._resolve import EndpointResolver, ServiceDNSResolver

__all__ = ["ProbeOutcome", "ProbeResult", "Prober", "judge_response"]

MODELS_PATH = "/v1/models"


class ProbeOutcome(StrEnum):
    """How a probe ended: one word, also the metrics label."""

    OK = "ok"
    HTTP_STATUS = "http_status"  # answered, with a status other than 200
    CONNECTION_REFUSED = "connection_refused"
    CONNECTION_FAILED = "connection_failed"  # DNS, unreachable, reset
    TIMEOUT = "timeout"
    BAD_RESPONSE = "bad_response"  # 200, but not an OpenAI model list
    MODEL_NOT_LISTED = "model_not_listed"
    NO_REPLICA = "no_replica"  # not probed: no replica of the workload is ready


class ProbeResult(BaseModel):
    """The result of one probe: ok, or a failure with a short reason for a condition message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: ProbeOutcome
    reason: str = Field(default="", description="Short and human: 'HTTP 401', 'connection refused'.")
    status_code: int | None = None
    latency_seconds: float = 0.0
    probed_at: datetime = Field(default_factory=now, description="When it ran (second precision): "
                                "the order's record counts a failed probe once.")

    @property
    def ok(self) -> bool:
        """Whether the API answered with a model list (naming the model, when one was expected)."""
        return self.outcome == ProbeOutcome.OK


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def judge_response(status_code: int, body: bytes, model: str | None) -> tuple[ProbeOutcome, str]:
    """What an HTTP answer from /v1/models says about the API."""
    if status_code != 200:
        hint = " (token refused)" if status_code in (401, 403) else ""
        return ProbeOutcome.HTTP_STATUS, f"HTTP {status_code}{hint}"
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return ProbeOutcome.BAD_RESPONSE, "the answer is not JSON"
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return ProbeOutcome.BAD_RESPONSE, "the answer is not a model list"
    ids = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id") is not None]
    if model is not None and model not in ids:
        served = ", ".join(ids[:5]) or "nothing"
        return ProbeOutcome.MODEL_NOT_LISTED, f"model {model} not listed (serves {served})"
    return ProbeOutcome.OK, ""


def _transport_failure(error: httpx.HTTPError, timeout: float) -> tuple[ProbeOutcome, str]:
    if isinstance(error, httpx.TimeoutException):
        return ProbeOutcome.TIMEOUT, f"no answer within {timeout:g}s"
    if isinstance(error, httpx.ConnectError) and "refused" in str(error).lower():
        return ProbeOutcome.CONNECTION_REFUSED, "connection refused"
    detail = str(error) or type(error).__name__
    return ProbeOutcome.CONNECTION_FAILED, f"connection failed: {detail}"[:200]


class Prober:
    """Probes orders' inference APIs with one reusable httpx.Client; never raises for a failed probe."""

    def __init__(
        self,
        resolver: EndpointResolver | None = None,
        *,
        timeout: float = 5.0,
        client: httpx.Client | None = None,
        metrics: ProbeMetrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.resolver = resolver or ServiceDNSResolver()
        self.timeout = timeout
        self.metrics = metrics
        self._clock = clock
        # trust_env off: a proxy from the environment must not carry probes anywhere else.
        self._client = client or httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False)

    def probe(
        self,
        namespace: str,
        name: str,
        *,
        service: str,
        port: int,
        token: str | None,
        model: str | None = None,
    ) -> ProbeResult:
        """Probe the order `namespace/name` through its Service, resolved by the resolver."""
        base = self.resolver.base_url(namespace, name, service, port)
        return self.probe_url(base, token=token, model=model, namespace=namespace, name=name)

    def probe_url(
        self,
        base_url: str,
        *,
        token: str | None,
        model: str | None = None,
        namespace: str = "",
        name: str = "",
    ) -> ProbeResult:
        """GET {base_url}/v1/models with the bearer token (none when `token` is None)."""
        started = self._clock()
        try:
            response = self._client.get(
                base_url.rstrip("/") + MODELS_PATH, headers=_headers(token), timeout=self.timeout
            )
        except httpx.HTTPError as error:
            return self._finish(namespace, name, started, *_transport_failure(error, self.timeout), None)
        outcome, reason = judge_response(response.status_code, response.content, model)
        return self._finish(namespace, name, started, outcome, reason, response.status_code)

    def _finish(
        self, namespace: str, name: str, started: float, outcome: ProbeOutcome, reason: str, code: int | None
    ) -> ProbeResult:
        latency = max(0.0, self._clock() - started)
        if self.metrics is not None:
            self.metrics.observe(namespace, name, outcome.value, latency)
        return ProbeResult(outcome=outcome, reason=reason, status_code=code, latency_seconds=latency)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
