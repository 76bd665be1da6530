"""The estimate webhook's HTTPS server: a client that connects and never finishes its TLS handshake holds
its own connection only; the API server's reviews are still answered, and the silent client is dropped."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from isvc_operator import Estimator
from isvc_operator._main import _serve_estimates

from .fakes import World, order
from .test_estimate import review

HANDSHAKE_SECONDS = 1.0
ANSWER_SECONDS = 5.0  # the bound on the real request; today's accept loop never answers it


def _certificate(directory: Path) -> Path:
    """A self-signed serving certificate for 127.0.0.1 as tls.crt/tls.key; returns tls.crt (its own CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "estimate-webhook")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return directory / "tls.crt"


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    ca = _certificate(tmp_path)
    server = _serve_estimates(
        "127.0.0.1", 0, tmp_path, Estimator(World().reconciler().d), handshake_timeout=HANDSHAKE_SECONDS
    )
    try:
        yield server.server_address[1], ca
    finally:
        server.shutdown()
        server.server_close()


def _post(port: int, ca: Path) -> httpx.Response:
    context = ssl.create_default_context(cafile=str(ca))
    with httpx.Client(verify=context, timeout=ANSWER_SECONDS) as client:
        return client.post(f"https://127.0.0.1:{port}/estimate", json=review(order(name="probe")))


def test_a_client_that_never_handshakes_does_not_hold_up_a_review(webhook: tuple[int, Path]) -> None:
    port, ca = webhook
    with socket.create_connection(("127.0.0.1", port)):
        time.sleep(0.2)  # the server has accepted it: today its accept loop now waits for a ClientHello
        try:
            answer = _post(port, ca)
        except httpx.TimeoutException:
            pytest.fail(f"no answer within {ANSWER_SECONDS} s while a client sat silent")

    assert answer.status_code == 200
    assert answer.json()["response"]["uid"] == "u-1"


def test_a_client_that_never_handshakes_is_dropped_after_the_handshake_deadline(
    webhook: tuple[int, Path],
) -> None:
    port, _ = webhook
    with socket.create_connection(("127.0.0.1", port)) as silent:
        silent.settimeout(HANDSHAKE_SECONDS + ANSWER_SECONDS)
        try:
            closed = silent.recv(1) == b""
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False

    assert closed


def test_a_client_that_fails_its_handshake_leaves_the_server_answering(webhook: tuple[int, Path]) -> None:
    port, ca = webhook
    with socket.create_connection(("127.0.0.1", port)) as garbage:
        garbage.sendall(b"GET /estimate HTTP/1.1\r\n\r\n")  # plain HTTP to the TLS port
        garbage.settimeout(ANSWER_SECONDS)
        with contextlib.suppress(OSError):
            garbage.recv(1024)

    assert _post(port, ca).status_code == 200
