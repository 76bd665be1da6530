"""WorkloadReady: the children are applied, and the replicas came up."""

from __future__ import annotations

import logging

from isvc_api import ConditionType, EndpointStatus, Reason, Verdict

from isvc_operator._ports import Deps, Obj, WorkloadUnbuildable
from isvc_operator._scope import RETRY_CAPACITY, RETRY_SOON, Children, OrderScope

__all__ = ["step"]

log = logging.getLogger(__name__)


def _take_down_unplaced(scope: OrderScope, deps: Deps) -> None:
    """No plan and no room: a workload this order still runs holds devices given to others."""
    for deployment in deps.cluster.owned("Deployment", scope.namespace, scope.name):
        deps.cluster.delete("apps/v1", "Deployment", scope.namespace, deployment["metadata"]["name"])
    scope.endpoint = None


def _auth_secret(scope: OrderScope, deps: Deps) -> str | None:
    """The endpoint's token Secret: made once, never rotated on a pass (read first, create when missing)."""
    assert scope.policy is not None
    if not scope.policy.token_required:
        return None
    wanted = deps.workload.auth_secret(scope.order)
    secret = (deps.cluster.get_secret(scope.namespace, wanted["metadata"]["name"])
              or deps.cluster.create(wanted))
    scope.token = deps.workload.token(secret)
    return str(secret["metadata"]["name"])


def _refused_by_cluster(exc: Exception) -> str | None:
    """The API server's own words when it refused one of our manifests (4xx, not a conflict or a throttle)."""
    status = getattr(exc, "status", None)
    if status is None or not 400 <= int(status) < 500 or int(status) in (409, 429):
        return None
    return str(getattr(exc, "body", "") or exc)


def _apply(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> Verdict | None:
    try:
        for manifest in manifests:
            deps.cluster.apply(manifest)
    except Exception as exc:
        words = _refused_by_cluster(exc)
        if words is None:
            raise
        return Verdict.refuse(Reason.WORKLOAD_ERROR, f"the cluster refused the workload: {words[:400]}")
    current = {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
    # Claim templates are immutable: a new plan gets a new one, and the old ones go.
    for template in deps.cluster.owned("ResourceClaimTemplate", scope.namespace, scope.name):
        if template["metadata"]["name"] not in current:
            deps.cluster.delete("resource.k8s.io/v1", "ResourceClaimTemplate", scope.namespace,
                                template["metadata"]["name"])
    return None


def step(scope: OrderScope, deps: Deps) -> Verdict:
    """Apply the children of the plan in force, publish the endpoint, and judge the replicas."""
    if scope.plan is None or scope.policy is None:
        if scope.unplaced:
            _take_down_unplaced(scope, deps)
        return scope.waits_for(ConditionType.PLANNED)
    scope.auth_secret_name = _auth_secret(scope, deps)
    try:
        manifests = deps.workload.manifests(scope.order, scope.plan, scope.policy, scope.auth_secret_name)
    except WorkloadUnbuildable as exc:
        return Verdict.refuse(Reason.WORKLOAD_ERROR, (
            f"the workload cannot be built from the plan: {exc}; delete the LaunchPlan if it was written "
            "by hand, or ask your administrator (module settings)."))
    refused = _apply(scope, deps, manifests)
    if refused is not None:
        return refused
    scope.endpoint = EndpointStatus(
        url=deps.workload.endpoint(scope.order, scope.policy), type=scope.policy.exposure.type,
        tool_calling_supported=bool(scope.plan.runtime and scope.plan.runtime.tool_calling_supported))
    deployments = deps.cluster.owned("Deployment", scope.namespace, scope.name)
    children = Children(deployments[0] if deployments else None,
                        deps.cluster.owned("Pod", scope.namespace, scope.name),
                        deps.cluster.owned("ResourceClaim", scope.namespace, scope.name))
    scope.children = children
    verdict, failure = deps.workload.judge(
        children.deployment, children.pods, children.claims, scope.previous.startup_failure,
        lambda pod, container: deps.cluster.read_log(scope.namespace, pod, container))
    scope.startup_failure = failure
    if not verdict.holds:
        exhausted = verdict.reason == Reason.RESOURCE_CLAIM_EXHAUSTED.value
        scope.requeue(RETRY_CAPACITY if exhausted else RETRY_SOON)
    return verdict
