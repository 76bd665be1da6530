"""The request meter beside the runtime (issue 42): the container that counts the runtime's own answers, and the
port the order's Service reaches the runtime through.

llama.cpp's server publishes no count of the requests it fails, so with `meterImage` set (the chart sets it to the
controller's image, whose `isvc-meter` it runs) every replica runs `isvc_health`'s meter beside its runtime: the
Service's `http` port leads to the meter, the meter to the runtime's API port on the pod's loopback. Its metrics
(`isvc_runtime_responses_total{code}`) are the order's PodMonitor's second endpoint.
"""

from __future__ import annotations

from typing import Any

from isvc_workload._common import WorkloadInputs
from isvc_workload._ports import named_port
from isvc_workload._settings import WorkloadSettings

__all__ = ["METER_METRICS_PORT", "METER_PORT", "api_target_port", "meter_container"]

METER_PORT = 8090  # the meter's listener: the Service's http port leads here
METER_METRICS_PORT = 9102  # the meter's own metrics
# No CPU asked: the meter passes bytes while the runtime computes, and a share's pod asks its CPU for the runtime
# (2 × the share, at least 1), which is all a small node may have.
_RESOURCES = {"requests": {"memory": "32Mi"}, "limits": {"memory": "256Mi"}}
_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}


def api_target_port(inputs: WorkloadInputs) -> int | None:
    """The pod port the order's API is reached at: the meter's, when the runtime runs behind one."""
    return METER_PORT if inputs.metered else named_port(inputs.runtime, "http")


def meter_container(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any] | None:
    """The meter container of the order's pods, or None when the module runs none."""
    upstream = named_port(inputs.runtime, "http")
    if not inputs.metered or settings.meter_image is None or upstream is None:
        return None
    return {
        "name": "meter",
        "image": settings.meter_image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["isvc-meter"],
        "args": [
            "--listen",
            str(METER_PORT),
            "--upstream",
            str(upstream),
            "--metrics",
            str(METER_METRICS_PORT),
        ],
        "ports": [
            {"name": "meter", "containerPort": METER_PORT, "protocol": "TCP"},
            {"name": "meter-metrics", "containerPort": METER_METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": _RESOURCES,
        "securityContext": _SECURITY,
    }
