"""PodDisruptionBudget `{order}`: a drain takes an order's replicas down one at a time, where it has several.

The policy (module/docs/FAQ.md, "What happens to my order when a node is drained or lost?"): an order whose
class lets it run more than one replica gets a budget of `maxUnavailable: 1`, so `kubectl drain` evicts its
replicas one by one, each next one once the evicted one serves again elsewhere; a replica that does not serve
(not Ready) may always be evicted (`unhealthyPodEvictionPolicy: AlwaysAllow`), so a stuck replica never holds
a drain. An order of one replica gets no budget: a budget could only block its one pod for ever, and a drain
must end; the order moves (its replica is made again on another device) and says so meanwhile.
"""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER

from isvc_workload._common import WorkloadInputs, child_metadata

__all__ = ["disruption_budget"]


def disruption_budget(inputs: WorkloadInputs) -> dict[str, Any] | None:
    """The budget of the order's replicas, or None when its class keeps it at one replica."""
    bounds = inputs.constraints
    if bounds is None or max(bounds.min_replicas, bounds.max_replicas) < 2:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": child_metadata(inputs.order, inputs.name),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {LABEL_ORDER: inputs.name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
