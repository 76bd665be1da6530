"""Growth on the runtime's own load (issue 28): the order says what it scales on, the objects of a metrics path
no longer wanted go (KEDA's own HPA stays), and minReplicas 0 is a class that does not hold."""

from __future__ import annotations

from typing import Any

import isvc_workload
from isvc_api import (
    ClassReason,
    CompiledRuntime,
    InferenceService,
    InferenceServiceClass,
    InferenceServiceClassSpec,
    LaunchPlanSpec,
    LoadMetrics,
    MetricsPath,
    Port,
    ScalingMetric,
    ScalingSignal,
    ScalingStatus,
)
from isvc_operator._adapters import Workload
from isvc_operator._policy import EffectivePolicy, judge_class

from .fakes import ESTIMATES, PLACEMENT, World, klass, order

LABELS = {"ai.deckhouse.io/inference-service": "support-llm"}
ORDER_OWNER = {
    "apiVersion": "ai.deckhouse.io/v1alpha1",
    "kind": "InferenceService",
    "name": "support-llm",
    "uid": "uid-support-llm",
    "controller": True,
}


def child(kind: str, api_version: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a", "labels": LABELS, "ownerReferences": [owner]},
    }


def test_the_order_says_what_its_replicas_follow() -> None:
    world = World()
    world.workload.scaling_status = ScalingStatus(
        signal=ScalingSignal.QUEUE,
        path=MetricsPath.PROMETHEUS_METRICS_ADAPTER,
        metrics=[ScalingMetric(name="llamacpp:requests_deferred", target="2")],
        autoscaler="HorizontalPodAutoscaler/support-llm",
    )
    status = world.run()
    assert status["scaling"] == {
        "signal": "Queue",
        "path": "PrometheusMetricsAdapter",
        "metrics": [{"name": "llamacpp:requests_deferred", "target": "2"}],
        "autoscaler": "HorizontalPodAutoscaler/support-llm",
    }
    world.workload.scaling_status = None  # the class dropped its autoscaler
    assert "scaling" not in world.run()


def test_what_scaled_the_order_before_goes_when_the_metrics_path_changes_but_kedas_own_hpa_stays() -> None:
    world = World()
    world.workload.extra = [child("PodMetric", "deckhouse.io/v1alpha1", "support-llm-waiting", ORDER_OWNER)]
    world.run()
    assert world.cluster.owned("PodMetric", "team-a", "support-llm")
    keda_owner = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "name": "support-llm",
        "uid": "so-1",
    }
    keda_owner["controller"] = True  # type: ignore[assignment]
    world.cluster.put(child("HorizontalPodAutoscaler", "autoscaling/v2", "keda-hpa-support-llm", keda_owner))
    # KEDA came, Deckhouse's adapter went: a ScaledObject is wanted now
    world.workload.extra = [child("ScaledObject", "keda.sh/v1alpha1", "support-llm", ORDER_OWNER)]
    world.run()
    assert world.cluster.owned("PodMetric", "team-a", "support-llm") == []
    assert [
        h["metadata"]["name"] for h in world.cluster.owned("HorizontalPodAutoscaler", "team-a", "support-llm")
    ] == ["keda-hpa-support-llm"]
    assert world.cluster.owned("ScaledObject", "team-a", "support-llm")


def test_min_replicas_zero_stored_before_the_schema_refused_it_is_a_class_that_does_not_hold() -> None:
    spec = InferenceServiceClassSpec.model_validate(
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "scalingPolicy": {"minReplicas": 0, "maxReplicas": 2, "autoscaler": True},
        }
    )
    reason, message = judge_class(spec, None, None)
    assert reason == ClassReason.INVALID_POLICY
    assert message.startswith("scalingPolicy.minReplicas 0 (scale to zero) is not supported")
    assert "set minReplicas to 1 or more" in message


def test_a_plan_compiled_before_recipes_named_their_gauges_scales_on_the_recipes_gauge() -> None:
    runtime = CompiledRuntime(
        recipe="llamacpp-chat",
        image="ghcr.io/ggml-org/llama.cpp:server-cuda-b7018",
        command=["/app/llama-server"],
        ports=[Port(name="http", container_port=8080), Port(name="metrics", container_port=8080)],
        content_hash="h",
        api_key_env="LLAMA_API_KEY",
    )
    plan = LaunchPlanSpec(placement=PLACEMENT, estimates=ESTIMATES, runtime=runtime)
    policy = EffectivePolicy.of(
        InferenceServiceClass.model_validate(
            klass(scalingPolicy={"minReplicas": 1, "maxReplicas": 2, "autoscaler": True})
        )
    )
    gauge = LoadMetrics(requests_waiting="llamacpp:requests_deferred", token_guarded=True)
    adapter = Workload(
        isvc_workload.WorkloadSettings(public_domain_template="%s.example.com"),
        lambda: False,
        lambda name: 0,
        lambda: isvc_workload.MetricsApis(pod_metric=True, pod_monitor=True),
        lambda recipe: gauge if recipe == "llamacpp-chat" else None,
    )
    the_order = InferenceService.model_validate(order())
    kinds = [m["kind"] for m in adapter.manifests(the_order, plan, policy, "support-llm-auth")]
    assert kinds.count("PodMetric") == 1 and "PodMonitor" in kinds and "HorizontalPodAutoscaler" in kinds
    scaling = adapter.scaling(the_order, plan, policy)
    assert scaling is not None and scaling.metrics[0].name == "llamacpp:requests_deferred"
