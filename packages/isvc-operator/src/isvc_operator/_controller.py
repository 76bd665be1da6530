"""The controller: informers feed one queue per kind; workers reconcile orders and classes by name."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from isvc_api import LABEL_ORDER, ConditionType, Obj, OrderKey, condition_of
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from isvc_operator._class import ClassReconciler
from isvc_operator._kube import KubeCluster
from isvc_operator._order import OrderReconciler
from isvc_operator._ports import ProbeLoop
from isvc_operator._queue import ShutDownError, WorkQueue
from isvc_operator._secret_refs import SecretRefs
from isvc_operator._waiting import WaitingRoom

__all__ = ["Controller", "OrdersByPhase", "order_of_plan"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
# How often, and how long, a new leader asks a planner that does not answer which orders it holds room for.
SWEEP_RETRY, SWEEP_TRIES = 10.0, 30


def order_of_plan(plan: Obj) -> OrderKey:
    """The order a LaunchPlan belongs to: the one it is named after.

    By name, not by label: a hand-written plan carries no label, and deleting it must still bring
    its order back to be planned.
    """
    meta = plan["metadata"]
    return meta.get("namespace", ""), meta["name"]


class Controller:
    """Reconcile by name, level-triggered; errors back off, timed requeues for what passes on its own."""

    def __init__(
        self,
        kube: KubeCluster,
        orders: OrderReconciler,
        classes: ClassReconciler,
        workers: int = 2,
        registry: CollectorRegistry | None = None,
        room: WaitingRoom | None = None,
        probes: ProbeLoop | None = None,
        holders: Callable[[], Iterable[OrderKey]] | None = None,
    ) -> None:
        self.kube = kube
        self.probes = probes
        self.holders = holders
        self._stopping = threading.Event()
        self.orders = orders
        self.classes = classes
        self.room = room
        self.order_queue: WorkQueue[OrderKey] = WorkQueue()
        self.class_queue: WorkQueue[str] = WorkQueue()
        self.workers = workers
        self._threads: list[threading.Thread] = []
        registry = registry or CollectorRegistry()
        self.passes = Counter(
            "isvc_reconcile_total", "Reconcile passes", ["kind", "result"], registry=registry
        )
        self.latency = Histogram(
            "isvc_reconcile_duration_seconds", "Reconcile pass duration", ["kind"], registry=registry
        )
        self.adds = Counter(
            "isvc_workqueue_adds_total", "Keys handed to a worker", ["kind"], registry=registry
        )
        self.retries = Counter(
            "isvc_workqueue_retries_total", "Keys requeued after a failed pass", ["kind"], registry=registry
        )
        self.timed = Counter(
            "isvc_order_timed_requeues_total",
            "Order passes that asked to be passed again after a delay, by the order's status reason",
            ["reason"],
            registry=registry,
        )
        self.secret_refs = SecretRefs()
        self._running: dict[str, float] = {}  # worker thread name -> when its pass began
        Gauge(
            "isvc_workqueue_longest_running_seconds",
            "How long the longest pass in progress has run",
            registry=registry,
        ).set_function(self.longest_running)
        depth = Gauge("isvc_workqueue_depth", "Keys waiting in a work queue", ["kind"], registry=registry)
        depth.labels("order").set_function(lambda: len(self.order_queue))
        depth.labels("class").set_function(lambda: len(self.class_queue))
        registry.register(OrdersByPhase(lambda: kube.orders.list()))
        self._wire()

    def _wire(self) -> None:
        """Which changes pass which orders: each informer's handler."""
        k = self.kube
        # The index first: an order is in it before its first pass reads the Secrets it names.
        k.orders.add_handler(self.secret_refs.on_order)
        k.orders.add_handler(self._on_order)
        secrets = getattr(k, "secrets", None)
        if secrets is not None:
            secrets.add_handler(self._on_secret)
            secrets.add_relist_handler(self._on_secrets_relisted)
        k.classes.add_handler(self._on_class)
        k.plans.add_handler(lambda _, obj: self.order_queue.add(order_of_plan(obj)))
        children = [k.statefulsets, k.deployments, k.pods, k.ingresses, k.services, k.autoscalers, k.claims]
        unless_off = (
            *(
                getattr(k, "network_policies", None),
                getattr(k, "budgets", None),
                getattr(k, "templates", None),
                getattr(k, "volumes", None),
            ),
            *(getattr(k, "pod_monitors", None), getattr(k, "pod_metrics", None)),
        )
        children += [informer for informer in unless_off if informer is not None]
        for informer in children:
            informer.add_handler(self._by_label)
        scalers = getattr(k, "scalers", None)
        if scalers is not None:
            scalers.add_handler(self._on_scaler)
        k.priority_classes.add_handler(self._on_priority)
        quotas = getattr(k, "quotas", None)
        if quotas is not None:
            quotas.add_handler(self._on_quota)
        for informer in getattr(k, "catalog", []):
            informer.add_handler(self._on_catalog)
        for name in ("pod_metrics", "scaled_objects", "pod_monitors"):
            optional = getattr(k, name, None)
            if optional is not None:
                optional.add_served_handler(self._on_metrics_path_served)

    def _pass(self, order: Obj) -> None:
        self.order_queue.add((order["metadata"].get("namespace", ""), order["metadata"]["name"]))

    def _on_order(self, _: str, obj: Obj) -> None:
        meta, status = obj["metadata"], obj.get("status") or {}
        # A new or edited order goes before the timed retries of orders waiting for room.
        urgent = status.get("observedGeneration") != meta.get("generation")
        self.order_queue.add((meta.get("namespace", ""), meta["name"]), urgent=urgent)

    def _by_label(self, _: str, obj: Obj) -> None:
        """A child: the order its label names."""
        meta = obj["metadata"]
        name = (meta.get("labels") or {}).get(LABEL_ORDER)
        if name:
            self.order_queue.add((meta.get("namespace", ""), name))

    def _on_scaler(self, _: str, obj: Obj) -> None:
        """Any autoscaler aimed at a StatefulSet: the order of that name (an order's set is named after it)."""
        target = obj.get("target") or {}
        if target.get("kind") == "StatefulSet" and target.get("name"):
            self.order_queue.add((obj["metadata"].get("namespace", ""), str(target["name"])))

    def _on_class(self, _: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        self.class_queue.add(name)
        for order in self.kube.orders.list():
            if (order.get("spec") or {}).get("inferenceServiceClassName") == name:
                self._pass(order)

    def _on_catalog(self, _: str, obj: Obj) -> None:
        """A catalog Model or ClusterModel: the orders that name it."""
        meta = obj["metadata"]
        kind, name, home = obj.get("kind"), meta["name"], meta.get("namespace")
        for order in self.kube.orders.list():
            model = (order.get("spec") or {}).get("model") or {}
            ref = model.get("ref") or {}
            here = order["metadata"].get("namespace")
            where = (ref.get("namespace") or here) if kind == "Model" else None
            named = model.get("src") == "AIModels" and (ref.get("kind"), ref.get("name")) == (kind, name)
            if named and where == home:
                self._pass(order)

    def _on_priority(self, _: str, obj: Obj) -> None:
        for klass in self.kube.classes.list():
            if (klass.get("spec") or {}).get("priorityClassName") == obj["metadata"]["name"]:
                self._on_class("SYNC", klass)

    def _on_secret(self, _: str, obj: Obj) -> None:
        meta = obj["metadata"]
        for key in self.secret_refs.orders(meta.get("namespace", ""), meta["name"]):
            self.order_queue.add(key)

    def _on_secrets_relisted(self) -> None:
        # A broken watch of Secrets may have missed a change: every order naming one is passed again.
        for key in self.secret_refs.all():
            self.order_queue.add(key)

    def _on_quota(self, _: str, obj: Obj) -> None:
        # A namespace's quota changed: its orders whose workload is not up are judged again (a refusal by
        # the quota stands or lifts on that pass; nothing else waits on a timer for it).
        for order in self.kube.orders.list(obj["metadata"].get("namespace", "")):
            if not _workload_up(order):
                self._pass(order)

    def _on_metrics_path_served(self) -> None:
        # The cluster now serves a kind the autoscaler is built from (its adapter installed after the
        # module): every order is passed, so one scaling on CPU moves to the runtime's own signal.
        for order in self.kube.orders.list():
            self._pass(order)

    def start(self) -> None:
        """Start the informers, then the workers: `workers` for orders, one for classes."""
        self.kube.start()
        for i in range(self.workers):
            self._spawn(f"order-worker-{i}", self.order_queue, "order", self._order_pass)
        self._spawn("class-worker", self.class_queue, "class", self._class_pass)
        if self.probes is not None:
            self.probes.on_change(lambda namespace, name: self.order_queue.add((namespace, name)))
            self.probes.start()
        if self.room is not None:  # waiting orders are passed when room may have appeared, not on a timer
            self.room.start(lambda namespace, name: self.order_queue.add((namespace, name)))
        if self.holders is not None:
            threading.Thread(target=self.sweep, name="reservation-sweep", daemon=True).start()

    def sweep(self) -> bool:
        """Pass each order the planner holds room for that no longer exists: its pass releases the room.

        A leader killed between the planner's reservation and the LaunchPlan, its order deleted before a
        new leader ran, leaves room held that no object in the API points to. Retried while the planner
        does not answer; True once it answered.
        """
        assert self.holders is not None
        for _ in range(SWEEP_TRIES):
            try:
                holders = list(self.holders())
            except Exception as exc:  # the planner is down or starting: ask again
                log.info(
                    "the planner did not list its reservations (%s); asking again in %.0fs",
                    type(exc).__name__,
                    SWEEP_RETRY,
                )
                if self._stopping.wait(SWEEP_RETRY):
                    return False
                continue
            for namespace, name in holders:
                if self.kube.orders.get(namespace, name) is None:
                    self.order_queue.add((namespace, name))
            return True
        return False

    def stop(self) -> None:
        """Stop the probes, the workers and the informers."""
        self._stopping.set()
        if self.probes is not None:
            self.probes.stop()
        if self.room is not None:
            self.room.stop()
        self.order_queue.shut_down()
        self.class_queue.shut_down()
        self.kube.stop()

    def _spawn(self, name: str, queue: WorkQueue[K], kind: str, one: Callable[[K], None]) -> None:
        thread = threading.Thread(target=self._work, args=(queue, kind, one), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _order_pass(self, key: OrderKey) -> None:
        result = self.orders.reconcile(*key)
        for other in result.wake:
            self.order_queue.add(other)
        if result.failed:
            raise _PassFailed
        if result.requeue_after is not None:
            self.timed.labels(result.reason or "").inc()
            self.order_queue.add_after(key, result.requeue_after)

    def _class_pass(self, name: str) -> None:
        self.classes.reconcile(name)

    def longest_running(self) -> float:
        """Seconds the longest pass in progress has run; 0 when every worker waits (a stuck pass shows)."""
        started = list(self._running.values())
        return max(time.monotonic() - min(started), 0.0) if started else 0.0

    def _work(self, queue: WorkQueue[K], kind: str, one: Callable[[K], None]) -> None:
        me = threading.current_thread().name
        while True:
            try:
                key = queue.get()
            except ShutDownError:
                return
            if key is None:
                continue
            started = time.monotonic()
            self._running[me] = started
            self.adds.labels(kind).inc()
            try:
                one(key)
                queue.forget(key)
                self.passes.labels(kind, "ok").inc()
            except _PassFailed:
                queue.add_rate_limited(key)  # the step that failed logged why and said so in status
                self.passes.labels(kind, "error").inc()
                self.retries.labels(kind).inc()
            except Exception as exc:
                if getattr(exc, "status", None) == 404:  # deleted while the pass ran: the next pass says done
                    queue.add(key)
                    continue
                backoff = queue.add_rate_limited(key)
                log.exception("%s %s failed; retry in %.1fs", kind, key, backoff)
                self.passes.labels(kind, "error").inc()
                self.retries.labels(kind).inc()
            finally:
                self._running.pop(me, None)
                self.latency.labels(kind).observe(time.monotonic() - started)
                queue.done(key)


def _workload_up(order: Obj) -> bool:
    """Whether the order's status says its workload is up (WorkloadReady True)."""
    return (condition_of(order, ConditionType.WORKLOAD_READY.value) or {}).get("status") == "True"


class OrdersByPhase(Collector):
    """`isvc_orders{phase,reason}`: the orders the cache holds, by phase and the reason of their first
    condition that is not True — counted when scraped, from the cache (no API call)."""

    def __init__(self, orders: Callable[[], list[Obj]]) -> None:
        self.orders = orders

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "isvc_orders",
            "Orders by phase and by the reason of the first condition that is not True",
            labels=["phase", "reason"],
        )
        counts: dict[tuple[str, str], int] = {}
        for order in self.orders():
            status = order.get("status") or {}
            key = (str(status.get("phase") or "Pending"), str(status.get("reason") or ""))
            counts[key] = counts.get(key, 0) + 1
        for (phase, reason), count in sorted(counts.items()):
            family.add_metric([phase, reason], count)
        yield family


class _PassFailed(Exception):
    """A step raised; its condition says NotJudged and the pass backs off."""
