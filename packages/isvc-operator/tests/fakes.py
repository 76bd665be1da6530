"""In-memory stand-ins for the reconciler's ports: plain data, no cluster, no network."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import isvc_health
import isvc_workload
from isvc_api import (
    LABEL_ORDER,
    CompiledRuntime,
    EndpointType,
    Estimates,
    HealthStatus,
    InferenceService,
    LaunchPlanSpec,
    Load,
    ModelFacts,
    ModelSource,
    ModelSpec,
    Placement,
    PlacementMode,
    Reason,
    Refusal,
    RuntimeRequirements,
    ScalingStatus,
    SharingMode,
    StartupFailure,
    StatusReason,
    Verdict,
)
from isvc_operator import (
    Deps,
    EffectivePolicy,
    Judgement,
    OrderReconciler,
    PassResult,
    PlanOutcome,
    RollPacer,
    Sealer,
    StartWaiters,
    TemporaryError,
    Workload,
)

Obj = dict[str, Any]
T0 = datetime(2026, 11, 1, tzinfo=UTC)
RUNTIME = {"name": "server", "image": "vllm/vllm-openai:v0.11.0"}


def owner(name: str = "support-llm") -> Obj:
    """The controller reference of an order the fakes make (its uid is uid-<name>)."""
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceService",
        "name": name,
        "uid": f"uid-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def order(
    name: str = "support-llm",
    namespace: str = "team-a",
    klass: str | None = "default-llm",
    model: str = "Qwen/Qwen2.5-7B-Instruct",
    **model_extra: Any,
) -> Obj:
    spec: Obj = {"model": {"src": "HuggingFace", "ref": {"name": model}, **model_extra}}
    if klass:
        spec["inferenceServiceClassName"] = klass
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
    }


def klass(name: str = "default-llm", ready: bool = True, reason: str = "ClassReady", **spec: Any) -> Obj:
    body: Obj = {"modelPolicy": {"allowedEndpointTypes": ["Chat", "Embeddings"]}}
    body.update(spec)
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceServiceClass",
        "metadata": {"name": name, "generation": 1},
        "spec": body,
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": reason, "message": "m"}
            ]
        },
    }


class FakeCluster:
    """A dictionary of objects keyed by (kind, namespace, name), with SSA as a merge-free replace."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.events: list[tuple[str, str, str, str]] = []
        self.statuses: list[Obj] = []
        self.applied: list[Obj] = []
        self.patched: list[list[Obj]] = []
        self.priority_classes: dict[str, int] = {}
        self.refuse_kind: str | None = None
        self.fail_kind: str | None = None  # apply raises a plain error: a bug, not a refusal
        self.failed_creates: dict[tuple[str, str], str] = {}  # FailedCreate events of workloads
        self.failed_create_reads: list[tuple[str, str, str, str]] = []
        self.allowed: set[tuple[str, str, str, str, str]] = set()  # (user, verb, resource, namespace, name)
        self.access_reviews: list[tuple[str, str, str, str, str]] = []
        self.said: dict[tuple[str, str, str], str] = {}  # (kind, name, event reason) -> message
        self.said_reads: list[tuple[str, str, str]] = []
        self.annotated: list[tuple[str, str, str, dict[str, str]]] = []
        self.ready_pods = True  # an applied set gets a ready replica
        self.start_logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its current instance's output
        self.start_log_reads: list[tuple[str, str]] = []

    def put(self, obj: Obj) -> None:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = copy.deepcopy(obj)

    def secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.put(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            }
        )

    def _get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    def order(self, namespace: str, name: str) -> Obj | None:
        return self._get("InferenceService", namespace, name)

    def klass(self, name: str) -> Obj | None:
        return self._get("InferenceServiceClass", "", name)

    def priority_class_exists(self, name: str) -> bool:
        return name in self.priority_classes

    def priority_value(self, name: str | None) -> int:
        return self.priority_classes.get(name or "", 0)

    def get_secret(self, namespace: str, name: str) -> Obj | None:
        return self._get("Secret", namespace, name)

    def launch_plan(self, namespace: str, name: str) -> Obj | None:
        return self._get("LaunchPlan", namespace, name)

    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]:
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in self.objects.items()
            if k == kind and ns == namespace and (o["metadata"].get("labels") or {}).get(LABEL_ORDER) == order
        ]

    def cached(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._get(kind, namespace, name)

    def autoscalers_of(self, namespace: str, kind: str, names: set[str]) -> list[Obj]:
        return [
            {**copy.deepcopy(o), "target": (o.get("spec") or {}).get("scaleTargetRef") or {}}
            for (k, ns, _), o in self.objects.items()
            if k == "HorizontalPodAutoscaler"
            and ns == namespace
            and ((o.get("spec") or {}).get("scaleTargetRef") or {}).get("kind") == kind
            and ((o.get("spec") or {}).get("scaleTargetRef") or {}).get("name") in names
        ]

    def ingresses_naming(self, host: str) -> list[Obj]:
        return [
            copy.deepcopy(o)
            for (k, _, _), o in self.objects.items()
            if k == "Ingress" and host in [r.get("host") for r in (o.get("spec") or {}).get("rules") or []]
        ]

    def lease(self, namespace: str, name: str) -> Obj | None:
        return self._get("Lease", namespace, name)

    def take_lease(self, manifest: Obj) -> bool:
        meta = manifest["metadata"]
        held = self.objects.get(("Lease", meta["namespace"], meta["name"]))
        version = (held or {}).get("metadata", {}).get("resourceVersion")
        if version != meta.get("resourceVersion"):
            return False
        stored = copy.deepcopy(manifest)
        stored["metadata"]["resourceVersion"] = str(int(version or 0) + 1)
        self.put(stored)
        self.applied.append(copy.deepcopy(manifest))
        return True

    def apply(self, manifest: Obj, dry_run: bool = False) -> Obj:
        if (
            manifest["kind"] == "Pod"
            and (key := ("Pod", manifest["metadata"]["namespace"], manifest["metadata"]["name"]))
            in self.objects
        ):
            pod = self.objects[key]  # a pod's metadata applied: its annotations merge, the rest stays
            pod["metadata"].setdefault("annotations", {}).update(
                manifest["metadata"].get("annotations") or {}
            )
            self.applied.append(copy.deepcopy(manifest))
            return copy.deepcopy(pod)
        if manifest["kind"] == self.refuse_kind:
            raise _ApiError(422, f"{manifest['kind']} is invalid: spec.x: Invalid value")
        if manifest["kind"] == self.fail_kind:
            raise RuntimeError(f"{manifest['kind']}: something no one foresaw")
        if dry_run:
            return copy.deepcopy(manifest)
        self.applied.append(copy.deepcopy(manifest))
        meta = manifest["metadata"]
        held = self.objects.get((manifest["kind"], meta.get("namespace", ""), meta["name"]))
        uid = (held or {}).get("metadata", {}).get("uid")
        if uid and not meta.get("uid"):  # the API server keeps an object's uid across applies
            manifest = {**manifest, "metadata": {**meta, "uid": uid}}
        self.put(manifest)
        if manifest["kind"] == "StatefulSet" and held is None and self.ready_pods:
            self._replica(manifest)
        return manifest

    def _replica(self, workload: Obj) -> None:
        """A ready replica of a set when it is made, as the cluster would make one: what the order's Service
        has behind it (a test that needs other pods puts its own; `replicas_gone` takes them away)."""
        meta = workload["metadata"]
        order = (meta.get("labels") or {}).get(LABEL_ORDER)
        if order is None or self.owned("Pod", meta["namespace"], order):
            return
        self.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{meta['name']}-0",
                    "namespace": meta["namespace"],
                    "labels": {LABEL_ORDER: order},
                },
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )

    def replicas_gone(self, namespace: str, order: str) -> None:
        """Every pod of the order gone: nothing behind its Service."""
        for pod in self.owned("Pod", namespace, order):
            del self.objects[("Pod", namespace, pod["metadata"]["name"])]

    def patch(self, manifest: Obj, ops: list[Obj], dry_run: bool = False) -> Obj:
        """A JSON patch as the API server applies one (add, replace, remove, test on object members)."""
        meta = manifest["metadata"]
        key = (manifest["kind"], meta.get("namespace", ""), meta["name"])
        obj = copy.deepcopy(self.objects[key])
        for op in ops:
            *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
            at = obj
            for part in parents:
                at = at[part]
            if op["op"] == "test":
                if at.get(last) != op["value"]:
                    raise _ApiError(422, f"test of {op['path']} failed")
            elif op["op"] in ("add", "replace"):
                at[last] = copy.deepcopy(op["value"])
            elif op["op"] == "remove":
                del at[last]
        if not dry_run:
            self.patched.append(copy.deepcopy(ops))
            self.objects[key] = obj
        return copy.deepcopy(obj)

    def apply_status(self, manifest: Obj) -> Obj:
        self.statuses.append(copy.deepcopy(manifest))
        meta = manifest["metadata"]
        if (manifest["kind"], meta.get("namespace", ""), meta["name"]) not in self.objects:
            raise _ApiError(404, "not found")
        key = (manifest["kind"], meta.get("namespace", ""), meta["name"])
        self.objects[key]["status"] = copy.deepcopy(manifest["status"])
        return self.objects[key]

    def create(self, manifest: Obj) -> Obj:
        meta = manifest["metadata"]
        key = (manifest["kind"], meta.get("namespace", ""), meta["name"])
        if key not in self.objects:
            self.put(manifest)
        return copy.deepcopy(self.objects[key])

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self.objects.pop((kind, namespace or "", name), None)

    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None:
        return None

    def start_log(self, namespace: str, pod: str, container: str, lines: int = 200) -> str | None:
        self.start_log_reads.append((namespace, pod))
        return self.start_logs.get((namespace, pod))

    def failed_create(self, namespace: str, kind: str, name: str, uid: str) -> str | None:
        self.failed_create_reads.append((namespace, kind, name, uid))
        return self.failed_creates.get((namespace, name))

    def refused(self, namespace: str, kind: str, name: str, uid: str, reason: str) -> str | None:
        self.said_reads.append((kind, name, reason))
        return self.said.get((kind, name, reason))

    def quotas_in(self, namespace: str) -> list[Obj]:
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in self.objects.items()
            if k == "ResourceQuota" and ns == namespace
        ]

    def annotate(
        self, api_version: str, kind: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        self.annotated.append((kind, namespace, name, dict(annotations)))
        obj = self.objects.get((kind, namespace, name))
        if obj is not None:
            obj["metadata"].setdefault("annotations", {}).update(annotations)

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((involved["metadata"]["name"], type_, reason, message))

    def user_may(
        self,
        username: str,
        uid: str,
        groups: tuple[str, ...],
        extra: Mapping[str, tuple[str, ...]],
        verb: str,
        resource: str,
        namespace: str,
        name: str,
    ) -> bool:
        self.access_reviews.append((username, verb, resource, namespace, name))
        return (username, verb, resource, namespace, name) in self.allowed

    def status_of(self, namespace: str, name: str) -> Obj:
        return self.objects[("InferenceService", namespace, name)]["status"]

    def condition(self, namespace: str, name: str, type_: str) -> Obj:
        return next(c for c in self.status_of(namespace, name)["conditions"] if c["type"] == type_)


class _ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


FACTS = ModelFacts(
    source=ModelSource.HUGGING_FACE,
    name="Qwen/Qwen2.5-7B-Instruct",
    parameter_count=7_600_000_000,
    dtype="bfloat16",
    num_layers=28,
    num_kv_heads=4,
    head_dim=128,
    context_length=32768,
)


class FakeModels:
    def __init__(self) -> None:
        self.answer: ModelFacts | Refusal | Exception = FACTS
        self.tokens: list[str | None] = []

    def resolve(self, spec: ModelSpec, namespace: str, token: str | None) -> ModelFacts | Refusal:
        self.tokens.append(token)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def admit(self, facts: ModelFacts, policy: EffectivePolicy) -> EndpointType | Refusal | None:
        types = policy.endpoint_types
        return None if types is None else types[0]


PLACEMENT = Placement(
    device_class_name="gpu.nvidia.com",
    driver="gpu.nvidia.com",
    pool="gpu-h100-0",
    devices=["gpu-0"],
    device_uuids=["GPU-0"],
    node_name="gpu-h100-0",
    accelerator_product_name="NVIDIA H100 80GB HBM3",
    accelerator_memory_gi_b=80,
    placement_mode=PlacementMode.WHOLE_DEVICE,
    sharing_mode=SharingMode.NONE,
    device_count=1,
    memory_gi_b=80,
)
ESTIMATES = Estimates(
    required_memory_gi_b=20,
    weights_gi_b=15,
    kv_cache_gi_b=3,
    overhead_gi_b=2,
    context_length=8192,
    cpu="4",
    memory="24Gi",
    model_volume="20Gi",
)


class FakeRecipes:
    version = "v1"

    def __init__(self) -> None:
        self.refusal: Refusal | None = None
        self.compile_refusal: Refusal | None = None
        self.parsers: tuple[str | None, str | None] = (None, None)  # tool-call, reasoning
        self.serving: list[Load | None] = []  # the serving target of each compile

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal:
        return self.refusal or RuntimeRequirements(recipes=["vllm"])

    def compile(
        self,
        facts: ModelFacts,
        endpoint_type: EndpointType | None,
        placement: Placement,
        estimates: Estimates,
        served_name: str,
        serving: Load | None = None,
    ) -> CompiledRuntime | Refusal:
        self.serving.append(serving)
        if self.compile_refusal is not None:
            return self.compile_refusal
        return CompiledRuntime(
            kv_cache_tokens=serving.tokens if serving else None,
            concurrent_requests=serving.requests if serving else None,
            request_tokens=serving.typical if serving else None,
            recipe="vllm",
            image="vllm/vllm-openai:v0.11.0",
            args=["serve", served_name],
            served_name=served_name,
            tool_calling_supported=True,
            tool_call_parser=self.parsers[0],
            reasoning_parser=self.parsers[1],
            content_hash="abc",
            runtime="vllm",  # the recipe's runtime, as the book compiles it
        )


class FakePlanner:
    def __init__(self) -> None:
        self.outcome = PlanOutcome(placement=PLACEMENT, estimates=ESTIMATES, refusal=None, preempt=[])
        self.asked: list[tuple[str, str]] = []
        self.refused: list[str | None] = []
        self.refused_since: list[datetime | None] = []
        self.dry_runs: list[bool] = []
        self.down = False
        self.bad_placement: Refusal | None = None
        self.holdings: list[Placement | None] = []
        self.released: list[tuple[str, str]] = []
        self.lost: dict[str, tuple[str, ...]] = {}  # order name -> why it lost its devices in the ledger
        self.gone: dict[str, tuple[str, ...]] = {}  # per order: its devices out of service, with why
        self.outranked: dict[str, tuple[str, ...]] = {}  # per order: orders of higher priority on its devices
        self.forgotten: list[tuple[str, str]] = []
        self.serving: list[Load | None] = []  # the serving target each plan was asked for

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
        self.serving.append(serving)
        self.refused.append(refused)
        self.refused_since.append(refused_since)
        self.dry_runs.append(dry_run)
        if self.down:
            raise TemporaryError("connection refused")
        self.holdings.append(holding)
        self.asked.append((order.metadata.namespace or "", order.metadata.name))
        return self.outcome

    def release(self, namespace: str, name: str) -> None:
        self.released.append((namespace, name))

    def forget_judgement(self, namespace: str, name: str) -> None:
        self.forgotten.append((namespace, name))

    def judge(self, namespace: str, name: str, placement: Placement) -> Judgement:
        if self.down:
            raise TemporaryError("connection refused")
        if placement.share_percent is not None and not 1 <= placement.share_percent <= 100:
            return Judgement(
                refusal=Refusal(
                    reason=Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
                    message=f"spec.placement.sharePercent is {placement.share_percent}, outside 1..100",
                )
            )
        return Judgement(
            refusal=self.bad_placement,
            lost=self.lost.get(name, ()),
            gone=self.gone.get(name, ()),
            outranked=self.outranked.get(name, ()),
        )


class FakeWorkload:
    service_port = 8000

    def __init__(self) -> None:
        self.verdict = Verdict(
            status="True", reason=StatusReason.WORKLOAD_AVAILABLE.value, message="1/1 replicas ready."
        )
        self.failure: StartupFailure | None = None
        self.growth_verdict = Verdict(
            status="True", reason=StatusReason.SCALING_OK.value, message="growth is not blocked."
        )
        self.unplaced: list[tuple[str, str]] = []
        self.outranked_seen: list[tuple[str, ...]] = []  # what growth() was told, when it asked
        self.judged_with: list[StartupFailure | None] = []
        self.judged_sets: list[Obj | None] = []
        self.judged_refusals: list[tuple[dict[str, str], list[Obj]]] = []
        self.digests: list[str | None] = []
        self.plans: list[LaunchPlanSpec] = []
        self.outgrown: str | None = None  # the refusal of settle() over a held set: the order outgrew it
        self.scaling_status: ScalingStatus | None = None
        self.extra: list[Obj] = []  # children besides the template and the set (an HPA, a PodMetric ...)

    autoscaling_kinds = (
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("deckhouse.io/v1alpha1", "PodMetric"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("monitoring.coreos.com/v1", "PodMonitor"),
    )

    def scaling(
        self, order: InferenceService, plan: LaunchPlanSpec, policy: EffectivePolicy
    ) -> ScalingStatus | None:
        return self.scaling_status

    def settle(self, wanted: Obj, held: Obj | None) -> Obj | Refusal:
        if held is not None and self.outgrown is not None:
            return Refusal(reason=Reason.WORKLOAD_ERROR, message=self.outgrown)
        return isvc_workload.settle(wanted, held)  # a held volume large enough is kept

    def outgrows(self, held: Obj | None, needed_size: str) -> Refusal | None:
        """What settle() would say of a set for this volume (the fakes' volumes are all the same size)."""
        if held is not None and self.outgrown is not None:
            return Refusal(reason=Reason.WORKLOAD_ERROR, message=self.outgrown)
        return None

    def manifests(
        self,
        order: InferenceService,
        plan: LaunchPlanSpec,
        policy: EffectivePolicy,
        auth_secret: str | None,
        token_digest: str | None = None,
    ) -> list[Obj]:
        self.digests.append(token_digest)
        self.plans.append(plan)
        name, ns = order.metadata.name, order.metadata.namespace
        labels = {LABEL_ORDER: name}
        return [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {
                    "name": f"{name}-{plan.placement.node_name}",
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [order.owner_reference()],
                },
                "spec": {
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": self._exactly(plan)}]}}
                },
            },
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [order.owner_reference()],
                },
                **self._template(policy, plan.estimates.model_volume if plan.estimates else None),
            },
            *self.extra,
        ]

    @staticmethod
    def _exactly(plan: LaunchPlanSpec) -> Obj:
        """The plan's one device, pinned by its uuids when it names them."""
        exactly: Obj = {"deviceClassName": plan.placement.device_class_name, "count": 1}
        if plan.placement.device_uuids:
            exactly["selectors"] = [{"cel": {"expression": f"uuid == {plan.placement.device_uuids[0]!r}"}}]
        return exactly

    @staticmethod
    def _template(policy: EffectivePolicy, volume: str | None = None) -> Obj:
        """One replica of the runtime, and the priority class when the class names one: what class edits change
        in pods; the model volume the plan estimates."""
        pod: Obj = {"automountServiceAccountToken": False, "containers": [RUNTIME]}
        if policy.priority_class_name:
            pod["priorityClassName"] = policy.priority_class_name
        claims = [
            {
                "metadata": {"name": f"models-{volume.lower()}"},
                "spec": {"resources": {"requests": {"storage": volume}}},
            }
        ]
        return {
            "spec": {
                "replicas": 1,
                "template": {"spec": pod},
                **({"volumeClaimTemplates": claims} if volume else {}),
            }
        }

    def recreates_pods(self, held: Obj | None, wanted: Obj, templates: dict[str, Obj]) -> bool:
        return isvc_workload.recreates_pods(held, wanted, templates)

    def set_rolling(self, statefulset: Obj | None) -> bool:
        return isvc_workload.set_rolling(statefulset)

    def auth_secret(self, order: InferenceService) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{order.metadata.name}-auth",
                "namespace": order.metadata.namespace,
                "ownerReferences": [order.owner_reference()],
            },
            "data": {"token": base64.b64encode(b"sekret").decode()},
        }

    def growth(
        self,
        deployment: Obj | None,
        pods: list[Obj],
        claims: list[Obj],
        policy: EffectivePolicy,
        outranked: Callable[[], tuple[str, ...]],
    ) -> tuple[Verdict, list[tuple[str, str]]]:
        if self.unplaced:  # asked only when a replica got no device, as the package's judge asks
            self.outranked_seen.append(outranked())
        return self.growth_verdict, self.unplaced

    def claim_refusal(self, pods: list[Obj]) -> tuple[str, datetime | None] | None:  # the package's reading
        refusal = isvc_workload.claim_refusal(pods)
        return (refusal.message, refusal.since) if refusal is not None else None

    def token(self, secret: Obj) -> str | None:
        return base64.b64decode(secret["data"]["token"]).decode()

    def endpoint(self, order: InferenceService, policy: EffectivePolicy) -> str:
        return f"https://{order.metadata.name}.{order.metadata.namespace}.example.com"

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
        self.judged_with.append(previous)
        self.judged_sets.append(deployment)
        self.judged_refusals.append((dict(claim_refusals or {}), list(quotas or [])))
        return self.verdict, self.failure

    def awaits_claim(self, pod: Obj) -> bool:  # the package's own reading of a pod
        return isvc_workload.awaits_claim(pod)

    def quota_retry(self, said: str, quotas: list[Obj]) -> dict[str, str] | None:
        return Workload.quota_retry(cast(Workload, self), said, quotas)


