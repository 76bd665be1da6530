"""Planned: a placement and a compiled recipe, kept in the order's LaunchPlan.

A stored plan is judged by the planner before it is used: whether it is a placement, and whether the order
still stands on its devices in the planner's ledger, the one account of who holds what (an order of higher
priority may have been placed there, naming this one as displaced). One whose inputs still hold is kept
without asking the planner; otherwise the planner is asked (with what the order holds) and the recipe
compiled for its placement. A serving order whose recomputation fails keeps its plan in force
(LaunchPlanInForce) — unless it lost its devices to orders of higher priority: then it is planned
elsewhere in the same pass or taken down. Both answers come from the one ranking the ledger keeps, and
placing the order needs room among all other holders of a device, a superset of those ranked above it, so
the order is never planned back onto the device it lost while nothing changed: no pass undoes the previous
pass's work. Devices lost to claims that came first (no preemption) are the scheduler's to refuse: the
plan stands until it does, and the refusal goes to the planner in that pass.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from isvc_api import (
    API_VERSION,
    MANAGER,
    CompiledRuntime,
    ConditionType,
    LaunchPlanSpec,
    Obj,
    Placement,
    Reason,
    Refusal,
    StatusReason,
    Verdict,
    find_condition,
)
from pydantic import ValidationError

from isvc_operator._outcome import Decisions, Delete, Outcome
from isvc_operator._ports import Deps, Judgement, TemporaryError
from isvc_operator._scope import RETRY_SOON, OrderScope, workload_deletes
from isvc_operator._steps.planning import (
    PLAN_ANNOTATION,
    Refused,
    Stored,
    adopt,
    compile_launch,
    compute,
    keep,
    plan_message,
    serving,
    serving_of,
)

__all__ = ["PLAN_ANNOTATION", "REFUSED_AFTER", "step"]

# Seconds a planned claim stays refused by the scheduler before the planner hears of it: the longest
# kube-scheduler leaves an unschedulable pod before trying it again after a change that may make room (its
# podMaxBackoffSeconds, 10 by default: kubernetes v1.36.3 pkg/scheduler/apis/config/v1/defaults.go), and a few
# seconds for the pass. A preemption's victim leaving (up to its pods' termination grace, 30 s) is not waited
# out: the planner takes a refusal its ledger explains (a victim still holding the device, a claim allocated
# first) for no disagreement; and a drain or a lost node is an inventory change the ledger names (`gone`).
REFUSED_AFTER = 15.0
MOVED, OUT_OF_SERVICE = "Moved", "OutOfService"  # events of an order whose hardware went out of service


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
        serving_of(scope),  # the load the plan is sized for (issue 42): the class's serving target
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


def _read(scope: OrderScope, deps: Deps, d: Decisions) -> Stored | Verdict:
    """The stored LaunchPlan, judged: a refusal when it is not a placement (or the planner is down). What the
    status says of it (its name) is decided here, and a serving order stays on it while the planner is down."""
    raw = deps.cluster.launch_plan(scope.namespace, scope.name)
    scope.launch_plan_obj = raw
    d.decide(launch_plan_name=scope.name if raw is not None else None)
    if raw is None:
        return Stored(None, None)
    try:
        spec = LaunchPlanSpec.model_validate(raw.get("spec") or {})
    except ValidationError as exc:
        by_module = _by_module(raw)
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
            f"LaunchPlan {scope.name!r}: {_field(exc)}; {_whose(raw, by_module)}.",
        )
    try:
        judgement = deps.planner.judge(scope.namespace, scope.name, spec.placement)
    except TemporaryError as exc:
        d.requeue(RETRY_SOON)
        if spec.runtime is not None and serving(scope, deps):  # an outage never takes a Ready order down
            keep(scope, d, spec)
            return Verdict(
                status="True",
                reason=Reason.LAUNCH_PLAN_IN_FORCE.value,
                message=(
                    f"the order runs on the plan it holds; the planner did not answer ({exc}), so the plan is "
                    "judged and recomputed when it does."
                ),
            )
        return Verdict.refuse(Reason.PLANNER_REQUEST_FAILED, f"the planner did not answer ({exc}); retried.")
    return _judged(scope, deps, raw, spec, judgement)


def _by_module(raw: Obj) -> bool:
    return (raw["metadata"].get("annotations") or {}).get(PLAN_ANNOTATION) == MANAGER


def _judged(
    scope: OrderScope, deps: Deps, raw: Obj, spec: LaunchPlanSpec, judgement: Judgement
) -> Stored | Verdict:
    """A stored plan as the planner judged it, and as the order's class and the recipes take it."""
    by_module = _by_module(raw)
    if judgement.gone:  # hardware out of service: replanned, never judged as a placement against what is left
        return Stored(raw, spec, gone=judgement.gone)
    if judgement.refusal is not None:
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
            f"LaunchPlan {scope.name!r}: {judgement.refusal.message}; {_whose(raw, by_module)}.",
        )
    outside = _outside_policy(scope, spec.placement)
    if outside is not None:
        return Verdict.refuse(
            Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
            f"LaunchPlan {scope.name!r}: {outside}; {_whose(raw, by_module)}.",
        )
    if judgement.lost:
        return Stored(raw, spec, judgement.lost, outranked=judgement.outranked)
    if scope.facts is not None and spec.inputs_hash == _inputs_hash(scope, deps):
        runtime = _recompiled(scope, deps, spec)
    else:  # an edit waits for a new plan, or the model source is down: only the module's own runtime stays
        runtime = spec.runtime if by_module else None
    if isinstance(runtime, Verdict):
        return runtime
    return Stored(raw, spec.model_copy(update={"runtime": runtime}))


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
    if spec.estimates is None:
        return None
    compiled = compile_launch(scope, deps, spec.placement, spec.estimates)
    if isinstance(compiled, Refusal):
        return Verdict.refuse(compiled.reason, compiled.message)
    return compiled


