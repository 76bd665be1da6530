"""Sized to serve (issue 42), for real: an order whose class asks 4 requests of 448 tokens at once (the longest
512, the tiny model's whole context) gets a llama-server with a slot for each request (`-np 4`, `-c 2048`), and
requests of about 448 tokens are served four at once and wait beyond that, none answered with a context error;
the runtime's own 5xx are counted by the request meter in front of it and said on the order.

Before, the order's llama-server ran with `-c 512` and no `-np`: llama-server's automatic 4 slots shared one
512-token cache (`kv_unified`), and overlapping requests of 264 tokens failed with HTTP 500 "Context size has
been exceeded". The load goes through `kubectl port-forward` straight to the order's llama-server; its own
gauges are read at its `/metrics` (with the order's token) every 50 ms meanwhile: `llamacpp:requests_processing`
(requests in a slot) and `llamacpp:requests_deferred` (the queue the growth signal reads).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.llamabed import REPO, Bed, llama_bed
from isvc_testbed.orders import hf
from isvc_testbed.realnode import REAL_NODE_GPU_SELECTOR, port_forward
from isvc_testbed.standin import StandIn
from isvc_workload import METER_METRICS_PORT, METER_PORT
from kubernetes import client as k8s

CLASS = "real-node-serve"
ORDER = "tiny-serve"
AT_ONCE, TYPICAL, LONGEST = 4, 448, 512
# The tiny model's tokenizer is one token per character, and its ChatML template adds 52 tokens around the
# content (tinymodel.py; test_growth_on_load.py counts 58 for the 6 characters of "Go on."): 140 characters and
# 256 tokens out are 448 tokens, the typical request. ignore_eos keeps every answer 256 tokens long: long enough
# for the gauges to be read while the requests run (answers of 64 tokens were over before a second look).
CONTENT = "a" * 140
MAX_TOKENS = 256
# Requests beyond what the budget serves at once: they wait in llama-server's queue. One: llama-server answers
# HTTP on max(-np + 2, cores - 1) threads (tools/server/server.cpp, `n_threads_http`), 6 here, and a request
# beyond them waits for a thread, not in the queue, with /metrics behind it unread.
MORE = 1


@pytest.fixture(scope="module")
def bed(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    fleet: Fleet,
    standin: StandIn,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[Bed]:
    with llama_bed(cluster, admin_api, alice_api, standin.url_template, team_a) as bed:
        yield bed


class Gauges:
    """llama-server's processing and deferred gauges, read every 50 ms while the block runs."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.seen: list[tuple[float, float]] = []
        self.stop, self.first = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.conn: http.client.HTTPConnection | None = None

    def read(self) -> tuple[float, float]:
        """One look, on a connection kept open (a new one through the port-forward costs more than a look)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            self.conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {self.token}"})
            text = self.conn.getresponse().read().decode()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("llamacpp:requests_processing", "llamacpp:requests_deferred"))
        }
        return values["llamacpp:requests_processing"], values["llamacpp:requests_deferred"]

    def _run(self) -> None:
        while not self.stop.is_set():
            self.seen.append(self.read())
            self.first.set()
            time.sleep(0.05)

    def __enter__(self) -> Gauges:
        self.thread.start()
        assert self.first.wait(30), "llama-server's /metrics did not answer"
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(30)
        if self.conn is not None:
            self.conn.close()


def _chats(port: int, token: str, served: str, count: int) -> list[str]:
    """`count` chats of about the typical length sent together, each one's outcome ("ok" or the status and
    body). Each has a connection of its own through the port-forward, opened and given a moment to reach the
    pod first, and every request is written before any answer is read: a connection opened per request took
    long enough for the tiny model to answer the chat before it (CI saw at most 2 or 3 in the slots at once)."""
    body = json.dumps(
        {
            "model": served,
            "max_tokens": MAX_TOKENS,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": CONTENT}],
        }
    )
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=300) for _ in range(count)]
    try:
        for conn in conns:
            conn.connect()
        time.sleep(1.0)  # the port-forward's streams to the pod, set up as each connection was accepted
        for conn in conns:
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
        outcomes = []
        for conn in conns:
            answer = conn.getresponse()
            text = answer.read().decode()
            done = answer.status == 200 and json.loads(text)["usage"]["completion_tokens"] == MAX_TOKENS
            outcomes.append("ok" if done else f"{answer.status}: {text[:300]}")
        return outcomes
    finally:
        for conn in conns:
            conn.close()


def test_a_class_asking_n_requests_of_t_tokens_gets_a_server_that_serves_them_at_once(bed: Bed) -> None:
    orders = bed.orders
    orders.create_class(
        CLASS,
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": {"deviceClassNames": ["gpu.nvidia.com"], "selector": REAL_NODE_GPU_SELECTOR},
            "serving": {
                "concurrentRequests": AT_ONCE,
                "typicalRequestTokens": TYPICAL,
                "longestRequestTokens": LONGEST,
            },
        },
    )
    orders.create(ORDER, hf(REPO), CLASS)
    try:
        status = orders.wait_ready(ORDER, timeout=180)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(ORDER)}") from None
    resolved = status["resolved"]
    assert (resolved["concurrentRequests"], resolved["requestTokens"], resolved["contextLength"]) == (
        AT_ONCE,
        TYPICAL,
        LONGEST,
    ), resolved
    assert resolved["kvCacheTokens"] == AT_ONCE * LONGEST, resolved
    plan: Any = orders.plan(ORDER)
    args = plan["spec"]["runtime"]["args"]
    assert (args[args.index("-np") + 1], args[args.index("-c") + 1]) == (str(AT_ONCE), str(AT_ONCE * LONGEST))
    served = plan["spec"]["runtime"]["servedName"]
    http = next(p["containerPort"] for p in plan["spec"]["runtime"]["ports"] if p["name"] == "http")
    token = bed.token(ORDER)
    # straight to llama-server, which the gauges are about (the next test sends through the request meter)
    with (
        port_forward(bed.cluster.admin_kubeconfig, orders.ns, f"{ORDER}-0", http) as port,
        port_forward(bed.cluster.admin_kubeconfig, orders.ns, f"{ORDER}-0", http) as runtime,
    ):
        # N at once: every one served, all in a slot together, none waiting at any look
        with Gauges(runtime, token) as at_once:
            outcomes = _chats(port, token, served, AT_ONCE)
        assert outcomes == ["ok"] * AT_ONCE, outcomes
        assert max(p for p, _ in at_once.seen) == AT_ONCE, at_once.seen
        assert all(d == 0 for _, d in at_once.seen), at_once.seen
        # N + k at once: every one served; the k beyond the budget wait in the queue, none is refused
        with Gauges(runtime, token) as beyond:
            outcomes = _chats(port, token, served, AT_ONCE + MORE)
        assert outcomes == ["ok"] * (AT_ONCE + MORE), outcomes
        assert max(p for p, _ in beyond.seen) == AT_ONCE, beyond.seen
        assert max(d for _, d in beyond.seen) >= 1, beyond.seen
        # a request longer than a slot is refused at once (400), never a running one failing (500)
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key=token, max_retries=0, timeout=300
        )
        try:
            client.chat.completions.create(
                model=served, max_tokens=8, messages=[{"role": "user", "content": "a" * (LONGEST + 100)}]
            )
        except openai.APIStatusError as e:
            assert e.status_code == 400 and "exceeds the available context size" in e.message, e.message
        else:
            raise AssertionError("a request longer than its slot was served")


def test_the_runtimes_own_5xx_are_counted_by_the_meter_and_said_on_the_order(bed: Bed) -> None:
    """llama-server answers a body that is no JSON with its own HTTP 500; the request meter in front of it
    counts them in the order's metrics (isvc_runtime_responses_total{code="5xx"}), and the controller, reading
    the counts on its probes, says the sustained rate as a RuntimeErrors event; the order stays Ready."""
    orders = bed.orders
    if orders.status(ORDER) is None:  # run alone: the order of the test above
        test_a_class_asking_n_requests_of_t_tokens_gets_a_server_that_serves_them_at_once(bed)
    token = bed.token(ORDER)
    served = orders.plan(ORDER)["spec"]["runtime"]["servedName"]  # type: ignore[index]
    with (
        port_forward(bed.cluster.admin_kubeconfig, orders.ns, f"{ORDER}-0", METER_PORT) as port,
        port_forward(bed.cluster.admin_kubeconfig, orders.ns, f"{ORDER}-0", METER_METRICS_PORT) as metrics,
    ):
        # chats through the meter, as the order's Service sends them: answered, and counted as 2xx
        assert _chats(port, token, served, AT_ONCE) == ["ok"] * AT_ONCE
        codes = []
        for _ in range(10):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request(
                "POST",
                "/v1/chat/completions",
                body=b"{not json",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            codes.append(conn.getresponse().status)
            conn.close()
        assert codes == [500] * 10, codes  # llama-server's own answer, passed through
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    counted = {
        line.split("{")[1].split("}")[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("isvc_runtime_responses_total{")
    }
    assert counted['code="5xx"'] >= 10 and counted['code="2xx"'] >= AT_ONCE, counted
    said = wait_for(
        lambda: [e for e in orders.events(ORDER) if e[1] == "RuntimeErrors"],
        60,
        what="the RuntimeErrors event",
    )
    assert said[0][0] == "Warning" and "requests with HTTP 5xx" in said[0][2] and f"{ORDER}-0" in said[0][2]
    assert orders.status(ORDER)["phase"] == "Ready"
