"""What the controller serves over HTTP besides metrics: its own health (/healthz, /readyz), and the estimate
webhook over TLS (each connection's handshake in its own thread, with a deadline and a bound on connections)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from isvc_operator._estimate import Estimator

__all__ = ["serve_estimates", "serve_health"]

log = logging.getLogger("isvc_operator")


def serve_health(port: int, ready: threading.Event) -> ThreadingHTTPServer:
    """/healthz (the process is up) and /readyz (it has started), on every address of `port`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz" or (self.path == "/readyz" and ready.is_set())
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"not ready")

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


_MAX_REVIEW = 1 << 20  # bytes of one AdmissionReview; the API server's own request limit is larger
_HANDSHAKE_SECONDS = 10.0  # a client that has not finished its TLS handshake by then is dropped
_REQUEST_SECONDS = 10.0  # a whole request after the handshake, read and answered (the API server waits 10 s)


class _TLSThreadingServer(ThreadingHTTPServer):
    """HTTPS where each connection's TLS handshake happens in that connection's own thread, with a deadline,
    and at most `max_connections` connections are held at once.

    `SSLContext.wrap_socket` on the listening socket handshakes inside `accept()`, that is in the one
    accept loop: a client that connects and never speaks stalls every other request. Here the listening
    socket is wrapped with `do_handshake_on_connect=False` and `finish_request` (run in the per-request
    thread) handshakes under `handshake_timeout`; a silent or failing client costs its own thread only, for
    the handshake deadline at most. A thousand silent connections would hold a thousand threads, so past
    `max_connections` a connection is closed as soon as it is accepted, before any thread is started.

    Issue 44: 64 clients with any certificate of the client authority, each dripping a byte every 5 s, held
    every slot (the deadline was per read). Now a certificate of another name than `client_names` is closed
    right after the handshake, before a byte is read, and a connection is cut `request_timeout` after its
    handshake whatever it sends.
    """

    request_queue_size = 128  # connections the kernel queues before accept: a burst is accepted, then judged

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        context: ssl.SSLContext,
        handshake_timeout: float = _HANDSHAKE_SECONDS,
        max_connections: int = 64,
        client_names: tuple[str, ...] = (),
        request_timeout: float = _REQUEST_SECONDS,
    ) -> None:
        super().__init__(address, handler)
        self.handshake_timeout = handshake_timeout
        self.request_timeout = request_timeout
        self.client_names = client_names
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self._slots = threading.BoundedSemaphore(max_connections)
        self.turned_away = 0  # connections closed at once, all slots being held

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.turned_away += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        assert isinstance(request, ssl.SSLSocket)
        try:
            request.settimeout(self.handshake_timeout)
            request.do_handshake()
        except OSError as error:  # ssl.SSLError and TimeoutError among them: this client only
            log.debug("estimate webhook: TLS handshake with %s failed: %s", client_address, error)
            return
        if self.client_names and _common_name(request.getpeercert()) not in self.client_names:
            log.debug("estimate webhook: %s is not the API server; closed", client_address)
            return
        cut = threading.Timer(self.request_timeout, _cut, (request,))
        cut.start()
        try:
            super().finish_request(request, client_address)
        finally:
            cut.cancel()


def _cut(connection: ssl.SSLSocket) -> None:
    """End a connection that overran its deadline: its thread's read or write fails, and the slot is free."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


def _common_name(cert: Any) -> str | None:
    """The subject common name of a peer certificate as `SSLSocket.getpeercert()` gives it."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _context(cert_dir: Path, client_ca: Path | None) -> ssl.SSLContext:
    """The webhook's TLS: its serving certificate, and a client certificate of `client_ca` when given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    return context


def serve_estimates(
    host: str,
    port: int,
    cert_dir: Path,
    estimator: Estimator,
    handshake_timeout: float = _HANDSHAKE_SECONDS,
    client_ca: Path | None = None,
    client_names: tuple[str, ...] = (),
    max_connections: int = 64,
    request_timeout: float = _REQUEST_SECONDS,
) -> _TLSThreadingServer:
    """The estimate webhook over TLS: the API server sends AdmissionReviews of dry-run creations.

    With `client_ca`, a caller must present a certificate it signed (the handshake fails otherwise) whose
    common name is one of `client_names` (403 otherwise): such a review is the API server's, vouched for.
    """
    if client_ca is not None and not client_names:
        raise ValueError("--webhook-client-ca needs --webhook-client-name: the authority may sign others too")

    class Handler(BaseHTTPRequestHandler):
        timeout = _REQUEST_SECONDS  # a client that handshakes and then stalls lets its thread go

        def do_POST(self) -> None:
            vouched = False
            if client_ca is not None:
                name = _common_name(self.connection.getpeercert())
                if name not in client_names:
                    self.send_error(403, "the webhook answers the API server only")
                    return
                vouched = True
            announced = self.headers.get("Content-Length") or "0"
            length = int(announced) if announced.isdigit() else 0
            if self.path.split("?", 1)[0] != "/estimate" or not 0 < length <= _MAX_REVIEW:
                self.send_error(404 if self.path.split("?", 1)[0] != "/estimate" else 413)
                return
            try:
                review = json.loads(self.rfile.read(length))
            except ValueError:
                review = None
            if not isinstance(review, dict):
                self.send_error(400, "not an AdmissionReview")
                return
            body = json.dumps(estimator.review(review, vouched=vouched)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    context = _context(cert_dir, client_ca)
    server = _TLSThreadingServer(
        (host, port), Handler, context, handshake_timeout, max_connections, client_names, request_timeout
    )
    threading.Thread(target=server.serve_forever, name="estimate-webhook", daemon=True).start()
    return server
