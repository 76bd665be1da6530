"""Reconcile one order: an ordered list of steps over one state object, one status write per pass."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs
from isvc_api import (
    GROUP,
    LABEL_ORDER,
    MANAGER,
    VERSION,
    CatalogKind,
    CompiledRuntime,
    Condition,
    ConditionType,
    EndpointStatus,
    EndpointType,
    Estimates,
    InferenceService,
    InferenceServiceClass,
    InferenceServiceStatus,
    LaunchPlanSpec,
    ModelFacts,
    ModelSource,
    ModelSpec,
    Placement,
    Reason,
    Refusal,
    Resolved,
    RuntimeRequirements,
    StatusReason,
    find_condition,
    now,
)
from pydantic import ValidationError

from isvc_operator._policy import EffectivePolicy, class_ready
from isvc_operator._state import Pass, Verdict

__all__ = [
    "Cluster",
    "Deps",
    "HealthPort",
    "ModelPort",
    "PlannerPort",
    "RecipesPort",
    "Reconciler",
    "TemporaryError",
    "WorkloadPort",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GV = f"{GROUP}/{VERSION}"
PLAN_ANNOTATION = "ai.deckhouse.io/computed-by"

RETRY_SOON = 5.0
RETRY_CAPACITY = 15.0
# The planner's answers that there is no room for the order: a workload it still runs holds devices
# the planner has given to others (it was preempted), so it is taken down.
NO_ROOM = frozenset({Reason.NO_CAPACITY, Reason.NO_COMPATIBLE_PLACEMENT, Reason.PLANNING_PREEMPTION_FAILED})


class TemporaryError(Exception):
    """A dependency did not answer; the pass is retried with backoff."""


class Cluster(Protocol):
    """What the reconciler needs of the API server (KubeCluster in production, a fake in unit tests)."""

    def order(self, namespace: str, name: str) -> Obj | None: ...
    def klass(self, name: str) -> Obj | None: ...
    def priority_class_exists(self, name: str) -> bool: ...
    def get_secret(self, namespace: str, name: str) -> Obj | None: ...
    def launch_plan(self, namespace: str, name: str) -> Obj | None: ...
    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]: ...
    def apply(self, manifest: Obj) -> Obj: ...
    def apply_status(self, manifest: Obj) -> Obj: ...
    def create(self, manifest: Obj) -> Obj: ...
    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None: ...
    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None: ...
    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None: ...


class ModelPort(Protocol):
    """Model resolution and the class's model policy (isvc-catalog)."""

    def resolve(self, spec: ModelSpec, namespace: str, token: str | None) -> ModelFacts | Refusal: ...
    def admit(self, facts: ModelFacts, policy: EffectivePolicy) -> EndpointType | Refusal | None: ...


class RecipesPort(Protocol):
    """Runtime recipes (isvc-runtime-recipes)."""

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal: ...

    def compile(
        self, facts: ModelFacts, endpoint_type: EndpointType | None, placement: Placement,
        estimates: Estimates, served_name: str,
    ) -> CompiledRuntime | Refusal: ...

    @property
    def version(self) -> str: ...


@attrs.frozen
class PlanOutcome:
    """The planner's answer."""

    placement: Placement | None
    estimates: Estimates | None
    refusal: Refusal | None
    preempt: list[tuple[str, str]]


class PlannerPort(Protocol):
    """The planner service (isvc-planner's client); raises TemporaryError when it does not answer."""

    def plan(
        self, order: InferenceService, facts: ModelFacts, policy: EffectivePolicy,
        requirements: RuntimeRequirements | None, holding: Placement | None,
    ) -> PlanOutcome: ...

    def judge(self, placement: Placement) -> Refusal | None: ...

    def release(self, namespace: str, name: str) -> None:
        """Drop what the planner reserved for an order that will not take it (best effort)."""
        ...


@attrs.frozen
class WorkloadVerdict:
    """What the workload judge says, and what it remembers for the next pass."""

    status: str
    reason: str
    message: str
    memory: Any = None
    events: Sequence[tuple[str, str, str]] = ()


