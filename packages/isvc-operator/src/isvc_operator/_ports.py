"""What a reconcile pass talks to, as protocols: each sibling package behind a port, and the cluster (`_api`).

Production binds them in `_adapters` (sibling packages) and `_kube` (the API server); unit tests bind
in-memory fakes. Nothing here imports a client library.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import attrs
from isvc_api import (
    NO_ROOM,
    CompiledRuntime,
    DeviceKey,
    EndpointType,
    Estimates,
    HealthStatus,
    InferenceService,
    LaunchPlanSpec,
    Load,
    ModelFacts,
    ModelSpec,
    Obj,
    OrderKey,
    Placement,
    Refusal,
    RuntimeRequirements,
    ScalingStatus,
    StartupFailure,
    Verdict,
    now,
)

from isvc_operator._api import Cluster
from isvc_operator._policy import EffectivePolicy
from isvc_operator._seal import Sealer

__all__ = [
    "NO_ROOM",
    "Deps",
    "DeviceKey",
    "HealthPort",
    "Judgement",
    "ModelPort",
    "Obj",
    "OrderKey",
    "PlanOutcome",
    "PlannerPort",
    "ProbeLoop",
    "RecipesPort",
    "RollsPort",
    "TemporaryError",
    "WorkloadPort",
    "WorkloadUnbuildable",
]


class TemporaryError(Exception):
    """A dependency did not answer; the pass is retried with backoff."""


class WorkloadUnbuildable(Exception):
    """The plan cannot be written as manifests (permanent until the plan or the settings change)."""


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
        self,
        facts: ModelFacts,
        endpoint_type: EndpointType | None,
        placement: Placement,
        estimates: Estimates,
        served_name: str,
        serving: Load | None = None,
    ) -> CompiledRuntime | Refusal: ...

    @property
    def version(self) -> str: ...


@attrs.frozen
class PlanOutcome:
    """The planner's answer: a placement with estimates, or a refusal; the orders it displaces."""

    placement: Placement | None
    estimates: Estimates | None
    refusal: Refusal | None
    preempt: list[OrderKey]


@attrs.frozen
class Judgement:
    """The planner's word on a stored plan: not a placement (a refusal), lost to holders ranked above the
    order on a device (why, per device), on hardware out of service (gone: why, per device), or standing."""

    refusal: Refusal | None = None
    lost: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # devices out of service for it (an inventory change), each with why
    # devices where orders of higher priority hold the room it needs, with who: with `lost`, preemption; where
    # it stands, growth (one more replica) blocked by priority rather than by a full device
    outranked: tuple[str, ...] = ()


class PlannerPort(Protocol):
    """The planner service behind the waiting room; raises TemporaryError when it does not answer."""

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
        """Plan the order; `refused` is the scheduler's words when it could not allocate the claim of
        `holding` (since `refused_since`: the planner then plans it elsewhere, or says no other device has
        room); `dry_run` answers what the order would get, reserving nothing; `serving`, the load its KV
        cache is sized for (issue 42)."""
        ...

    def judge(self, namespace: str, name: str, placement: Placement) -> Judgement:
        """Whether the order's stored placement is one, and whether the order still stands on its devices
        in the planner's ledger (the one account of who holds what)."""
        ...

    def release(self, namespace: str, name: str) -> None:
        """Drop what the planner reserved for an order that will not take it (best effort)."""
        ...

    def forget_judgement(self, namespace: str, name: str) -> None:
        """Drop what the planner last said of the order's plan: the next `judge` asks it again."""
        ...


