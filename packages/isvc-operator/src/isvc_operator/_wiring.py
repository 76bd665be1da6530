"""Bind the sibling packages to the reconciler's ports; the only place that knows their APIs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import isvc_catalog
import isvc_health
import isvc_planner
import isvc_runtime_recipes
import isvc_workload
from isvc_api import (
    CompiledRuntime,
    Condition,
    EndpointType,
    Estimates,
    InferenceService,
    LaunchPlanSpec,
    ModelFacts,
    ModelSpec,
    Placement,
    Refusal,
    RuntimeRequirements,
)

from isvc_operator._policy import EffectivePolicy
from isvc_operator._reconcile import PlanOutcome, TemporaryError, WorkloadVerdict
from isvc_operator._state import Verdict

__all__ = ["CatalogModels", "Health", "PlannerService", "Recipes", "Workload"]

Obj = dict[str, Any]


class CatalogModels:
    """ModelPort over isvc-catalog."""

    def __init__(self, resolver: isvc_catalog.Resolver) -> None:
        self.resolver = resolver

    def resolve(self, spec: ModelSpec, namespace: str, token: str | None) -> ModelFacts | Refusal:
        try:
            return self.resolver.resolve(spec, namespace, token)
        except isvc_catalog.TemporaryError as exc:
            raise TemporaryError(str(exc)) from exc

    def admit(self, facts: ModelFacts, policy: EffectivePolicy) -> EndpointType | Refusal | None:
        return isvc_catalog.admit(facts, policy.spec)


class Recipes:
    """RecipesPort over isvc-runtime-recipes."""

    def __init__(self, book: isvc_runtime_recipes.RecipeBook, version: str) -> None:
        self.book = book
        self._version = version

    @property
    def version(self) -> str:
        return self._version

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal:
        return self.book.requirements(facts, endpoint_type)

    def compile(
        self, facts: ModelFacts, endpoint_type: EndpointType | None, placement: Placement,
        estimates: Estimates, served_name: str,
    ) -> CompiledRuntime | Refusal:
        return self.book.compile(facts, endpoint_type, placement, estimates, served_name)


class PlannerService:
    """PlannerPort over the planner's HTTP client; a planner that does not answer is temporary."""

    def __init__(self, client: isvc_planner.PlannerClient) -> None:
        self.client = client

    def plan(
        self, order: InferenceService, facts: ModelFacts, policy: EffectivePolicy,
        requirements: RuntimeRequirements | None, holding: Placement | None,
    ) -> PlanOutcome:
        request = isvc_planner.PlanRequest(
            order=isvc_planner.OrderRef(namespace=order.metadata.namespace or "",
                                        name=order.metadata.name, uid=order.metadata.uid),
            facts=facts, accelerator_policy=policy.accelerator,
            priority_class_name=policy.priority_class_name, requirements=requirements, holding=holding,
        )
        try:
            answer = self.client.plan(request)
        except isvc_planner.PlannerError as exc:
            raise TemporaryError(str(exc)) from exc
        return PlanOutcome(placement=answer.placement, estimates=answer.estimates, refusal=answer.refusal,
                           preempt=[(v.namespace, v.name) for v in answer.preempt])

    def judge(self, placement: Placement) -> Refusal | None:
        try:
            return self.client.judge(placement)
        except isvc_planner.PlannerError as exc:
            raise TemporaryError(str(exc)) from exc


class Workload:
    """WorkloadPort over isvc-workload."""

    def __init__(self, settings: isvc_workload.WorkloadSettings, cert_manager: Callable[[], bool],
                 priority_value: Callable[[str], int]) -> None:
        self.settings = settings
        self.cert_manager = cert_manager
        self.priority_value = priority_value

    def _inputs(self, order: Obj, plan: LaunchPlanSpec, policy: EffectivePolicy) -> Any:
        parsed = InferenceService.model_validate(order)
        priority = self.priority_value(policy.priority_class_name) if policy.priority_class_name else 0
        return isvc_workload.WorkloadInputs.from_plan(parsed, plan, policy.spec, exposure=policy.exposure,
                                                      priority=priority)

    def manifests(self, order: Obj, plan: LaunchPlanSpec, policy: EffectivePolicy,
                  auth_secret: str | None) -> list[Obj]:
        inputs = self._inputs(order, plan, policy)
        out = [isvc_workload.resource_claim_template(inputs),
               isvc_workload.deployment(inputs, self.settings),
               isvc_workload.service(inputs)]
        if policy.exposure.type.value == "External":
            out.append(isvc_workload.ingress(inputs, self.settings))
        if self.cert_manager():
            cert = isvc_workload.certificate(inputs, self.settings)
            if cert is not None:
                out.append(cert)
        return out

    @property
    def service_port(self) -> int:
        return int(isvc_workload.SERVICE_PORT)

    def auth_secret(self, order: Obj) -> Obj:
        return isvc_workload.auth_secret(InferenceService.model_validate(order))

    def token(self, secret: Obj) -> str | None:
        return isvc_workload.read_token(secret)

    def endpoint(self, order: Obj, policy: EffectivePolicy) -> str:
        meta = order["metadata"]
        exposure = policy.exposure.type
        return isvc_workload.endpoint_url(meta["name"], meta["namespace"], exposure, self.settings)

    def judge(self, order: Obj, deployment: Obj | None, pods: list[Obj], claims: list[Obj], memory: Any,
              read_log: Callable[[str, str], str | None]) -> WorkloadVerdict:
        verdict = isvc_workload.judge_workload(deployment, pods, claims, memory, read_log)
        return WorkloadVerdict(status=verdict.status, reason=str(verdict.reason), message=verdict.message,
                               memory=verdict.memory)


    def growth(self, deployment: Obj | None, pods: list[Obj], claims: list[Obj],
               policy: EffectivePolicy) -> WorkloadVerdict:
        verdict = isvc_workload.judge_growth(
            deployment, pods, claims, autoscaler=policy.constraints.autoscaler,
            min_replicas=policy.constraints.min_replicas,
        )
        unplaced = isvc_workload.EVENT_GROWTH_CLAIM_UNPLACED
        events = [("Warning", unplaced, r.event_message) for r in verdict.unplaced]
        return WorkloadVerdict(status=verdict.status, reason=str(verdict.reason), message=verdict.message,
                               events=events)


class Health:
    """HealthPort over isvc-health: probe through the endpoint-resolution seam, judge sustained failure."""

    def __init__(self, prober: isvc_health.Prober, tracker: isvc_health.HealthTracker, period: float) -> None:
        self.prober = prober
        self.tracker = tracker
        self._period = period

    @property
    def period(self) -> float:
        return self._period

    def check(
        self, namespace: str, name: str, port: int, token: str | None, ready: Condition | None
    ) -> Verdict:
        key = f"{namespace}/{name}"
        self.tracker.recover(key, ready)
        result = self.prober.probe(namespace, name, service=name, port=port, token=token)
        verdict = self.tracker.observe(key, result)
        return Verdict(verdict.status, str(verdict.reason), verdict.message)

    def forget(self, namespace: str, name: str) -> None:
        self.tracker.forget(f"{namespace}/{name}")
