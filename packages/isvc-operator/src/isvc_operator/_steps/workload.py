"""WorkloadReady: the children are applied, and the replicas came up."""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime

from isvc_api import (
    ConditionType,
    EndpointStatus,
    ExposureType,
    Obj,
    Reason,
    Verdict,
    condition_of,
    conditions_of,
    find_condition,
)
from isvc_workload import model_volume

from isvc_operator._outcome import Annotate, Decisions, Delete, Outcome
from isvc_operator._ports import Deps, TemporaryError, WorkloadUnbuildable
from isvc_operator._scope import RETRY_SOON, Children, OrderScope, controlled_by, left_by_earlier, made_for
from isvc_operator._steps.children import _settled_region_too_small, apply_children
from isvc_operator._steps.pace import pace
from isvc_operator._steps.start_turn import take_turns

__all__ = ["step"]

log = logging.getLogger(__name__)
# A pass that found the plan's devices out of service, or taken first, asks for the next one this soon: that one
# moves it, or tells the planner of the refusal.
MOVE_SOON = 0.5
# How long a pod may wait for the cluster to make its device claim before the cluster's words are read: the
# resourceclaim controller makes one in milliseconds, so a steady start reads nothing.
CLAIM_GRACE = 2.0
CLAIM_REFUSED = "FailedResourceClaimCreation"  # the resourceclaim controller's event (kubernetes v1.36.3)
# An earlier workload of the order's name still being removed is looked at again this often (its removal, seen by
# the informers, passes the order at once too).
EARLIER_LOOK = 1.0


class _NotOurs(Exception):
    """A Secret of the auth Secret's name that the module did not make for this order."""


class _Earlier(Exception):
    """A Secret of the auth Secret's name that an earlier order of this name left, not yet removed."""


def _earlier(scope: OrderScope, deps: Deps) -> list[str]:
    """What an earlier workload of the order's name left and the cluster has not removed yet: the StatefulSet of
    an order deleted and made again at once, or the pods and model volumes of a set deleted. A set made over them
    would share their names and wait on what the garbage collector deletes under it (a pod on a volume deleted
    under it waits for the scheduler's next look, minutes)."""
    held = deps.cluster.cached("StatefulSet", scope.namespace, scope.name)
    left = [f"StatefulSet {scope.name}"] if held is not None and left_by_earlier(held, scope) else []
    set_uid = held["metadata"].get("uid") if held is not None and made_for(held, scope) else None
    for kind, word in (("Pod", "pod"), ("PersistentVolumeClaim", "model volume")):
        left += [
            f"{word} {o['metadata']['name']}"
            for o in deps.cluster.owned(kind, scope.namespace, scope.name)
            if left_by_earlier(o, scope, set_uid)
        ]
    return left


def _auth_secret(scope: OrderScope, deps: Deps) -> str | None:
    """The endpoint's token Secret: made once, never rotated on a pass (read first, create when missing).

    One of that name the module did not make for this order (no controller reference to it) is never
    adopted: its content could be anything, the user's own Hugging Face token among them.
    """
    assert scope.policy is not None
    if not scope.policy.token_required:
        return None
    wanted = deps.workload.auth_secret(scope.order)
    name = wanted["metadata"]["name"]
    secret = deps.cluster.get_secret(scope.namespace, name) or deps.cluster.create(wanted)
    if left_by_earlier(secret, scope):
        raise _Earlier(f"Secret {name}")
    if not made_for(secret, scope):
        raise _NotOurs(name)
    scope.token = deps.workload.token(secret)
    return str(secret["metadata"]["name"])


def _prune(scope: OrderScope, deps: Deps, d: Decisions, manifests: list[Obj]) -> None:
    """What published, scaled, scraped or guarded the order before and is not wanted now goes: the exposure is
    no longer External; the class dropped its autoscaler or the cluster's metrics path changed (KEDA installed,
    Deckhouse's adapter enabled); the class keeps the order at one replica (no disruption budget). Only objects
    the order controls: KEDA's own HPA of a ScaledObject carries the order's labels too, and is KEDA's."""
    assert scope.policy is not None
    wanted = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    pruned = list(deps.workload.autoscaling_kinds)
    if scope.policy.exposure.type != ExposureType.EXTERNAL:
        pruned.insert(0, ("networking.k8s.io/v1", "Ingress"))
    for api_version, kind in pruned:
        for held in deps.cluster.owned(kind, scope.namespace, scope.name):
            name = held["metadata"]["name"]
            if made_for(held, scope) and (kind == "Ingress" or (kind, name) not in wanted):
                d.write(Delete(api_version, kind, name))
    if not any(m["kind"] == "PodDisruptionBudget" for m in manifests):
        for budget in deps.cluster.owned("PodDisruptionBudget", scope.namespace, scope.name):
            d.write(Delete("policy/v1", "PodDisruptionBudget", budget["metadata"]["name"]))


