"""The real node's order forwarder reads which order a request is for from its path (issue 45: one pod's
forwarder carried every order's probe to the first order's pod, and the second order read 401)."""

from __future__ import annotations

from isvc_testbed.realnode import routed


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
