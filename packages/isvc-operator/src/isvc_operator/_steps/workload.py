"""WorkloadReady: the children are applied, and the replicas came up."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from datetime import datetime

from cachetools import TTLCache
from isvc_api import (
    ConditionType,
    EndpointStatus,
    ExposureType,
    Reason,
    Refusal,
    Resolved,
    Verdict,
    find_condition,
)

from isvc_operator._ports import Deps, Obj, TemporaryError, WorkloadUnbuildable, namespace_terminating
from isvc_operator._scope import (
    RETRY_CAPACITY,
    RETRY_SOON,
    Children,
    OrderScope,
    controlled_by,
    made_for,
    take_down_workload,
)
from isvc_operator._seal import SEAL, SEALED_KINDS, WRITTEN_APART
from isvc_operator._steps.start_turn import take_turns

__all__ = ["step"]

log = logging.getLogger(__name__)
RESTORES = 3  # restores of one child a window allows
RESTORE_WINDOW = 300.0  # seconds


def _take_down_unplaced(scope: OrderScope, deps: Deps) -> None:
    """No plan and no room: a workload this order still runs holds devices given to others."""
    take_down_workload(scope, deps)
    scope.endpoint = None


SETTLED_REGION_TOO_SMALL = "SettledRegionTooSmall"
# How the API server words its refusal of a change to a StatefulSet's fields other than the few it lets
# change: for the module's sets, only the claim template of the model volume ever differs.
_SET_SPEC_FORBIDDEN = "updates to statefulset spec for fields other than"


def _settled_region_too_small(scope: OrderScope, message: str) -> Verdict:
    """WorkloadError that stays until the set is taken down; one SettledRegionTooSmall event per change."""
    last = find_condition(scope.previous.conditions, ConditionType.WORKLOAD_READY.value)
    if last is None or last.message != message:
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
        scope.event("Warning", SETTLED_REGION_TOO_SMALL, message)
    return Verdict.refuse(Reason.WORKLOAD_ERROR, message)


class _NotOurs(Exception):
    """A Secret of the auth Secret's name that the module did not make for this order."""


def _auth_secret(scope: OrderScope, deps: Deps) -> str | None:
    """The endpoint's token Secret: made once, never rotated on a pass (read first, create when missing).

    One of that name the module did not make for this order (no controller reference to it) is never
    adopted: its content could be anything, the user's own Hugging Face token among them.
    """
    assert scope.policy is not None
    if not scope.policy.token_required:
        return None
    wanted = deps.workload.auth_secret(scope.order)
    secret = deps.cluster.get_secret(scope.namespace, wanted["metadata"]["name"]) or deps.cluster.create(
        wanted
    )
    owners = secret["metadata"].get("ownerReferences") or []
    if not any(o.get("uid") == scope.order.metadata.uid and o.get("controller") for o in owners):
        raise _NotOurs(secret["metadata"]["name"])
    scope.token = deps.workload.token(secret)
    return str(secret["metadata"]["name"])


def _refused_by_cluster(exc: Exception) -> str | None:
    """The API server's own words when it refused one of our manifests (4xx, not a conflict or a throttle):
    the `message` of the Status it answered, not the raw body."""
    status = getattr(exc, "status", None)
    if (
        status is None
        or not 400 <= int(status) < 500
        or int(status) in (409, 429)
        or namespace_terminating(exc)
    ):
        return None
    body = str(getattr(exc, "body", "") or exc)
    try:
        said = json.loads(body)
    except ValueError:
        return body
    return str(said.get("message") or body) if isinstance(said, dict) else body


def _refused(scope: OrderScope, manifest: Obj, words: str) -> Verdict:
    what = f"{manifest['kind']} {manifest['metadata']['name']}"
    message = f"the cluster refused the workload's {what}; the API server said: {words}"
    last = find_condition(scope.previous.conditions, ConditionType.WORKLOAD_READY.value)
    if last is None or last.message != message:  # once per refusal, not once per pass
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
    return Verdict.refuse(Reason.WORKLOAD_ERROR, message)


