"""The request meter beside the runtime (issue 42): with `meterImage` set, the Service leads to the meter, the
meter to the runtime's API port, the NetworkPolicy admits both, and the PodMonitor scrapes the meter's counts."""

from __future__ import annotations

from isvc_api import CompiledRuntime, Constraints, Port
from isvc_workload import (
    METER_METRICS_PORT,
    METER_PORT,
    MetricsApis,
    WorkloadSettings,
    network_policy,
    pod_monitor,
    service,
    statefulset,
)
from workload_builders import make_inputs

METERED = WorkloadSettings(meter_image="registry.example/isvc/controller:1", model_fetch_image=None)
LLAMA = CompiledRuntime(
    recipe="llamacpp-chat",
    image="ghcr.io/ggml-org/llama.cpp:server-cuda-b7018",
    command=["/app/llama-server"],
    ports=[Port(name="http", container_port=8080), Port(name="metrics", container_port=8080)],
    content_hash="h",
    load_metrics={"requestsWaiting": "llamacpp:requests_deferred", "tokenGuarded": True},
)


def test_the_meter_stands_between_the_service_and_the_runtime() -> None:
    inputs = make_inputs(runtime=LLAMA, metered=True)
    pod = statefulset(inputs, METERED)["spec"]["template"]["spec"]
    runtime, meter = pod["containers"]
    assert meter["image"] == "registry.example/isvc/controller:1" and meter["command"] == ["isvc-meter"]
    assert meter["args"] == [
        "--listen",
        str(METER_PORT),
        "--upstream",
        "8080",
        "--metrics",
        str(METER_METRICS_PORT),
    ]
    assert runtime["ports"][0]["containerPort"] == 8080  # the runtime keeps its own port, reached on loopback
    [http] = [p for p in service(inputs)["spec"]["ports"] if p["name"] == "http"]
    assert http["targetPort"] == METER_PORT
    api, metrics = network_policy(inputs, METERED)["spec"]["ingress"]
    assert {"protocol": "TCP", "port": "meter"} in api["ports"]
    assert {"protocol": "TCP", "port": "meter-metrics"} in metrics["ports"]
    bounds = make_inputs(runtime=LLAMA, metered=True, constraints=Constraints(min_replicas=1, max_replicas=1))
    monitor = pod_monitor(bounds, MetricsApis(pod_monitor=True))
    assert monitor is not None
    assert {"port": "meter-metrics", "path": "/metrics"} in monitor["spec"]["podMetricsEndpoints"]


def test_without_a_meter_image_the_service_reaches_the_runtime_as_before() -> None:
    inputs = make_inputs(runtime=LLAMA)
    pod = statefulset(inputs, WorkloadSettings())["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["server"]
    [http] = [p for p in service(inputs)["spec"]["ports"] if p["name"] == "http"]
    assert http["targetPort"] == 8080