class FakeHealth:
    period = 30.0

    def __init__(self, watched: bool = False) -> None:
        self.watched = watched
        self.forgotten: list[tuple[str, str]] = []
        self.ok = True
        self.tokens: list[str | None] = []
        self.records: list[HealthStatus] = []
        self.models: list[str | None] = []
        self.errors: str | None = None  # the next pass's news of the runtime's own 5xx

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
        self.tokens.append(token)
        self.models.append(model)
        self.records.append(record)
        if self.ok:
            return HealthStatus(ever_ready=True), Verdict.ok(StatusReason.SERVING, "the API answered.")
        failed = HealthStatus(
            ever_ready=record.ever_ready,
            consecutive_failures=record.consecutive_failures + 1,
            first_failure_time=record.first_failure_time or at,
            last_failure="refused",
        )
        reason = Reason.SERVICE_UNHEALTHY if record.ever_ready else Reason.HEALTH_CHECK_FAILED
        return failed, Verdict.refuse(reason, "the inference API did not answer.")

    def forget(self, namespace: str, name: str) -> None:
        self.forgotten.append((namespace, name))

    def runtime_errors(self, namespace: str, name: str) -> str | None:
        said, self.errors = self.errors, None
        return said

    def without_replica(self, why: str, record: HealthStatus, at: datetime) -> tuple[HealthStatus, Verdict]:
        """isvc-health's own judgement of a pass with no replica ready, sustained at the second in a row."""
        self.records.append(record)
        result = isvc_health.ProbeResult(
            outcome=isvc_health.ProbeOutcome.NO_REPLICA, reason=why, probed_at=at
        )
        settings = isvc_health.HealthSettings(failure_threshold=2, sustained_seconds=0)
        return isvc_health.judge_health(record, result, at, settings)


