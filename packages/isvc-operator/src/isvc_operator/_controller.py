"""The controller: informers feed a work queue; workers reconcile orders and classes by name."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from isvc_api import (
    GROUP,
    LABEL_ORDER,
    MANAGER,
    VERSION,
    ClassReason,
    Condition,
    InferenceServiceClass,
    InferenceServiceClassStatus,
    now,
    set_condition,
)
from prometheus_client import CollectorRegistry, Counter, Histogram

from isvc_operator._kube import KubeCluster
from isvc_operator._policy import judge_class
from isvc_operator._queue import ShutDownError, WorkQueue
from isvc_operator._reconcile import Reconciler, TemporaryError

__all__ = ["ClusterAdapter", "Controller", "order_of_plan"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name): "order" or "class"
GV = f"{GROUP}/{VERSION}"
# When a claim goes, orders waiting for room are passed again after this long: the planner watches
# claims on its own, and one second lets it see the room before they ask.
WAKE_AFTER = 1.0


def order_of_plan(plan: Obj) -> tuple[str, str]:
    """The order a LaunchPlan belongs to: the one it is named after.

    By name, not by label: a hand-written plan carries no label, and deleting it must still bring
    its order back to be planned.
    """
    meta = plan["metadata"]
    return meta.get("namespace", ""), meta["name"]


class ClusterAdapter:
    """The reconciler's Cluster port over KubeCluster: cached reads where informers hold the kind."""

    def __init__(self, kube: KubeCluster) -> None:
        self.kube = kube
        self._owned = {
            "Deployment": kube.deployments, "Pod": kube.pods, "ResourceClaim": kube.claims,
            "ResourceClaimTemplate": kube.templates,
        }

    def order(self, namespace: str, name: str) -> Obj | None:
        return self.kube.get(GV, "InferenceService", namespace, name)

    def klass(self, name: str) -> Obj | None:
        return self.kube.classes.get(None, name)

    def priority_class_exists(self, name: str) -> bool:
        return self.kube.priority_classes.get(None, name) is not None

    def get_secret(self, namespace: str, name: str) -> Obj | None:
        return self.kube.get_secret(namespace, name)

    def launch_plan(self, namespace: str, name: str) -> Obj | None:
        return self.kube.get(GV, "LaunchPlan", namespace, name)

    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]:
        return [o for o in self._owned[kind].list(namespace)
                if (o["metadata"].get("labels") or {}).get(LABEL_ORDER) == order]

    def apply(self, manifest: Obj) -> Obj:
        return self.kube.apply(manifest)

    def apply_status(self, manifest: Obj) -> Obj:
        return self.kube.apply_status(manifest)

    def create(self, manifest: Obj) -> Obj:
        return self.kube.create(manifest)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self.kube.delete(api_version, kind, namespace, name)

    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None:
        return self.kube.read_log(namespace, pod, container, lines)

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        self.kube.event(involved, type_, reason, message)


