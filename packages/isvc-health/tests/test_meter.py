"""The request meter in front of a runtime (issue 42): answers pass through as they stream, and are counted by
status class; the probe's path carries the counts. A stand-in runtime on loopback answers as llama-server does."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_health import METER_HEADER, Meter, parse_meter, serve_meter


class Runtime(http.server.BaseHTTPRequestHandler):
    """llama-server's answers: a model list, a chat (streamed on request), HTTP 500 for a body that is no JSON."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {"Content-Length": str(len(body))}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, b'{"data": [{"id": "tiny"}]}')

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            asked = json.loads(raw)
        except ValueError:
            self._send(500, b'{"error": {"code": 500, "message": "parse error"}}')
            return
        if not asked.get("stream"):
            self._send(200, json.dumps({"echo": asked}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(3):
            self.wfile.write(f"data: {i}\n\n".encode())
            self.wfile.flush()
            time.sleep(0.05)
        self.close_connection = True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _end_the_rest() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class Served:
    """The meter on a loopback port in a thread of its own, until `stop`."""

    def __init__(self, meter: Meter) -> None:
        self.meter, self.port = meter, _free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.02)

    def _run(self) -> None:
        self.task = self.loop.create_task(serve_meter(self.meter, self.port, host="127.0.0.1"))
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)
        self.loop.run_until_complete(_end_the_rest())  # connections still being handled end with the meter
        self.loop.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(5)


@pytest.fixture
def metered() -> Iterator[tuple[int, Meter]]:
    runtime = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Runtime)
    threading.Thread(target=runtime.serve_forever, daemon=True).start()
    served = Served(Meter(runtime.server_address[1], "tiny-0"))
    yield served.port, served.meter
    served.stop()
    runtime.shutdown()
    runtime.server_close()


def _ask(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, data, answer.getheader(METER_HEADER)


def test_answers_pass_through_and_are_counted_by_status_class(metered: tuple[int, Meter]) -> None:
    port, meter = metered
    assert _ask(port, "POST", "/v1/chat/completions", b'{"messages": []}')[:2] == (
        200,
        b'{"echo": {"messages": []}}',
    )
    assert _ask(port, "POST", "/v1/chat/completions", b"{not json")[0] == 500
    assert _ask(port, "POST", "/v1/chat/completions", b"{not json either")[0] == 500
    code, _, counts = _ask(port, "GET", "/v1/models")
    assert code == 200 and parse_meter(counts) == ("tiny-0", 4, 2)  # this answer counted too
    assert (meter.answered, meter.errors) == (4, 2)
    sample = meter.registry.get_sample_value
    assert sample("isvc_runtime_responses_total", {"code": "5xx"}) == 2
    assert sample("isvc_runtime_responses_total", {"code": "2xx"}) == 2


def test_a_stream_passes_through_as_it_comes_and_other_paths_carry_no_counts(
    metered: tuple[int, Meter],
) -> None:
    port, _ = metered
    code, body, counts = _ask(port, "POST", "/v1/chat/completions", b'{"stream": true}')
    assert code == 200 and body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n" and counts is None


def test_a_runtime_not_listening_is_the_meters_502_not_the_runtimes_5xx() -> None:
    served = Served(Meter(_free_port(), "tiny-0"))
    try:
        code, _, _ = _ask(served.port, "GET", "/v1/models")
    finally:
        served.stop()
    meter = served.meter
    assert code == 502 and (meter.answered, meter.errors) == (0, 0)
    assert meter.registry.get_sample_value("isvc_runtime_unreachable_total") == 1


def test_the_header_reads_back_and_junk_is_none() -> None:
    assert parse_meter("tiny-0 12 3") == ("tiny-0", 12, 3)
    assert parse_meter(None) is None and parse_meter("twelve") is None
