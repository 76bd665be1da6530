"""Service `{order}`: the stable in-cluster address of the replicas."""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER

from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._ports import SERVICE_PORT, named_port

__all__ = ["HTTPS_SERVICE_PORT", "service"]

HTTPS_SERVICE_PORT = 443  # ClusterLocal URLs carry no port: https lands here


def service(inputs: WorkloadInputs) -> dict[str, Any]:
    """ClusterIP Service: 8000 → the runtime's http port, plus its metrics and https ports if it has them."""
    ports: list[dict[str, Any]] = [
        {"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"},
    ]
    metrics = named_port(inputs.runtime, "metrics")
    if metrics is not None and metrics != SERVICE_PORT:
        ports.append({"name": "metrics", "port": metrics, "targetPort": "metrics", "protocol": "TCP"})
    if named_port(inputs.runtime, "https") is not None:
        ports.append({"name": "https", "port": HTTPS_SERVICE_PORT, "targetPort": "https", "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(inputs.order, inputs.name),
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_ORDER: inputs.name},
            "ports": ports,
        },
    }
