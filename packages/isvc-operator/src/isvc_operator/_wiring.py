"""Bind the sibling packages to the reconciler's ports; the only place that knows their APIs."""

from __future__ import annotations

import logging
import threading
import time
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
from isvc_operator._reconcile import NO_ROOM, PlanOutcome, TemporaryError, WorkloadVerdict
from isvc_operator._state import Verdict

__all__ = ["CatalogModels", "Health", "PlannerService", "Recipes", "Workload"]

Obj = dict[str, Any]
log = logging.getLogger(__name__)


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


OrderKey = tuple[str, str]


class PlannerService:
    """PlannerPort over the planner's HTTP client; a planner that does not answer is temporary.

    Orders refused for want of room are remembered (with the request of their last pass) for `ttl`
    seconds. A new order is planned together with them (`plan_many`), so the room that frees up goes to
    the most orders; the waiting ones it places are reserved by the planner and handed to `on_placed`,
    which queues them so that their own pass picks the reservation up.
    """

    def __init__(self, client: isvc_planner.PlannerClient, *,
                 still_waiting: Callable[[str, str, str | None], bool] = lambda *_: True,
                 ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.still_waiting = still_waiting
        self.on_placed: Callable[[str, str], None] = lambda namespace, name: None
        self.ttl = ttl
        self.clock = clock
        self._waiting: dict[OrderKey, tuple[float, isvc_planner.PlanRequest]] = {}
        self._lock = threading.Lock()

    def plan(
        self, order: InferenceService, facts: ModelFacts, policy: EffectivePolicy,
        requirements: RuntimeRequirements | None, holding: Placement | None,
    ) -> PlanOutcome:
        key = (order.metadata.namespace or "", order.metadata.name)
        request = isvc_planner.PlanRequest(
            order=isvc_planner.OrderRef(namespace=key[0], name=key[1], uid=order.metadata.uid),
            facts=facts, accelerator_policy=policy.accelerator,
            priority_class_name=policy.priority_class_name, requirements=requirements, holding=holding,
        )
        others = [] if holding is not None else self._others(key)
        try:
            answers = self._plan_many(request, others) if others else [self.client.plan(request)]
        except isvc_planner.PlannerError as exc:
            raise TemporaryError(str(exc)) from exc
        answer = answers[0]
        with self._lock:
            if answer.refusal is not None and answer.refusal.reason in NO_ROOM:
                self._waiting[key] = (self.clock(), request)
            else:
                self._waiting.pop(key, None)
            placed = [(o.order.namespace, o.order.name) for o, a in zip(others, answers[1:], strict=True)
                      if a.placement is not None]
            for other in placed:
                self._waiting.pop(other, None)
        if placed:
            log.info("%s/%s planned with %d waiting order(s); placed together: %s", *key, len(others),
                     ", ".join(f"{ns}/{n}" for ns, n in placed))
        for namespace, name in placed:
            self.on_placed(namespace, name)
        return PlanOutcome(placement=answer.placement, estimates=answer.estimates, refusal=answer.refusal,
                           preempt=[(v.namespace, v.name) for v in answer.preempt])

    def _plan_many(self, request: isvc_planner.PlanRequest,
                   others: list[isvc_planner.PlanRequest]) -> list[isvc_planner.PlanResponse]:
        try:
            return self.client.plan_many([request, *others])
        except isvc_planner.PlannerProtocolError as exc:
            # A planner that cannot plan orders together (an older one during a rollout) still plans one.
            log.warning("planning together failed (%s); %s/%s planned alone", exc, request.order.namespace,
                        request.order.name)
            return [self.client.plan(request)] + [isvc_planner.PlanResponse() for _ in others]

    def release(self, namespace: str, name: str) -> None:
        with self._lock:
            self._waiting.pop((namespace, name), None)
        try:
            self.client.release(isvc_planner.OrderRef(namespace=namespace, name=name))
        except isvc_planner.PlannerError as exc:  # the reservation lapses on its own in two minutes
            log.info("reservation of %s/%s not released: %s", namespace, name, exc)

    def waiting(self) -> list[OrderKey]:
        """The orders remembered as waiting for room, oldest first."""
        with self._lock:
            return [k for k, _ in sorted(self._waiting.items(), key=lambda kv: kv[1][0])]

    def _others(self, key: OrderKey) -> list[isvc_planner.PlanRequest]:
        """Requests of the other orders still waiting, oldest first; the stale and the gone forgotten."""
        now = self.clock()
        with self._lock:
            entries = sorted(self._waiting.items(), key=lambda kv: kv[1][0])
        others = []
        for other, (since, request) in entries:
            if other == key:
                continue
            if now - since > self.ttl or not self.still_waiting(*other, request.order.uid):
                with self._lock:
                    if self._waiting.get(other, (None, None))[0] == since:
                        del self._waiting[other]
                continue
            others.append(request)
        return others

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
