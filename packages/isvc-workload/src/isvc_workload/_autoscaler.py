"""HorizontalPodAutoscaler `{order}`: replicas within the class's bounds when the class asks for one."""

from __future__ import annotations

from typing import Any

from isvc_workload._common import WorkloadInputs, child_metadata

__all__ = ["CPU_TARGET_PERCENT", "SCALE_DOWN_WINDOW_SECONDS", "autoscaler"]

# The one signal every cluster has (metrics-server): the runtime containers' CPU against their request.
CPU_TARGET_PERCENT = 80
# A replica holds a device and a loaded model: it is not given up on a minute's lull.
SCALE_DOWN_WINDOW_SECONDS = 600


def autoscaler(inputs: WorkloadInputs) -> dict[str, Any] | None:
    """The autoscaler of the order's StatefulSet, or None when the class asks for none (or min = max)."""
    bounds = inputs.constraints
    if bounds is None or not bounds.autoscaler or bounds.max_replicas <= bounds.min_replicas:
        return None
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": child_metadata(inputs.order, inputs.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": inputs.name},
            "minReplicas": bounds.min_replicas,
            "maxReplicas": bounds.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": CPU_TARGET_PERCENT},
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_SECONDS}},
        },
    }
