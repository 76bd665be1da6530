"""The sibling packages bound to the reconciler's ports: the only module that knows their APIs (the recipe
book's: `_recipes`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

import isvc_catalog
import isvc_health
import isvc_planner_client
import isvc_workload
from cachetools import TTLCache
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    ExposureType,
    HealthStatus,
    InferenceService,
    LaunchPlanSpec,
    Load,
    LoadMetrics,
    ModelFacts,
    ModelSpec,
    Obj,
    Placement,
    Refusal,
    RuntimeRequirements,
    ScalingStatus,
    ServingTarget,
    StartupFailure,
    Verdict,
)

from isvc_operator._policy import EffectivePolicy
from isvc_operator._ports import Judgement, PlanOutcome, TemporaryError, WorkloadUnbuildable
from isvc_operator._waiting import WaitingRoom

__all__ = ["CatalogModels", "Health", "PlannerService", "Workload"]


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


class PlannerService:
    """PlannerPort over the planner client, through the waiting room; a planner that does not answer is
    temporary."""

    def __init__(
        self,
        client: isvc_planner_client.PlannerClient,
        room: WaitingRoom,
        judged: TTLCache[tuple[str, str], tuple[str, Judgement]] | None = None,
    ) -> None:
        self.client = client
        self.room = room
        # An order's plan judged a minute ago is judged the same now: a steady order asks the planner nothing.
        # Only a preemption takes an order's standing away, and it names the orders it displaces: their
        # judgements are dropped then, so each finds out on its next pass.
        self.judged: TTLCache[tuple[str, str], tuple[str, Judgement]] = (
            judged if judged is not None else TTLCache(10_000, 60.0)
        )
        self._lock = threading.Lock()
        # An order stranded on hardware out of service is judged afresh on its next pass, not from the cache.
        room.on_stranded(self.forget_judgement)

    def forget_judgement(self, namespace: str, name: str) -> None:
        """Drop what the planner last said of the order's plan: the next pass asks again."""
        with self._lock:
            self.judged.pop((namespace, name), None)

    def plan(
        self,
        order: InferenceService,
        facts: ModelFacts,
        policy: EffectivePolicy,
        requirements: RuntimeRequirements | None,
        holding: Placement | None,
        refused: str | None = None,
        dry_run: bool = False,
        refused_since: datetime | None = None,
        serving: Load | None = None,
    ) -> PlanOutcome:
        scheduler = (
            isvc_planner_client.SchedulerRefusal(placement=holding, message=refused, since=refused_since)
            if refused is not None and holding is not None
            else None
        )
        request = isvc_planner_client.PlanRequest(
            order=isvc_planner_client.OrderRef(
                namespace=order.metadata.namespace or "", name=order.metadata.name, uid=order.metadata.uid
            ),
            facts=facts,
            accelerator_policy=policy.accelerator,
            priority_class_name=policy.priority_class_name,
            requirements=requirements,
            serving=ServingTarget.of(serving) if serving is not None else None,
            holding=holding,
            refused=scheduler,
            dry_run=dry_run,
        )
        try:
            # An estimate reserves nothing and never joins the waiting room.
            answer = self.client.plan(request) if dry_run else self.room.plan(request)
        except isvc_planner_client.PlannerError as exc:
            raise TemporaryError(str(exc)) from exc
        victims = [(v.namespace, v.name) for v in answer.preempt]
        with self._lock:
            for victim in [*victims, (request.order.namespace, request.order.name)]:
                self.judged.pop(victim, None)
        return PlanOutcome(
            placement=answer.placement, estimates=answer.estimates, refusal=answer.refusal, preempt=victims
        )

    def release(self, namespace: str, name: str) -> None:
        self.room.forget(namespace, name)
        try:
            self.client.release(isvc_planner_client.OrderRef(namespace=namespace, name=name))
        except isvc_planner_client.PlannerError:  # the reservation lapses on its own in two minutes
            return

    def judge(self, namespace: str, name: str, placement: Placement) -> Judgement:
        stored = placement.model_dump_json(by_alias=True)
        with self._lock:
            known = self.judged.get((namespace, name))
        if known is not None and known[0] == stored:
            return known[1]
        try:
            verdict = self.client.hold(
                isvc_planner_client.OrderRef(namespace=namespace, name=name), placement
            )
        except isvc_planner_client.PlannerError as exc:
            raise TemporaryError(str(exc)) from exc
        judgement = Judgement(
            refusal=verdict.refusal,
            lost=tuple(verdict.lost),
            gone=tuple(verdict.gone),
            outranked=tuple(verdict.outranked),
        )
        with self._lock:
            self.judged[(namespace, name)] = (stored, judgement)
        return judgement