class WorkloadPort(Protocol):
    """Child manifests and the workload judge (isvc-workload)."""

    def manifests(
        self, order: Obj, plan: LaunchPlanSpec, policy: EffectivePolicy, auth_secret: str | None
    ) -> list[Obj]: ...

    def auth_secret(self, order: Obj) -> Obj: ...

    def token(self, secret: Obj) -> str | None: ...

    @property
    def service_port(self) -> int:
        """The port the order's Service serves the inference API on (whatever the runtime listens on)."""
        ...

    def endpoint(self, order: Obj, policy: EffectivePolicy) -> str: ...

    def judge(
        self, order: Obj, deployment: Obj | None, pods: list[Obj], claims: list[Obj], memory: Any,
        read_log: Callable[[str, str], str | None],
    ) -> WorkloadVerdict: ...

    def growth(
        self, deployment: Obj | None, pods: list[Obj], claims: list[Obj], policy: EffectivePolicy
    ) -> WorkloadVerdict: ...


class HealthPort(Protocol):
    """The inference API probe and its sustained-failure tracker (isvc-health)."""

    def check(
        self, namespace: str, name: str, port: int, token: str | None, ready: Condition | None
    ) -> Verdict: ...

    def forget(self, namespace: str, name: str) -> None: ...

    @property
    def period(self) -> float: ...


@attrs.define
class Deps:
    """Everything a pass talks to."""

    cluster: Cluster
    models: ModelPort
    recipes: RecipesPort
    planner: PlannerPort
    workload: WorkloadPort
    health: HealthPort
    catalog_enabled: bool = True
    clock: Callable[[], datetime] = now


