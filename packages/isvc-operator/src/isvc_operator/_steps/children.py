"""WorkloadReady, the children applied: what changed is applied (sealed), what someone else changed is restored
(every time, paced per child), an autoscaler someone else aims at the order's set goes, an External host another
Ingress published first is not published, and what the order no longer needs goes."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time

import attrs
from cachetools import TTLCache
from isvc_api import ConditionType, Obj, Reason, Refusal, Verdict

from isvc_operator._api import ClusterRefusal, RefusalCause
from isvc_operator._outcome import Decisions, Delete
from isvc_operator._ports import Deps
from isvc_operator._scope import RETRY_CAPACITY, RETRY_SOON, OrderScope, made_for
from isvc_operator._seal import SEAL, SEALED_KINDS, WRITTEN_APART, editors
from isvc_operator._steps.foreign import foreign_autoscalers
from isvc_operator._steps.pace import templates, waits_its_turn

__all__ = ["CHILD_RESTORED", "SETTLED_REGION_TOO_SMALL", "Applied", "apply_children"]

log = logging.getLogger(__name__)
# A child is restored every time someone else changes it, never given up on; a child changed faster than
# RESTORE_BURST times at once and then once every RESTORE_EVERY seconds (something of the cluster fighting the
# module) is restored at that pace, not on every pass: at most ten writes a minute, each one an event.
RESTORE_BURST = 10
RESTORE_EVERY = 6.0  # seconds
CHILD_RESTORED = "ChildRestored"  # the event on the order: a child someone else changed, restored
SETTLED_REGION_TOO_SMALL = "SettledRegionTooSmall"
APPLIED = "ai.deckhouse.io/applied"  # the hash of the manifest last applied: equal means nothing to write


def _settled_region_too_small(scope: OrderScope, d: Decisions, message: str) -> Verdict:
    """WorkloadError that stays until the set is taken down; one SettledRegionTooSmall event per change."""
    verdict = Verdict.refuse(Reason.WORKLOAD_ERROR, message)
    if not scope.repeats(ConditionType.WORKLOAD_READY, verdict):
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
        d.event("Warning", SETTLED_REGION_TOO_SMALL, message)
    return verdict


def _refused(scope: OrderScope, d: Decisions, manifest: Obj, refusal: ClusterRefusal) -> Verdict:
    """The API server refused a child: WorkloadError in its words (a set that cannot keep its model volume in
    place, SettledRegionTooSmall: the cache was behind)."""
    name = manifest["metadata"]["name"]
    if manifest["kind"] == "StatefulSet" and refusal.cause == RefusalCause.SET_SPEC_FIXED:
        return _settled_region_too_small(
            scope,
            d,
            (
                f"the model volume of StatefulSet {name} cannot change in place and the order now needs another "
                "one; follow the SettledRegionTooSmall procedure in the Release notes (delete the StatefulSet; "
                f"the module makes it anew). The API server said: {refusal.words}"
            ),
        )
    message = (
        f"the cluster refused the workload's {manifest['kind']} {name}; the API server said: {refusal.words}"
    )
    verdict = Verdict.refuse(Reason.WORKLOAD_ERROR, message)
    if not scope.repeats(ConditionType.WORKLOAD_READY, verdict):  # once per refusal, not once per pass
        log.warning("%s/%s: %s", scope.namespace, scope.name, message)
    return verdict


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
    traffic; the module then does not publish it."""
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


@attrs.define
class _Pace:
    """One child's restores: a token bucket, and the version last restored (the cache may still show it)."""

    tokens: float = float(RESTORE_BURST)
    at: float = attrs.field(factory=time.monotonic)
    version: str | None = None
    count: int = 0

    def take(self, now: float) -> float:
        """Take one restore: 0 when one may be made now, else the seconds until one may."""
        self.tokens = min(float(RESTORE_BURST), self.tokens + (now - self.at) / RESTORE_EVERY)
        self.at = now
        if self.tokens < 1:
            return (1 - self.tokens) * RESTORE_EVERY
        self.tokens -= 1
        return 0.0


