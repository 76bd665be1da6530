"""Growth on load (issue 28): llama.cpp's own queue drives the replicas through the cluster's metrics path.

Everything on the path is real: llama-server on the real node publishes `llamacpp:requests_deferred`, a
Prometheus built from its Go module scrapes it through the PodMonitor the controller made (with the order's
token), prometheus-adapter serves the PodMetric the controller made as the custom metrics API through the API
server's aggregation layer, and kube-controller-manager's HPA controller scales the order's StatefulSet. The
load is the openai client's concurrent streaming chats, more than the server's four slots hold.

The second replica has no room: the class permits 60 % shares only, so the planned card (100 shares) holds one
replica, and a replica on a 60 % share asks 2 CPUs, all the 2-CPU node has; kube-scheduler's resource check
comes first and says so ("1 Insufficient cpu"). So the replica waits for a node with room, and the order says
that, not that the device is full (issue 45: it said GrowthClaimUnplaced "the device is full", and the planner
learned a device refusal, while CPU held it back); ScalingHealthy stays True and the phase Ready throughout, and
when the load stops the set goes back to one replica after the class's (shortened) scale-down window. A full
device alone is test_isvc_growth.py's (KWOK nodes have CPU to spare).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from isvc_testbed.cluster import HPA_SYNC_SECONDS, Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.llamabed import REPO, Bed, llama_bed
from isvc_testbed.monitoring import SCRAPE_SECONDS, Monitoring, monitoring
from isvc_testbed.orders import condition, hf
from isvc_testbed.realnode import REAL_NODE_GPU_SELECTOR, port_forward
from isvc_testbed.standin import StandIn
from kubernetes import client as k8s

CLASS = "real-node-grow"
ORDER = "tiny-grow"
WINDOW = 10  # the class's scale-down window, seconds (600 by default)
# Concurrent streaming chats: llama-server serves 4 at once, the rest wait (requests_deferred). A chat of the
# tiny model takes the server a fraction of the round trip through the port-forward, so many more workers than
# slots keep a queue at every scrape (12 left it empty on a loaded machine: each slot finished before the next
# request arrived).
STREAMS = 32
# The class serves 4 requests at once (its serving target, issue 42): llama-server runs 4 slots, each of the tiny
# model's whole 512-token context (tinymodel.py). Its tokenizer is one token per character, so the ChatML
# prompt is 58 tokens with BOS and the space prefix, and a chat of 58 + 56 tokens fits a slot. (Before issue 42
# the four slots shared one 512-token cache, and a 70-token prompt with 64 tokens out ended in "Context size
# has been exceeded" when four chats neared their end together.)
PROMPT = "Go on."
MAX_TOKENS = 56


@pytest.fixture(scope="module")
def bed(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    fleet: Fleet,
    standin: StandIn,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[tuple[Bed, Monitoring]]:
    """The llama.cpp bed with the metrics path up before the order (the controller finds its kinds served)."""
    with (
        monitoring(cluster) as watch,
        llama_bed(cluster, admin_api, alice_api, standin.url_template, team_a) as bed,
    ):
        yield bed, watch


class Load:
    """`STREAMS` workers, each sending streaming chats to the order's pod one after another until stopped
    (through `kubectl port-forward` at `port`: the API server's port-forward, as the probes go, but kubectl's
    own client, which carries many streams at once)."""

    def __init__(self, bed: Bed, served: str, port: int) -> None:
        self.bed, self.served, self.port = bed, served, port
        self.stop = threading.Event()
        self.done = 0
        self.errors: list[str] = []
        self.workers = [threading.Thread(target=self._run, daemon=True) for _ in range(STREAMS)]

    def _run(self) -> None:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{self.port}/v1",
            api_key=self.bed.token(ORDER),
            max_retries=0,
            timeout=120,
        )
        while not self.stop.is_set():
            try:
                stream = client.chat.completions.create(
                    model=self.served,
                    max_tokens=MAX_TOKENS,
                    stream=True,
                    messages=[{"role": "user", "content": PROMPT}],
                    extra_body={"ignore_eos": True},
                )
                for _ in stream:
                    pass
                self.done += 1
            except Exception as e:  # counted: a run of failures shows in the assertion below
                self.errors.append(repr(e))
                time.sleep(0.5)

    def __enter__(self) -> Load:
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(150)


def _hpa(bed: Bed) -> Any:
    return k8s.AutoscalingV2Api(bed.orders.admin_api).read_namespaced_horizontal_pod_autoscaler(
        ORDER, bed.orders.ns
    )


def _replicas(bed: Bed) -> int:
    workload: Any = k8s.AppsV1Api(bed.orders.admin_api).read_namespaced_stateful_set(ORDER, bed.orders.ns)
    return int(workload.spec.replicas or 0)


def test_the_queue_adds_a_replica_that_finds_no_room_and_the_order_stays_ready_then_goes_back_to_one(
    bed: tuple[Bed, Monitoring],
) -> None:
    llama, watch = bed
    orders = llama.orders
    orders.create_class(
        CLASS,
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": {
                "deviceClassNames": ["gpu.nvidia.com"],
                "selector": REAL_NODE_GPU_SELECTOR,
                "allowedSharePercents": [60],  # one replica per card
            },
            "scalingPolicy": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "autoscaler": True,
                "targets": {"requestsWaitingPerReplica": 1},
                "scaleDownStabilizationSeconds": WINDOW,
            },
            "serving": {"concurrentRequests": 4},  # 4 slots: 32 streams keep a queue at every scrape
        },
    )
    orders.create(ORDER, hf(REPO), CLASS)
    try:
        status = orders.wait_ready(ORDER, timeout=180)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{llama.diagnosis(ORDER)}") from None
    # the order says what it scales on, and how the autoscaler reads it
    assert status["scaling"] == {
        "signal": "Queue",
        "path": "PrometheusMetricsAdapter",
        "metrics": [{"name": "llamacpp:requests_deferred", "target": "1"}],
        "autoscaler": f"HorizontalPodAutoscaler/{ORDER}",
    }, status.get("scaling")
    placed = orders.plan(ORDER)
    assert placed is not None and placed["spec"]["placement"]["sharePercent"] == 60
    metric = f"{ORDER}-waiting"
    # Prometheus scraped the pod with the order's token, and the adapter serves the PodMetric's query
    wait_for(
        lambda: watch.query(f'llamacpp:requests_deferred{{namespace="{orders.ns}",pod="{ORDER}-0"}}'),
        60,
        interval=1,
        what="llama-server's queue gauge scraped by Prometheus",
    )
    [item] = wait_for(
        lambda: watch.custom_metric(orders.ns, metric), 60, interval=1, what="the custom metric"
    )
    assert (item["describedObject"]["name"], item["value"]) == (f"{ORDER}-0", "0")
    assert _replicas(llama) == 1

    phases: list[
        str
    ] = []  # the order's phase at each look from the load's start to the end: Ready throughout

    def look() -> dict[str, Any]:
        status = orders.status(ORDER)
        phases.append(str(status.get("phase")))
        return status

    started = time.monotonic()
    plan = orders.plan(ORDER)
    assert plan is not None
    http = next(p["containerPort"] for p in plan["spec"]["runtime"]["ports"] if p["name"] == "http")
    with (
        port_forward(llama.cluster.admin_kubeconfig, orders.ns, f"{ORDER}-0", http) as port,
        Load(llama, plan["spec"]["runtime"]["servedName"], port) as load,
    ):
        # the HPA controller asks for a second replica because of the queue
        try:
            wait_for(
                lambda: look() and _replicas(llama) == 2, 90, interval=0.5, what="a second replica asked for"
            )
        except TimeoutError as e:  # say what the autoscaler saw, and whether the load ran
            seen = {  # what Prometheus scraped from the server during the load
                gauge: watch.query(f'max_over_time(llamacpp:{gauge}{{namespace="{orders.ns}"}}[3m])')
                for gauge in ("requests_deferred", "requests_processing")
            }
            raise AssertionError(
                f"{e}; HPA status: {_hpa(llama).status}; metric: {watch.custom_metric(orders.ns, metric)}; "
                f"scraped at most: {seen}; chats done {load.done}, errors {load.errors[-3:]}"
            ) from None
        grew = time.monotonic() - started
        [peak] = watch.query(f'max_over_time(llamacpp:requests_deferred{{namespace="{orders.ns}"}}[3m])')
        hpa = _hpa(llama)
        [current] = hpa.status.current_metrics
        assert (current.type, current.pods.metric.name) == ("Pods", metric)
        assert current.pods.current.average_value not in ("0", None), current  # the queue, per replica
        assert hpa.status.desired_replicas == 2
        # the new replica finds no node with the CPU it asks: the order says so, and serves
        status = orders.wait(
            ORDER,
            lambda s: (
                look() is not None
                and "waits for a node with room for it" in condition(s, "ScalingHealthy").get("message", "")
            ),
            60,
            "ScalingHealthy saying the replica waits for a node with room",
        )
        scaling = condition(status, "ScalingHealthy")
        assert (scaling.get("status"), scaling.get("reason")) == ("True", "ScalingOK"), scaling
        assert f"{ORDER}-1 waits for a node with room for it" in scaling["message"], scaling
        assert "Insufficient cpu" in scaling["message"] and "the device is full" not in scaling["message"]
        load.stop.set()
        stopped = time.monotonic()  # the queue was long until now: the window starts here at the earliest
    assert load.done > 0, load.errors[-3:]
    # load gone: back to one replica after the class's window, and the order was Ready all along
    wait_for(lambda: look() and _replicas(llama) == 1, WINDOW + 60, interval=1, what="back to one replica")
    shrank = time.monotonic() - stopped
    status = orders.wait(
        ORDER,
        lambda s: (
            look() is not None and condition(s, "ScalingHealthy").get("message", "").startswith("1 of 1")
        ),
        60,
        "one replica, growth healthy",
    )
    assert condition(status, "ScalingHealthy").get("status") == "True"
    assert set(phases) == {"Ready"}, phases  # the order was Ready all along, never Degraded
    assert [e for e in orders.events(ORDER) if e[1] == "GrowthClaimUnplaced"] == []  # no device was said full
    print(
        f"growth: a second replica {grew:.0f}s after the load began with {peak['value'][1]} chats waiting at most "
        f"({STREAMS} streams; HPA sync {HPA_SYNC_SECONDS}s, scrape "
        f"{SCRAPE_SECONDS}s); back to one {shrank:.0f}s after it stopped (window {WINDOW}s)"
    )
    assert shrank >= WINDOW - HPA_SYNC_SECONDS  # the last pass that saw the queue may precede the stop by one
    llama.gone(ORDER)