def _unplace(scope: OrderScope, deps: Deps, d: Decisions) -> None:
    """The order's own plan and workload go, and it waits for room (the waiting room)."""
    d.write(Delete(API_VERSION, "LaunchPlan", scope.name), *workload_deletes(scope, deps.cluster))
    d.decide(launch_plan_name=None, endpoint=None)
    scope.launch_plan_obj = None


def _moved(scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str) -> Verdict:
    """Devices of the plan went out of service (a node deleted, cordoned, not ready; a device withdrawn): an
    inventory change, not a refusal. Planned elsewhere in this pass (event Moved), or, with nothing else
    having room, the plan and workload go and the order waits saying why (event OutOfService); it is planned
    again when room appears or the hardware returns (the waiting room wakes on both)."""
    why = "; ".join(stored.gone)
    verdict = compute(scope, deps, d, stored, inputs)
    if scope.plan is not None:
        d.event(
            "Normal", MOVED, f"Its devices are out of service ({why}); planned elsewhere: {verdict.message}"
        )
        return verdict
    _unplace(scope, deps, d)
    d.event(
        "Warning",
        OUT_OF_SERVICE,
        f"Its devices are out of service ({why}); no other device has room, so its workload is taken down and "
        f"it waits: it is planned again when room appears or the hardware returns ({verdict.message})",
    )
    return verdict.model_copy(
        update={"message": f"Its devices are out of service ({why}). {verdict.message}"}
    )


def _taken_first(scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str) -> Verdict:
    """Holders ranked above the order took its devices without outranking it: a claim of no order, or one of
    its own priority or below, that the scheduler allocated before this order's claim (the ledger could not
    count it when it planned: a claim nobody allocated holds nothing). Not preemption, and nothing to take
    down: once the scheduler refuses the order's claim, the planner hears it at once and plans the order
    elsewhere, or answers ResourceClaimExhausted naming the device and the scheduler's words while the claim
    waits where it is (the waiting room moves it when room appears elsewhere). Until the scheduler has
    spoken (its pod not tried yet, or a quota keeping its claim from being made) the plan stands."""
    spec = stored.spec
    assert spec is not None
    refusal = _claim_refused(scope, deps)
    if refusal is not None:
        return compute(scope, deps, d, stored, inputs, refusal)
    if spec.inputs_hash == inputs and spec.runtime is not None:
        keep(scope, d, spec)
        return Verdict.ok(StatusReason.PLANNED, plan_message(spec))
    return compute(scope, deps, d, stored, inputs)