# Each child's restores, by (namespace, kind, name); a child left alone for long enough is forgotten.
_PACES: TTLCache[tuple[str, str, str], _Pace] = TTLCache(
    maxsize=10_000, ttl=RESTORE_BURST * RESTORE_EVERY * 2
)
_PACES_LOCK = threading.Lock()


def _pace(key: tuple[str, str, str]) -> _Pace:
    with _PACES_LOCK:
        found = _PACES.get(key)
        if found is None:
            found = _PACES[key] = _Pace()
        return found


@attrs.define
class Applied:
    """What applying the children came to: a refusal that ends the step, and how the set's roll stands."""

    refusal: Verdict | None = None
    roll_waits: bool = False  # a roll of its pods nobody asked for waits for its class's turn
    set_applied: bool = False  # the set was written on this pass (its roll, if any, begins now)
    too_small: Verdict | None = None  # the order outgrew the model volume of the set it holds
    squat: str | None = None  # another object published the order's External host first
    paced: str | None = None  # a child changed again faster than it is restored: restored at its pace
    restored: list[str] = attrs.field(factory=list)  # children another field manager had changed, restored


def _restored(
    scope: OrderScope, deps: Deps, d: Decisions, held: Obj, manifest: Obj, bound: int | None, applied: Applied
) -> None:
    """Restore a child someone else changed, every time, at its pace; a Warning event names the field managers
    that changed it (managedFields), and the order's counter of restores goes up. A claim template, whose spec
    the API server never changes, is deleted and made anew."""
    meta, kind = manifest["metadata"], manifest["kind"]
    pace = _pace((meta["namespace"], kind, meta["name"]))
    version = str(held["metadata"].get("resourceVersion") or "")
    if version and version == pace.version:
        return  # restored already: the cache has not caught up with the restore yet
    wait = pace.take(time.monotonic())
    if wait > 0:
        applied.paced = (
            f"{kind} {meta['name']} of the order keeps being changed by something other than the module "
            f"({', '.join(editors(held)) or 'a writer naming itself as the module'}): restored {pace.count} "
            f"times lately, it is restored again in {wait:.0f}s, and every time after; find who changes it "
            "(its managedFields, the order's ChildRestored events) and stop them."
        )
        d.requeue(wait)
        return
    if kind == "ResourceClaimTemplate":
        deps.cluster.delete(manifest["apiVersion"], kind, meta["namespace"], meta["name"])
        deps.cluster.apply(_sealed(deps, manifest))
    else:
        ops = _restore(held, manifest, bound)
        seal = deps.sealer.seal(deps.cluster.patch(manifest, ops, dry_run=True))
        ops[1] = {**ops[1], "value": {**ops[1]["value"], SEAL: seal}}
        deps.cluster.patch(manifest, ops)
    pace.version, pace.count = version, pace.count + 1
    deps.restored(scope.namespace, scope.name, kind)
    _said_restored(scope, d, held, f"{kind} {meta['name']}", applied)


def _said_restored(scope: OrderScope, d: Decisions, held: Obj, child: str, applied: Applied) -> None:
    """A restore said: a warning and an event naming who changed the child when another field manager did;
    a line of the log alone when none shows (a writer that names itself as the module's manager)."""
    who = editors(held)
    if not who:
        log.info("%s/%s: %s restored to what the module computes", scope.namespace, scope.name, child)
        return
    message = (
        f"{child} of the order was changed by {', '.join(who)} and is restored to what the module computes; "
        "an order's children are the module's: change the order instead."
    )
    log.warning("%s/%s: %s", scope.namespace, scope.name, message)
    d.event("Warning", CHILD_RESTORED, message)
    applied.restored.append(f"{child} (changed by {', '.join(who)})")


