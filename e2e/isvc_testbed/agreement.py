"""Does kube-scheduler allocate what the planner places, and find no room where the planner says no?

Random orders (seeded: sizes, classes, selectors, share steps, priorities) are planned one by one by an
in-process planner kept current from the cluster exactly as the service is (`KubeSync`). Each placement
becomes a claim pinned to the planned devices, as the operator's claim template pins it, and a pod on
it; the scheduler must allocate it (else a *disagreement*, with the scheduler's words). Each refusal is
checked by asking the scheduler for every shape the planner could have given the order (`Planner.shapes`):
none may be allocated (else a *false refusal*). Orders go on until `refusals` refusals were checked.

Placements are not waited for one by one: up to `batch` of them are in flight, as orders arrive under
load, so the ledger must count plans whose claims it has not seen allocated yet. A refusal, a preemption
or a full batch first waits for every claim in flight to be settled by the scheduler. Each claim asks what
the operator's claim template asks for the placement (`isvc_api.claim_capacity_requests`: the share and
the memory the planner computed from the device's request policy).

With `sizes`, orders take mixed shares of the shareable cards the run is confined to (or, with `fill_class`
mig.nvidia.com, MIG devices) until they are full
(issue 26: rounded memory requests summed past an H100 and left orders stuck on a planned device). With
`plant`, once they are full, one placed claim is deleted and a claim the planner cannot see (its watch
skips it) takes that room back at the scheduler: the next order of that shape is planned there, the
scheduler refuses its claim, and the planner must learn it at once, log it once, never offer that room for
that shape again while nothing changes there, and answer ResourceClaimExhausted with the scheduler's words
when nothing else has room.

Fleets of one product are published side by side: a run's orders keep to its fleet by `Fleet.selector()`
(each fleet file's host driver version is its own).

`python -m isvc_testbed.agreement --seed N` (`nox -s agreement -- --seed N`) starts its own control
plane, publishes the default (consumable shares) and the dynamic-MIG fleets and runs both; the e2e test runs
a short seeded round of each.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from isvc_api import GIB, LABEL_ORDER, AcceleratorPolicy, ModelFacts, Reason, claim_capacity_requests
from isvc_planner import Inventory, KubeSync, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse, SchedulerRefusal
from isvc_workload import uuid_selector
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed.fleet import DRIVER, Fleet
from isvc_testbed.helpers import namespace, wait_for

__all__ = ["FLEETS", "Report", "main", "products", "publish", "run"]

E2E = Path(__file__).resolve().parents[1]
FLEETS = {"default": E2E / "fleets" / "default.yaml", "partitioned": E2E / "fleets" / "partitioned.yaml"}
_PRIORITIES = {"agree-low": 100, "agree-high": 1000}
_CANNOT = "cannot allocate all claims"


@dataclass
class Report:
    """What one run saw."""

    fleet: str
    seed: int
    orders: int = 0
    placed: int = 0
    allocated: int = 0
    refusals: int = 0
    probes: int = 0
    preempted: int = 0
    disagreements: list[str] = field(default_factory=list)
    false_refusals: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # refusals by reason
    grown: int = 0  # further replicas' claims (the template's prioritized list) the scheduler allocated
    waiting_growth: int = 0  # further replicas' claims no device of the plan's shape had room for
    planted: list[str] = field(default_factory=list)  # what went wrong with the planted disagreement
    learned: str = ""  # the planner's answer once it learned the planted disagreement
    seconds: float = 0.0

    def line(self) -> str:
        """One line of figures."""
        return (
            f"{self.fleet} seed {self.seed}: {self.orders} orders, {self.placed} placed, "
            f"{self.allocated} allocated, {len(self.disagreements)} disagreements, "
            f"{self.refusals} refusals checked by {self.probes} probes, "
            f"{len(self.false_refusals)} false, {self.preempted} preempted, "
            f"refusals {dict(sorted(self.reasons.items()))}, "
            + (
                f"growth {self.grown} allocated {self.waiting_growth} waiting, "
                if self.grown or self.waiting_growth
                else ""
            )
            + f"{self.seconds:.0f} s"
            + (f"; planted: {self.learned or 'not learned'}" if self.learned or self.planted else "")
        )


def _facts(need_gib: float, name: str) -> ModelFacts:
    """A model whose whole need is about `need_gib`: weights only, KV and overhead estimated."""
    weights = max(0.2, (need_gib - 1) / 1.2)
    return ModelFacts.model_validate(
        {
            "source": "HuggingFace",
            "name": name,
            "parameter_count": int(weights * GIB / 2),
            "dtype": "bfloat16",
        }
    )


def _selector(within: str | None, products: list[str] | None) -> str | None:
    """The orders' selector: the run's fleet alone (`within`), and of it these products."""
    names = None if products is None else ", ".join(f"'{p}'" for p in products)
    clauses = [within, None if names is None else f"device.attributes['{DRIVER}'].productName in [{names}]"]
    return " && ".join(c for c in clauses if c) or None


def _order(
    rng: random.Random, i: int, products: list[str], confine: list[str] | None, within: str | None
) -> PlanRequest:
    """One random order: size log-uniform in [2, 90] GiB, a random class policy and priority."""
    need = math.exp(rng.uniform(math.log(2), math.log(90)))
    classes = rng.choice([None, ["gpu.nvidia.com"], ["mig.nvidia.com"], ["mig.nvidia.com", "gpu.nvidia.com"]])
    chosen = sorted(rng.sample(products, rng.randint(1, len(products)))) if rng.random() < 0.3 else None
    allowed = confine if chosen is None else [p for p in chosen if confine is None or p in confine] or confine
    selector = _selector(within, allowed)
    shares = rng.choice([None, None, [25, 50, 75, 100], [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]])
    policy = AcceleratorPolicy(device_class_names=classes, selector=selector, allowed_share_percents=shares)
    priority = rng.choice([None, None, "agree-low", "agree-high"])
    return PlanRequest(
        order=OrderRef(namespace="", name=f"o{i:03d}"),
        facts=_facts(need, f"agree/m{i}"),
        accelerator_policy=policy,
        priority_class_name=priority,
    )


def _sized_order(
    rng: random.Random,
    i: int,
    sizes: Sequence[float],
    confine: list[str] | None,
    within: str | None,
    device_class: str,
) -> PlanRequest:
    """One order of a size drawn from `sizes` (GiB), on the cards of `device_class` the run is confined to."""
    policy = AcceleratorPolicy(device_class_names=[device_class], selector=_selector(within, confine))
    return PlanRequest(
        order=OrderRef(namespace="", name=f"o{i:03d}"),
        facts=_facts(rng.choice(list(sizes)), f"agree/s{i}"),
        accelerator_policy=policy,
    )


class _Blind(Inventory):
    """The planner's ledger, blind to claims labelled as planted: a claim the planner could not know."""

    def upsert_claim(self, claim: Mapping[str, Any]) -> None:
        if ((claim.get("metadata") or {}).get("labels") or {}).get(PLANTED) == "true":
            return
        super().upsert_claim(claim)