class Workload:
    """WorkloadPort over isvc-workload; a plan it cannot express is WorkloadUnbuildable."""

    def __init__(
        self,
        settings: isvc_workload.WorkloadSettings,
        cert_manager: Callable[[], bool],
        priority_value: Callable[[str | None], int],
        metrics_apis: Callable[[], isvc_workload.MetricsApis] = isvc_workload.MetricsApis,
        recipe_load: Callable[[str], LoadMetrics | None] = lambda recipe: None,
    ) -> None:
        self.settings = settings
        self.cert_manager = cert_manager
        self.priority_value = priority_value
        self.metrics_apis = metrics_apis
        self.recipe_load = recipe_load

    def _inputs(
        self,
        order: InferenceService,
        plan: LaunchPlanSpec,
        policy: EffectivePolicy,
        token_digest: str | None = None,
    ) -> isvc_workload.WorkloadInputs:
        inputs = isvc_workload.WorkloadInputs.from_plan(
            order,
            plan,
            policy.spec,
            exposure=policy.exposure,
            priority=self.priority_value(policy.priority_class_name),
            token_digest=token_digest,
        ).model_copy(update={"metered": self.settings.meter_image is not None})
        if isvc_workload.load_metrics(inputs) is not None:
            return inputs
        # a plan compiled before recipes named their load gauges: the recipe's, as the book has it now
        load = self.recipe_load(inputs.runtime.recipe)
        if load is None:
            return inputs
        runtime = CompiledRuntime.model_validate(
            {**inputs.runtime.model_dump(), "load_metrics": load.to_wire()}
        )
        return inputs.model_copy(update={"runtime": runtime})

    def manifests(
        self,
        order: InferenceService,
        plan: LaunchPlanSpec,
        policy: EffectivePolicy,
        auth_secret: str | None,
        token_digest: str | None = None,
    ) -> list[Obj]:
        try:
            inputs = self._inputs(order, plan, policy, token_digest)
            apis = self.metrics_apis()
            out = [
                isvc_workload.resource_claim_template(inputs),
                isvc_workload.statefulset(inputs, self.settings),
                isvc_workload.service(inputs, apis),
                isvc_workload.network_policy(inputs, self.settings),
            ]
            if policy.exposure.type == ExposureType.EXTERNAL:
                out.append(isvc_workload.ingress(inputs, self.settings, cert_manager=self.cert_manager()))
            out += [m for m in (isvc_workload.pod_monitor(inputs, apis),) if m is not None]
            scaling = isvc_workload.autoscaling(inputs, apis)
            if scaling is not None:
                out += scaling.manifests
            out += [b for b in (isvc_workload.disruption_budget(inputs),) if b is not None]
        except isvc_workload.IsvcWorkloadError as exc:
            raise WorkloadUnbuildable(str(exc)) from exc
        return out

    def scaling(
        self, order: InferenceService, plan: LaunchPlanSpec, policy: EffectivePolicy
    ) -> ScalingStatus | None:
        try:
            made = isvc_workload.autoscaling(self._inputs(order, plan, policy), self.metrics_apis())
        except isvc_workload.IsvcWorkloadError:
            return None
        return made.status if made is not None else None

    @property
    def autoscaling_kinds(self) -> tuple[tuple[str, str], ...]:
        return isvc_workload.AUTOSCALING_KINDS

    def settle(self, wanted: Obj, held: Obj | None) -> Obj | Refusal:
        return isvc_workload.settle(wanted, held)

    def outgrows(self, held: Obj | None, needed_size: str) -> Refusal | None:
        return isvc_workload.outgrown(held, needed_size)

    @property
    def service_port(self) -> int:
        return int(isvc_workload.SERVICE_PORT)

    def auth_secret(self, order: InferenceService) -> Obj:
        return isvc_workload.auth_secret(order)

    def token(self, secret: Obj) -> str | None:
        return isvc_workload.read_token(secret)

    def endpoint(self, order: InferenceService, policy: EffectivePolicy) -> str:
        try:
            return isvc_workload.endpoint_url(
                order.metadata.name, order.metadata.namespace or "", policy.exposure.type, self.settings
            )
        except isvc_workload.IsvcWorkloadError as exc:
            raise WorkloadUnbuildable(str(exc)) from exc

    def judge(
        self,
        deployment: Obj | None,
        pods: list[Obj],
        claims: list[Obj],
        previous: StartupFailure | None,
        read_log: Callable[[str, str], str | None],
        claim_refusals: dict[str, str] | None = None,
        quotas: list[Obj] | None = None,
    ) -> tuple[Verdict, StartupFailure | None]:
        return isvc_workload.judge_workload(
            deployment, pods, claims, previous, read_log, claim_refusals, quotas
        )

    def recreates_pods(self, held: Obj | None, wanted: Obj, templates: dict[str, Obj]) -> bool:
        return isvc_workload.recreates_pods(held, wanted, templates)

    def set_rolling(self, statefulset: Obj | None) -> bool:
        return isvc_workload.set_rolling(statefulset)

    def awaits_claim(self, pod: Obj) -> bool:
        return isvc_workload.awaits_claim(pod)

    def quota_retry(self, said: str, quotas: list[Obj]) -> dict[str, str] | None:
        refusal = isvc_workload.quota_refusal(said)
        if refusal is None:
            return None
        if refusal.stands(quotas):
            return {}
        return {isvc_workload.QUOTA_RETRY_ANNOTATION: refusal.retry_token(quotas)}

    def growth(
        self,
        deployment: Obj | None,
        pods: list[Obj],
        claims: list[Obj],
        policy: EffectivePolicy,
        outranked: Callable[[], tuple[str, ...]],
    ) -> tuple[Verdict, list[tuple[str, str]]]:
        verdict, unplaced = isvc_workload.judge_growth(
            deployment,
            pods,
            claims,
            autoscaler=policy.constraints.autoscaler,
            min_replicas=policy.constraints.min_replicas,
            outranked=outranked,
        )
        return verdict, [(r.pod, r.event_message) for r in unplaced]

    def claim_refusal(self, pods: list[Obj]) -> tuple[str, datetime | None] | None:
        refusal = isvc_workload.claim_refusal(pods)
        return (refusal.message, refusal.since) if refusal is not None else None