def _owner_ref(order: Obj) -> Obj:
    meta = order["metadata"]
    return {"apiVersion": GV, "kind": "InferenceService", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _hash(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _pydantic_field(exc: ValidationError) -> str:
    err = exc.errors()[0]
    path = ".".join(str(p) for p in err["loc"])
    return f"spec.{path}: {err['msg']} (value {err.get('input')!r})"


class Reconciler:
    """Level-triggered: each pass reads the world, decides every condition and writes status once."""

    def __init__(self, deps: Deps) -> None:
        self.d = deps
        self._workload_memory: dict[tuple[str, str], Any] = {}
        self._in_force: dict[tuple[str, str], str] = {}  # inputs whose recomputation failed, counted once
        self._unplaced: dict[tuple[str, str], set[str]] = {}
        self._asked: set[tuple[str, str]] = set()  # orders that asked the planner (it may hold room for them)

    # ------------------------------------------------------------------ entry

    def reconcile(self, namespace: str, name: str) -> float | None:
        """One pass; returns the delay of a timed requeue, or None. NotFound means done."""
        raw = self.d.cluster.order(namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            self._workload_memory.pop((namespace, name), None)
            self._in_force.pop((namespace, name), None)
            self._unplaced.pop((namespace, name), None)
            self.d.health.forget(namespace, name)
            if (namespace, name) in self._asked:  # once: what the planner may still reserve for it
                self._asked.discard((namespace, name))
                self.d.planner.release(namespace, name)
            return None
        order = InferenceService.model_validate(raw)
        st = Pass(order=order, raw=raw, now=self.d.clock())
        for step in (self.step_class, self.step_model, self.step_plan, self.step_workload,
                     self.step_ready, self.step_scaling):
            step(st)
        self._write_status(st)
        for type_, reason, message in st.events:
            self.d.cluster.event(raw, type_, reason, message)
        return st.requeue_after

    # ------------------------------------------------------------------ steps

    def step_class(self, st: Pass) -> None:
        """ClassResolved: the class exists, holds, and admits the namespace."""
        type_ = ConditionType.CLASS_RESOLVED
        name = st.order.spec.inference_service_class_name
        if name is None:
            st.policy = EffectivePolicy.builtin()
            st.say(type_, Verdict.ok(StatusReason.RESOLVED,
                                     "no class named: the platform's built-in defaults apply."))
            return
        raw = self.d.cluster.klass(name)
        if raw is None:
            st.say(type_, Verdict.refuse(Reason.CLASS_NOT_FOUND, (
                f"spec.inferenceServiceClassName names {name!r}, and no such class exists; compare "
                "the name with the classes your administrator ships (an upgrade may have renamed it)."
            )))
            return
        klass = InferenceServiceClass.model_validate(raw)
        ready, reason, _ = class_ready(klass.status.conditions if klass.status else [])
        policy = EffectivePolicy.of(klass)
        if reason is None:
            # A class just created has not been judged yet: a moment, not a refusal for anyone to fix.
            st.say(type_, Verdict("Unknown", StatusReason.WAITING.value,
                                  f"class {name!r} has not been judged yet; asked again shortly."))
            st.requeue(RETRY_SOON)
            return
        if not ready and reason != "PriorityClassMissing":
            st.say(type_, Verdict.refuse(Reason.CLASS_NOT_READY, (
                f"class {name!r} exists but is not ready ({reason}); this is your administrator's to fix."
            )))
            return
        if not policy.admits(st.namespace):
            st.say(type_, Verdict.refuse(Reason.NAMESPACE_NOT_ALLOWED, (
                f"class {name!r} does not admit orders from namespace {st.namespace!r} "
                "(admissionPolicy.allowedNamespaces); ask your administrator, or use another class."
            )))
            return
        st.policy = policy
        st.say(type_, Verdict.ok(StatusReason.RESOLVED, f"class {name!r} applies."))

    def step_model(self, st: Pass) -> None:
        """ModelResolved: the reference resolves, its Secret exists, and the class admits the model."""
        type_ = ConditionType.MODEL_RESOLVED
        if st.policy is None:
            st.say(type_, st.waits_for(ConditionType.CLASS_RESOLVED))
            return
        spec = st.order.spec.model
        if spec.src == ModelSource.AI_MODELS and not self.d.catalog_enabled:
            st.say(type_, Verdict.refuse(Reason.CATALOG_DISABLED, (
                f"the order names catalog {spec.ref.kind or CatalogKind.MODEL} {spec.ref.name!r}, and "
                "catalog integration is off (catalog.mode: None); name a HuggingFace source, or ask "
                "for the setting to be changed."
            )))
            return
        token: str | None = None
        if spec.auth_secret_ref is not None:
            ref = spec.auth_secret_ref
            secret = self.d.cluster.get_secret(st.namespace, ref.name)
            data = (secret or {}).get("data") or {}
            if secret is None or ref.key not in data:
                missing = "does not exist" if secret is None else f"has no key {ref.key!r}"
                st.say(type_, Verdict.refuse(Reason.AUTH_SECRET_NOT_FOUND, (
                    f"Secret {ref.name!r} named in spec.model.authSecretRef {missing} in namespace "
                    f"{st.namespace!r}; create it, or correct the name."
                )))
                st.requeue(RETRY_CAPACITY)
                return
            token = base64.b64decode(data[ref.key]).decode().strip()
        try:
            resolved = self.d.models.resolve(spec, st.namespace, token)
        except TemporaryError as exc:
            catalog = spec.src == ModelSource.AI_MODELS
            reason = Reason.CATALOG_LOOKUP_FAILED if catalog else Reason.MODEL_NOT_READY
            # The sources word their failure as a sentence: what failed, and that it is retried.
            message = str(exc).strip() or "the model source did not answer; asked again shortly."
            st.say(type_, Verdict.refuse(reason, message))
            st.requeue(RETRY_SOON)
            return
        if isinstance(resolved, Refusal):
            st.say(type_, Verdict.refuse(resolved.reason, resolved.message))
            if resolved.reason.retried:
                st.requeue(RETRY_CAPACITY)
            return
        admitted = self.d.models.admit(resolved, st.policy)
        if isinstance(admitted, Refusal):
            st.say(type_, Verdict.refuse(admitted.reason, admitted.message))
            return
        st.facts = resolved
        st.endpoint_type = admitted
        what = f" as {admitted.value}" if admitted else ""
        st.say(type_, Verdict.ok(StatusReason.RESOLVED, f"model {spec.ref.name!r} resolved{what}."))

    def _inputs_hash(self, st: Pass) -> str:
        assert st.policy is not None and st.facts is not None
        policy = st.policy
        return _hash(
            st.order.spec.model.to_wire(), policy.class_name,
            policy.accelerator.to_wire() if policy.accelerator else None,
            policy.priority_class_name, st.facts.to_wire(),
            st.endpoint_type.value if st.endpoint_type else None, self.d.recipes.version,
        )

    def step_plan(self, st: Pass) -> None:
        """Planned: a placement and a compiled recipe, kept in the order's LaunchPlan."""
        type_ = ConditionType.PLANNED
        if st.facts is None or st.policy is None:
            st.say(type_, st.waits_for(ConditionType.MODEL_RESOLVED))
            return
        previous = st.order.status.resolved if st.order.status else None
        replans = previous.replan_count if previous else 0
        was_ready = self._was_ready(st)
        raw_plan = self.d.cluster.launch_plan(st.namespace, st.name)
        existing: LaunchPlanSpec | None = None
        if raw_plan is not None:
            by_module = (raw_plan["metadata"].get("annotations") or {}).get(PLAN_ANNOTATION) == MANAGER
            whose = ("the module's own answer did not hold up: report this as a defect with this message"
                     if by_module else "delete the LaunchPlan and the module computes a new one")
            try:
                existing = LaunchPlanSpec.model_validate(raw_plan.get("spec") or {})
            except ValidationError as exc:
                st.say(type_, Verdict.refuse(Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
                                             f"LaunchPlan {st.name!r}: {_pydantic_field(exc)}; {whose}."))
                return
            try:
                bad = self.d.planner.judge(existing.placement)
            except TemporaryError as exc:
                st.say(type_, Verdict.refuse(Reason.PLANNER_REQUEST_FAILED,
                                             f"the planner did not answer ({exc}); retried."))
                st.requeue(RETRY_SOON)
                return
            if bad is not None:
                st.say(type_, Verdict.refuse(Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
                                             f"LaunchPlan {st.name!r}: {bad.message}; {whose}."))
                return
        inputs = self._inputs_hash(st)
        if existing is not None and existing.inputs_hash == inputs and existing.runtime is not None:
            self._adopt(st, existing, replans)
            st.say(type_, Verdict.ok(StatusReason.PLANNED, self._plan_message(existing)))
            return

        def refuse(refusal: Refusal) -> None:
            if existing is not None and existing.runtime is not None and was_ready:
                self._adopt(st, existing, replans + self._recount(st, inputs))
                st.say(type_, Verdict("True", Reason.LAUNCH_PLAN_IN_FORCE.value, (
                    f"the order runs on the plan it holds; recomputing it failed: "
                    f"{refusal.reason.value}: {refusal.message}"
                )))
            else:
                st.say(type_, Verdict.refuse(refusal.reason, refusal.message))
                st.unplaced = raw_plan is None and refusal.reason in NO_ROOM
            if refusal.reason.retried:
                st.requeue(RETRY_CAPACITY)

        requirements = self.d.recipes.requirements(st.facts, st.endpoint_type)
        if isinstance(requirements, Refusal):
            refuse(requirements)
            return
        try:
            outcome = self.d.planner.plan(
                st.order, st.facts, st.policy, requirements,
                existing.placement if existing is not None else None,
            )
        except TemporaryError as exc:
            refuse(Refusal(reason=Reason.PLANNER_REQUEST_FAILED,
                           message=f"the planner did not answer ({exc}); retried."))
            return
        self._asked.add((st.namespace, st.name))
        if outcome.refusal is not None or outcome.placement is None or outcome.estimates is None:
            refuse(outcome.refusal or Refusal(reason=Reason.PLANNER_REQUEST_FAILED,
                                              message="the planner answered without a placement; retried."))
            return
        # The model is served under its name without a pinned revision, as clients ask for it.
        served_name = st.order.spec.model.ref.name.split("@", 1)[0]
        compiled = self.d.recipes.compile(
            st.facts, st.endpoint_type, outcome.placement, outcome.estimates, served_name
        )
        if isinstance(compiled, Refusal):
            self.d.planner.release(st.namespace, st.name)  # the placement will not be taken
            refuse(compiled)
            return
        plan = LaunchPlanSpec(placement=outcome.placement, estimates=outcome.estimates, runtime=compiled,
                              inputs_hash=inputs, planned_at=st.now)
        for namespace, name in outcome.preempt:
            self._preempt(st, namespace, name)
        self.d.cluster.apply({
            "apiVersion": GV, "kind": "LaunchPlan",
            "metadata": {"name": st.name, "namespace": st.namespace,
                         "labels": {LABEL_ORDER: st.name, "app.kubernetes.io/managed-by": MANAGER},
                         "annotations": {PLAN_ANNOTATION: MANAGER},
                         "ownerReferences": [_owner_ref(st.raw)]},
            "spec": plan.to_wire(),
        })
        self._in_force.pop((st.namespace, st.name), None)
        self._adopt(st, plan, replans + (1 if existing is not None else 0))
        st.say(type_, Verdict.ok(StatusReason.PLANNED, self._plan_message(plan)))

    def _preempt(self, st: Pass, namespace: str, name: str) -> None:
        """Free what a lower-priority order holds: its workload goes, the order replans and waits."""
        victim = self.d.cluster.order(namespace, name)
        if victim is None:
            return
        # The plan goes first: a pass of the victim that still read it may re-apply the Deployment, and
        # its next pass (no plan, no room) takes that down again.
        self.d.cluster.delete(GV, "LaunchPlan", namespace, name)
        self.d.cluster.delete("apps/v1", "Deployment", namespace, name)
        self.d.cluster.event(victim, "Warning", "Preempted",
                             f"displaced by {st.namespace}/{st.name}, an order of higher priority")

    @staticmethod
    def _plan_message(plan: LaunchPlanSpec) -> str:
        p = plan.placement
        share = f" {p.share_percent}%" if p.share_percent else ""
        runtime = plan.runtime.recipe if plan.runtime else "no runtime"
        return (f"{p.placement_mode.value}{share} of {p.device_count}× {p.accelerator_product_name} "
                f"({p.device_class_name}) on {p.node_name}, runtime {runtime}.")

    def _adopt(self, st: Pass, plan: LaunchPlanSpec, replans: int) -> None:
        st.plan = plan
        p, e = plan.placement, plan.estimates
        st.resolved = Resolved(
            device_class=p.device_class_name, accelerator_product_name=p.accelerator_product_name,
            accelerator_memory_gi_b=p.accelerator_memory_gi_b, placement_mode=p.placement_mode,
            sharing_mode=p.sharing_mode, share_percent=p.share_percent, device_count=p.device_count,
            node_name=p.node_name, required_memory_gi_b=e.required_memory_gi_b if e else None,
            cpu=e.cpu if e else None, memory=e.memory if e else None,
            model_volume=e.model_volume if e else None,
            runtime=plan.runtime.recipe if plan.runtime else None, replan_count=replans,
        )

    def _recount(self, st: Pass, inputs: str) -> int:
        """1 when this pass is the first recomputation for these inputs that failed with a plan in force.

        Later passes over the same inputs ask the planner again but count nothing, so the counter (and
        the status) does not move on every pass. After a restart the condition itself says it was counted.
        """
        key = (st.namespace, st.name)
        seen = self._in_force.get(key)
        self._in_force[key] = inputs
        if seen is not None:
            return int(seen != inputs)
        planned = find_condition(st.order.status.conditions, ConditionType.PLANNED.value) \
            if st.order.status else None
        counted = (planned is not None and planned.reason == Reason.LAUNCH_PLAN_IN_FORCE.value
                   and planned.observed_generation == st.order.metadata.generation)
        return 0 if counted else 1

    def _was_ready(self, st: Pass) -> bool:
        """Whether the order serves on the plan it holds: it was Ready, or its replicas still are.

        An earlier step that failed for one pass (a Secret the cache has not seen yet) leaves Ready
        waiting, but the workload keeps serving on its plan; that plan stays in force.
        """
        status = st.order.status
        if status is not None and any(
                c.type == ConditionType.READY.value and c.status == "True" for c in status.conditions):
            return True
        return any(int((d.get("status") or {}).get("readyReplicas") or 0) > 0
                   for d in self.d.cluster.owned("Deployment", st.namespace, st.name))

    def step_workload(self, st: Pass) -> None:
        """WorkloadReady: the children are applied and the replicas came up."""
        type_ = ConditionType.WORKLOAD_READY
        if st.plan is None or st.policy is None:
            if st.unplaced:
                for deployment in self.d.cluster.owned("Deployment", st.namespace, st.name):
                    name = deployment["metadata"]["name"]
                    self.d.cluster.delete("apps/v1", "Deployment", st.namespace, name)
            st.say(type_, st.waits_for(ConditionType.PLANNED))
            return
        auth_name: str | None = None
        if st.policy.token_required:
            wanted = self.d.workload.auth_secret(st.raw)
            # Made once and never rotated on a pass: read first, create only when missing.
            secret = (self.d.cluster.get_secret(st.namespace, wanted["metadata"]["name"])
                      or self.d.cluster.create(wanted))
            auth_name = secret["metadata"]["name"]
            st.token = self.d.workload.token(secret)
        st.auth_secret_name = auth_name
        manifests = self.d.workload.manifests(st.raw, st.plan, st.policy, auth_name)
        try:
            for manifest in manifests:
                self.d.cluster.apply(manifest)
        except Exception as exc:  # an API refusal of our own manifest: say what failed
            status = getattr(exc, "status", None)
            if status is not None and 400 <= int(status) < 500 and int(status) not in (409, 429):
                body = getattr(exc, "body", "") or str(exc)
                st.say(type_, Verdict.refuse(Reason.WORKLOAD_ERROR,
                                             f"the cluster refused the workload: {str(body)[:400]}"))
                return
            raise
        self._prune_templates(st, manifests)
        st.endpoint = EndpointStatus(
            url=self.d.workload.endpoint(st.raw, st.policy),
            type=st.policy.exposure.type,
            tool_calling_supported=bool(st.plan.runtime and st.plan.runtime.tool_calling_supported),
        )
        key = (st.namespace, st.name)
        deployments = self.d.cluster.owned("Deployment", st.namespace, st.name)
        st.children = (deployments[0] if deployments else None,
                       self.d.cluster.owned("Pod", st.namespace, st.name),
                       self.d.cluster.owned("ResourceClaim", st.namespace, st.name))
        verdict = self.d.workload.judge(
            st.raw, *st.children,
            self._workload_memory.get(key),
            lambda pod, container: self.d.cluster.read_log(st.namespace, pod, container),
        )
        self._workload_memory[key] = verdict.memory
        for event in verdict.events:
            st.event(*event)
        st.say(type_, Verdict(verdict.status, verdict.reason, verdict.message))
        if verdict.status != "True":
            exhausted = verdict.reason == Reason.RESOURCE_CLAIM_EXHAUSTED.value
            st.requeue(RETRY_CAPACITY if exhausted else RETRY_SOON)

    def _prune_templates(self, st: Pass, manifests: list[Obj]) -> None:
        """Claim templates are immutable: a new plan gets a new one, and the old ones go."""
        current = {m["metadata"]["name"] for m in manifests if m["kind"] == "ResourceClaimTemplate"}
        for template in self.d.cluster.owned("ResourceClaimTemplate", st.namespace, st.name):
            name = template["metadata"]["name"]
            if name not in current:
                self.d.cluster.delete("resource.k8s.io/v1", "ResourceClaimTemplate", st.namespace, name)

    def step_ready(self, st: Pass) -> None:
        """Ready: the inference API answered the probe with the token."""
        type_ = ConditionType.READY
        if not st.holds(ConditionType.WORKLOAD_READY):
            st.say(type_, st.waits_for(ConditionType.WORKLOAD_READY))
            return
        status = st.order.status
        previous = find_condition(status.conditions, ConditionType.READY.value) if status else None
        verdict = self.d.health.check(st.namespace, st.name, self.d.workload.service_port, st.token, previous)
        st.say(type_, verdict)
        st.requeue(self.d.health.period)

    def step_scaling(self, st: Pass) -> None:
        """ScalingHealthy: growth is possible (True) or blocked by capacity (False, phase Degraded)."""
        type_ = ConditionType.SCALING_HEALTHY
        if st.children is None or st.policy is None or not st.holds(ConditionType.WORKLOAD_READY):
            st.say(type_, st.waits_for(ConditionType.WORKLOAD_READY))
            return
        verdict = self.d.workload.growth(*st.children, st.policy)
        reported = self._unplaced.setdefault((st.namespace, st.name), set())
        for type_event, reason, message in verdict.events:
            if message not in reported:  # one event per replica that got no device, not one per pass
                st.event(type_event, reason, message)
                reported.add(message)
        if verdict.status == "True":
            reported.clear()
        else:
            st.requeue(RETRY_CAPACITY)
        st.say(type_, Verdict(verdict.status, verdict.reason, verdict.message))

    # ------------------------------------------------------------------ status

    def _write_status(self, st: Pass) -> None:
        previous = st.order.status.conditions if st.order.status else []
        generation = st.order.metadata.generation
        status = InferenceServiceStatus(
            observed_generation=generation,
            phase=st.phase().value,
            reason=st.first_not_true(),
            conditions=st.conditions(previous, generation),
            endpoint=st.endpoint,
            auth_secret_name=st.auth_secret_name,
            model=st.model_status(),
            constraints=st.policy.constraints if st.policy else None,
            resolved=st.resolved or (st.order.status.resolved if st.order.status else None),
            launch_plan_name=st.name if st.plan is not None else None,
        )
        self.d.cluster.apply_status({
            "apiVersion": GV, "kind": "InferenceService",
            "metadata": {"name": st.name, "namespace": st.namespace},
            "status": status.to_wire(),
        })