PLANTED = "agreement/planted"


class _Lines(logging.Handler):
    """The planner's warnings that the scheduler refused what the ledger admitted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "the scheduler refused the claim" in message:
            self.lines.append(message)


class _Bed:
    """The cluster side of one run: pinned claims and pods in one namespace."""

    def __init__(self, api: k8s.ApiClient, ns: str) -> None:
        self.ns = ns
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)

    def create(self, name: str, spec: dict[str, Any], labels: dict[str, str]) -> None:
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
        self.custom.create_namespaced_custom_object("resource.k8s.io", "v1", self.ns, "resourceclaims", claim)
        self._create_pod(name, labels)

    def _create_pod(self, name: str, labels: dict[str, str]) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "containers": [
                    {"name": "c", "image": "agreement:none", "resources": {"claims": [{"name": "gpu"}]}}
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "terminationGracePeriodSeconds": 0,
            },
        }
        self.core.create_namespaced_pod(self.ns, cast(Any, pod))

    def ask_again(self, name: str) -> None:
        """The pod made again, so the scheduler tries it at once: a pod it found no room for waits in its
        unschedulable queue for an event its plugins name, and the freeing of a device held by another,
        deleted claim may not be one (it is retried within five minutes, longer than a test waits)."""
        pod = self.core.read_namespaced_pod(name, self.ns)
        self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)

        def gone() -> bool:
            try:
                self.core.read_namespaced_pod(name, self.ns)
            except ApiException as e:
                if e.status == 404:
                    return True
                raise
            return False

        wait_for(gone, 30, what=f"pod {name} gone")
        self._create_pod(name, dict((pod.metadata.labels if pod.metadata else None) or {}))

    def claim(self, name: str) -> dict[str, Any] | None:
        try:
            return cast(
                dict[str, Any],
                self.custom.get_namespaced_custom_object(
                    "resource.k8s.io", "v1", self.ns, "resourceclaims", name
                ),
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def refused(self, name: str) -> str | None:
        """The scheduler's words when it found no room for the pod's claim, else None."""
        try:
            pod = self.core.read_namespaced_pod(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        for c in (pod.status.conditions if pod.status else None) or []:
            if c.type == "PodScheduled" and c.status == "False" and _CANNOT in (c.message or ""):
                return str(c.message)
        return None

    def refused_since(self, name: str) -> datetime | None:
        """Since when the scheduler has refused the pod (its PodScheduled lastTransitionTime), as the
        controller reports it with the refusal."""
        pod = self.core.read_namespaced_pod(name, self.ns)
        for c in (pod.status.conditions if pod.status else None) or []:
            if c.type == "PodScheduled" and c.status == "False":
                return c.last_transition_time
        return None

    def settle(
        self, name: str, timeout: float = 30.0, persist: float = 0.0
    ) -> tuple[list[tuple[str, str]] | None, str | None]:
        """(allocated (pool, device) pairs, None) or (None, the scheduler's refusal or a timeout note).

        With `persist`, a refusal counts only once it has lasted that long, as the controller counts it
        (a claim of a pod deleted a moment ago may still be in the scheduler's books; it retries)."""
        deadline = time.monotonic() + timeout
        first: float | None = None
        while True:
            claim = self.claim(name) or {}
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                return [(r["pool"], r["device"]) for r in allocation["devices"]["results"]], None
            words = self.refused(name)
            if words is not None:
                first = time.monotonic() if first is None else first
                if time.monotonic() - first >= persist:
                    return None, words
            if time.monotonic() > deadline:
                return None, f"neither allocated nor refused after {timeout:.0f} s"
            time.sleep(0.2)

    def delete(self, names: Sequence[str]) -> None:
        for name in names:
            for call in (
                lambda n=name: self.core.delete_namespaced_pod(n, self.ns, grace_period_seconds=0),
                lambda n=name: self.custom.delete_namespaced_custom_object(
                    "resource.k8s.io", "v1", self.ns, "resourceclaims", n
                ),
            ):
                try:
                    call()
                except ApiException as e:
                    if e.status != 404:
                        raise
        wait_for(lambda: all(self.claim(n) is None for n in names), 60, what=f"claims {list(names)} gone")


def _pin(placement: Any) -> dict[str, Any]:
    """The claim spec the operator's template builds for a placement (isvc_workload `_request`): the planned
    devices as the plan's selectors pin them (by uuid in a plan made before it had selectors), asking what
    `claim_capacity_requests` says."""
    chosen = placement.device_selectors
    pinned = chosen.pinned if chosen is not None else uuid_selector(placement.driver, placement.device_uuids)
    exactly: dict[str, Any] = {
        "deviceClassName": placement.device_class_name,
        "allocationMode": "ExactCount",
        "count": placement.device_count,
        "selectors": [{"cel": {"expression": pinned}}],
    }
    requests = claim_capacity_requests(placement)
    if requests:
        exactly["capacity"] = {"requests": requests}
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _growth(placement: Any) -> dict[str, Any]:
    """The claim of a further replica as the operator's template asks it (isvc_workload `_request`): the
    planned devices first, else any of their shape (issue 40)."""
    chosen = placement.device_selectors
    assert chosen is not None
    base: dict[str, Any] = {
        "deviceClassName": placement.device_class_name,
        "allocationMode": "ExactCount",
        "count": placement.device_count,
    }
    requests = claim_capacity_requests(placement)
    if requests:
        base["capacity"] = {"requests": requests}
    choices = [
        {"name": n, **base, "selectors": [{"cel": {"expression": e}}]}
        for n, e in (("planned", chosen.pinned), ("alike", chosen.alike))
    ]
    return {"devices": {"requests": [{"name": "gpu", "firstAvailable": choices}]}}


def _same(inventory: Inventory, allocated: list[tuple[str, str]], placement: Any) -> bool:
    """Whether the scheduler allocated what the plan placed: its devices, or, for partitions published
    without a uuid (DynamicMIG), placements of the same profile on the same parents (what their pin names)."""
    planned = sorted((placement.pool or "", d) for d in placement.devices or [])
    if sorted(allocated) == planned:
        return True
    devices = inventory.view.fleet.devices

    def pins(pairs: list[tuple[str, str]]) -> list[str]:
        return sorted(
            str(devices[(DRIVER, pool, d)].pin) for pool, d in pairs if (DRIVER, pool, d) in devices
        )

    return len(pins(allocated)) == len(planned) and pins(allocated) == pins(planned)


def _where(answer: PlanResponse) -> str:
    p = answer.placement
    assert p is not None
    share = f" {p.share_percent}%" if p.share_percent is not None else ""
    return f"{p.device_class_name} {p.pool}/{','.join(p.devices or [])}{share}"


def run(
    api: k8s.ApiClient,
    fleet: str,
    seed: int,
    *,
    refusals: int = 8,
    max_orders: int = 400,
    batch: int = 6,
    confine: list[str] | None = None,
    fill_class: str = "gpu.nvidia.com",
    ns: str | None = None,
    sizes: Sequence[float] | None = None,
    plant: bool = False,
    growth: bool = False,
) -> Report:
    """One seeded run against the fleets published on the cluster (see the module docstring)."""
    started = time.monotonic()
    report = Report(fleet, seed)
    within = Fleet.load(FLEETS[fleet]).selector() if fleet in FLEETS else None
    ns = namespace(api, ns or f"agree-{fleet}-{seed}")
    scheduling = k8s.SchedulingV1Api(api)
    for name, value in _PRIORITIES.items():
        try:
            body = k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value)
            scheduling.create_priority_class(body)
        except ApiException as e:
            if e.status != 409:
                raise
    inventory = _Blind()
    sync = KubeSync(inventory, api, orders=False)  # no orders here: their classes are told below
    sync.start()
    bed = _Bed(api, ns)
    live: dict[str, str] = {}  # order -> where it was placed
    live_requests: dict[str, tuple[PlanRequest, PlanResponse]] = {}
    try:
        wait_for(
            lambda: (
                inventory.synced
                and all(
                    p in {d.product for d in inventory.view.fleet.devices.values()} for p in confine or []
                )
            ),
            60,
            what="the planner's inventory",
        )
        wait_for(
            lambda: all(inventory.view.priorities.of(p) is not None for p in _PRIORITIES),
            30,
            what="the priority classes in the inventory",
        )
        disagreements: list[None] = []
        planner = Planner(inventory, on_disagreement=lambda: disagreements.append(None))
        products = sorted({d.product for d in inventory.view.fleet.devices.values() if d.product})
        rng = random.Random(seed)
        in_flight: list[tuple[str, PlanResponse]] = []

        def settle() -> None:
            for name, answer in in_flight:
                allocated, words = bed.settle(name, timeout=45.0, persist=20.0)
                if allocated is None and words is not None and _CANNOT in words:
                    bed.ask_again(name)  # a refusal counts when the scheduler, asked afresh, repeats it
                    allocated, words = bed.settle(name, timeout=45.0, persist=20.0)
                if allocated is None:
                    report.disagreements.append(f"{name} planned on {_where(answer)}: {words}")
                    continue
                p = answer.placement
                assert p is not None
                if not _same(inventory, allocated, p):
                    report.disagreements.append(f"{name} planned on {_where(answer)}, allocated {allocated}")
                report.allocated += 1
            in_flight.clear()

        growing: list[tuple[str, Any]] = []
        waiting: list[str] = []  # further replicas' claims left waiting for room

        def grow() -> None:
            """Further replicas of orders placed and allocated: each claim as the operator's template asks
            it (the planned devices, else any of their shape), labelled with its order, so the ledger counts
            it as the order's and the plans after it must still agree with the scheduler (issue 40)."""
            for name, placement in growing:
                bed.create(f"{name}-grow", _growth(placement), {LABEL_ORDER: name})
            for name, _ in growing:
                allocated, _words = bed.settle(f"{name}-grow", timeout=30.0, persist=5.0)
                if allocated is not None:
                    report.grown += 1
                else:
                    report.waiting_growth += 1
                    waiting.append(f"{name}-grow")
            growing.clear()

        def forget(names: list[str]) -> None:
            """Delete claims and wait until the planner's ledger has seen them go, as it will in time."""
            uids = {f"claim:{(bed.claim(n) or {}).get('metadata', {}).get('uid')}" for n in names}
            bed.delete(names)

            def forgotten() -> bool:
                with inventory.reading() as view:
                    return not any(
                        h.source in uids
                        for key in list(view.fleet.devices)
                        for h in view.ledger.holdings_on(key)
                    )

            wait_for(forgotten, 30, what=f"the planner's ledger without {names}")

        def probe(name: str, request: PlanRequest, answer: PlanResponse) -> None:
            shapes = planner.shapes(request)
            with inventory.reading() as view:
                before = {
                    k: (view.ledger.used(k), [h.source for h in view.ledger.holdings_on(k)])
                    for k in view.fleet.devices
                }
            names = [f"{name}-probe-{i}" for i in range(len(shapes))]
            for probe_name, shape in zip(names, shapes, strict=True):
                bed.create(probe_name, shape.claim_spec(), {"agreement": "probe"})
            report.probes += len(shapes)
            for probe_name, shape in zip(names, shapes, strict=True):
                allocated, _ = bed.settle(probe_name)
                if allocated is not None:
                    assert answer.refusal is not None
                    seen = {d: before.get((DRIVER, pool, d)) for pool, d in allocated}
                    report.false_refusals.append(
                        f"{name} refused ({answer.refusal.reason.value}: {answer.refusal.message}) but the "
                        f"scheduler allocated {allocated} for {shape}; the ledger saw them (used, holders): "
                        f"{seen}"
                    )
            forget(names)

        while report.orders < max_orders and report.refusals < refusals:
            request = (
                _sized_order(rng, report.orders, sizes, confine, within, fill_class)
                if sizes
                else _order(rng, report.orders, products, confine, within)
            )
            request = request.model_copy(update={"order": OrderRef(namespace=ns, name=request.order.name)})
            name = request.order.name
            report.orders += 1
            answer = planner.plan(request)
            if answer.placement is None:
                settle()
                report.refusals += 1
                assert answer.refusal is not None
                reason = answer.refusal.reason.value
                report.reasons[reason] = report.reasons.get(reason, 0) + 1
                probe(name, request, answer)
                continue
            if answer.preempt:
                settle()
                victims = [v.name for v in answer.preempt if v.name in live]
                forget(victims)
                for v in victims:
                    live.pop(v, None)
                    planner.release(ns, v)
                report.preempted += len(victims)
            # A claim's priority is its order's class's (issue 14): the bench tells the planner both.
            klass = f"agree-{request.priority_class_name or 'none'}"
            inventory.upsert_service_class(
                {"metadata": {"name": klass}, "spec": {"priorityClassName": request.priority_class_name}}
            )
            inventory.upsert_order(
                {"metadata": {"namespace": ns, "name": name}, "spec": {"inferenceServiceClassName": klass}}
            )
            bed.create(name, _pin(answer.placement), {LABEL_ORDER: name})
            live_requests[name] = (request, answer)
            report.placed += 1
            live[name] = _where(answer)
            in_flight.append((name, answer))
            if growth and report.placed % 3 == 0 and answer.placement.device_selectors is not None:
                growing.append((name, answer.placement))
            if len(in_flight) >= batch:
                settle()
                grow()
        settle()
        grow()
        if plant:
            forget(waiting)  # a replica waiting for room would take the room freed for the planted claim
            _plant(report, bed, planner, inventory, live_requests, ns, forget, disagreements)
    finally:
        sync.stop()
        k8s.CoreV1Api(api).delete_namespace(ns)
        resource = k8s.ResourceV1Api(api)
        wait_for(  # the next run starts on an empty fleet
            lambda: not resource.list_namespaced_resource_claim(ns).items, 90, what=f"the claims of {ns} gone"
        )
    report.seconds = time.monotonic() - started
    return report


def _plant(
    report: Report,
    bed: _Bed,
    planner: Planner,
    inventory: Inventory,
    live: dict[str, tuple[PlanRequest, PlanResponse]],
    ns: str,
    forget: Any,
    disagreements: list[None],
) -> None:
    """The planted disagreement (module docstring): the fleet is full; one placed claim goes and a claim the
    planner cannot see takes its room back at the scheduler."""
    placed = [(n, a.placement) for n, (_, a) in live.items() if a.placement is not None]
    if not placed:
        report.planted.append("no placement to plant beside")
        return
    shared = [n for n, p in placed if p.share_percent]
    victim = (shared or [n for n, _ in placed])[-1]  # a share beside others, else a device taken whole
    request, answer = live.pop(victim)
    placement = answer.placement
    assert placement is not None
    forget([victim])
    planner.release(ns, victim)
    bed.create("planted", _pin(placement), {PLANTED: "true"})  # the planner's ledger never sees it
    allocated, words = bed.settle("planted")
    if allocated is None:
        report.planted.append(f"the planted claim was not allocated: {words}")
        return
    lines = _Lines()
    logger = logging.getLogger("isvc_planner")
    logger.addHandler(lines)
    try:
        order = request.model_copy(update={"order": OrderRef(namespace=ns, name="late")})
        first = planner.plan(order)
        if first.placement is None or first.placement.devices != placement.devices:
            report.planted.append(
                f"the ledger did not see the room it lost: {first.model_dump(exclude_none=True)}"
            )
            return
        bed.create("late", _pin(first.placement), {LABEL_ORDER: "late"})
        allocated, words = bed.settle("late", timeout=45.0, persist=5.0)
        if allocated is not None or words is None:
            report.planted.append(f"the scheduler allocated the planted room twice: {allocated}")
            return
        refused = order.model_copy(
            update={
                "holding": first.placement,
                "refused": SchedulerRefusal(
                    placement=first.placement, message=words, since=bed.refused_since("late")
                ),
            }
        )
        learned = planner.plan(refused)
        again = planner.plan(refused)  # the controller reports it again on later passes
        other = planner.plan(request.model_copy(update={"order": OrderRef(namespace=ns, name="next")}))
    finally:
        logger.removeHandler(lines)
    refusal = learned.refusal
    if refusal is None or refusal.reason != Reason.RESOURCE_CLAIM_EXHAUSTED:
        report.planted.append(
            f"not ResourceClaimExhausted once learned: {learned.model_dump(exclude_none=True)}"
        )
    elif words.split(".")[0] not in refusal.message or (placement.devices or [""])[0] not in refusal.message:
        report.planted.append(
            f"the refusal does not name the device and the scheduler's words: {refusal.message}"
        )
    else:
        report.learned = f"{refusal.reason.value}: {refusal.message}"
    if again.refusal is None or again.refusal.reason != Reason.RESOURCE_CLAIM_EXHAUSTED:
        report.planted.append(f"a second report changed the answer: {again.model_dump(exclude_none=True)}")
    if len(lines.lines) != 1 or len(disagreements) != 1:
        report.planted.append(f"logged {len(lines.lines)} times, counted {len(disagreements)} (once each)")
    if other.placement is not None and other.placement.devices == placement.devices:
        report.planted.append("the refused room was offered to the next order of that shape")
    bed.delete(["late", "planted"])


def products(fleet: str) -> list[str]:
    """The products of one fleet, to keep a run's orders on it while others are published too."""
    return sorted({g.product for n in Fleet.load(FLEETS[fleet]).nodes for g in n.gpus})


def publish(api: k8s.ApiClient, *names: str) -> None:
    """Publish fleets (pods per node raised: the agreement is about devices, not the pod limit)."""
    for name in names:
        f = Fleet.load(FLEETS[name])
        f.nodes = [replace(n, pods="1000") for n in f.nodes]
        f.publish(api)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: a longer seeded run on its own control plane; exits 1 on any disagreement or false refusal."""
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.agreement", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=20260818)
    p.add_argument("--refusals", type=int, default=25, help="refusals to check per fleet")
    p.add_argument("--fleet", choices=sorted(FLEETS), action="append", help="default: both")
    args = p.parse_args(argv)
    from isvc_testbed.cluster import Cluster

    failed = False
    with Cluster() as cluster, cluster.api_client("admin") as api:
        publish(api, "default", "partitioned")
        for name in args.fleet or sorted(FLEETS):
            report = run(api, name, args.seed, refusals=args.refusals, confine=products(name))
            print(report.line(), flush=True)
            for line in report.disagreements + report.false_refusals:
                print("  " + line, flush=True)
            failed = failed or bool(report.disagreements or report.false_refusals)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
