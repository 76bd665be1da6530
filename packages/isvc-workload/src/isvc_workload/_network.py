"""NetworkPolicy `{order}`: who may connect to the order's runtime pods.

A runtime answers more than the API its token guards: /metrics, /tokenize, /invocations and its native
paths take no token, so any pod of the cluster that reached the runtime's port could use them. The policy
selects the order's pods and admits, on the API port, the controller's probes (its pods in the module's
namespace) and, for an External endpoint, the ingress controller's namespaces, for a ClusterLocal one the
pods of the order's own namespace (its callers; a namespace's owner admits more with a policy of their own:
policies add up); on the metrics port (the API port when the runtime has none of its own), the monitoring
namespaces. The kubelet's readiness probes come from the node, which NetworkPolicy implementations let in.
"""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER, ExposureType

from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._ports import container_ports, named_port
from isvc_workload._settings import WorkloadSettings

__all__ = ["CONTROLLER_POD_LABELS", "NAMESPACE_NAME_LABEL", "network_policy"]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace
CONTROLLER_POD_LABELS = {"app": "isvc-controller"}  # the chart's controller pods


def _namespaces(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: n}}} for n in names]


def network_policy(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any]:
    """The order's pods admit the controller, the ingress controller (External) or the order's namespace
    (ClusterLocal) on the API port, and monitoring on the metrics port; nothing else."""
    # The pod lists one port per number, under the first name (container_ports): a runtime that serves its
    # metrics on its API port lists it as http alone, so a port is named as the pod lists it.
    listed = {p.container_port: p.name for p in container_ports(inputs.runtime)}

    def port(name: str) -> dict[str, Any] | None:
        number = named_port(inputs.runtime, name)
        return None if number is None else {"protocol": "TCP", "port": listed[number]}

    api = [p for p in (port("http"), port("https")) if p is not None]
    metrics = [port("metrics") or api[0]]
    if inputs.metered:  # the Service leads to the request meter, which serves its own metrics too
        api.append({"protocol": "TCP", "port": "meter"})
        metrics.append({"protocol": "TCP", "port": "meter-metrics"})
    controller = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: settings.controller_namespace}},
        "podSelector": {"matchLabels": dict(CONTROLLER_POD_LABELS)},
    }
    callers = (
        _namespaces(settings.ingress_controller_namespaces)
        if inputs.exposure.type == ExposureType.EXTERNAL
        else [{"podSelector": {}}]
    )
    rules: list[dict[str, Any]] = [{"from": [controller, *callers], "ports": api}]
    if settings.monitoring_namespaces:
        rules.append({"from": _namespaces(settings.monitoring_namespaces), "ports": metrics})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": child_metadata(inputs.order, inputs.name),
        "spec": {
            "podSelector": {"matchLabels": {LABEL_ORDER: inputs.name}},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }
