"""A stand-in inference server on 127.0.0.1 that checks the bearer token (imported by name)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    """What the stand-in answers; tests change it between probes."""

    token: str | None = "secret-token"
    models: list[str] = field(default_factory=lambda: ["org/model"])
    status: int | None = None  # force a status
    body: bytes | None = None  # force a body
    delay: float = 0.0
    drop_after_answer: bool = False  # close a kept-alive connection after answering, saying nothing
    connections: int = 0
    seen_auth: list[str | None] = field(default_factory=list)
    seen_paths: list[str] = field(default_factory=list)


@dataclass
class StandIn:
    url: str
    behaviour: Behaviour


def _handler(behaviour: Behaviour, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def setup(self) -> None:
            behaviour.connections += 1
            super().setup()

        def do_GET(self) -> None:
            behaviour.seen_auth.append(self.headers.get("Authorization"))
            behaviour.seen_paths.append(self.path)
            if behaviour.delay:
                time.sleep(behaviour.delay)
            status, body = 200, behaviour.body
            if not self.path.endswith("/v1/models"):
                status = 404
            elif (
                behaviour.token is not None
                and self.headers.get("Authorization") != f"Bearer {behaviour.token}"
            ):
                status = 401
            if behaviour.status is not None:
                status = behaviour.status
            if body is None:
                body = json.dumps(
                    {"object": "list", "data": [{"id": m, "object": "model"} for m in behaviour.models]}
                ).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if behaviour.drop_after_answer:
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def serve(keep_alive: bool = False) -> Iterator[StandIn]:
    """An HTTP/1.0 server (a connection per answer), or with `keep_alive` an HTTP/1.1 one."""
    behaviour = Behaviour()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour, keep_alive))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield StandIn(url=f"http://{host!s}:{port}", behaviour=behaviour)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
