"""The estimate webhook's HTTPS server: a client that connects and never finishes its TLS handshake holds
its own connection only; the API server's reviews are still answered, and the silent client is dropped.
Issue 29: with caller authentication, only the API server's client certificate gets an answer, and a flood
of connections holds at most `max_connections` threads."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from isvc_operator import Estimator
from isvc_operator._webhook import serve_estimates

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
    server = serve_estimates(
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


# ---- issue 29: the caller is the API server, and a flood of connections holds a bounded number of threads

API_SERVER = "isvc-testbed-apiserver-webhook-client"


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _client(directory: Path, name: str) -> tuple[Path, Path]:
    """A client certificate for `name` from an authority of its own in `directory` (ca.crt, NAME.crt/.key)."""
    ca_key_file, ca_file = directory / "ca.key", directory / "ca.crt"
    now = dt.datetime.now(dt.UTC)
    if not ca_file.exists():
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client-authority")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        ca_key_file.write_bytes(_key_pem(ca_key))
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_file.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .sign(ca_key, hashes.SHA256())
    )
    (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(_key_pem(key))
    return directory / f"{name}.crt", directory / f"{name}.key"


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def mtls(tmp_path: Path, world: World) -> Iterator[tuple[int, Path, Path]]:
    """The webhook asking callers for a certificate of the client authority named API_SERVER."""
    serving = tmp_path / "serving"
    serving.mkdir()
    ca = _certificate(serving)
    clients = tmp_path / "clients"
    clients.mkdir()
    _client(clients, API_SERVER)
    server = serve_estimates(
        "127.0.0.1",
        0,
        serving,
        Estimator(world.reconciler().d),
        handshake_timeout=HANDSHAKE_SECONDS,
        client_ca=clients / "ca.crt",
        client_names=(API_SERVER,),
    )
    try:
        yield server.server_address[1], ca, clients
    finally:
        server.shutdown()
        server.server_close()


def _post_as(port: int, ca: Path, cert: tuple[Path, Path] | None, body: dict[str, Any]) -> httpx.Response:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(*cert)
    with httpx.Client(verify=context, timeout=ANSWER_SECONDS) as client:
        return client.post(f"https://127.0.0.1:{port}/estimate", json=body)


def test_a_caller_without_the_api_servers_certificate_gets_no_answer_issue_29(
    mtls: tuple[int, Path, Path], world: World
) -> None:
    port, ca, clients = mtls
    world.cluster.secret("team-b", "hf", {"token": "hf_team_b_secret"})
    forged = review(order(namespace="team-b", authSecretRef={"name": "hf", "key": "token"}))
    forged["request"]["namespace"] = "team-b"

    with pytest.raises(httpx.HTTPError):  # no certificate: the handshake fails
        _post_as(port, ca, None, forged)
    with pytest.raises(httpx.HTTPError):  # the same authority, another name: closed after the handshake
        _post_as(port, ca, _client(clients, "alice"), forged)

    assert world.models.tokens == [] and world.cluster.access_reviews == []


def test_the_api_servers_review_is_vouched_for_issue_29(mtls: tuple[int, Path, Path], world: World) -> None:
    port, ca, clients = mtls
    world.cluster.secret("team-b", "hf", {"token": "hf_team_b_secret"})
    asked = review(order(namespace="team-b", authSecretRef={"name": "hf", "key": "token"}))
    asked["request"]["namespace"] = "team-b"

    answer = _post_as(port, ca, (clients / f"{API_SERVER}.crt", clients / f"{API_SERVER}.key"), asked)

    assert answer.status_code == 200
    assert world.cluster.access_reviews == [
        ("alice", "get", "secrets", "team-b", "hf")
    ]  # her rights, not ours


def test_a_flood_of_silent_connections_holds_a_bounded_number_of_threads_issue_29(tmp_path: Path) -> None:
    ca = _certificate(tmp_path)
    server = serve_estimates(
        "127.0.0.1",
        0,
        tmp_path,
        Estimator(World().reconciler().d),
        handshake_timeout=HANDSHAKE_SECONDS,
        max_connections=8,
    )
    port = server.server_address[1]
    threads = threading.active_count()
    most = 0
    try:
        silent = []
        for _ in range(200):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            silent.append(s)
            most = max(most, threading.active_count() - threads)
        until = time.monotonic() + 3 * HANDSHAKE_SECONDS  # long enough for holders to drop and others to come
        while time.monotonic() < until:
            most = max(most, threading.active_count() - threads)
            time.sleep(0.01)
        turned_away = server.turned_away
        for s in silent:
            s.close()
        time.sleep(HANDSHAKE_SECONDS + 0.5)  # the held ones dropped at their handshake deadline
        answer = _post(port, ca)
    finally:
        server.shutdown()
        server.server_close()

    assert most <= 8 and turned_away >= 100, (most, turned_away)
    assert answer.status_code == 200


def test_clients_dripping_bytes_with_another_certificate_of_the_authority_hold_no_slot_issue_44(
    tmp_path: Path, world: World
) -> None:
    """Before: 64 connections with any certificate of the client authority, dripping a byte every 5 s, held
    every slot (the deadline was per read), and the API server's review got no answer."""
    serving, clients = tmp_path / "serving", tmp_path / "clients"
    serving.mkdir()
    clients.mkdir()
    ca = _certificate(serving)
    api_server = _client(clients, API_SERVER)
    mallory = _client(clients, "mallory")
    server = serve_estimates(
        "127.0.0.1",
        0,
        serving,
        Estimator(world.reconciler().d),
        handshake_timeout=HANDSHAKE_SECONDS,
        client_ca=clients / "ca.crt",
        client_names=(API_SERVER,),
        max_connections=4,
        request_timeout=2.0,
    )
    port = server.server_address[1]
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(*mallory)
    dripping = []
    try:
        for _ in range(4):
            raw = socket.create_connection(("127.0.0.1", port))
            tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
            tls.sendall(b"POST /estimate HTTP/1.1\r\n")
            dripping.append(tls)
        time.sleep(0.5)
        for tls in dripping:
            with contextlib.suppress(OSError):
                tls.sendall(b"X")  # a byte, well inside any per-read deadline
        answer = _post_as(port, ca, api_server, review(order()))
    finally:
        for tls in dripping:
            tls.close()
        server.shutdown()
        server.server_close()

    assert answer.status_code == 200


def test_a_connection_of_the_api_servers_name_is_cut_at_its_request_deadline_issue_44(tmp_path: Path) -> None:
    serving, clients = tmp_path / "serving", tmp_path / "clients"
    serving.mkdir()
    clients.mkdir()
    ca = _certificate(serving)
    api_server = _client(clients, API_SERVER)
    server = serve_estimates(
        "127.0.0.1",
        0,
        serving,
        Estimator(World().reconciler().d),
        client_ca=clients / "ca.crt",
        client_names=(API_SERVER,),
        request_timeout=1.0,
    )
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(*api_server)
    try:
        tls = context.wrap_socket(
            socket.create_connection(("127.0.0.1", server.server_address[1])), server_hostname="127.0.0.1"
        )
        started = time.monotonic()
        tls.settimeout(10)
        with contextlib.suppress(OSError):
            for _ in range(20):  # a byte every 0.3 s: each read well inside a per-read deadline
                tls.sendall(b"X")
                time.sleep(0.3)
        with contextlib.suppress(OSError):
            tls.recv(1)
        took = time.monotonic() - started
        tls.close()
    finally:
        server.shutdown()
        server.server_close()

    assert took < 3.0, took
