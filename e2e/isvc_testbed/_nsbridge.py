"""Forward TCP from inside a test-bed network namespace to the API server on the host's 127.0.0.1.

`python -m isvc_testbed._nsbridge NETNS_PATH TARGET_PORT ADDR:PORT...` opens each listening socket inside
the namespace (setns for the creation only), then returns to the host namespace and relays every connection to
127.0.0.1:TARGET_PORT. Nothing else is ever dialled: the real node's kubelet reaches the API server
through it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import socket
import sys
import threading

_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def listen_in(netns: str, addresses: list[tuple[str, int]]) -> list[socket.socket]:
    """Listening sockets created inside `netns` (the calling thread returns to its own namespace)."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    socks: list[socket.socket] = []
    try:
        _setns(target)
        try:
            for host, port in addresses:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
                s.listen(64)
                socks.append(s)
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)
    return socks


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _relay(conn: socket.socket, target_port: int) -> None:
    try:
        up = socket.create_connection(("127.0.0.1", target_port), timeout=10)
        up.settimeout(None)
    except OSError:
        conn.close()
        return
    t = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
    t.start()
    _pipe(conn, up)
    t.join()
    conn.close()
    up.close()


def main(argv: list[str]) -> None:
    netns, target = argv[0], int(argv[1])
    addresses = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in argv[2:]]
    sel = selectors.DefaultSelector()
    for s in listen_in(netns, addresses):
        sel.register(s, selectors.EVENT_READ)
    print(f"nsbridge: {netns} {addresses} -> 127.0.0.1:{target}", flush=True)
    while True:
        for key, _ in sel.select():
            listener = key.fileobj
            assert isinstance(listener, socket.socket)
            conn, _addr = listener.accept()
            threading.Thread(target=_relay, args=(conn, target), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