class Health:
    """HealthPort over isvc-health: probe through the endpoint-resolution seam, judge over time.

    With a schedule, a checked order is then probed between passes and its pass woken only when the
    result changes; a pass uses the schedule's latest result and probes itself only when there is none.
    """

    def __init__(
        self,
        prober: isvc_health.Prober,
        settings: isvc_health.HealthSettings,
        period: float,
        schedule: isvc_health.ProbeSchedule | None = None,
    ) -> None:
        self.prober = prober
        self.settings = settings
        self._period = period
        self.schedule = schedule
        self.errors = isvc_health.RuntimeErrors()  # the runtime's own 5xx, from the probes' meter counts

    @property
    def period(self) -> float:
        return self._period

    @property
    def watched(self) -> bool:
        return self.schedule is not None

    def check(
        self,
        namespace: str,
        name: str,
        port: int,
        token: str | None,
        model: str | None,
        record: HealthStatus,
        at: datetime,
    ) -> tuple[HealthStatus, Verdict]:
        target = isvc_health.ProbeTarget(namespace, name, name, port, token, model)
        result = self.schedule.latest(target) if self.schedule is not None else None
        if result is None:
            result = self.prober.probe(namespace, name, service=name, port=port, token=token, model=model)
            if self.schedule is not None:
                self.schedule.watch(target, result)
        self.errors.observe((namespace, name), result.meter, time.monotonic())
        return isvc_health.judge_health(record, result, at, self.settings)

    def runtime_errors(self, namespace: str, name: str) -> str | None:
        return self.errors.news((namespace, name), time.monotonic())

    def without_replica(self, why: str, record: HealthStatus, at: datetime) -> tuple[HealthStatus, Verdict]:
        result = isvc_health.ProbeResult(
            outcome=isvc_health.ProbeOutcome.NO_REPLICA, reason=why, probed_at=at
        )
        return isvc_health.judge_health(record, result, at, self.settings)

    def forget(self, namespace: str, name: str) -> None:
        self.errors.forget((namespace, name))
        if self.schedule is not None:
            self.schedule.forget(namespace, name)
