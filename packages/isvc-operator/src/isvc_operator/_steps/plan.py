"""Planned: a placement and a compiled recipe, kept in the order's LaunchPlan.

A stored plan is judged by the planner before it is used: whether it is a placement, and whether the order
still stands on its devices in the planner's ledger, the one account of who holds what (an order of higher
priority may have been placed there, naming this one as displaced). One whose inputs still hold is kept
without asking the planner; otherwise the planner is asked (with what the order holds) and the recipe
compiled for its placement. A serving order whose recomputation fails keeps its plan in force
(LaunchPlanInForce) — unless it lost its devices: then it is planned elsewhere in the same pass or taken
down. Both answers come from the one ranking the ledger keeps, and placing the order needs room among all
other holders of a device, a superset of those ranked above it, so the order is never planned back onto the
device it lost while nothing changed: no pass undoes the previous pass's work.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import attrs
from isvc_api import (
    GROUP,
    LABEL_MANAGED_BY,
    LABEL_ORDER,
    MANAGER,
    VERSION,
    CompiledRuntime,
    ConditionType,
    LaunchPlanSpec,
    Placement,
    Reason,
    Refusal,
    Resolved,
    StatusReason,
    Verdict,
    find_condition,
)
from pydantic import ValidationError

from isvc_operator._ports import NO_ROOM, Deps, Obj, TemporaryError
from isvc_operator._scope import (
    RETRY_CAPACITY,
    RETRY_SOON,
    WORKLOAD_KINDS,
    OrderScope,
    take_down_workload,
)

__all__ = ["PLAN_ANNOTATION", "step"]

PLAN_ANNOTATION = "ai.deckhouse.io/computed-by"  # on LaunchPlans the module computed (not written by hand)

log = logging.getLogger(__name__)
GV = f"{GROUP}/{VERSION}"
REFUSED_AFTER = 45.0  # seconds a planned claim stays unallocated before the planner hears it was refused


@attrs.frozen
class _Stored:
    """The LaunchPlan read this pass: None when there is none or it was just taken down; `lost`: why the
    order no longer stands on its devices in the planner's ledger (empty: it does); `gone`: why devices of
    the plan are out of service for it (its node deleted, cordoned or not ready, the device withdrawn)."""

    raw: Obj | None
    spec: LaunchPlanSpec | None
    lost: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # devices of the plan out of service for it (an inventory change), with why


def _hash(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _inputs_hash(scope: OrderScope, deps: Deps) -> str:
    assert scope.policy is not None and scope.facts is not None
    policy = scope.policy
    return _hash(
        scope.order.spec.model.to_wire(),
        policy.class_name,
        policy.accelerator.to_wire() if policy.accelerator else None,
        policy.priority_class_name,
        scope.facts.to_wire(),
        scope.endpoint_type.value if scope.endpoint_type else None,
        deps.recipes.version,
    )


def _field(exc: ValidationError) -> str:
    err = exc.errors()[0]
    path = ".".join(str(p) for p in err["loc"])
    return f"spec.{path}: {err['msg']} (value {err.get('input')!r})"


def _hands(raw: Obj) -> list[str]:
    """Who besides the module wrote the plan's spec: the field managers of its managedFields (kubectl-edit,
    kubectl-client-side-apply, ...), which the API server keeps whatever annotations an edit leaves."""
    entries = raw["metadata"].get("managedFields") or []
    return sorted(
        {
            str(e.get("manager") or "an unnamed client")
            for e in entries
            if isinstance(e, dict)
            and e.get("manager") != MANAGER
            and not e.get("subresource")
            and "f:spec" in (e.get("fieldsV1") or {})
        }
    )


def _whose(raw: Obj, by_module: bool) -> str:
    """What to do about a plan that is not a placement: the module's own answer is a defect to report; a plan
    written or edited by hand (even the module's, its annotation kept) is deleted and computed anew."""
    hands = _hands(raw)
    if by_module and not hands:
        return "the module's own answer did not hold up: report this as a defect with this message"
    edited = f" (its spec was edited by {', '.join(hands)})" if by_module else ""
    return f"delete the LaunchPlan and the module computes a new one{edited}"


def _read(scope: OrderScope, deps: Deps) -> _Stored | Verdict:
    """The stored LaunchPlan, judged: a refusal when it is not a placement (or the planner is down)."""
    raw = deps.cluster.launch_plan(scope.namespace, scope.name)
    scope.launch_plan_name = scope.name if raw is not None else None
    scope.launch_plan_obj = raw
    if raw is None:
        return _Stored(None, None)
    by_module = (raw["metadata"].get("annotations") or {}).get(PLAN_ANNOTATION) == MANAGER
    whose = _whose(raw, by_module)
    try:
        spec = LaunchPlanSpec.model_validate(raw.get("spec") or {})
    except ValidationError as exc:
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT, f"LaunchPlan {scope.name!r}: {_field(exc)}; {whose}."
        )
    try:
        judgement = deps.planner.judge(scope.namespace, scope.name, spec.placement)
    except TemporaryError as exc:
        scope.requeue(RETRY_SOON)
        if spec.runtime is not None and _serving(scope, deps):  # an outage never takes a Ready order down
            _keep(scope, spec)
            return Verdict(
                status="True",
                reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
                message=(
                    f"the order runs on the plan it holds; the planner did not answer ({exc}), so the plan is "
                    "judged and recomputed when it does."
                ),
            )
        return Verdict.refuse(Reason.PLANNER_REQUEST_FAILED, f"the planner did not answer ({exc}); retried.")
    if judgement.gone:  # hardware out of service: replanned, never judged as a placement against what is left
        return _Stored(raw, spec, gone=judgement.gone)
    if judgement.refusal is not None:
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
            f"LaunchPlan {scope.name!r}: {judgement.refusal.message}; {whose}.",
        )
    outside = _outside_policy(scope, spec.placement)
    if outside is not None:
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT, f"LaunchPlan {scope.name!r}: {outside}; {whose}."
        )
    if judgement.lost:
        return _Stored(raw, spec, judgement.lost)
    if scope.facts is not None and spec.inputs_hash == _inputs_hash(scope, deps):
        runtime = _recompiled(scope, deps, spec)
    else:  # an edit waits for a new plan, or the model source is down: only the module's own runtime stays
        runtime = spec.runtime if by_module else None
    if isinstance(runtime, Verdict):
        return runtime
    return _Stored(raw, spec.model_copy(update={"runtime": runtime}))


