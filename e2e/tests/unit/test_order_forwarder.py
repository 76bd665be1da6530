"""The real node's order forwarder reads which order a request is for from its path (issue 45: one pod's
forwarder carried every order's probe to the first order's pod, and the second order read 401)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from isvc_testbed.realnode import _carry_over, routed


def test_a_request_names_its_order_in_its_path_and_goes_without_that_prefix_and_alone() -> None:
    request = (
        b"POST /team-a/tiny-chat-2/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:4001\r\n"
        b"Connection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
    )
    found = routed(request)
    assert found is not None
    namespace, order, carried = found
    assert (namespace, order) == ("team-a", "tiny-chat-2")
    assert carried.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"keep-alive" not in carried and carried.endswith(b"Connection: close\r\n\r\n{}")


def test_a_request_that_names_no_order_goes_nowhere() -> None:
    assert routed(b"GET / HTTP/1.1\r\n\r\n") is None
    assert routed(b"nonsense\r\n\r\n") is None
    assert routed(b"GET /team-a/tiny-chat HTTP/1.1\r\n\r\n") == (
        "team-a",
        "tiny-chat",
        b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
    )


class _EndedForward:
    """A kubernetes client port-forward whose stream the server already ended: its proxy's half is closed."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        theirs.close()
        self.ours = ours
        self.local_ports = {8090: SimpleNamespace(python=theirs)}
        self.websocket = SimpleNamespace(connected=False, shutdown=lambda: None)

    def socket(self, port: int) -> socket.socket:
        return self.ours

    def close(self) -> None:
        self.ours.close()


def test_a_request_to_a_pod_that_ended_the_forward_closes_the_callers_connection_and_raises_nothing() -> None:
    conn, caller = socket.socketpair()
    with conn, caller:
        _carry_over(conn, _EndedForward(), 8090, b"GET /v1/models HTTP/1.1\r\n\r\n" * 4096)
        caller.settimeout(5)
        assert caller.recv(1) == b""
