"""One probe of an OpenAI-compatible inference API: GET /v1/models with the endpoint's token.

Probes go through the standard library's `http.client` over kept-alive connections, not httpx: a probe is
one small GET per order and period, and at 2,000 orders and the default 30 s period httpx's own work
(≈ 1.0 ms of CPU per request against ≈ 0.4 ms here, measured on loopback) was alone more than the
controller's 5 % budget at rest. A probe needs nothing httpx adds: no redirects, proxies, cookies, retries.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from isvc_api import now
from pydantic import BaseModel, ConfigDict, Field

from isvc_health._meter import METER_HEADER, parse_meter
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
    probed_at: datetime = Field(
        default_factory=now,
        description="When it ran (second precision): the order's record counts a failed probe once.",
    )
    meter: tuple[str, int, int] | None = Field(
        default=None,
        description="The request meter's counts the answer carried (X-Isvc-Meter): the replica's pod, the "
        "runtime's answers and its HTTP 5xx since the meter started; None without a meter (issue 42).",
    )

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


def _transport_failure(
    error: OSError | http.client.HTTPException, timeout: float
) -> tuple[ProbeOutcome, str]:
    if isinstance(error, TimeoutError):
        return ProbeOutcome.TIMEOUT, f"no answer within {timeout:g}s"
    if isinstance(error, ConnectionRefusedError):
        return ProbeOutcome.CONNECTION_REFUSED, "connection refused"
    detail = str(error) or type(error).__name__
    return ProbeOutcome.CONNECTION_FAILED, f"connection failed: {detail}"[:200]


MAX_BODY = 1 << 20  # a model list is a few KiB; more than this is not read (nor the connection kept)
# Servers close idle kept-alive connections after 5 s by default: uvicorn's --timeout-keep-alive, vLLM's
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE (vllm/envs.py), cpp-httplib's CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND (httplib.h,
# llama.cpp's server).
# A connection idle longer than this is closed rather than tried and found closed.
KEEP_ALIVE_SECONDS = 4.0
_Origin = tuple[str, str, int]
# How a kept-alive connection that the server closed meanwhile fails before any answer: asked once more.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine)


class _Connections:
    """Idle kept-alive connections by origin; beyond `limit` the least recently used is closed, and one idle
    longer than `max_idle` seconds is not used again (the server has likely closed it meanwhile)."""

    def __init__(self, timeout: float, limit: int = 64, max_idle: float = KEEP_ALIVE_SECONDS) -> None:
        self._timeout = timeout
        self._limit = limit
        self._max_idle = max_idle
        self._idle: OrderedDict[int, tuple[_Origin, http.client.HTTPConnection, float]] = OrderedDict()
        self._serial = 0
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None

    def take(self, origin: _Origin) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection to `origin` (and True: reused), or a new one (False)."""
        with self._lock:
            latest = next((key for key in reversed(self._idle) if self._idle[key][0] == origin), None)
            if latest is not None:
                _, conn, since = self._idle.pop(latest)
                if time.monotonic() - since <= self._max_idle:
                    return conn, True
                conn.close()  # and any older one of the origin ages out of the pool
            if origin[0] == "https" and self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        scheme, host, port = origin
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self._timeout, context=tls), False
        return http.client.HTTPConnection(host, port, timeout=self._timeout), False

    def give(self, origin: _Origin, conn: http.client.HTTPConnection) -> None:
        """Keep `conn` for a later probe of `origin`."""
        with self._lock:
            self._serial += 1
            self._idle[self._serial] = (origin, conn, time.monotonic())
            surplus = [self._idle.popitem(last=False)[1][1] for _ in range(len(self._idle) - self._limit)]
        for old in surplus:
            old.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for _, conn, _ in idle:
            conn.close()


def _origin(url: str) -> tuple[_Origin, str]:
    """(scheme, host, port) and the path with its query, of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise http.client.InvalidURL(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (parts.scheme, parts.hostname, port), path


class Prober:
    """Probes orders' inference APIs over kept-alive connections; never raises for a failed probe."""

    def __init__(
        self,
        resolver: EndpointResolver | None = None,
        *,
        timeout: float = 5.0,
        keep_alive: float = KEEP_ALIVE_SECONDS,
        metrics: ProbeMetrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`keep_alive`: how long an idle connection is kept for the next probe of its origin (0: never)."""
        self.resolver = resolver or ServiceDNSResolver()
        self.timeout = timeout
        self.metrics = metrics
        self._clock = clock
        # No proxy from the environment is used: a probe goes to the order's own address only.
        self._connections = _Connections(timeout, max_idle=keep_alive)

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
            status, body, meter = self._get(base_url.rstrip("/") + MODELS_PATH, _headers(token))
        except (OSError, http.client.HTTPException) as error:
            return self._finish(namespace, name, started, *_transport_failure(error, self.timeout), None)
        outcome, reason = judge_response(status, body, model)
        return self._finish(namespace, name, started, outcome, reason, status, parse_meter(meter))

    def _get(self, url: str, headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        """GET `url` on a kept-alive connection when one is idle (once more on a fresh one when the server
        had closed it), returning the status, at most MAX_BODY bytes of the answer and the request meter's
        header."""
        origin, path = _origin(url)
        while True:
            conn, reused = self._connections.take(origin)
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read(MAX_BODY)
            except _STALE:
                conn.close()
                if reused:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if response.will_close or not response.isclosed():
                conn.close()  # the server closes it, or the answer was longer than read
            else:
                self._connections.give(origin, conn)
            return response.status, body, response.getheader(METER_HEADER)

    def _finish(
        self,
        namespace: str,
        name: str,
        started: float,
        outcome: ProbeOutcome,
        reason: str,
        code: int | None,
        meter: tuple[str, int, int] | None = None,
    ) -> ProbeResult:
        latency = max(0.0, self._clock() - started)
        if self.metrics is not None:
            self.metrics.observe(namespace, name, outcome.value, latency)
        # Built from values this module made itself: validation would only cost (a probe per order a period).
        return ProbeResult.model_construct(
            outcome=outcome,
            reason=reason,
            status_code=code,
            latency_seconds=latency,
            probed_at=now(),
            meter=meter,
        )

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._connections.close()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
