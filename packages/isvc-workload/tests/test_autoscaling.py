"""The autoscaler per runtime and per cluster capability, and how the runtime's metrics are scraped (issue 28)."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import (
    Authentication,
    CompiledRuntime,
    Constraints,
    Exposure,
    ExposureType,
    MetricsPath,
    Port,
    ScalingPolicy,
    ScalingSignal,
    ScalingTargets,
)
from isvc_workload import (
    CPU_TARGET_PERCENT,
    CUSTOM_TARGET,
    MetricsApis,
    WorkloadSettings,
    autoscaling,
    pod_monitor,
    service,
    statefulset,
)
from workload_builders import make_inputs

DECKHOUSE = MetricsApis(pod_metric=True, pod_monitor=True)
KEDA = MetricsApis(scaled_object=True, pod_monitor=True, prometheus_url="http://prometheus.monitoring:9090")
BARE = MetricsApis()
BOUNDS = Constraints(min_replicas=1, max_replicas=2, autoscaler=True)

VLLM_LOAD = {
    "requestsWaiting": "vllm:num_requests_waiting",
    "cacheUsage": "vllm:kv_cache_usage_perc",
    "tokenGuarded": False,
}
LLAMA_LOAD = {"requestsWaiting": "llamacpp:requests_deferred", "tokenGuarded": True}


def vllm(load: dict[str, Any] | None = VLLM_LOAD) -> CompiledRuntime:
    return CompiledRuntime(
        recipe="vllm-chat",
        image="vllm/vllm-openai:v0.11.0",
        command=["vllm", "serve"],
        ports=[Port(name="http", container_port=8000), Port(name="metrics", container_port=8000)],
        content_hash="hash-1",
        api_key_env="VLLM_API_KEY",
        metrics_path="/metrics",
        load_metrics=load,
    )


def llama() -> CompiledRuntime:
    return CompiledRuntime(
        recipe="llamacpp-chat",
        image="ghcr.io/ggml-org/llama.cpp:server-cuda-b7018",
        command=["/app/llama-server"],
        ports=[Port(name="http", container_port=8080), Port(name="metrics", container_port=8080)],
        content_hash="hash-2",
        api_key_env="LLAMA_API_KEY",
        metrics_path="/metrics",
        load_metrics=LLAMA_LOAD,
    )


def tei() -> CompiledRuntime:
    return CompiledRuntime(
        recipe="tei-embed",
        image="ghcr.io/huggingface/text-embeddings-inference:1.8",
        command=["text-embeddings-router"],
        ports=[Port(name="http", container_port=8080), Port(name="metrics", container_port=9000)],
        content_hash="hash-3",
        api_key_env="API_KEY",
        metrics_path="/metrics",
        load_metrics={"requestsWaiting": "te_queue_size"},
    )


def kinds(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["kind"] for m in manifests]


def test_on_deckhouse_a_pod_metric_per_signal_feeds_an_hpa_of_type_pods() -> None:
    inputs = make_inputs(
        runtime=vllm(),
        constraints=BOUNDS,
        scaling=ScalingPolicy(
            min_replicas=1,
            max_replicas=2,
            autoscaler=True,
            targets=ScalingTargets(requests_waiting_per_replica=3, cache_usage_percent=90),
            scale_down_stabilization_seconds=120,
        ),
    )
    made = autoscaling(inputs, DECKHOUSE)
    assert made is not None
    assert kinds(made.manifests) == ["PodMetric", "PodMetric", "HorizontalPodAutoscaler"]
    waiting, cache, hpa = made.manifests
    assert waiting["apiVersion"] == "deckhouse.io/v1alpha1"
    assert waiting["metadata"]["name"] == "llm-a-waiting"
    assert waiting["spec"]["query"] == (
        "sum by (<<.GroupBy>>) (vllm:num_requests_waiting{<<.LabelMatchers>>})"
    )
    assert cache["spec"]["query"] == "max by (<<.GroupBy>>) (vllm:kv_cache_usage_perc{<<.LabelMatchers>>})"
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "llm-a-waiting"},
                "target": {"type": "AverageValue", "averageValue": "3"},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "llm-a-cache"},
                "target": {"type": "AverageValue", "averageValue": "900m"},
            },
        },
    ]
    assert hpa["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 120}}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)
    assert made.status.signal == ScalingSignal.QUEUE
    assert made.status.path == MetricsPath.PROMETHEUS_METRICS_ADAPTER
    assert [(m.name, m.target) for m in made.status.metrics] == [
        ("vllm:num_requests_waiting", "3"),
        ("vllm:kv_cache_usage_perc", "900m"),
    ]
    assert made.status.autoscaler == "HorizontalPodAutoscaler/llm-a"
    for manifest in made.manifests:
        assert manifest["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"


def test_the_queue_alone_by_default_and_for_a_runtime_without_a_cache_gauge() -> None:
    cache_asked = ScalingPolicy(
        min_replicas=1, max_replicas=2, autoscaler=True, targets=ScalingTargets(cache_usage_percent=80)
    )
    for runtime, scaling in ((vllm(), None), (llama(), cache_asked)):
        made = autoscaling(make_inputs(runtime=runtime, constraints=BOUNDS, scaling=scaling), DECKHOUSE)
        assert made is not None
        assert kinds(made.manifests) == ["PodMetric", "HorizontalPodAutoscaler"]
        [metric] = made.manifests[1]["spec"]["metrics"]
        assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "2"}  # the default
        assert made.manifests[1]["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 600}}


@pytest.mark.parametrize(
    ("runtime", "gauge"),
    [(vllm, "vllm:num_requests_waiting"), (llama, "llamacpp:requests_deferred"), (tei, "te_queue_size")],
    ids=["vllm", "llama.cpp", "tei"],
)
def test_each_runtime_is_followed_by_its_own_queue_gauge(runtime: Any, gauge: str) -> None:
    made = autoscaling(make_inputs(runtime=runtime(), constraints=BOUNDS), DECKHOUSE)
    assert made is not None
    assert gauge in made.manifests[0]["spec"]["query"]
    assert made.status.metrics[0].name == gauge


def test_with_keda_a_scaled_object_queries_prometheus_for_the_orders_pods() -> None:
    inputs = make_inputs(
        runtime=vllm(),
        constraints=BOUNDS,
        scaling=ScalingPolicy(
            min_replicas=1, max_replicas=2, autoscaler=True, targets=ScalingTargets(cache_usage_percent=90)
        ),
    )
    made = autoscaling(inputs, KEDA)
    assert made is not None
    [scaled] = made.manifests
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm-a"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 2)
    waiting, cache = spec["triggers"]
    assert waiting["type"] == "prometheus" and waiting["metricType"] == "AverageValue"
    assert waiting["metadata"] == {
        "serverAddress": "http://prometheus.monitoring:9090",
        "query": 'sum(vllm:num_requests_waiting{namespace="team",pod=~"llm-a-[0-9]+"})',
        "threshold": "2",
    }
    assert cache["metricType"] == "Value" and cache["metadata"]["threshold"] == "900m"
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 600
    }
    assert made.status.path == MetricsPath.KEDA and made.status.autoscaler == "ScaledObject/llm-a"


@pytest.mark.parametrize(
    ("apis", "runtime", "why"),
    [
        (BARE, vllm(), "neither Deckhouse's prometheus-metrics-adapter (PodMetric) nor KEDA (ScaledObject)"),
        (MetricsApis(scaled_object=True), vllm(), "no Prometheus for its triggers"),
        (DECKHOUSE, vllm(load=None), "publishes no load gauge"),
    ],
    ids=["no adapter", "KEDA without a Prometheus", "no gauge in the recipe"],
)
def test_cpu_only_where_no_adapter_can_read_the_queue_and_the_status_says_why(
    apis: MetricsApis, runtime: CompiledRuntime, why: str
) -> None:
    made = autoscaling(make_inputs(runtime=runtime, constraints=BOUNDS), apis)
    assert made is not None
    [hpa] = made.manifests
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == CPU_TARGET_PERCENT
    assert made.status.signal == ScalingSignal.CPU and made.status.path == MetricsPath.METRICS_SERVER
    assert made.status.message is not None and why in made.status.message


@pytest.mark.parametrize(
    "constraints",
    [
        None,
        Constraints(min_replicas=2, max_replicas=2, autoscaler=True),
        Constraints(min_replicas=1, max_replicas=3),
    ],
    ids=["no class", "min = max", "no autoscaler"],
)
def test_no_autoscaler_when_the_class_asks_for_none(constraints: Constraints | None) -> None:
    assert autoscaling(make_inputs(runtime=vllm(), constraints=constraints), DECKHOUSE) is None


def test_a_change_of_targets_re_renders_the_autoscaler_without_rolling_the_pods() -> None:
    settings = WorkloadSettings(model_fetch_image="fetch:1")
    before = make_inputs(runtime=vllm(), constraints=BOUNDS)
    after = make_inputs(
        runtime=vllm(),
        constraints=BOUNDS,
        scaling=ScalingPolicy(
            min_replicas=1,
            max_replicas=2,
            autoscaler=True,
            targets=ScalingTargets(requests_waiting_per_replica=5),
            scale_down_stabilization_seconds=60,
        ),
    )
    old, new = autoscaling(before, DECKHOUSE), autoscaling(after, DECKHOUSE)
    assert old is not None and new is not None and old.manifests != new.manifests
    assert statefulset(before, settings) == statefulset(after, settings)
    assert service(before, DECKHOUSE) == service(after, DECKHOUSE)


def test_a_token_guarded_runtime_is_scraped_by_a_pod_monitor_sending_the_orders_token() -> None:
    inputs = make_inputs(runtime=llama(), constraints=BOUNDS)
    monitor = pod_monitor(inputs, DECKHOUSE)
    assert monitor is not None
    assert monitor["metadata"]["labels"]["prometheus"] == "main"
    assert monitor["spec"]["selector"] == {"matchLabels": {"ai.deckhouse.io/inference-service": "llm-a"}}
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {
            "port": "http",
            "path": "/metrics",
            "authorization": {"type": "Bearer", "credentials": {"name": "llm-a-auth", "key": "token"}},
        }
    ]
    meta = service(inputs, DECKHOUSE)["metadata"]
    assert "prometheus.deckhouse.io/custom-target" not in meta["labels"]  # scraped once, not twice


def test_on_deckhouse_an_open_metrics_port_is_a_custom_target_of_the_service() -> None:
    inputs = make_inputs(runtime=tei(), constraints=BOUNDS)
    assert pod_monitor(inputs, DECKHOUSE) is None
    meta = service(inputs, DECKHOUSE)["metadata"]
    assert meta["labels"]["prometheus.deckhouse.io/custom-target"] == CUSTOM_TARGET
    assert meta["annotations"] == {
        "prometheus.deckhouse.io/port": "9000",
        "prometheus.deckhouse.io/path": "/metrics",
    }


def test_elsewhere_a_pod_monitor_scrapes_an_open_metrics_port_without_a_token() -> None:
    monitor = pod_monitor(make_inputs(runtime=tei()), KEDA)
    assert monitor is not None
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics"}]


def test_no_token_is_sent_for_an_endpoint_without_authentication() -> None:
    open_exposure = Exposure(type=ExposureType.CLUSTER_LOCAL, authentication=Authentication.NONE)
    inputs = make_inputs(runtime=llama(), exposure=open_exposure)
    monitor = pod_monitor(inputs, KEDA)
    assert monitor is not None and "authorization" not in monitor["spec"]["podMetricsEndpoints"][0]
    assert pod_monitor(inputs, DECKHOUSE) is None  # Deckhouse's custom target scrapes it
    assert service(inputs, DECKHOUSE)["metadata"]["labels"]["prometheus.deckhouse.io/custom-target"]


def test_nothing_scrapes_a_runtime_without_load_gauges_and_nothing_is_labelled_without_monitoring() -> None:
    assert pod_monitor(make_inputs(runtime=vllm(load=None)), DECKHOUSE) is None
    assert pod_monitor(make_inputs(runtime=llama()), BARE) is None
    guarded = service(make_inputs(runtime=llama()), BARE)["metadata"]
    assert "prometheus.deckhouse.io/custom-target" not in guarded["labels"]  # it could not send the token


@pytest.mark.parametrize(
    ("at_once", "stated", "target"), [(16, None, "2"), (64, None, "8"), (4, None, "1"), (64, 3, "3")]
)
def test_the_default_queue_target_is_an_eighth_of_what_a_replica_serves_at_once_issue_42(
    at_once: int, stated: int | None, target: str
) -> None:
    """Requests wait beyond the concurrentRequests a replica's KV budget serves at once; the autoscaler asks for
    a replica once an eighth of that many wait (a class's own target wins)."""
    runtime = vllm().model_copy(update={"concurrent_requests": at_once})
    scaling = ScalingPolicy(
        min_replicas=1,
        max_replicas=2,
        autoscaler=True,
        targets=ScalingTargets(requests_waiting_per_replica=stated),
    )
    made = autoscaling(make_inputs(runtime=runtime, constraints=BOUNDS, scaling=scaling), DECKHOUSE)
    assert made is not None
    [metric] = made.manifests[1]["spec"]["metrics"]
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": target}
    assert [(m.name, m.target) for m in made.status.metrics] == [("vllm:num_requests_waiting", target)]