def _outside_policy(scope: OrderScope, placement: Placement) -> str | None:
    """What of a stored placement the order's class does not let it use (a plan may be written by hand)."""
    accelerator = scope.policy.accelerator if scope.policy is not None else None
    if accelerator is None:
        return None
    classes = accelerator.device_class_names
    if classes and placement.device_class_name not in classes:
        return (
            f"deviceClassName={placement.device_class_name!r} is not among the device classes the "
            f"order's class lets it use ({', '.join(classes)})"
        )
    shares = accelerator.allowed_share_percents
    if shares and placement.share_percent is not None and placement.share_percent not in shares:
        return f"sharePercent={placement.share_percent} is not a share the order's class permits ({shares})"
    return None


def _recompiled(scope: OrderScope, deps: Deps, spec: LaunchPlanSpec) -> CompiledRuntime | Verdict | None:
    """The runtime of a stored placement, always compiled from the recipes: a plan may fix a placement,
    never a container (image, command and arguments are never read from the plan)."""
    assert scope.facts is not None
    if spec.estimates is None:
        return None
    served_name = scope.order.spec.model.ref.name.split("@", 1)[0]
    compiled = deps.recipes.compile(
        scope.facts, scope.endpoint_type, spec.placement, spec.estimates, served_name
    )
    if isinstance(compiled, Refusal):
        return Verdict.refuse(compiled.reason, compiled.message)
    return compiled


def _unplace(scope: OrderScope, deps: Deps) -> None:
    """The order's own plan and workload go, and it waits for room (the waiting room)."""
    deps.cluster.delete(GV, "LaunchPlan", scope.namespace, scope.name)
    take_down_workload(scope, deps)
    scope.launch_plan_name = None
    scope.launch_plan_obj = None
    scope.unplaced = True


def _take_down(scope: OrderScope, deps: Deps, why: str) -> None:
    """This order's plan lost its device to one of higher priority and nothing else has room: its own plan
    and workload go, and it waits for room."""
    _unplace(scope, deps)
    scope.event(
        "Warning",
        "Preempted",
        f"An order of higher priority took the device this order held ({why}); nothing else has room, so its "
        "workload is taken down and it waits for room.",
    )


MOVED, OUT_OF_SERVICE = "Moved", "OutOfService"  # events of an order whose hardware went out of service


