"""WorkloadReady, what someone else aims at the order's children: an autoscaler of the order's set that the
order did not make goes (the set's replica count is the module's, or its own autoscaler's)."""

from __future__ import annotations

import logging

from isvc_api import Obj

from isvc_operator._outcome import Decisions, Delete
from isvc_operator._ports import Deps
from isvc_operator._scope import OrderScope, made_for

__all__ = ["FOREIGN_AUTOSCALER", "foreign_autoscalers"]

log = logging.getLogger(__name__)
FOREIGN_AUTOSCALER = "ForeignAutoscalerRemoved"  # the event: an autoscaler aimed at the order's set, deleted


def foreign_autoscalers(scope: OrderScope, deps: Deps, d: Decisions, manifests: list[Obj]) -> None:
    """An autoscaler someone else aims at the order's set goes (the order's replica count is the module's or
    its own autoscaler's): deleted, or its ScaledObject when KEDA made it; a Warning event names it."""
    sets = {m["metadata"]["name"] for m in manifests if m["kind"] == "StatefulSet"}
    ours = {
        o["metadata"]["name"]
        for o in deps.cluster.owned("ScaledObject", scope.namespace, scope.name)
        if made_for(o, scope)
    }
    for hpa in deps.cluster.autoscalers_of(scope.namespace, "StatefulSet", sets):
        meta = hpa["metadata"]
        owner: Obj = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), {})
        keda = owner.get("kind") == "ScaledObject"
        if made_for(hpa, scope) or (keda and owner.get("name") in ours):
            continue
        if keda:  # KEDA makes it again from its ScaledObject: that goes
            gone = Delete(str(owner.get("apiVersion")), "ScaledObject", str(owner.get("name")))
        else:
            gone = Delete("autoscaling/v2", "HorizontalPodAutoscaler", meta["name"])
        message = (
            f"{gone.kind} {gone.name} aimed at the order's StatefulSet, whose replica count is the module's, "
            "and is deleted; ask for replicas through the order's class (its scalingPolicy)."
        )
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
        d.write(gone)
        d.event("Warning", FOREIGN_AUTOSCALER, message)
