"""The request meter: a sidecar in front of a runtime's API port that counts the runtime's own answers.

A runtime that fails requests while its health probe passes looks healthy (issue 42: llama-server answered
overlapping chats with HTTP 500 "Context size has been exceeded" and the order stayed Ready), and llama.cpp's
server publishes no count of the requests it fails (its /metrics: tokens, decode calls, requests processing and
deferred). So the order's Service reaches the runtime through this meter: it passes each request to the runtime
on the pod's loopback and its answer back as it streams, and counts the answers by status class.

- `isvc_runtime_responses_total{code="2xx"|"3xx"|"4xx"|"5xx"}`: the runtime's answers, on the meter's metrics
  port (the order's PodMonitor scrapes it); `isvc_runtime_unreachable_total`: requests the runtime did not
  answer at all (the meter answered 502 itself: the runtime is not listening yet, or it died).
- Every answer to the health probe's path (`/v1/models`) carries `X-Isvc-Meter: <pod> <answered> <5xx>`, the
  counts since the meter started, so the controller's probe reads them without reaching the pod any other way.

One request per connection: the meter asks the runtime to close after its answer and tells the client so, which
frames every answer without parsing its body (a stream of server-sent events passes through as it comes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket

from prometheus_client import CollectorRegistry, Counter, start_http_server

__all__ = ["METER_HEADER", "Meter", "main", "parse_meter", "serve"]

METER_HEADER = "X-Isvc-Meter"
PROBED = (b"/v1/models",)  # the paths whose answers carry the counts (the controller's probe asks the first)
_HEAD_LIMIT = 64 * 1024  # a request or response head larger than this is refused
_CHUNK = 64 * 1024
_METER = re.compile(r"^(\S+) (\d+) (\d+)$")


def parse_meter(value: str | None) -> tuple[str, int, int] | None:
    """(pod, answered, 5xx) of an `X-Isvc-Meter` header, or None when absent or not of that form."""
    found = _METER.match(value.strip()) if value else None
    return (found.group(1), int(found.group(2)), int(found.group(3))) if found else None


class Meter:
    """Counts the runtime's answers by status class while passing requests and answers through."""

    def __init__(self, upstream_port: int, pod: str, registry: CollectorRegistry | None = None) -> None:
        self.upstream_port = upstream_port
        self.pod = pod
        self.registry = registry or CollectorRegistry()
        self.responses = Counter(
            "isvc_runtime_responses",
            "The runtime's answers by status class",
            ["code"],
            registry=self.registry,
        )
        self.unreachable = Counter(
            "isvc_runtime_unreachable",
            "Requests the runtime did not answer (the meter's 502)",
            registry=self.registry,
        )
        self.answered = 0
        self.errors = 0

    def header(self) -> bytes:
        return f"{METER_HEADER}: {self.pod} {self.answered} {self.errors}\r\n".encode()

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """One request: its head and body to the runtime, the runtime's answer back, counted."""
        up_w: asyncio.StreamWriter | None = None
        try:
            head = await client_r.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            except OSError:
                self.unreachable.inc()
                client_w.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if b"100-continue" in head.lower():  # the client waits for this before its body
                client_w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            up_w.write(_closing(head, drop=(b"connection:", b"expect:")))
            await _body(client_r, up_w, head)
            await self._answer(up_r, client_w, path)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass  # a client or runtime that went away, or a head larger than _HEAD_LIMIT: nothing to answer
        finally:
            for writer in (w for w in (up_w, client_w) if w is not None):
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()

    async def _answer(self, up_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, path: bytes) -> None:
        head = await up_r.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1][:1] if head.count(b" ") >= 1 else b"?"
        if status in (b"2", b"3", b"4", b"5"):
            self.responses.labels(code=f"{status.decode()}xx").inc()
            self.answered += 1
            self.errors += status == b"5"
        head = _closing(head, drop=(b"connection:",))
        if path.split(b"?", 1)[0] in PROBED:
            head = head[:-2] + self.header() + b"\r\n"
        client_w.write(head)
        while chunk := await up_r.read(_CHUNK):
            client_w.write(chunk)
            await client_w.drain()


def _closing(head: bytes, drop: tuple[bytes, ...]) -> bytes:
    """The head without the fields named in `drop`, and `Connection: close` (one exchange per connection)."""
    lines = [line for line in head[:-4].split(b"\r\n") if not line.lower().startswith(drop)]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


async def _body(client_r: asyncio.StreamReader, up_w: asyncio.StreamWriter, head: bytes) -> None:
    """The request's body to the runtime: Content-Length bytes, or chunks up to the last one."""
    fields = {
        k.strip().lower(): v.strip()
        for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
        if k
    }
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        while True:
            size_line = await client_r.readuntil(b"\r\n")
            up_w.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            up_w.write(await client_r.readexactly(size + 2))  # the chunk and its CRLF
            if size == 0:
                break
    else:
        left = int(fields.get(b"content-length", b"0") or b"0")
        while left > 0:
            chunk = await client_r.read(min(left, _CHUNK))
            if not chunk:
                raise ConnectionError("the client closed before its body ended")
            up_w.write(chunk)
            left -= len(chunk)
    await up_w.drain()


async def serve(meter: Meter, port: int, host: str | None = None) -> None:
    """Serve the meter on `port` (of every address, or `host`) until cancelled."""
    server = await asyncio.start_server(
        meter.handle, host=host, port=port, limit=_HEAD_LIMIT, family=socket.AF_INET
    )
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """`isvc-meter --listen 8090 --upstream 8080 --metrics 9102`: the sidecar of a runtime container."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--listen", type=int, required=True, help="the port the order's Service reaches")
    parser.add_argument("--upstream", type=int, required=True, help="the runtime's API port on loopback")
    parser.add_argument("--metrics", type=int, required=True, help="the port of the meter's own metrics")
    args = parser.parse_args(argv)
    meter = Meter(args.upstream, os.environ.get("HOSTNAME", "unknown"))
    start_http_server(args.metrics, registry=meter.registry)
    asyncio.run(serve(meter, args.listen))
    return 0