def _moved(scope: OrderScope, deps: Deps, stored: _Stored, inputs: str) -> Verdict:
    """Devices of the plan went out of service (a node deleted, cordoned, not ready; a device withdrawn): an
    inventory change, not a refusal. Planned elsewhere in this pass (event Moved), or, with nothing else
    having room, the plan and workload go and the order waits saying why (event OutOfService); it is planned
    again when room appears or the hardware returns (the waiting room wakes on both)."""
    why = "; ".join(stored.gone)
    verdict = _compute(scope, deps, stored, inputs)
    if scope.plan is not None:
        scope.event(
            "Normal", MOVED, f"Its devices are out of service ({why}); planned elsewhere: {verdict.message}"
        )
        return verdict
    _unplace(scope, deps)
    scope.event(
        "Warning",
        OUT_OF_SERVICE,
        f"Its devices are out of service ({why}); no other device has room, so its workload is taken down and "
        f"it waits: it is planned again when room appears or the hardware returns ({verdict.message})",
    )
    return verdict.model_copy(
        update={"message": f"Its devices are out of service ({why}). {verdict.message}"}
    )


def _lost(scope: OrderScope, deps: Deps, stored: _Stored, inputs: str) -> Verdict:
    """The order lost its devices in the planner's ledger: planned again in this pass (never back onto what
    it lost), or taken down to wait when nothing else has room."""
    if stored.gone:
        return _moved(scope, deps, stored, inputs)
    why = "; ".join(stored.lost)
    verdict = _compute(scope, deps, stored, inputs)
    if scope.plan is not None:
        scope.event(
            "Warning",
            "Preempted",
            f"An order of higher priority took the device this order held ({why}); it is planned elsewhere: "
            f"{verdict.message}",
        )
        return verdict
    _take_down(scope, deps, why)
    return verdict


def _plan_message(plan: LaunchPlanSpec) -> str:
    p = plan.placement
    share = f" {p.share_percent}%" if p.share_percent else ""
    runtime = plan.runtime.recipe if plan.runtime else "no runtime"
    return (
        f"{p.placement_mode.value}{share} of {p.device_count}× {p.accelerator_product_name} "
        f"({p.device_class_name}) on {p.node_name}, runtime {runtime}."
    )


def _launch_figure(plan: LaunchPlanSpec, field: str) -> Any:
    """A figure of the launch: the compiled runtime's, else the plan's estimate of it."""
    compiled = getattr(plan.runtime, field, None) if plan.runtime else None
    return compiled if compiled is not None else getattr(plan.estimates, field, None)


def _adopt(scope: OrderScope, plan: LaunchPlanSpec, replans: int, inputs: str | None) -> None:
    scope.plan = plan
    p, e = plan.placement, plan.estimates
    scope.resolved = Resolved(
        device_class=p.device_class_name,
        accelerator_product_name=p.accelerator_product_name,
        accelerator_memory_gi_b=p.accelerator_memory_gi_b,
        placement_mode=p.placement_mode,
        sharing_mode=p.sharing_mode,
        share_percent=p.share_percent,
        device_count=p.device_count,
        node_name=p.node_name,
        devices=[f"{p.pool}/{d}" for d in p.devices or []] or None,
        served_model=plan.runtime.served_name if plan.runtime else None,
        required_memory_gi_b=e.required_memory_gi_b if e else None,
        cpu=e.cpu if e else None,
        memory=e.memory if e else None,
        model_volume=e.model_volume if e else None,
        weights_gi_b=e.weights_gi_b if e else None,
        kv_bytes_per_token=e.kv_bytes_per_token if e else None,
        overhead_gi_b=e.overhead_gi_b if e else None,
        context_length=e.context_length if e else None,
        # what the compiled launch states (its flags), else what the plan estimated
        kv_cache_bytes=_launch_figure(plan, "kv_cache_bytes"),
        margin_gi_b=_launch_figure(plan, "margin_gi_b"),
        runtime=plan.runtime.recipe if plan.runtime else None,
        replan_count=replans,
        inputs_hash=inputs,
    )


def _keep(scope: OrderScope, plan: LaunchPlanSpec) -> None:
    """The plan stays in force as the status last counted it."""
    previous = scope.previous.resolved
    _adopt(scope, plan, previous.replan_count if previous else 0, previous.inputs_hash if previous else None)


