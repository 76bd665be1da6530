"""Issue 29: resolutions of hostile repositories at once keep the controller's memory bounded.

Every repository of test_hub_limits.py that is just under a cap or just over it, and the issue's own
case (a split GGUF variant of eight files, each header carrying a 60 MiB string), resolved from as many
threads at once, with the process's resident memory sampled every millisecond. The stand-in Hub runs in a
process of its own, so that what is measured is the client alone. Before: that GGUF variant alone took the
client from 66 to 452 MiB, and four 30 MiB GGUF headers at once from 66 to 388 MiB.

Only `HubLimits.concurrent` resolutions read the Hub at once; the others wait their turn within their
deadline.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from isvc_api import ModelFacts, Refusal
from isvc_catalog import HubClient, HubLimits
from isvc_testing.standin_hub import (
    HOSTILE_CONFIG,
    HOSTILE_PARAMETERS,
    FixtureModel,
    StandinHub,
    hostile_repositories,
)

MIB = 1024 * 1024
PAGE = 4096
# Twice (two resolutions at once) what the heaviest single read may cost parsed: a JSON document of the
# largest allowed size and value count. Measured: 14 MiB for all of them at once.
GROWTH_BOUND = 64 * MIB
REPOS = [m.repo for m in hostile_repositories()]
SLOW = [  # config.json of 20 KiB dripped 1 KiB every 20 ms: 0.4 s a resolution
    FixtureModel(
        repo=f"slow/{i}",
        parameters=HOSTILE_PARAMETERS,
        config=HOSTILE_CONFIG,
        drip=0.02,
        padded_files={"config.json": 20 * 1024},
    )
    for i in range(4)
] + [FixtureModel(repo="fast/0", parameters=HOSTILE_PARAMETERS, config=HOSTILE_CONFIG)]


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The stand-in Hub serving REPOS from a process of its own."""
    models = tmp_path_factory.mktemp("models")  # no other repositories
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "isvc_testing.standin_hub",
            "--port",
            str(port),
            "--models",
            str(models),
            "--hostile",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/api/models/{REPOS[0]}", timeout=2)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the stand-in Hub did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.kill()
        proc.wait()


class _Sampler:
    """The process's resident memory, sampled every millisecond until stopped."""

    def __init__(self) -> None:
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.001)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_every_hostile_repository_at_once_leaves_memory_bounded(hub: str) -> None:
    answers: dict[str, Any] = {}
    with HubClient(hub, timeout=30) as client:
        client.resolve(
            "fine/config-at-cap"
        )  # the connection pool and the parsers warmed up before the baseline
        client.forget()
        threads = [
            threading.Thread(target=lambda r=r: answers.__setitem__(r, client.resolve(r))) for r in REPOS
        ]
        with _Sampler() as memory:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    growth = memory.peak - memory.start
    assert {r for r, a in answers.items() if not isinstance(a, ModelFacts | Refusal)} == set()
    assert isinstance(answers["evil/gguf-eight-60-mib-strings"], Refusal)
    assert growth <= GROWTH_BOUND, f"RSS {memory.start / MIB:.0f} -> {memory.peak / MIB:.0f} MiB"


class _Counting(httpx.BaseTransport):
    """A transport that counts the requests in flight (from the request until its body is closed)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self._lock = threading.Lock()
        self.now = self.most = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        response = self._inner.handle_request(request)
        outer = self

        class Stream(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                yield from response.stream  # type: ignore[misc]

            def close(self) -> None:
                response.close()
                with outer._lock:
                    outer.now -= 1

        return httpx.Response(response.status_code, headers=response.headers, stream=Stream())

    def close(self) -> None:
        self._inner.close()


@pytest.fixture
def slow_hub() -> Iterator[str]:
    standin = StandinHub(SLOW)
    url = standin.start()
    yield url
    standin.stop()


@pytest.mark.parametrize("concurrent", [1, 2])
def test_only_the_allowed_number_of_resolutions_read_the_hub_at_once(slow_hub: str, concurrent: int) -> None:
    transport = _Counting()
    limits_ = HubLimits(concurrent=concurrent, deadline=30)
    with HubClient(slow_hub, timeout=10, transport=transport, limits=limits_) as client:
        threads = [threading.Thread(target=client.resolve, args=(m.repo,)) for m in SLOW if m.drip]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert transport.most == concurrent


def test_a_resolution_waits_its_turn_and_is_not_blamed_for_the_wait(slow_hub: str) -> None:
    answers: dict[str, Any] = {}

    def resolve(repo: str) -> None:
        answers[repo] = client.resolve(repo)

    with HubClient(slow_hub, timeout=10, limits=HubLimits(concurrent=1, deadline=0.3)) as client:
        slow = threading.Thread(target=resolve, args=("slow/0",))  # 0.4 s of drip: past its deadline
        slow.start()
        time.sleep(0.05)
        resolve("fast/0")  # waits for the slow one's turn to end, then has its own 0.3 s
        slow.join()

    assert isinstance(answers["slow/0"], Refusal) and "longer than 0.3s" in answers["slow/0"].message
    assert isinstance(answers["fast/0"], ModelFacts)