class WorkloadPort(Protocol):
    """Child manifests and the workload judges (isvc-workload); raises WorkloadUnbuildable for a plan
    that cannot be written as manifests."""

    def manifests(
        self,
        order: InferenceService,
        plan: LaunchPlanSpec,
        policy: EffectivePolicy,
        auth_secret: str | None,
        token_digest: str | None = None,
    ) -> list[Obj]:
        """The children; `token_digest` (of the endpoint's token) rolls the pods when the token changes."""
        ...

    def scaling(
        self, order: InferenceService, plan: LaunchPlanSpec, policy: EffectivePolicy
    ) -> ScalingStatus | None:
        """What the order's autoscaler follows (the status echoes it); None without an autoscaler."""
        ...

    @property
    def autoscaling_kinds(self) -> tuple[tuple[str, str], ...]:
        """(apiVersion, kind) of every child that scales or scrapes an order, mine to remove when unwanted."""
        ...

    def settle(self, wanted: Obj, held: Obj | None) -> Obj | Refusal:
        """The StatefulSet to apply over the one the cluster holds (`held`, None when absent): `wanted`
        keeping the held model volume (claim templates never change), or the refusal when the order outgrew
        it."""
        ...

    def outgrows(self, held: Obj | None, needed_size: str) -> Refusal | None:
        """The refusal, with its procedure, when the model volume of the set the cluster holds is smaller than
        `needed_size`; None without a set or when it is large enough."""
        ...

    def auth_secret(self, order: InferenceService) -> Obj: ...

    def token(self, secret: Obj) -> str | None: ...

    @property
    def service_port(self) -> int:
        """The port the order's Service serves the inference API on (whatever the runtime listens on)."""
        ...

    def endpoint(self, order: InferenceService, policy: EffectivePolicy) -> str: ...

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
        """WorkloadReady; `claim_refusals` (pod → what the cluster said when it did not make the pod's device
        claim) and the namespace's `quotas` judge a quota's refusal."""
        ...

    def recreates_pods(self, held: Obj | None, wanted: Obj, templates: dict[str, Obj]) -> bool:
        """Whether applying the set `wanted` over `held` recreates its pods on the same devices (`templates`:
        the claim templates of both, by name)."""
        ...

    def set_rolling(self, statefulset: Obj | None) -> bool:
        """Whether the set's controller has not yet brought every replica to its latest template."""
        ...

    def awaits_claim(self, pod: Obj) -> bool:
        """Whether the pod waits for the cluster to make its device claim."""
        ...

    def quota_retry(self, said: str, quotas: list[Obj]) -> dict[str, str] | None:
        """For what the cluster said refusing part of the workload: None when it is no quota's refusal; else
        the annotations that ask the cluster to try again once the quota changed since (empty while the
        refusal stands)."""
        ...

    def growth(
        self,
        deployment: Obj | None,
        pods: list[Obj],
        claims: list[Obj],
        policy: EffectivePolicy,
        outranked: Callable[[], tuple[str, ...]],
    ) -> tuple[Verdict, list[tuple[str, str]]]:
        """ScalingHealthy, and (pod, event message) of each replica whose claim got no device; `outranked`,
        asked only then, says where orders of higher priority hold the room such a replica needs."""
        ...

    def claim_refusal(self, pods: list[Obj]) -> tuple[str, datetime | None] | None:
        """The scheduler's words, and since when, for a pod whose device claim it could not allocate (as the
        pods read now say it), or None."""
        ...


class HealthPort(Protocol):
    """The inference API probe and its judgement over time (isvc-health)."""

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
        """Probe once (asking that `model`, the served name, be listed) and judge with the record."""
        ...

    def without_replica(self, why: str, record: HealthStatus, at: datetime) -> tuple[HealthStatus, Verdict]:
        """Judge a pass where no replica is ready as a failed probe: a blip, or sustained."""
        ...

    def forget(self, namespace: str, name: str) -> None:
        """Stop probing the order between passes (it is gone, or has no replica to probe)."""
        ...

    def runtime_errors(self, namespace: str, name: str) -> str | None:
        """The words of a sustained rate of the runtime's own HTTP 5xx that began since it was last said (the
        request meter's counts the probes read; issue 42), else None."""
        ...

    @property
    def period(self) -> float: ...

    @property
    def watched(self) -> bool:
        """Whether checked orders are probed between passes, their pass woken when the result changes;
        when not, the step asks for a pass every period."""
        ...


class RollsPort(Protocol):
    """The pace of rolls an order did not ask for itself (_rollout.RollPacer): one order of a class at a time."""

    def may_roll(self, group: str, order: OrderKey) -> bool: ...
    def settled(self, group: str, order: OrderKey) -> list[OrderKey]: ...
    def forget(self, order: OrderKey) -> list[OrderKey]: ...
    def turn(self, group: str) -> OrderKey | None: ...


class StartWaitersPort(Protocol):
    """Who waits for a shared device's start turn (_rollout.StartWaiters): woken when the start holding it ends."""

    def wait(self, device: DeviceKey, order: OrderKey) -> None: ...
    def freed(self, device: DeviceKey) -> list[OrderKey]: ...


class ProbeLoop(Protocol):
    """Probes run apart from passes (isvc_health.ProbeSchedule): started with the workers, it wakes an
    order's pass when its latest probe result changed."""

    def on_change(self, wake: Callable[[str, str], None]) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


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
    # seals the children the controller writes; the default key is this process's own
    sealer: Sealer = attrs.field(factory=lambda: Sealer.from_file(None))
    namespace: str = "d8-isvc"  # the module's own: where the start turns' Leases live
    start_turn_seconds: int = 600  # how long one start may keep the co-tenants of its device waiting
    rolls: RollsPort | None = None  # None: every roll at once
    start_waiters: StartWaitersPort | None = None  # None: a co-tenant waiting its turn looks again in 5 s
    # counts a child restored (namespace, order, kind): the controller's isvc_child_restores_total
    restored: Callable[[str, str, str], None] = lambda namespace, order, kind: None