class Controller:
    """Reconcile by name, level-triggered; errors back off, timed requeues for what passes on its own."""

    def __init__(
        self,
        kube: KubeCluster,
        reconciler: Reconciler,
        selector_error: Callable[[str], str | None],
        workers: int = 2,
        registry: CollectorRegistry | None = None,
        waiting: Callable[[], Iterable[tuple[str, str]]] = tuple,
    ) -> None:
        self.kube = kube
        self.waiting = waiting
        self.reconciler = reconciler
        self.selector_error = selector_error
        self.queue: WorkQueue[Key] = WorkQueue()
        self.workers = workers
        self._threads: list[threading.Thread] = []
        registry = registry or CollectorRegistry()
        self.passes = Counter("isvc_reconcile_total", "Reconcile passes", ["kind", "result"],
                              registry=registry)
        self.latency = Histogram("isvc_reconcile_seconds", "Reconcile pass duration", ["kind"],
                                 registry=registry)
        self._wire()

    def _wire(self) -> None:
        k = self.kube

        def order_key(obj: Obj) -> None:
            meta = obj["metadata"]
            self.queue.add(("order", meta.get("namespace", ""), meta["name"]))

        def by_label(_: str, obj: Obj) -> None:
            meta = obj["metadata"]
            name = (meta.get("labels") or {}).get(LABEL_ORDER)
            if name:
                self.queue.add(("order", meta.get("namespace", ""), name))

        def on_claim(event: str, obj: Obj) -> None:
            by_label(event, obj)
            if event == "DELETED":  # room freed: orders waiting for room try again, once the planner saw it
                for namespace, name in self.waiting():
                    self.queue.add_after(("order", namespace, name), WAKE_AFTER)

        def on_class(_: str, obj: Obj) -> None:
            name = obj["metadata"]["name"]
            self.queue.add(("class", "", name))
            for order in k.orders.list():
                if (order.get("spec") or {}).get("inferenceServiceClassName") == name:
                    order_key(order)

        def on_priority(_: str, obj: Obj) -> None:
            for klass in k.classes.list():
                if (klass.get("spec") or {}).get("priorityClassName") == obj["metadata"]["name"]:
                    on_class("SYNC", klass)

        k.orders.add_handler(lambda _, obj: order_key(obj))
        k.classes.add_handler(on_class)
        k.plans.add_handler(lambda _, obj: self.queue.add(("order", *order_of_plan(obj))))
        for informer in (k.deployments, k.pods):
            informer.add_handler(by_label)
        k.claims.add_handler(on_claim)
        k.priority_classes.add_handler(on_priority)

    def start(self) -> None:
        """Start the informers, then the workers."""
        self.kube.start()
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop the workers and the informers."""
        self.queue.shut_down()
        self.kube.stop()

    def _work(self) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDownError:
                return
            if key is None:
                continue
            kind, namespace, name = key
            started = time.monotonic()
            try:
                if kind == "class":
                    delay = self.reconcile_class(name)
                else:
                    delay = self.reconciler.reconcile(namespace, name)
                self.queue.forget(key)
                if delay is not None:
                    self.queue.add_after(key, delay)
                self.passes.labels(kind, "ok").inc()
            except TemporaryError as exc:
                backoff = self.queue.add_rate_limited(key)
                log.info("%s %s/%s: %s; retry in %.1fs", kind, namespace, name, exc, backoff)
                self.passes.labels(kind, "retry").inc()
            except Exception as exc:
                if getattr(exc, "status", None) == 404 and self._gone(kind, namespace, name):
                    self.queue.forget(key)  # deleted while the pass ran: NotFound means done
                    continue
                backoff = self.queue.add_rate_limited(key)
                log.exception("%s %s/%s failed; retry in %.1fs", kind, namespace, name, backoff)
                self.passes.labels(kind, "error").inc()
            finally:
                self.latency.labels(kind).observe(time.monotonic() - started)
                self.queue.done(key)

    def _gone(self, kind: str, namespace: str, name: str) -> bool:
        """Whether the object a key names no longer exists."""
        if kind == "class":
            return self.kube.get(GV, "InferenceServiceClass", None, name) is None
        return self.kube.get(GV, "InferenceService", namespace, name) is None

    def reconcile_class(self, name: str) -> float | None:
        """Judge a class and write its Ready condition."""
        raw = self.kube.get(GV, "InferenceServiceClass", None, name)
        if raw is None:
            return None
        klass = InferenceServiceClass.model_validate(raw)
        spec = klass.spec
        pc_exists = (self.kube.priority_classes.get(None, spec.priority_class_name) is not None
                     if spec.priority_class_name else None)
        selector = spec.accelerator_policy.selector if spec.accelerator_policy else None
        sel_error = self.selector_error(selector) if selector else None
        reason, message = judge_class(spec, pc_exists, sel_error)
        previous = klass.status.conditions if klass.status else []
        conditions = set_condition(previous, Condition(
            type="Ready", status="True" if reason == ClassReason.READY else "False",
            reason=reason.value, message=message, observed_generation=klass.metadata.generation,
        ), at=now())
        status = InferenceServiceClassStatus(observed_generation=klass.metadata.generation,
                                             conditions=conditions)
        self.kube.apply_status({"apiVersion": GV, "kind": "InferenceServiceClass",
                                "metadata": {"name": name}, "status": status.to_wire()})
        log.debug("class %s: %s (%s)", name, reason.value, MANAGER)
        return None
