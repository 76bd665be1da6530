"""Growth on load on the KWOK fleet (issue 28), driven by the same metrics path as the real node's.

The metrics path is real: Prometheus (built from its Go module) scrapes the order's pods through the PodMonitor
the controller made, with the order's token; prometheus-adapter serves the PodMetric the controller made
through the API server's aggregation layer; kube-controller-manager's HPA controller scales the StatefulSet.
The pods are simulated, so their runtime is the stand-in, as for every KWOK order: it serves the order's chats
one at a time and publishes how many wait in llama.cpp's words (`llamacpp:requests_deferred`) at the address
Prometheus is pointed to for a simulated pod (a simulated pod's own address is never dialled).

The card is set up so that the second replica fits beside the first: the class permits 30 % shares, and the
planned H100 holds three. The replica the autoscaler adds takes a device through the order's claim template,
comes up, and the order's Service has both; when the load stops the set goes back to one.

Under preemption (issue 28): an order of higher priority holds the room the second replica needs on the card
the order's claim template names; the order serves, growth is blocked (ScaleUpBlocked, phase Degraded) naming
it, and once it goes the replica takes the room and the order is Ready with both. (A replica on a card simply
full waits for capacity, the order Ready: test_isvc_serving.py, and the real node's growth test.)
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from isvc_testbed.cluster import HPA_SYNC_SECONDS, Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.monitoring import Monitoring, monitoring
from isvc_testbed.orders import Orders, condition, hf
from isvc_testbed.standin import StandIn
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

GGUF = "Qwen/Qwen2.5-7B-Instruct-GGUF"  # llama.cpp's recipe: its /metrics asks for the token
CLASS = "grow-on-load"
ORDER = "grow"
WINDOW = 10  # the class's scale-down window, seconds
STREAMS = 6  # concurrent chats; the stand-in serves one at a time, one second each


@pytest.fixture(scope="module")
def watch(cluster: Cluster, standin: StandIn, module: Any) -> Iterator[Monitoring]:
    with monitoring(cluster, standin.port) as w:
        yield w


@pytest.fixture
def bed(
    watch: Monitoring, module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str
) -> Iterator[Orders]:
    with Orders(module, admin_api, alice_api, team_a) as b:
        yield b


def test_a_class_asking_to_scale_to_zero_is_refused_at_write_saying_why(
    module: Any, admin_api: k8s.ApiClient
) -> None:
    """minReplicas 0: no silent half-state (nothing would hold the first request while no replica runs)."""
    klass = {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceServiceClass",
        "metadata": {"name": "grow-to-zero"},
        "spec": {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "scalingPolicy": {"minReplicas": 0, "maxReplicas": 2, "autoscaler": True},
        },
    }
    objects = k8s.CustomObjectsApi(admin_api)
    with pytest.raises(k8s.ApiException) as refused:
        objects.create_cluster_custom_object("ai.deckhouse.io", "v1alpha1", "inferenceserviceclasses", klass)
    assert refused.value.status == 422
    assert "minReplicas 0 (scale to zero) is not supported" in str(refused.value.body)
    assert "set minReplicas to 1 or more" in str(refused.value.body)


def _replicas(bed: Orders, name: str = ORDER) -> int:
    workload: Any = k8s.AppsV1Api(bed.admin_api).read_namespaced_stateful_set(name, bed.ns)
    return int(workload.spec.replicas or 0)


def _token(bed: Orders, name: str = ORDER) -> str:
    secret: Any = k8s.CoreV1Api(bed.admin_api).read_namespaced_secret(f"{name}-auth", bed.ns)
    return base64.b64decode(secret.data["token"]).decode()


class _Chats:
    """`STREAMS` workers sending the order streaming chats one after another until the block ends."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.stop = threading.Event()
        self.served: list[int] = []
        self.stopped = 0.0
        self.workers = [threading.Thread(target=self._run, daemon=True) for _ in range(STREAMS)]

    def _run(self) -> None:
        with httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60
        ) as http:
            while not self.stop.is_set():
                body = {"model": GGUF, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                with http.stream("POST", "/v1/chat/completions", json=body) as answer:
                    self.served.append(answer.status_code)
                    for _ in answer.iter_bytes():
                        pass

    def __enter__(self) -> _Chats:
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.stopped = time.monotonic()  # the queue was long until now
        for w in self.workers:
            w.join(30)


def _ready_endpoints(bed: Orders) -> set[str]:
    slices: Any = k8s.DiscoveryV1Api(bed.admin_api).list_namespaced_endpoint_slice(
        bed.ns, label_selector=f"kubernetes.io/service-name={ORDER}"
    )
    return {
        e.target_ref.name
        for s in slices.items
        for e in s.endpoints or []
        if e.target_ref is not None and e.conditions is not None and e.conditions.ready
    }


def test_the_queue_adds_a_replica_that_fits_beside_the_first_and_both_serve_then_back_to_one(
    bed: Orders, watch: Monitoring, standin: StandIn
) -> None:
    standin.set_queue(bed.ns, ORDER, slots=1, seconds=1.0)
    bed.create_class(
        CLASS,
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": {
                "deviceClassNames": ["gpu.nvidia.com"],
                "selector": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
                "allowedSharePercents": [30],  # three replicas per card
            },
            "scalingPolicy": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "autoscaler": True,
                "targets": {"requestsWaitingPerReplica": 1},
                "scaleDownStabilizationSeconds": WINDOW,
            },
        },
    )
    bed.create(ORDER, hf(GGUF), CLASS)
    bed.wait_ready(ORDER)
    # The metrics path's kinds were installed by this module's fixture, while the controller ran: once its
    # informers see them served (within their ten-second retry), the order is passed again and scales on them.
    status = wait_for(
        lambda: (s := bed.status(ORDER)).get("scaling", {}).get("signal") == "Queue" and s,
        30,
        interval=1,
        what="the order scaling on the runtime's queue",
    )
    assert status["scaling"] == {
        "signal": "Queue",
        "path": "PrometheusMetricsAdapter",
        "metrics": [{"name": "llamacpp:requests_deferred", "target": "1"}],
        "autoscaler": f"HorizontalPodAutoscaler/{ORDER}",
    }, status.get("scaling")
    metric = f"{ORDER}-waiting"
    [item] = wait_for(lambda: watch.custom_metric(bed.ns, metric), 60, interval=1, what="the custom metric")
    assert (item["describedObject"]["name"], item["value"]) == (f"{ORDER}-0", "0")

    started = time.monotonic()
    with _Chats(standin.url_for(bed.ns, ORDER), _token(bed)) as load:
        wait_for(lambda: _replicas(bed) == 2, 60, interval=0.5, what="a second replica asked for")
        grew = time.monotonic() - started
        hpa: Any = k8s.AutoscalingV2Api(bed.admin_api).read_namespaced_horizontal_pod_autoscaler(
            ORDER, bed.ns
        )
        [current] = hpa.status.current_metrics
        assert (current.type, current.pods.metric.name) == ("Pods", metric)
        # the new replica took a device through the order's claim template, came up, and the Service has both
        status = bed.wait(
            ORDER,
            lambda s: condition(s, "ScalingHealthy").get("message", "").startswith("2 of 2 replicas ready"),
            60,
            "both replicas ready",
        )
        assert condition(status, "Ready").get("status") == "True"
        assert status["phase"] == "Ready"
        wait_for(
            lambda: _ready_endpoints(bed) == {f"{ORDER}-0", f"{ORDER}-1"}, 30, what="both behind the Service"
        )
        claims: Any = k8s.ResourceV1Api(bed.admin_api).list_namespaced_resource_claim(
            bed.ns, label_selector=f"ai.deckhouse.io/inference-service={ORDER}"
        )
        devices = {
            (r.pool, r.device)
            for c in claims.items
            if c.status.allocation
            for r in c.status.allocation.devices.results
        }
        assert len(claims.items) == 2 and len(devices) == 1, (
            devices
        )  # the planned card, shared: no replanning
        assert not [e for e in bed.events(ORDER) if e[1] == "GrowthClaimUnplaced"]
    stopped = load.stopped  # the window starts there at the earliest
    assert load.served and set(load.served) == {200}, set(load.served)
    wait_for(lambda: _replicas(bed) == 1, WINDOW + 60, interval=1, what="back to one replica")
    shrank = time.monotonic() - stopped
    assert shrank >= WINDOW - HPA_SYNC_SECONDS  # the last pass that saw the queue may precede the stop by one
    print(
        f"growth (KWOK): a second replica {grew:.0f}s after the load began, back to one {shrank:.0f}s after"
    )