APPLIED = "ai.deckhouse.io/applied"  # the hash of the manifest last applied: equal means nothing to write


def _stamped(manifest: Obj) -> Obj:
    blob = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    meta = manifest["metadata"]
    annotations = {**(meta.get("annotations") or {}), APPLIED: hashlib.sha256(blob).hexdigest()[:16]}
    return {**manifest, "metadata": {**meta, "annotations": annotations}}


def _unchanged(deps: Deps, manifest: Obj) -> bool:
    """Whether the cache already holds the object as this manifest was last applied (a quiet pass)."""
    meta = manifest["metadata"]
    held = deps.cluster.cached(manifest["kind"], meta["namespace"], meta["name"])
    return (
        held is not None
        and (held["metadata"].get("annotations") or {}).get(APPLIED) == meta["annotations"][APPLIED]
    )


def _settled(deps: Deps, manifest: Obj) -> Obj | Refusal:
    """A StatefulSet keeps the model volume the held set settled on (claim templates never change), or is
    refused when the order outgrew it; every other manifest is applied as built."""
    if manifest["kind"] != "StatefulSet":
        return manifest
    meta = manifest["metadata"]
    return deps.workload.settle(manifest, deps.cluster.cached("StatefulSet", meta["namespace"], meta["name"]))


def _with_seal(manifest: Obj, seal: str) -> Obj:
    meta = manifest["metadata"]
    return {**manifest, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), SEAL: seal}}}


def _sealed(deps: Deps, manifest: Obj) -> Obj:
    """A child's manifest stamped with the seal of what the API server makes of it (asked by a dry run)."""
    if manifest["kind"] not in SEALED_KINDS:
        return manifest
    return _with_seal(manifest, deps.sealer.seal(deps.cluster.apply(manifest, dry_run=True)))


# The fields of a set's spec the API server lets change; the rest never differ from what the module wrote.
_SET_MUTABLE = (
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
    "ordinals",
)
# What the API server allocated to a Service, which a restore keeps.
_ALLOCATED = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")


def _restore(held: Obj, manifest: Obj, max_replicas: int | None) -> list[Obj]:
    """JSON patch operations that make a child what `manifest` says, whoever changed it: its labels,
    annotations and owners replaced, finalizers of others removed, its spec replaced (a set's mutable fields;
    a Service keeps its allocated addresses; an autoscaled set's replicas bounded by the class)."""
    meta, spec = manifest["metadata"], manifest.get("spec") or {}
    live = held.get("spec") or {}
    apart = {k: v for k, v in (held["metadata"].get("annotations") or {}).items() if k in WRITTEN_APART}
    ops: list[Obj] = [
        {"op": "add", "path": "/metadata/labels", "value": meta.get("labels") or {}},
        {"op": "add", "path": "/metadata/annotations", "value": {**apart, **(meta.get("annotations") or {})}},
        {"op": "add", "path": "/metadata/ownerReferences", "value": meta.get("ownerReferences") or []},
    ]
    if held["metadata"].get("finalizers"):
        ops.append({"op": "remove", "path": "/metadata/finalizers"})
    if manifest["kind"] == "StatefulSet":
        for key in _SET_MUTABLE:
            if key in spec:
                ops.append({"op": "add", "path": f"/spec/{key}", "value": spec[key]})
            elif key in live:
                ops.append({"op": "remove", "path": f"/spec/{key}"})
        if "replicas" in spec:
            ops.append({"op": "add", "path": "/spec/replicas", "value": spec["replicas"]})
        elif max_replicas is not None and int(live.get("replicas") or 0) > max_replicas:
            ops.append({"op": "add", "path": "/spec/replicas", "value": max_replicas})
    else:
        kept = {k: live[k] for k in _ALLOCATED if k in live} if manifest["kind"] == "Service" else {}
        ops.append({"op": "add", "path": "/spec", "value": {**spec, **kept}})
    return ops


