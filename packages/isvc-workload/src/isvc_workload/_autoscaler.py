"""The autoscaler of an order's StatefulSet, and how the runtime's metrics reach the cluster's monitoring.

The replicas follow the runtime's own queue (requests waiting for a free slot of the batch, and KV-cache use
where the runtime publishes it), read through the metrics path the cluster already runs, never through the
module's code:

- Deckhouse (`deckhouse.io/v1alpha1` PodMetric served): a PodMetric per signal, a namespaced PromQL query
  the prometheus-metrics-adapter module serves as a custom metric, and an `autoscaling/v2` HPA of type Pods;
- elsewhere, with KEDA (`keda.sh/v1alpha1` ScaledObject served) and a Prometheus address in the settings: a
  ScaledObject with a prometheus trigger per signal (KEDA makes and feeds the HPA);
- otherwise, or for a runtime that publishes no load gauge: an HPA on the containers' CPU (metrics-server).

Scraping: a PodMonitor (`monitoring.coreos.com/v1`, label `prometheus: main`) where that kind is served and
either the runtime's metrics path wants the endpoint's token (the monitor sends it from the order's auth
Secret) or Deckhouse's custom targets are not there; otherwise the order's Service carries Deckhouse's
custom-target label and port/path annotations (`scrape_labels`). Never both: a target scraped twice would
count its queue twice.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from isvc_api import (
    LABEL_ORDER,
    Authentication,
    LoadMetrics,
    MetricsPath,
    ScalingMetric,
    ScalingPolicy,
    ScalingSignal,
    ScalingStatus,
)
from pydantic import BaseModel, ConfigDict, Field

from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._ports import container_ports, named_port
from isvc_workload._secret import AUTH_SECRET_KEY, auth_secret_name

__all__ = [
    "AUTOSCALING_KINDS",
    "CPU_TARGET_PERCENT",
    "CUSTOM_TARGET",
    "SCALE_DOWN_WINDOW_SECONDS",
    "Autoscaling",
    "MetricsApis",
    "autoscaler",
    "autoscaling",
    "load_metrics",
    "pod_monitor",
    "scrape_annotations",
    "scrape_labels",
]

# The one signal every cluster has (metrics-server): the runtime containers' CPU against their request.
CPU_TARGET_PERCENT = 80
# A replica holds a device and a loaded model: it is not given up on a minute's lull (the class may say).
SCALE_DOWN_WINDOW_SECONDS = 600
# The name Deckhouse's Prometheus lists the runtimes' targets under (monitoring-custom: the label's value).
CUSTOM_TARGET = "isvc-runtime"

POD_METRIC = ("deckhouse.io/v1alpha1", "PodMetric")
SCALED_OBJECT = ("keda.sh/v1alpha1", "ScaledObject")
POD_MONITOR = ("monitoring.coreos.com/v1", "PodMonitor")
# (apiVersion, kind) of every object `autoscaling` and `pod_monitor` may make for an order
AUTOSCALING_KINDS = (("autoscaling/v2", "HorizontalPodAutoscaler"), POD_METRIC, SCALED_OBJECT, POD_MONITOR)
_DECKHOUSE = "prometheus.deckhouse.io"


class MetricsApis(BaseModel):
    """Which metrics paths the cluster serves (discovery), and where KEDA finds Prometheus."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pod_metric: bool = Field(default=False, description="deckhouse.io/v1alpha1 PodMetric is served.")
    scaled_object: bool = Field(default=False, description="keda.sh/v1alpha1 ScaledObject is served.")
    pod_monitor: bool = Field(default=False, description="monitoring.coreos.com/v1 PodMonitor is served.")
    prometheus_url: str | None = Field(default=None, description="Prometheus for KEDA's triggers.")


class Autoscaling(BaseModel):
    """The objects that scale an order's set, and what its status says they follow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifests: list[dict[str, Any]]
    status: ScalingStatus


def load_metrics(inputs: WorkloadInputs) -> LoadMetrics | None:
    """The runtime's load gauges as its recipe names them (compiled into the plan), or None."""
    extra = inputs.runtime.model_extra or {}
    raw = extra.get("load_metrics", extra.get("loadMetrics"))
    return LoadMetrics.model_validate(raw) if raw else None


def _metrics_port(inputs: WorkloadInputs) -> int | None:
    return named_port(inputs.runtime, "metrics") or named_port(inputs.runtime, "http")


def _metrics_path(inputs: WorkloadInputs) -> str:
    extra = inputs.runtime.model_extra or {}
    return str(extra.get("metrics_path") or extra.get("metricsPath") or "/metrics")


def _token_needed(inputs: WorkloadInputs, load: LoadMetrics) -> bool:
    return load.token_guarded and inputs.exposure.authentication == Authentication.TOKEN