def test_the_queue_asks_for_a_replica_whose_room_an_order_of_higher_priority_holds_scale_up_blocked(
    bed: Orders, watch: Monitoring, standin: StandIn, fleet: Fleet
) -> None:
    """Issue 28: ScaleUpBlocked from load, only under preemption; the order serves (Degraded) and grows once
    the order of higher priority goes."""
    name, urgent = "grow-low", "grow-urgent"
    card = fleet.idle(bed.admin_api, "gpu-h100-0")
    one_card = f"device.attributes['gpu.nvidia.com'].uuid == '{card.uuid}'"
    scheduling = k8s.SchedulingV1Api(bed.admin_api)
    scheduling.create_priority_class(k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=urgent), value=1000))
    bed.cleanup.append(lambda: scheduling.delete_priority_class(urgent))
    policy = {"deviceClassNames": ["gpu.nvidia.com"], "selector": one_card, "allowedSharePercents": [40]}
    common = {
        "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
        "exposure": {"type": "ClusterLocal", "authentication": "Token"},
        "acceleratorPolicy": policy,
    }
    bed.create_class(urgent, {**common, "priorityClassName": urgent})
    bed.create_class(
        name,
        {
            **common,
            "scalingPolicy": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "autoscaler": True,
                "targets": {"requestsWaitingPerReplica": 1},
                "scaleDownStabilizationSeconds": WINDOW,
            },
        },
    )
    standin.set_queue(bed.ns, name, slots=1, seconds=1.0)
    bed.create(urgent, hf(GGUF), urgent)  # 40 % of the card, at priority 1000
    bed.create(name, hf(GGUF), name)  # 40 % beside it, at 0: the card keeps 20 %, a replica needs 40
    bed.wait_ready(urgent)
    bed.wait_ready(name)
    wait_for(lambda: watch.custom_metric(bed.ns, f"{name}-waiting"), 60, interval=1, what="the custom metric")
    started = time.monotonic()
    with _Chats(standin.url_for(bed.ns, name), _token(bed, name)) as load:
        wait_for(lambda: _replicas(bed, name) == 2, 60, interval=0.5, what="a second replica asked for")
        status = bed.wait(
            name,
            lambda s: condition(s, "ScalingHealthy").get("reason") == "ScaleUpBlocked",
            60,
            "growth blocked by preemption",
        )
        blocked = time.monotonic() - started
        scaling = condition(status, "ScalingHealthy")
        assert scaling["status"] == "False" and status["phase"] == "Degraded"
        assert condition(status, "Ready").get("status") == "True"  # the endpoint serves
        assert (
            "the autoscaler asked for 2" in scaling["message"]
            and "blocked by preemption" in scaling["message"]
        )
        assert f"{bed.ns}/{urgent} at priority 1000" in scaling["message"]
        events = bed.wait_events(name, "GrowthClaimUnplaced")
        assert len(events) == 1 and f"{name}-1" in events[0][2]
        bed.delete(urgent)  # the room it held frees: the scheduler places the waiting replica
        status = bed.wait(
            name,
            lambda s: condition(s, "ScalingHealthy").get("message", "").startswith("2 of 2 replicas ready"),
            60,
            "both replicas ready",
        )
        assert status["phase"] == "Ready" and condition(status, "ScalingHealthy")["status"] == "True"
    assert load.served and set(load.served) == {200}, set(load.served)
    print(
        f"growth under preemption (KWOK): ScaleUpBlocked {blocked:.0f}s after the load began, both replicas "
        f"ready {time.monotonic() - started - blocked:.0f}s after the order of higher priority went"
    )