def _tampered(deps: Deps, held: Obj | None, manifest: Obj, max_replicas: int | None) -> bool:
    """Whether someone other than the controller changed a child: its seal no longer holds, or its replica
    count (an autoscaler's to change) went past the class's bound."""
    if held is None or manifest["kind"] not in SEALED_KINDS or held["metadata"].get("deletionTimestamp"):
        return False
    if not deps.sealer.holds(held):
        return True
    replicas = (held.get("spec") or {}).get("replicas")
    return (
        max_replicas is not None and manifest["kind"] == "StatefulSet" and int(replicas or 0) > max_replicas
    )


def _squatted(scope: OrderScope, deps: Deps, manifest: Obj, held: Obj | None) -> str | None:
    """Another object's claim on the host of the order's Ingress, when one came first: an Ingress the module
    did not make for this order, made before the order's own (or while it has none). Hosts follow a template
    anyone can read, so a user of another namespace could publish an order's host first and take its
    traffic (issue 29); the module then does not publish it."""
    if manifest["kind"] != "Ingress":
        return None
    mine = (held or {}).get("metadata", {}).get("creationTimestamp")
    for host in [r.get("host") for r in manifest["spec"].get("rules") or []]:
        for other in deps.cluster.ingresses_naming(str(host)):
            meta = other["metadata"]
            if (
                meta.get("namespace") == scope.namespace
                and meta.get("name") == scope.name
                and made_for(other, scope)
            ):
                continue
            if mine is None or str(meta.get("creationTimestamp") or "") <= str(mine):
                return (
                    f"host {host} is already published by Ingress {meta.get('namespace')}/{meta.get('name')}, "
                    "which the module did not make for this order, so the endpoint is not published; ask the "
                    "administrator to remove that Ingress (the endpoint is published once it is gone)."
                )
    return None


# Children restored lately, by (namespace, kind, name): something of the cluster that changes a child again
# and again (a mutating webhook, another controller) must not make the module rewrite it every pass.
_RESTORED: TTLCache[tuple[str, str, str], int] = TTLCache(maxsize=10_000, ttl=RESTORE_WINDOW)
_RESTORED_LOCK = threading.Lock()


def _restores(key: tuple[str, str, str]) -> int:
    """Count one more restore of a child in the window; the count so far."""
    with _RESTORED_LOCK:
        _RESTORED[key] = _RESTORED.get(key, 0) + 1
        return _RESTORED[key]