def _by_pod_monitor(inputs: WorkloadInputs, apis: MetricsApis) -> bool:
    """Whether the order's metrics are scraped through a PodMonitor (else through Deckhouse's custom target)."""
    load = load_metrics(inputs)
    if load is None or not apis.pod_monitor:
        return False
    return _token_needed(inputs, load) or not apis.pod_metric


def pod_monitor(inputs: WorkloadInputs, apis: MetricsApis) -> dict[str, Any] | None:
    """PodMonitor `{order}` for the runtime's metrics, with the order's token when the runtime wants it."""
    load = load_metrics(inputs)
    port = _metrics_port(inputs)
    if load is None or port is None or not _by_pod_monitor(inputs, apis):
        return None
    # the container lists each number once, under the first name that has it (http before metrics)
    name = next(p.name for p in container_ports(inputs.runtime) if p.container_port == port)
    endpoint: dict[str, Any] = {"port": name, "path": _metrics_path(inputs)}
    if _token_needed(inputs, load):
        endpoint["authorization"] = {
            "type": "Bearer",
            "credentials": {"name": auth_secret_name(inputs.name), "key": AUTH_SECRET_KEY},
        }
    meta = child_metadata(inputs.order, inputs.name)
    meta["labels"] = {**meta["labels"], "prometheus": "main"}  # the label Deckhouse's Prometheus selects by
    return {
        "apiVersion": POD_MONITOR[0],
        "kind": POD_MONITOR[1],
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {LABEL_ORDER: inputs.name}},
            # the request meter's counts of the runtime's answers beside the runtime's own (issue 42)
            "podMetricsEndpoints": [endpoint, *_meter_endpoints(inputs)],
        },
    }


def _meter_endpoints(inputs: WorkloadInputs) -> list[dict[str, Any]]:
    """The request meter's metrics, when the runtime runs behind one (no token: they say no more than counts)."""
    return [{"port": "meter-metrics", "path": "/metrics"}] if inputs.metered else []


def scrape_labels(inputs: WorkloadInputs, apis: MetricsApis) -> dict[str, str]:
    """Labels of the order's Service that make Deckhouse's Prometheus scrape the runtime (monitoring-custom);
    none when a PodMonitor does it, or when the metrics want a token this way cannot send."""
    load = load_metrics(inputs)
    if load is None or _by_pod_monitor(inputs, apis) or _token_needed(inputs, load):
        return {}
    return {f"{_DECKHOUSE}/custom-target": CUSTOM_TARGET}


def scrape_annotations(inputs: WorkloadInputs, apis: MetricsApis) -> dict[str, str]:
    """The port (the container's, as monitoring-custom wants for a Service) and path of the custom target."""
    port = _metrics_port(inputs)
    if not scrape_labels(inputs, apis) or port is None:
        return {}
    return {f"{_DECKHOUSE}/port": str(port), f"{_DECKHOUSE}/path": _metrics_path(inputs)}


def _policy(inputs: WorkloadInputs) -> ScalingPolicy:
    return inputs.scaling or ScalingPolicy()


def _behavior(inputs: WorkloadInputs) -> dict[str, Any]:
    return {"scaleDown": {"stabilizationWindowSeconds": _policy(inputs).scale_down_stabilization_seconds}}


def _drives(inputs: WorkloadInputs) -> bool:
    bounds = inputs.constraints
    return bounds is not None and bounds.autoscaler and bounds.max_replicas > bounds.min_replicas


def _hpa(inputs: WorkloadInputs, metrics: list[dict[str, Any]]) -> dict[str, Any]:
    bounds = inputs.constraints
    assert bounds is not None
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": child_metadata(inputs.order, inputs.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": inputs.name},
            "minReplicas": bounds.min_replicas,
            "maxReplicas": bounds.max_replicas,
            "metrics": metrics,
            "behavior": _behavior(inputs),
        },
    }


def autoscaler(inputs: WorkloadInputs) -> dict[str, Any] | None:
    """The CPU autoscaler of the order's StatefulSet, or None when the class asks for none (or min = max)."""
    if not _drives(inputs):
        return None
    return _hpa(
        inputs,
        [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": CPU_TARGET_PERCENT},
                },
            }
        ],
    )


def _signals(inputs: WorkloadInputs, load: LoadMetrics) -> list[tuple[str, str, str, str]]:
    """(suffix, gauge, aggregation, target per replica) of each signal the class and the runtime agree on."""
    targets = _policy(inputs).effective_targets
    waiting = targets.waiting_for(inputs.runtime.concurrent_requests)  # beyond what a replica serves at once
    out = [("waiting", load.requests_waiting, "sum", str(waiting))]
    if targets.cache_usage_percent is not None and load.cache_usage:
        fraction = Decimal(targets.cache_usage_percent) / 100
        out.append(("cache", load.cache_usage, "max", _quantity(fraction)))
    return out