class World:
    """A class, every fake, and one reconciler over them, as the controller keeps one for its life."""

    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.models = FakeModels()
        self.recipes = FakeRecipes()
        self.planner = FakePlanner()
        self.workload = FakeWorkload()
        self.health = FakeHealth()
        self.catalog_enabled = True
        self.rolls: RollPacer | None = None
        self.start_waiters: StartWaiters | None = None
        self.cluster.put(klass())
        self._reconciler: OrderReconciler | None = None
        self.last: PassResult | None = None
        self.clock_offset = timedelta(0)
        self.sealer = Sealer(b"a key of the world, kept across restarts")
        self.restores: list[tuple[str, str, str]] = []  # children restored, as the controller counts them

    def reconciler(self) -> OrderReconciler:
        """One reconciler for the world, as the controller keeps one for its life."""
        if self._reconciler is None:
            self._reconciler = self._make()
        return self._reconciler

    def restart(self) -> None:
        """A new reconciler, as a controller restart makes (it keeps nothing between passes anyway)."""
        self._reconciler = None

    def _make(self) -> OrderReconciler:
        return OrderReconciler(
            Deps(
                cluster=self.cluster,
                models=self.models,
                recipes=self.recipes,
                planner=self.planner,
                workload=self.workload,
                health=self.health,
                catalog_enabled=self.catalog_enabled,
                clock=lambda: T0 + self.clock_offset,
                sealer=self.sealer,  # the key survives restarts: it is the chart's Secret
                rolls=self.rolls,
                start_waiters=self.start_waiters,
                restored=lambda namespace, order, kind: self.restores.append((namespace, order, kind)),
            )
        )

    def run(self, obj: dict[str, Any] | None = None) -> dict[str, Any]:
        obj = obj or order()
        if self.cluster.order(obj["metadata"]["namespace"], obj["metadata"]["name"]) is None:
            self.cluster.put(obj)
        self.last = self.reconciler().reconcile(obj["metadata"]["namespace"], obj["metadata"]["name"])
        return self.cluster.status_of(obj["metadata"]["namespace"], obj["metadata"]["name"])
