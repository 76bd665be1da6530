"""Service `{order}`: the stable in-cluster address of the replicas."""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER

from isvc_workload._autoscaler import MetricsApis, scrape_annotations, scrape_labels
from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._meter import api_target_port
from isvc_workload._ports import SERVICE_PORT, named_port

__all__ = ["HTTPS_SERVICE_PORT", "METRICS_SERVICE_PORT", "service"]

HTTPS_SERVICE_PORT = 443  # ClusterLocal URLs carry no port: https lands here
METRICS_SERVICE_PORT = 9090  # scrape here, whether the runtime serves metrics on its API port or its own


def service(inputs: WorkloadInputs, apis: MetricsApis | None = None) -> dict[str, Any]:
    """ClusterIP Service: 8000 → the runtime's http port, plus its metrics and https ports if it has them;
    labelled as Deckhouse's custom scrape target when no PodMonitor scrapes the runtime (`scrape_labels`)."""
    # Target numbers, not names: a runtime may serve metrics on its API port, and the pod names it once.
    http = api_target_port(inputs)  # the request meter's, when the runtime runs behind one (issue 42)
    ports: list[dict[str, Any]] = [
        {"name": "http", "port": SERVICE_PORT, "targetPort": http, "protocol": "TCP"},
    ]
    metrics = named_port(inputs.runtime, "metrics")
    if metrics is not None:
        ports.append(
            {"name": "metrics", "port": METRICS_SERVICE_PORT, "targetPort": metrics, "protocol": "TCP"}
        )
    https = named_port(inputs.runtime, "https")
    if https is not None:
        ports.append({"name": "https", "port": HTTPS_SERVICE_PORT, "targetPort": https, "protocol": "TCP"})
    apis = apis or MetricsApis()
    meta = child_metadata(inputs.order, inputs.name, scrape_annotations(inputs, apis) or None)
    meta["labels"] = {**meta["labels"], **scrape_labels(inputs, apis)}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_ORDER: inputs.name},
            "ports": ports,
        },
    }