def _quantity(value: Decimal) -> str:
    """A fraction as a Kubernetes quantity: 0.9 -> 900m, 1 -> 1."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


def _deckhouse(inputs: WorkloadInputs, load: LoadMetrics) -> Autoscaling:
    manifests: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    followed: list[ScalingMetric] = []
    for suffix, gauge, how, target in _signals(inputs, load):
        name = f"{inputs.name}-{suffix}"
        manifests.append(
            {
                "apiVersion": POD_METRIC[0],
                "kind": POD_METRIC[1],
                "metadata": child_metadata(inputs.order, name),
                # <<.LabelMatchers>> names the namespace and the pods the HPA asks about; one value per pod
                "spec": {"query": f"{how} by (<<.GroupBy>>) ({gauge}{{<<.LabelMatchers>>}})"},
            }
        )
        metrics.append(
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": name},
                    "target": {"type": "AverageValue", "averageValue": target},
                },
            }
        )
        followed.append(ScalingMetric(name=gauge, target=target))
    manifests.append(_hpa(inputs, metrics))
    return Autoscaling(
        manifests=manifests,
        status=ScalingStatus(
            signal=ScalingSignal.QUEUE,
            path=MetricsPath.PROMETHEUS_METRICS_ADAPTER,
            metrics=followed,
            autoscaler=f"HorizontalPodAutoscaler/{inputs.name}",
        ),
    )


def _keda(inputs: WorkloadInputs, load: LoadMetrics, prometheus: str) -> Autoscaling:
    bounds = inputs.constraints
    assert bounds is not None
    # the set's pods are {order}-0, {order}-1, ...; the scrape labels every series with its pod and namespace
    pods = f'namespace="{inputs.namespace}",pod=~"{inputs.name}-[0-9]+"'
    triggers = []
    followed = []
    for suffix, gauge, how, target in _signals(inputs, load):
        # AverageValue: KEDA's HPA divides the order's total by its replicas (max: any replica over the target)
        query = f"{how}({gauge}{{{pods}}})"
        triggers.append(
            {
                "type": "prometheus",
                "name": f"requests-{suffix}" if suffix == "waiting" else f"kv-{suffix}",
                "metricType": "AverageValue" if how == "sum" else "Value",
                "metadata": {"serverAddress": prometheus, "query": query, "threshold": target},
            }
        )
        followed.append(ScalingMetric(name=gauge, target=target))
    return Autoscaling(
        manifests=[
            {
                "apiVersion": SCALED_OBJECT[0],
                "kind": SCALED_OBJECT[1],
                "metadata": child_metadata(inputs.order, inputs.name),
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": inputs.name},
                    "minReplicaCount": bounds.min_replicas,
                    "maxReplicaCount": bounds.max_replicas,
                    "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(inputs)}},
                    "triggers": triggers,
                },
            }
        ],
        status=ScalingStatus(
            signal=ScalingSignal.QUEUE,
            path=MetricsPath.KEDA,
            metrics=followed,
            autoscaler=f"ScaledObject/{inputs.name}",
        ),
    )


def autoscaling(inputs: WorkloadInputs, apis: MetricsApis) -> Autoscaling | None:
    """The objects that scale the order's set on the best signal the cluster can read, or None when the class
    asks for no autoscaler (or its bounds leave it nothing to do)."""
    if not _drives(inputs):
        return None
    load = load_metrics(inputs)
    why: str
    if load is None:
        why = f"the runtime of recipe {inputs.runtime.recipe} publishes no load gauge"
    elif apis.pod_metric:
        return _deckhouse(inputs, load)
    elif apis.scaled_object and apis.prometheus_url:
        return _keda(inputs, load, apis.prometheus_url)
    elif apis.scaled_object:
        why = "KEDA is served but the module settings name no Prometheus for its triggers (autoscaling.prometheusURL)"
    else:
        why = "the cluster serves neither Deckhouse's prometheus-metrics-adapter (PodMetric) nor KEDA (ScaledObject)"
    hpa = autoscaler(inputs)
    assert hpa is not None
    return Autoscaling(
        manifests=[hpa],
        status=ScalingStatus(
            signal=ScalingSignal.CPU,
            path=MetricsPath.METRICS_SERVER,
            metrics=[ScalingMetric(name="cpu", target=f"{CPU_TARGET_PERCENT}%")],
            autoscaler=f"HorizontalPodAutoscaler/{inputs.name}",
            message=f"Scales on CPU: {why}.",
        ),
    )