def _apply(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> Verdict | None:
    """Apply what changed; restore what someone else changed. A set the order outgrew is not applied (the
    held one keeps serving): the pass ends in SettledRegionTooSmall once the other children are applied."""
    too_small: Verdict | None = None
    squat: str | None = None
    keeps: str | None = None
    restored: list[str] = []
    bound = next(
        (m["spec"].get("maxReplicas") for m in manifests if m["kind"] == "HorizontalPodAutoscaler"), None
    )
    for built in manifests:
        settled = _settled(deps, built)
        if isinstance(settled, Refusal):
            too_small = _settled_region_too_small(scope, settled.message)
            continue
        manifest = _stamped(settled)
        meta = manifest["metadata"]
        held = deps.cluster.cached(manifest["kind"], meta["namespace"], meta["name"])
        squatted = _squatted(scope, deps, manifest, held)
        if squatted is not None:
            if held is not None and made_for(held, scope):  # ours came second: it goes
                deps.cluster.delete(manifest["apiVersion"], "Ingress", meta["namespace"], meta["name"])
            squat = squatted
            continue
        try:
            if _tampered(deps, held, manifest, bound):
                assert held is not None
                if _restores((meta["namespace"], manifest["kind"], meta["name"])) > RESTORES:
                    keeps = (
                        f"{manifest['kind']} {meta['name']} of the order keeps being changed by something other "
                        f"than the module: restored {RESTORES} times in {RESTORE_WINDOW // 60:g} minutes, it is "
                        "left as it is for now; a controller or admission webhook of the cluster changes it, "
                        "which an administrator can tell from its managedFields."
                    )
                    continue
                ops = _restore(held, manifest, bound)
                seal = deps.sealer.seal(deps.cluster.patch(manifest, ops, dry_run=True))
                ops[1] = {**ops[1], "value": {**ops[1]["value"], SEAL: seal}}
                deps.cluster.patch(manifest, ops)
                restored.append(f"{manifest['kind']} {meta['name']}")
                continue
            if _unchanged(deps, manifest):
                continue
            if manifest["kind"] == "StatefulSet" and _waits_its_turn(
                scope, deps, manifest, _templates(scope, deps, manifests)
            ):
                scope.roll_waits = True  # the set in place keeps serving; applied when the class's turn comes
                continue
            deps.cluster.apply(_sealed(deps, manifest))
            scope.set_applied = scope.set_applied or manifest["kind"] == "StatefulSet"
        except Exception as exc:
            words = _refused_by_cluster(exc)
            if words is None:
                raise
            if manifest["kind"] == "StatefulSet" and _SET_SPEC_FORBIDDEN in words:  # the cache was behind
                return _settled_region_too_small(
                    scope,
                    (
                        f"the model volume of StatefulSet {manifest['metadata']['name']} cannot change in place "
                        "and the order now needs another one; follow the SettledRegionTooSmall procedure in the "
                        "Release notes (delete the StatefulSet; the module makes it anew). The API server said: "
                        f"{words}"
                    ),
                )
            return _refused(scope, manifest, words)
    if too_small is not None:
        return too_small
    for old in deps.cluster.owned("Deployment", scope.namespace, scope.name):  # an earlier version's workload
        if made_for(old, scope):
            deps.cluster.delete("apps/v1", "Deployment", scope.namespace, old["metadata"]["name"])
    _prune_templates(
        scope, deps, {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
    )
    if keeps is not None:
        log.warning("%s/%s: %s", scope.namespace, scope.name, keeps)
        scope.requeue(RETRY_CAPACITY)
        return Verdict.refuse(Reason.WORKLOAD_ERROR, keeps)
    if squat is not None:
        log.warning("%s/%s: %s", scope.namespace, scope.name, squat)
        scope.requeue(RETRY_CAPACITY)
        return Verdict.refuse(Reason.WORKLOAD_ERROR, squat)
    if restored:
        message = (
            f"{', '.join(restored)} of the order had been changed by someone other than the module, and is "
            "restored to what the module computes; the order is served again once its replicas are. An "
            "order's children are the module's: change the order instead."
        )
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
        scope.requeue(RETRY_SOON)
        return Verdict.refuse(Reason.WORKLOAD_NOT_READY, message)
    return None


# While a roll waits for its class's turn the order is passed again this often, besides being woken when the turn
# frees (a turn held by an order deleted meanwhile, or lapsing after ROLL_DEADLINE, wakes no one).
ROLL_RETRY = 15.0


def _group(scope: OrderScope) -> str:
    """The orders whose rolls are paced together: those of one class ("" for orders without one)."""
    return scope.order.spec.inference_service_class_name or ""


def _templates(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> dict[str, Obj]:
    """The order's claim templates by name: those the cluster holds, and those of this pass's manifests."""
    held = deps.cluster.owned("ResourceClaimTemplate", scope.namespace, scope.name)
    wanted = [m for m in manifests if m["kind"] == "ResourceClaimTemplate"]
    return {t["metadata"]["name"]: t for t in [*held, *wanted]}


def _waits_its_turn(scope: OrderScope, deps: Deps, manifest: Obj, templates: dict[str, Obj]) -> bool:
    """Whether applying the set would recreate the pods of a serving order on the devices they hold, for a
    change it did not ask for (its class, a recipe, a module setting), while another order of its class rolls."""
    if deps.rolls is None:
        return False
    meta = manifest["metadata"]
    held = deps.cluster.cached("StatefulSet", meta["namespace"], meta["name"])
    if held is None or not deps.workload.recreates_pods(held, manifest, templates):
        return False
    if int((held.get("status") or {}).get("readyReplicas") or 0) < 1:
        return False  # it serves nothing: there is nothing to keep up
    if scope.order.metadata.generation != scope.previous.observed_generation:
        return False  # an edit of the order itself rolls at once
    return not deps.rolls.may_roll(_group(scope), scope.key)


def _pace(scope: OrderScope, deps: Deps, manifests: list[Obj], verdict: Verdict) -> Verdict:
    """A roll waiting for its turn says so and retries; a finished roll hands the class's turn on."""
    if deps.rolls is None:
        return verdict
    group = _group(scope)
    if scope.roll_waits:
        scope.requeue(ROLL_RETRY)
        turn = deps.rolls.turn(group)
        rolling = f" (order {turn[0]}/{turn[1]} is rolling now)" if turn is not None else ""
        what = f"class {group}" if group else "orders without a class"
        note = (
            f" A change that recreates its pods waits its turn: the {what} roll one order at a time{rolling}; "
            "the pods in place keep serving meanwhile."
        )
        return verdict.model_copy(update={"message": verdict.message + note}) if verdict.holds else verdict
    wanted = next((m for m in manifests if m["kind"] == "StatefulSet"), None)
    held = deps.cluster.cached("StatefulSet", scope.namespace, scope.name)
    templates = _templates(scope, deps, manifests)
    if (
        scope.set_applied
        or wanted is None
        or held is None
        or deps.workload.recreates_pods(held, wanted, templates)
    ):
        return verdict  # applied just now, or the cache has not seen it yet: the roll has not begun
    if verdict.holds and not deps.workload.set_rolling(held):
        scope.wake.extend(deps.rolls.settled(group, scope.key))
    return verdict


def _out_of_service(scope: OrderScope, deps: Deps, verdict: Verdict) -> Verdict:
    """A claim the scheduler cannot allocate, on a plan whose devices went out of service (a cordon and an
    eviction, a node deleted): not capacity. The planner is asked afresh; when it says so the order reads
    WorkloadNotReady naming the node's state, and its next pass, a moment later, moves it (Planned)."""
    if verdict.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value or scope.plan is None:
        return verdict
    deps.planner.forget_judgement(scope.namespace, scope.name)
    try:
        gone = deps.planner.judge(scope.namespace, scope.name, scope.plan.placement).gone
    except TemporaryError:
        return verdict
    if not gone:
        return verdict
    scope.requeue(MOVE_SOON)
    return Verdict.refuse(
        Reason.WORKLOAD_NOT_READY,
        f"Its devices are out of service ({'; '.join(gone)}): it is planned on devices in service now.",
    )


# A pass that found the plan's devices out of service asks for the next one this soon: that one moves it.
MOVE_SOON = 0.5


def _prune_autoscaling(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> None:
    """What scaled or scraped the order before and is not wanted now goes: the class dropped its autoscaler,
    or the cluster's metrics path changed (KEDA installed, Deckhouse's adapter enabled). Only objects the
    order controls: KEDA's own HPA of a ScaledObject carries the order's labels too, and is KEDA's."""
    wanted = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    uid = scope.order.metadata.uid
    for api_version, kind in deps.workload.autoscaling_kinds:
        for held in deps.cluster.owned(kind, scope.namespace, scope.name):
            name = held["metadata"]["name"]
            owners = held["metadata"].get("ownerReferences") or []
            ours = any(o.get("uid") == uid and o.get("controller") for o in owners)
            if ours and (kind, name) not in wanted:
                deps.cluster.delete(api_version, kind, scope.namespace, name)


def _prune_templates(scope: OrderScope, deps: Deps, current: set[str]) -> None:
    """A plan that needs another claim rolls onto a new template; an old one goes once no pod uses it."""
    in_use = {
        claim.get("resourceClaimTemplateName")
        for pod in deps.cluster.owned("Pod", scope.namespace, scope.name)
        for claim in (pod.get("spec") or {}).get("resourceClaims") or []
    }
    for template in deps.cluster.owned("ResourceClaimTemplate", scope.namespace, scope.name):
        name = template["metadata"]["name"]
        if name not in current and name not in in_use and made_for(template, scope):
            deps.cluster.delete("resource.k8s.io/v1", "ResourceClaimTemplate", scope.namespace, name)


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
        *(status.get("conditions") or []),
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": said},
    ]
    return {**workload, "status": status}


# How long a pod may wait for the cluster to make its device claim before the cluster's words are read: the
# resourceclaim controller makes one in milliseconds, so a steady start reads nothing.
CLAIM_GRACE = 2.0
CLAIM_REFUSED = "FailedResourceClaimCreation"  # the resourceclaim controller's event (kubernetes v1.36.3)


def _age(obj: Obj, now: datetime) -> float | None:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return (now - datetime.fromisoformat(str(created))).total_seconds() if created else None
    except ValueError:
        return None


def _claim_refusals(scope: OrderScope, deps: Deps, pods: list[Obj]) -> dict[str, str]:
    """What the cluster said about the device claims it has not made for pods that waited a while for them."""
    said: dict[str, str] = {}
    for pod in pods:
        if not deps.workload.awaits_claim(pod):
            continue
        age = _age(pod, scope.now)
        if age is None or age < CLAIM_GRACE:
            scope.requeue(CLAIM_GRACE)
            continue
        meta = pod["metadata"]
        words = deps.cluster.refused(
            scope.namespace, "Pod", meta["name"], str(meta.get("uid") or ""), CLAIM_REFUSED
        )
        if words:
            said[meta["name"]] = words
    return said


def _quota_refused(
    scope: OrderScope, deps: Deps, refused: list[tuple[Obj, str, str, str]], quotas: list[Obj]
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
            deps.cluster.annotate(api_version, kind, scope.namespace, meta["name"], wanted)
    return any_quota


def _resolved_as_served(scope: OrderScope) -> None:
    """The plan's workload was not applied and the order served: status.resolved keeps describing the plan
    that still serves (the workload in place), not the one refused; the recomputation is still counted. The
    refused plan is in the Planned condition's message and the LaunchPlan."""
    before, planned = scope.previous.resolved, scope.resolved
    ready = find_condition(scope.previous.conditions, ConditionType.READY.value)
    if before is None or before.device_class is None or not isinstance(planned, Resolved):
        return
    if ready is None or ready.status != "True":
        return
    scope.resolved = before.model_copy(
        update={"replan_count": planned.replan_count, "inputs_hash": planned.inputs_hash}
    )


def step(scope: OrderScope, deps: Deps) -> Verdict:
    """Apply the children of the plan in force, publish the endpoint, and judge the replicas."""
    if scope.plan is None or scope.policy is None:
        if scope.unplaced:
            _take_down_unplaced(scope, deps)
        return scope.waits_for(ConditionType.PLANNED)
    try:
        scope.auth_secret_name = _auth_secret(scope, deps)
    except _NotOurs as exc:
        return Verdict.refuse(
            Reason.WORKLOAD_ERROR,
            (
                f"Secret {exc} exists in namespace {scope.namespace!r} and was not made by the module for this "
                "order, so its content is not used as the endpoint's token; rename or delete it, and the module "
                "makes its own."
            ),
        )
    digest = hashlib.sha256(scope.token.encode()).hexdigest()[:16] if scope.token else None
    try:
        manifests = deps.workload.manifests(
            scope.order, scope.plan, scope.policy, scope.auth_secret_name, digest
        )
    except WorkloadUnbuildable as exc:
        return Verdict.refuse(
            Reason.WORKLOAD_ERROR,
            (
                f"the workload cannot be built from the plan: {exc}; delete the LaunchPlan if it was written "
                "by hand, or ask your administrator (module settings)."
            ),
        )
    refused = _apply(scope, deps, manifests)
    if refused is not None:
        _resolved_as_served(scope)
        return refused
    if scope.policy.exposure.type != ExposureType.EXTERNAL:  # an exposure changed: what was published goes
        for published in deps.cluster.owned("Ingress", scope.namespace, scope.name):
            if not made_for(published, scope):
                continue
            name = published["metadata"]["name"]
            deps.cluster.delete("networking.k8s.io/v1", "Ingress", scope.namespace, name)
    _prune_autoscaling(scope, deps, manifests)
    scope.scaling = deps.workload.scaling(scope.order, scope.plan, scope.policy)
    if not any(
        m["kind"] == "PodDisruptionBudget" for m in manifests
    ):  # the class keeps it at one replica now
        for budget in deps.cluster.owned("PodDisruptionBudget", scope.namespace, scope.name):
            deps.cluster.delete(
                "policy/v1", "PodDisruptionBudget", scope.namespace, budget["metadata"]["name"]
            )
    runtime = scope.plan.runtime
    scope.endpoint = EndpointStatus(
        url=deps.workload.endpoint(scope.order, scope.policy),
        type=scope.policy.exposure.type,
        tool_calling_supported=bool(runtime and runtime.tool_calling_supported),
        tool_call_parser=runtime.tool_call_parser if runtime else None,
        reasoning_parser=runtime.reasoning_parser if runtime else None,
    )
    sets = [
        s
        for s in deps.cluster.owned("StatefulSet", scope.namespace, scope.name)
        if made_for(s, scope) and s["metadata"].get("name") == scope.name
    ]
    templates = {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
    every_pod = deps.cluster.owned("Pod", scope.namespace, scope.name)
    # Only the set's own pods: a pod a user labels as the order's serves nothing of the module's (issue 29).
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
    children = Children(_with_failed_create(deps, sets[0], every_pod) if sets else None, pods, claims)
    scope.children = children
    quotas = deps.cluster.quotas_in(scope.namespace)
    claim_refusals = _claim_refusals(scope, deps, pods)
    verdict, failure = deps.workload.judge(
        children.deployment,
        children.pods,
        children.claims,
        scope.previous.startup_failure,
        lambda pod, container: deps.cluster.read_log(scope.namespace, pod, container),
        claim_refusals,
        quotas,
    )
    scope.startup_failure = failure
    verdict = _out_of_service(scope, deps, verdict)
    verdict = take_turns(scope, deps, children.deployment, children.pods, children.claims, verdict)
    verdict = _pace(scope, deps, manifests, verdict)
    turned_down = [
        (p, "v1", "Pod", claim_refusals[p["metadata"]["name"]])
        for p in pods
        if p["metadata"]["name"] in claim_refusals
    ]
    failed_create = next(
        (
            c
            for c in (children.deployment or {}).get("status", {}).get("conditions") or []
            if c.get("type") == "ReplicaFailure"
        ),
        None,
    )
    if sets and failed_create is not None:
        turned_down.append((sets[0], "apps/v1", "StatefulSet", str(failed_create.get("message") or "")))
    by_quota = _quota_refused(scope, deps, turned_down, quotas) if not verdict.holds else False
    # A claim the scheduler cannot allocate: Planned times the planner's turn; a quota's refusal waits for the
    # quota to change (watched), not for a timer.
    quota_waits = by_quota and verdict.reason == Reason.WORKLOAD_ERROR.value
    if not verdict.holds and verdict.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value and not quota_waits:
        scope.requeue(RETRY_SOON)
    return verdict