def _lost(scope: OrderScope, deps: Deps, d: Decisions, stored: Stored, inputs: str) -> Verdict:
    """The order lost its devices in the planner's ledger: to orders of higher priority (preemption) it is
    planned again in this pass (never back onto what it lost), or taken down to wait when nothing else has
    room; to holders that came first, the scheduler's word decides (`_taken_first`)."""
    if stored.gone:
        return _moved(scope, deps, d, stored, inputs)
    if not stored.outranked:
        return _taken_first(scope, deps, d, stored, inputs)
    why = "; ".join(stored.lost)
    verdict = compute(scope, deps, d, stored, inputs)
    if scope.plan is not None:
        d.event(
            "Warning",
            "Preempted",
            f"An order of higher priority took the device this order held ({why}); it is planned elsewhere: "
            f"{verdict.message}",
        )
        return verdict
    _unplace(scope, deps, d)
    d.event(
        "Warning",
        "Preempted",
        f"An order of higher priority took the device this order held ({why}); nothing else has room, so its "
        "workload is taken down and it waits for room.",
    )
    return verdict


def _claim_refused(scope: OrderScope, deps: Deps) -> Refused | None:
    """The scheduler's words, as the order's pods read now say them, when it could not allocate a claim."""
    return deps.workload.claim_refusal(deps.cluster.owned("Pod", scope.namespace, scope.name))


def _scheduler_refused(scope: OrderScope, deps: Deps, d: Decisions, plan: LaunchPlanSpec) -> Refused | None:
    """The scheduler's words when it has not allocated the claim of a plan the ledger sees room for.

    Not at once (REFUSED_AFTER): the scheduler retries a pod a few seconds after a change that may make room,
    and says what it said before meanwhile.
    """
    last = find_condition(scope.previous.conditions, ConditionType.WORKLOAD_READY.value)
    if last is None or last.reason != Reason.RESOURCE_CLAIM_EXHAUSTED.value:
        return None
    times = [t for t in (last.last_transition_time, plan.planned_at) if t is not None]
    if not times:
        return None
    waited = (scope.now - max(times)).total_seconds()
    if waited < REFUSED_AFTER:
        d.requeue(REFUSED_AFTER - waited)  # told to the planner then; the room takes it from there
        return None
    return _claim_refused(scope, deps)


def _model_source_down(scope: OrderScope, deps: Deps, d: Decisions) -> Verdict | None:
    """A serving order whose model source does not answer for a moment keeps the plan it holds."""
    model = scope.verdicts.get(ConditionType.MODEL_RESOLVED)
    if scope.policy is None or model is None or model.holds or not _retried(model.reason):
        return None
    stored = _read(scope, deps, d)
    if (
        isinstance(stored, Verdict)
        or stored.spec is None
        or stored.spec.runtime is None
        or not serving(scope, deps)
    ):
        return None
    keep(scope, d, stored.spec)
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


def _planned(scope: OrderScope, deps: Deps, d: Decisions) -> Verdict:
    """Keep the stored plan while its inputs hold; otherwise compute one."""
    if scope.facts is None or scope.policy is None:
        return _model_source_down(scope, deps, d) or scope.waits_for(ConditionType.MODEL_RESOLVED)
    stored = _read(scope, deps, d)
    if isinstance(stored, Verdict):
        return stored
    inputs = _inputs_hash(scope, deps)
    if stored.lost or stored.gone:
        return _lost(scope, deps, d, stored, inputs)
    existing = stored.spec
    refused = _scheduler_refused(scope, deps, d, existing) if existing is not None else None
    if refused is not None:  # the scheduler could not allocate the plan's claim: the planner plans again
        return compute(scope, deps, d, stored, inputs, refused)
    if existing is not None and existing.inputs_hash == inputs and existing.runtime is not None:
        previous = scope.previous.resolved
        adopt(scope, d, existing, previous.replan_count if previous else 0, inputs)
        return Verdict.ok(StatusReason.PLANNED, plan_message(existing))
    return compute(scope, deps, d, stored, inputs)


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Planned: the plan in force, its status fields, and the writes that take an unplaced order down."""
    d = Decisions()
    return d.outcome(_planned(scope, deps, d))