def _serving(scope: OrderScope, deps: Deps) -> bool:
    """Whether the order serves on the plan it holds: it was Ready, or its replicas still are.

    An earlier step that failed for one pass (a Secret the cache has not seen yet) leaves Ready
    waiting, but the workload keeps serving on its plan; that plan stays in force.
    """
    if any(c.type == ConditionType.READY.value and c.status == "True" for c in scope.previous.conditions):
        return True
    return any(
        int((d.get("status") or {}).get("readyReplicas") or 0) > 0
        for kind in WORKLOAD_KINDS
        for d in deps.cluster.owned(kind, scope.namespace, scope.name)
    )


def _refused(scope: OrderScope, deps: Deps, stored: _Stored, inputs: str, refusal: Refusal) -> Verdict:
    """A recomputation that failed: the plan in force stays for a serving order (not for one that lost its
    devices), else the refusal. A refusal for want of room waits in the waiting room, on no timer."""
    if refusal.reason.retried and refusal.reason not in NO_ROOM:
        scope.requeue(RETRY_CAPACITY)
    existing = stored.spec
    standing = not stored.lost and not stored.gone
    if existing is not None and standing and existing.runtime is not None and _serving(scope, deps):
        previous = scope.previous.resolved
        replans = previous.replan_count if previous else 0
        counted = previous is not None and previous.inputs_hash == inputs
        _adopt(scope, existing, replans + (0 if counted else 1), inputs)
        return Verdict(
            status="True",
            reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
            message=(
                f"the order runs on the plan it holds; recomputing it failed: "
                f"{refusal.reason.value}: {refusal.message}"
            ),
        )
    scope.unplaced = existing is None and refusal.reason in NO_ROOM
    return Verdict.refuse(refusal.reason, refusal.message)


def _launch_plan(scope: OrderScope, plan: LaunchPlanSpec) -> Obj:
    return {
        "apiVersion": GV,
        "kind": "LaunchPlan",
        "metadata": {
            "name": scope.name,
            "namespace": scope.namespace,
            "labels": {LABEL_ORDER: scope.name, LABEL_MANAGED_BY: MANAGER},
            "annotations": {PLAN_ANNOTATION: MANAGER},
            "ownerReferences": [scope.order.owner_reference()],
        },
        "spec": plan.to_wire(),
    }


def _scheduler_refused(scope: OrderScope, plan: LaunchPlanSpec) -> str | None:
    """The scheduler's words when it has not allocated the claim of the plan held for a while.

    Not at once: a plan that preempted waits a few seconds for the displaced order's claim to go, and
    the scheduler says the same meanwhile.
    """
    last = find_condition(scope.previous.conditions, ConditionType.WORKLOAD_READY.value)
    if last is None or last.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value:
        return None
    times = [t for t in (last.last_transition_time, plan.planned_at) if t is not None]
    if not times:
        return None
    waited = (scope.now - max(times)).total_seconds()
    if waited < REFUSED_AFTER:
        scope.requeue(REFUSED_AFTER - waited)  # told to the planner then; the room takes it from there
        return None
    return last.message if "cannot allocate all claims" in last.message else None