def _apply_one(
    scope: OrderScope, deps: Deps, d: Decisions, manifest: Obj, manifests: list[Obj], applied: Applied
) -> None:
    """One child, stamped: restored when someone else changed it, else applied when it changed (a set whose roll
    must wait for its class's turn is left serving as it is)."""
    meta = manifest["metadata"]
    held = deps.cluster.cached(manifest["kind"], meta["namespace"], meta["name"])
    squatted = _squatted(scope, deps, manifest, held)
    if squatted is not None:
        if held is not None and made_for(held, scope):  # ours came second: it goes
            d.write(Delete(manifest["apiVersion"], "Ingress", meta["name"]))
        applied.squat = squatted
        return
    bound = next(
        (m["spec"].get("maxReplicas") for m in manifests if m["kind"] == "HorizontalPodAutoscaler"), None
    )
    if _tampered(deps, held, manifest, bound):
        assert held is not None
        _restored(scope, deps, d, held, manifest, bound, applied)
        return
    if _unchanged(deps, manifest):
        return
    if manifest["kind"] == "StatefulSet" and waits_its_turn(
        scope, deps, manifest, templates(scope, deps, manifests)
    ):
        applied.roll_waits = True  # the set in place keeps serving; applied when the class's turn comes
        return
    deps.cluster.apply(_sealed(deps, manifest))
    applied.set_applied = applied.set_applied or manifest["kind"] == "StatefulSet"


def apply_children(scope: OrderScope, deps: Deps, d: Decisions, manifests: list[Obj]) -> Applied:
    """Apply what changed; restore what someone else changed. A set the order outgrew is not applied (the
    held one keeps serving): the step ends in SettledRegionTooSmall once the other children are applied."""
    applied = Applied()
    for built in manifests:
        settled = _settled(deps, built)
        if isinstance(settled, Refusal):
            applied.too_small = _settled_region_too_small(scope, d, settled.message)
            continue
        manifest = _stamped(settled)
        try:
            _apply_one(scope, deps, d, manifest, manifests, applied)
        except Exception as exc:
            refusal = ClusterRefusal.of(exc)
            if refusal is None:
                raise
            applied.refusal = _refused(scope, d, manifest, refusal)
            return applied
    applied.refusal = applied.too_small or _after(scope, deps, d, manifests, applied)
    return applied


def _after(
    scope: OrderScope, deps: Deps, d: Decisions, manifests: list[Obj], applied: Applied
) -> Verdict | None:
    """What the order no longer needs goes (an earlier version's Deployment, claim templates no pod uses); a
    child left changed, a host taken or a child restored says so."""
    for old in deps.cluster.owned("Deployment", scope.namespace, scope.name):  # an earlier version's workload
        if made_for(old, scope):
            d.write(Delete("apps/v1", "Deployment", old["metadata"]["name"]))
    current = {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
    _prune_templates(scope, deps, d, current)
    foreign_autoscalers(scope, deps, d, manifests)
    if applied.squat is not None:
        log.warning("%s/%s: %s", scope.namespace, scope.name, applied.squat)
        d.requeue(RETRY_CAPACITY)
        return Verdict.refuse(Reason.WORKLOAD_ERROR, applied.squat)
    if applied.paced is not None:
        return Verdict.refuse(Reason.WORKLOAD_NOT_READY, applied.paced)
    if applied.restored:
        message = (
            f"{', '.join(applied.restored)} had been changed by someone other than the module, and is restored "
            "to what the module computes; the order is served again once its replicas are. An order's children "
            "are the module's: change the order instead."
        )
        d.requeue(RETRY_SOON)
        return Verdict.refuse(Reason.WORKLOAD_NOT_READY, message)
    return None


def _prune_templates(scope: OrderScope, deps: Deps, d: Decisions, current: set[str]) -> None:
    """A plan that needs another claim rolls onto a new template; an old one goes once no pod uses it."""
    in_use = {
        claim.get("resourceClaimTemplateName")
        for pod in deps.cluster.owned("Pod", scope.namespace, scope.name)
        for claim in (pod.get("spec") or {}).get("resourceClaims") or []
    }
    for template in deps.cluster.owned("ResourceClaimTemplate", scope.namespace, scope.name):
        name = template["metadata"]["name"]
        if name not in current and name not in in_use and made_for(template, scope):
            d.write(Delete("resource.k8s.io/v1", "ResourceClaimTemplate", name))
