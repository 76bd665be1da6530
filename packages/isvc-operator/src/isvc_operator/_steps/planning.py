"""Planned, the plan computed: the planner asked (with what the order holds), the recipe compiled for its
placement, the LaunchPlan stored, and the plan in force adopted into the status."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from isvc_api import (
    API_VERSION,
    LABEL_MANAGED_BY,
    LABEL_ORDER,
    MANAGER,
    CompiledRuntime,
    ConditionType,
    Estimates,
    LaunchPlanSpec,
    Load,
    Obj,
    Placement,
    Reason,
    Refusal,
    Resolved,
    StatusReason,
    Verdict,
    find_condition,
    serving_load,
)
from isvc_runtime_recipes import effective_endpoint_type

from isvc_operator._outcome import Decisions
from isvc_operator._ports import NO_ROOM, Deps, TemporaryError
from isvc_operator._scope import RETRY_CAPACITY, WORKLOAD_KINDS, OrderScope, workload_deletes

__all__ = [
    "PLAN_ANNOTATION",
    "Refused",
    "Stored",
    "adopt",
    "compile_launch",
    "compute",
    "keep",
    "plan_message",
    "serving",
    "serving_of",
]

PLAN_ANNOTATION = "ai.deckhouse.io/computed-by"  # on LaunchPlans the module computed (not written by hand)
Refused = tuple[str, datetime | None]  # the scheduler's words, and since when it has said them


@attrs.frozen
class Stored:
    """The LaunchPlan read this pass: None when there is none; `lost`: why the order no longer stands on its
    devices in the planner's ledger (empty: it does); `gone`: why devices of the plan are out of service for
    it (its node deleted, cordoned or not ready, the device withdrawn)."""

    raw: Obj | None
    spec: LaunchPlanSpec | None
    lost: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # devices of the plan out of service for it (an inventory change), with why
    outranked: tuple[str, ...] = ()  # with `lost`: orders of higher priority took them (preemption)


def serving_of(scope: OrderScope) -> Load:
    """The load the order must carry (issue 42): its class's serving target, each field the class leaves out
    taken from the default of the contract the order is served as (a class-less order: what the model is)."""
    assert scope.facts is not None
    spec = scope.policy.spec if scope.policy is not None else None
    endpoint = effective_endpoint_type(scope.facts, scope.endpoint_type)
    return serving_load(spec.serving if spec is not None else None, endpoint)


def compile_launch(
    scope: OrderScope, deps: Deps, placement: Placement, estimates: Estimates
) -> CompiledRuntime | Refusal:
    """The runtime of a placement, compiled from the recipes for the order's model, endpoint, served name and
    serving target."""
    assert scope.facts is not None
    served = scope.order.spec.model.ref.served_name
    return deps.recipes.compile(
        scope.facts, scope.endpoint_type, placement, estimates, served, serving=serving_of(scope)
    )


def plan_message(plan: LaunchPlanSpec) -> str:
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


def adopt(scope: OrderScope, d: Decisions, plan: LaunchPlanSpec, replans: int, inputs: str | None) -> None:
    """The plan in force for the later steps, and what it resolved to in the status."""
    scope.plan = plan
    p, e = plan.placement, plan.estimates
    resolved = Resolved(
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
        kv_cache_tokens=_launch_figure(plan, "kv_cache_tokens"),
        concurrent_requests=_launch_figure(plan, "concurrent_requests"),
        request_tokens=_launch_figure(plan, "request_tokens"),
        runtime=plan.runtime.recipe if plan.runtime else None,
        replan_count=replans,
        inputs_hash=inputs,
    )
    d.decide(resolved=resolved)


def keep(scope: OrderScope, d: Decisions, plan: LaunchPlanSpec) -> None:
    """The plan stays in force as the status last counted it."""
    previous = scope.previous.resolved
    adopt(
        scope, d, plan, previous.replan_count if previous else 0, previous.inputs_hash if previous else None
    )


def serving(scope: OrderScope, deps: Deps) -> bool:
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


def _refused(
    scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str, refusal: Refusal
) -> Verdict:
    """A recomputation that failed: the plan in force stays for a serving order (not for one that lost its
    devices), else the refusal. A refusal for want of room waits in the waiting room, on no timer; an order
    without a plan and without room has its workload taken down (it holds devices given to others)."""
    if refusal.reason.retried and refusal.reason not in NO_ROOM:
        d.requeue(RETRY_CAPACITY)
    existing = stored.spec
    standing = not stored.lost and not stored.gone
    if existing is not None and standing and existing.runtime is not None and serving(scope, deps):
        previous = scope.previous.resolved
        replans = previous.replan_count if previous else 0
        counted = previous is not None and previous.inputs_hash == inputs
        adopt(scope, d, existing, replans + (0 if counted else 1), inputs)
        return Verdict(
            status="True",
            reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
            message=(
                f"the order runs on the plan it holds; recomputing it failed: "
                f"{refusal.reason.value}: {refusal.message}"
            ),
        )
    if existing is None and refusal.reason in NO_ROOM:
        d.write(*workload_deletes(scope, deps.cluster))
        d.decide(endpoint=None)
    return Verdict.refuse(refusal.reason, refusal.message)


def _launch_plan(scope: OrderScope, plan: LaunchPlanSpec) -> Obj:
    return {
        "apiVersion": API_VERSION,
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


def _no_other_room(scope: OrderScope, d: Decisions, held: LaunchPlanSpec, refusal: Refusal | None) -> Verdict:
    """No other device has room for the claim the scheduler could not allocate: the claim waits where it is
    (WorkloadReady says ResourceClaimExhausted, in the planner's words), and the order in the waiting room,
    moved when room appears elsewhere."""
    keep(scope, d, held)
    why = refusal.message if refusal else "no answer"
    if refusal is not None and refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED:
        scope.claim_exhausted = refusal.message
    return Verdict.ok(
        StatusReason.PLANNED,
        f"{plan_message(held)} No other device has room for the claim the scheduler could not allocate: {why}",
    )


def compute(
    scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str, refused: Refused | None = None
) -> Verdict:
    """Ask the planner (with what the order holds), compile the recipe, and store the plan."""
    assert scope.facts is not None and scope.policy is not None
    requirements = deps.recipes.requirements(scope.facts, scope.endpoint_type)
    if isinstance(requirements, Refusal):
        return _refused(scope, deps, d, stored, inputs, requirements)
    holding = stored.spec.placement if stored.spec is not None else None
    words, since = refused if refused is not None else (None, None)
    try:
        outcome = deps.planner.plan(
            scope.order,
            scope.facts,
            scope.policy,
            requirements,
            holding,
            words,
            refused_since=since,
            serving=serving_of(scope),
        )
    except TemporaryError as exc:
        failed = Refusal(
            reason=Reason.PLANNER_REQUEST_FAILED, message=f"the planner did not answer ({exc}); retried."
        )
        return _refused(scope, deps, d, stored, inputs, failed)
    if refused is not None and outcome.placement is None and stored.spec is not None:
        return _no_other_room(scope, d, stored.spec, outcome.refusal)
    if refused is not None and stored.spec is not None and outcome.placement == stored.spec.placement:
        # The devices it holds, again (a victim of its preemption still leaving them): nothing to rewrite.
        keep(scope, d, stored.spec)
        d.wake.extend(outcome.preempt)
        return Verdict.ok(StatusReason.PLANNED, plan_message(stored.spec))
    if outcome.refusal is not None or outcome.placement is None or outcome.estimates is None:
        missing = Refusal(
            reason=Reason.PLANNER_REQUEST_FAILED, message="the planner answered without a placement; retried."
        )
        return _refused(scope, deps, d, stored, inputs, outcome.refusal or missing)
    compiled = compile_launch(scope, deps, outcome.placement, outcome.estimates)
    if isinstance(compiled, Refusal):
        deps.planner.release(scope.namespace, scope.name)  # the placement will not be taken
        return _refused(scope, deps, d, stored, inputs, _unserved(outcome.placement, compiled))
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
    d.wake.extend(outcome.preempt)  # each finds out in its own pass that it was displaced
    return _outgrown(scope, deps, d, stored, inputs, plan) or _store(scope, deps, d, stored, plan)


def _outgrown(
    scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str, plan: LaunchPlanSpec
) -> Verdict | None:
    """A new plan of a serving order that the model volume of its set cannot take (a volume never changes;
    SettledRegionTooSmall): not stored, and its room released, so that the LaunchPlan, Planned and the
    planner's ledger keep describing what serves (one share held, not both); WorkloadReady refuses it."""
    existing = stored.spec
    needed = plan.estimates.model_volume if plan.estimates is not None else None
    if existing is None or existing.runtime is None or needed is None or stored.lost or stored.gone:
        return None
    refusal = deps.workload.outgrows(deps.cluster.cached("StatefulSet", scope.namespace, scope.name), needed)
    if refusal is None or not serving(scope, deps):
        return None
    deps.planner.release(scope.namespace, scope.name)  # the placement will not be taken
    scope.outgrown = refusal.message
    previous = scope.previous.resolved
    counted = previous is not None and previous.inputs_hash == inputs
    adopt(scope, d, existing, (previous.replan_count if previous else 0) + (0 if counted else 1), inputs)
    return Verdict(
        status="True",
        reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
        message=(
            f"the order runs on the plan it holds ({plan_message(existing)}); the plan its edit needs "
            f"({plan_message(plan)}) is not taken, since its model volume ({needed}) does not fit the set's: "
            "see WorkloadReady."
        ),
    )


def _store(scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, plan: LaunchPlanSpec) -> Verdict:
    """The new plan written as the order's LaunchPlan and adopted, counted as a replan when it replaces one."""
    try:
        scope.launch_plan_obj = deps.cluster.apply(_launch_plan(scope, plan))
    except Exception:
        deps.planner.release(scope.namespace, scope.name)  # the room is not held by a plan never stored
        raise
    d.decide(launch_plan_name=scope.name)
    previous = scope.previous.resolved
    replans = previous.replan_count if previous else 0
    recomputed = stored.spec is not None or (previous is not None and previous.device_class is not None)
    adopt(scope, d, plan, replans + (1 if recomputed and not _counted(scope, plan) else 0), plan.inputs_hash)
    return Verdict.ok(StatusReason.PLANNED, plan_message(plan))


def _counted(scope: OrderScope, plan: LaunchPlanSpec) -> bool:
    """Whether the recomputation for these inputs was counted already, when it was refused while the plan
    before stayed in force (LaunchPlanInForce): one edit is one replan, however many passes it took."""
    planned = find_condition(scope.previous.conditions, ConditionType.PLANNED.value)
    previous = scope.previous.resolved
    return (
        planned is not None
        and planned.reason == Reason.LAUNCH_PLAN_IN_FORCE.value
        and previous is not None
        and previous.inputs_hash == plan.inputs_hash
    )


def _unserved(placement: Placement, refusal: Refusal) -> Refusal:
    """The recipes refused the planner's placement although they serve the model (its requirements held):
    the placement is the problem, not the model, so the reason is the placement's (it waits for room) and
    never the permanent NoCompatibleRuntimeAvailable on the way to it."""
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