def _compute(
    scope: OrderScope, deps: Deps, stored: _Stored, inputs: str, refused: str | None = None
) -> Verdict:
    """Ask the planner (with what the order holds), compile the recipe, and store the plan."""
    assert scope.facts is not None and scope.policy is not None
    requirements = deps.recipes.requirements(scope.facts, scope.endpoint_type)
    if isinstance(requirements, Refusal):
        return _refused(scope, deps, stored, inputs, requirements)
    holding = stored.spec.placement if stored.spec is not None else None
    try:
        outcome = deps.planner.plan(scope.order, scope.facts, scope.policy, requirements, holding, refused)
    except TemporaryError as exc:
        return _refused(
            scope,
            deps,
            stored,
            inputs,
            Refusal(
                reason=Reason.PLANNER_REQUEST_FAILED, message=f"the planner did not answer ({exc}); retried."
            ),
        )
    if refused is not None and outcome.placement is None and stored.spec is not None:
        # No other device has room: the claim waits where it is (WorkloadReady says ResourceClaimExhausted),
        # and the order in the waiting room, moved when room appears elsewhere.
        _keep(scope, stored.spec)
        why = outcome.refusal.message if outcome.refusal else "no answer"
        return Verdict.ok(
            StatusReason.PLANNED,
            f"{_plan_message(stored.spec)} No other device has room for "
            f"the claim the scheduler could not allocate: {why}",
        )
    if outcome.refusal is not None or outcome.placement is None or outcome.estimates is None:
        return _refused(
            scope,
            deps,
            stored,
            inputs,
            outcome.refusal
            or Refusal(
                reason=Reason.PLANNER_REQUEST_FAILED,
                message="the planner answered without a placement; retried.",
            ),
        )
    # The model is served under its name without a pinned revision, as clients ask for it.
    served_name = scope.order.spec.model.ref.name.split("@", 1)[0]
    compiled = deps.recipes.compile(
        scope.facts, scope.endpoint_type, outcome.placement, outcome.estimates, served_name
    )
    if isinstance(compiled, Refusal):
        deps.planner.release(scope.namespace, scope.name)  # the placement will not be taken
        return _refused(scope, deps, stored, inputs, _unserved(outcome.placement, compiled))
    plan = LaunchPlanSpec(
        placement=outcome.placement,
        estimates=outcome.estimates,
        runtime=compiled,
        inputs_hash=inputs,
        planned_at=scope.now,
        model_commit=scope.facts.commit,
        model_files=scope.facts.gguf_files,
        model_repo=scope.facts.download_repo,
    )
    try:
        scope.launch_plan_obj = deps.cluster.apply(_launch_plan(scope, plan))
    except Exception:
        deps.planner.release(scope.namespace, scope.name)  # the room is not held by a plan never stored
        raise
    scope.wake.extend(outcome.preempt)  # each finds out in its own pass that it was displaced
    scope.launch_plan_name = scope.name
    previous = scope.previous.resolved
    replans = previous.replan_count if previous else 0
    recomputed = stored.spec is not None or (previous is not None and previous.device_class is not None)
    _adopt(scope, plan, replans + (1 if recomputed else 0), inputs)
    return Verdict.ok(StatusReason.PLANNED, _plan_message(plan))


def _unserved(placement: Placement, refusal: Refusal) -> Refusal:
    """The recipes refused the planner's placement although they serve the model (its requirements held):
    the placement is the problem, not the model, so the reason is the placement's (it waits for room) and
    never the permanent NoCompatibleRuntimeAvailable on the way to it (issue 26)."""
    if refusal.reason not in (Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE, Reason.QUANTIZATION_MISMATCH):
        return refusal
    where = (
        f"{placement.accelerator_product_name} ({placement.placement_mode.value}, {placement.device_count})"
    )
    return Refusal(
        reason=Reason.NO_COMPATIBLE_PLACEMENT,
        message=(
            f"No room now in a form a runtime serves: the planner's placement on {where} is one the recipes do "
            f"not run the model on ({refusal.message}). Replanned when capacity changes."
        ),
    )


def _model_source_down(scope: OrderScope, deps: Deps) -> Verdict | None:
    """A serving order whose model source does not answer for a moment keeps the plan it holds."""
    model = scope.verdicts.get(ConditionType.MODEL_RESOLVED)
    if scope.policy is None or model is None or model.holds or not _retried(model.reason):
        return None
    stored = _read(scope, deps)
    if (
        isinstance(stored, Verdict)
        or stored.spec is None
        or stored.spec.runtime is None
        or not _serving(scope, deps)
    ):
        return None
    _keep(scope, stored.spec)
    return Verdict(
        status="True",
        reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
        message=(
            f"the order runs on the plan it holds; the model could not be resolved for now ({model.reason}), "
            "so the plan is recomputed when it can."
        ),
    )


def _retried(reason: str) -> bool:
    return reason in {r.value for r in Reason if r.retried}


def step(scope: OrderScope, deps: Deps) -> Verdict:
    """Keep the stored plan while its inputs hold; otherwise compute one."""
    if scope.facts is None or scope.policy is None:
        return _model_source_down(scope, deps) or scope.waits_for(ConditionType.MODEL_RESOLVED)
    stored = _read(scope, deps)
    if isinstance(stored, Verdict):
        return stored
    inputs = _inputs_hash(scope, deps)
    if stored.lost or stored.gone:
        return _lost(scope, deps, stored, inputs)
    existing = stored.spec
    refused = _scheduler_refused(scope, existing) if existing is not None else None
    if refused is not None:  # the scheduler could not allocate the plan's claim: the planner plans again
        return _compute(scope, deps, stored, inputs, refused)
    if existing is not None and existing.inputs_hash == inputs and existing.runtime is not None:
        previous = scope.previous.resolved
        _adopt(scope, existing, previous.replan_count if previous else 0, inputs)
        return Verdict.ok(StatusReason.PLANNED, _plan_message(existing))
    return _compute(scope, deps, stored, inputs)