def _of_plan(pod: Obj, templates: set[str]) -> bool:
    """Whether a pod claims its device through the plan in force (not one of a plan being replaced)."""
    claims = [c.get("resourceClaimTemplateName") for c in (pod.get("spec") or {}).get("resourceClaims") or []]
    return not templates or not claims or any(c in templates for c in claims)


def _with_failed_create(deps: Deps, workload: Obj, pods: list[Obj]) -> Obj:
    """The set with the cluster's refusal to create its pods as a ReplicaFailure condition (which a
    ReplicaSet reports and a StatefulSet does not: its controller only records a FailedCreate event).

    Read only while the set wants replicas and has no pod at all, so a steady order reads nothing.
    """
    wanted = int((workload.get("spec") or {}).get("replicas") or 0)
    meta = workload["metadata"]
    if pods or wanted < 1 or not meta.get("uid"):
        return workload
    said = deps.cluster.failed_create(
        meta["namespace"], workload.get("kind") or "StatefulSet", meta["name"], meta["uid"]
    )
    if said is None:
        return workload
    status = dict(workload.get("status") or {})
    status["conditions"] = [
        *conditions_of(workload),
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": said},
    ]
    return {**workload, "status": status}


def _children(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> Children:
    """The order's set (the one it controls, named after it), that set's pods of the plan in force, and their
    claims: a pod or set a user labels as the order's serves nothing of the module's."""
    sets = [
        s
        for s in deps.cluster.owned("StatefulSet", scope.namespace, scope.name)
        if made_for(s, scope) and s["metadata"].get("name") == scope.name
    ]
    templates = {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
    every_pod = deps.cluster.owned("Pod", scope.namespace, scope.name)
    set_uid = sets[0]["metadata"].get("uid") if sets else None
    pods = [
        p
        for p in every_pod
        if _of_plan(p, templates) and (set_uid is None or controlled_by(p, "StatefulSet", set_uid))
    ]
    names = {p["metadata"]["name"] for p in pods}
    claims = [
        c
        for c in deps.cluster.owned("ResourceClaim", scope.namespace, scope.name)
        if not (owners := c["metadata"].get("ownerReferences")) or any(o.get("name") in names for o in owners)
    ]
    return Children(_with_failed_create(deps, sets[0], every_pod) if sets else None, pods, claims)


def _age(obj: Obj, now: datetime) -> float | None:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return (now - datetime.fromisoformat(str(created))).total_seconds() if created else None
    except ValueError:
        return None


def _claim_refusals(scope: OrderScope, deps: Deps, d: Decisions, pods: list[Obj]) -> dict[str, str]:
    """What the cluster said about the device claims it has not made for pods that waited a while for them."""
    said: dict[str, str] = {}
    for pod in pods:
        if not deps.workload.awaits_claim(pod):
            continue
        age = _age(pod, scope.now)
        if age is None or age < CLAIM_GRACE:
            d.requeue(CLAIM_GRACE)
            continue
        meta = pod["metadata"]
        words = deps.cluster.refused(
            scope.namespace, "Pod", meta["name"], str(meta.get("uid") or ""), CLAIM_REFUSED
        )
        if words:
            said[meta["name"]] = words
    return said


def _turned_down(children: Children, claim_refusals: dict[str, str]) -> list[tuple[Obj, str, str, str]]:
    """What the cluster refused to make of the workload: (object, its apiVersion and kind, the cluster's words)
    for each pod whose claim it did not make, and the set whose pods it did not create."""
    refused = [
        (p, "v1", "Pod", claim_refusals[p["metadata"]["name"]])
        for p in children.pods
        if p["metadata"]["name"] in claim_refusals
    ]
    failed_create = condition_of(children.deployment, "ReplicaFailure")
    if children.deployment is not None and failed_create is not None:
        said = str(failed_create.get("message") or "")
        refused.append((children.deployment, "apps/v1", "StatefulSet", said))
    return refused


def _quota_refused(
    scope: OrderScope, deps: Deps, d: Decisions, refused: list[tuple[Obj, str, str, str]], quotas: list[Obj]
) -> bool:
    """Whether a quota refused part of the workload (`refused`: object, its apiVersion and kind, the cluster's
    words); for each refusal whose quota changed since, the object is annotated once for that change of the
    quota, which makes the controller that retries it (the set's, the resourceclaim controller) do it now
    rather than after its backoff of up to minutes."""
    any_quota = False
    for obj, api_version, kind, words in refused:
        wanted = deps.workload.quota_retry(words, quotas)
        if wanted is None:
            continue
        any_quota = True
        meta = obj["metadata"]
        held = meta.get("annotations") or {}
        if wanted and any(held.get(k) != v for k, v in wanted.items()):
            log.info(
                "%s/%s: the quota that refused %s %s changed; asking the cluster to try again",
                scope.namespace,
                scope.name,
                kind,
                meta["name"],
            )
            d.write(Annotate(api_version, kind, meta["name"], wanted))
    return any_quota


def _resolved_as_served(scope: OrderScope, d: Decisions) -> None:
    """The plan's workload was not applied and the order served: status.resolved keeps describing the plan
    that still serves (the workload in place), not the one refused; the recomputation is still counted. The
    refused plan is in the Planned condition's message and the LaunchPlan."""
    before, planned = scope.previous.resolved, scope.status.resolved
    ready = find_condition(scope.previous.conditions, ConditionType.READY.value)
    if before is None or before.device_class is None or planned is None:
        return
    if ready is None or ready.status != "True":
        return
    d.decide(
        resolved=before.model_copy(
            update={"replan_count": planned.replan_count, "inputs_hash": planned.inputs_hash}
        )
    )


def _volume_held(scope: OrderScope, deps: Deps, d: Decisions) -> None:
    """status.resolved names the model volume the set holds, which stays when a later plan needs a smaller one
    (a set's volume never changes): an order edited from a 7B model to a 3B keeps its 17Gi volume."""
    resolved = scope.status.resolved
    held = model_volume(deps.cluster.cached("StatefulSet", scope.namespace, scope.name))
    if resolved is not None and held is not None and held.size != resolved.model_volume:
        d.decide(resolved=resolved.model_copy(update={"model_volume": held.size}))


def _out_of_service(scope: OrderScope, deps: Deps, d: Decisions, verdict: Verdict) -> Verdict:
    """A claim the scheduler cannot allocate, on a plan whose devices went out of service (a cordon and an
    eviction, a node deleted): not capacity. The planner is asked afresh; when it says so the order reads
    WorkloadNotReady naming the node's state, and its next pass, a moment later, moves it (Planned). When it
    says the devices went to holders that came first (a claim the scheduler allocated before this order's),
    the next pass, a moment later, tells the planner of the refusal (Planned)."""
    if verdict.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value or scope.plan is None:
        return verdict
    if scope.claim_exhausted is not None:  # the planner heard the refusal on this pass: its words say it all
        return Verdict.refuse(
            Reason.RESOURCE_CLAIM_EXHAUSTED,
            f"{scope.claim_exhausted} The claim waits where it was planned and is allocated as soon as room "
            "frees up there; the order moves if room appears on another device first.",
        )
    deps.planner.forget_judgement(scope.namespace, scope.name)
    try:
        judgement = deps.planner.judge(scope.namespace, scope.name, scope.plan.placement)
    except TemporaryError:
        return verdict
    if judgement.lost and not judgement.gone and not judgement.outranked:
        d.requeue(MOVE_SOON)
    if not judgement.gone:
        return verdict
    d.requeue(MOVE_SOON)
    return Verdict.refuse(
        Reason.WORKLOAD_NOT_READY,
        f"Its devices are out of service ({'; '.join(judgement.gone)}): it is planned on devices in service "
        "now.",
    )


def _judged(
    scope: OrderScope, deps: Deps, d: Decisions, children: Children, quotas: list[Obj]
) -> tuple[Verdict, dict[str, str]]:
    """The workload judged (isvc-workload), with what the cluster said of claims it did not make, and told
    apart from devices out of service or taken first; the replicas waiting at a shared card's start gate."""
    claim_refusals = _claim_refusals(scope, deps, d, children.pods)
    verdict, failure = deps.workload.judge(
        children.deployment,
        children.pods,
        children.claims,
        scope.previous.startup_failure,
        lambda pod, container: deps.cluster.read_log(scope.namespace, pod, container),
        claim_refusals,
        quotas,
    )
    d.decide(startup_failure=failure)
    verdict = _out_of_service(scope, deps, d, verdict)
    return take_turns(
        scope, deps, d, children.deployment, children.pods, children.claims, verdict
    ), claim_refusals


def _applied(scope: OrderScope, deps: Deps, d: Decisions, auth: str | None) -> Verdict:
    """The children of the plan in force applied, the endpoint published, the replicas judged."""
    assert scope.plan is not None and scope.policy is not None
    digest = hashlib.sha256(scope.token.encode()).hexdigest()[:16] if scope.token else None
    try:
        manifests = deps.workload.manifests(scope.order, scope.plan, scope.policy, auth, digest)
    except WorkloadUnbuildable as exc:
        return Verdict.refuse(
            Reason.WORKLOAD_ERROR,
            (
                f"the workload cannot be built from the plan: {exc}; delete the LaunchPlan if it was written "
                "by hand, or ask your administrator (module settings)."
            ),
        )
    applied = apply_children(scope, deps, d, manifests)
    if (
        applied.refusal is None and scope.outgrown is not None
    ):  # the plan serving stays; the edit's is refused
        applied.refusal = _settled_region_too_small(scope, d, scope.outgrown)
    if applied.refusal is not None:
        _resolved_as_served(scope, d)
        return applied.refusal
    _volume_held(scope, deps, d)
    _prune(scope, deps, d, manifests)
    runtime = scope.plan.runtime
    d.decide(
        scaling=deps.workload.scaling(scope.order, scope.plan, scope.policy),
        endpoint=EndpointStatus(
            url=deps.workload.endpoint(scope.order, scope.policy),
            type=scope.policy.exposure.type,
            tool_calling_supported=bool(runtime and runtime.tool_calling_supported),
            tool_call_parser=runtime.tool_call_parser if runtime else None,
            reasoning_parser=runtime.reasoning_parser if runtime else None,
        ),
    )
    scope.children = children = _children(scope, deps, manifests)
    quotas = deps.cluster.quotas_in(scope.namespace)
    verdict, claim_refusals = _judged(scope, deps, d, children, quotas)
    verdict = pace(scope, deps, d, manifests, verdict, applied.roll_waits, applied.set_applied)
    by_quota = (
        _quota_refused(scope, deps, d, _turned_down(children, claim_refusals), quotas)
        if not verdict.holds
        else False
    )
    # A claim the scheduler cannot allocate: Planned times the planner's turn; a quota's refusal waits for the
    # quota to change (watched), not for a timer.
    quota_waits = by_quota and verdict.reason == Reason.WORKLOAD_ERROR.value
    if not verdict.holds and verdict.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value and not quota_waits:
        d.requeue(RETRY_SOON)
    return verdict


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Apply the children of the plan in force, publish the endpoint, and judge the replicas."""
    if scope.plan is None or scope.policy is None:
        return Outcome(scope.waits_for(ConditionType.PLANNED))
    d = Decisions()
    left = _earlier(scope, deps)
    try:
        auth = None if left else _auth_secret(scope, deps)
    except _Earlier as exc:
        left, auth = [str(exc)], None
    except _NotOurs as exc:
        return Outcome(
            Verdict.refuse(
                Reason.WORKLOAD_ERROR,
                (
                    f"Secret {exc} exists in namespace {scope.namespace!r} and was not made by the module for "
                    "this order, so its content is not used as the endpoint's token; rename or delete it, and the "
                    "module makes its own."
                ),
            )
        )
    if left:
        d.requeue(EARLIER_LOOK)
        return d.outcome(
            Verdict.refuse(
                Reason.WORKLOAD_NOT_READY,
                (
                    f"an earlier workload of this name is still being removed by the cluster ({', '.join(left)}); "
                    "the order's own is made once it is gone: this passes on its own."
                ),
            )
        )
    d.decide(auth_secret_name=auth)
    return d.outcome(_applied(scope, deps, d, auth))
