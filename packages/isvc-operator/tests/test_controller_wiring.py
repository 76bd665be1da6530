"""The controller's informer wiring: which changes queue which orders (no cluster: informers stand in)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from isvc_api import LABEL_ORDER
from isvc_operator import ClassReconciler, Controller, KubeCluster, OrderReconciler, OrdersByPhase
from prometheus_client import CollectorRegistry

Obj = dict[str, Any]


class Informer:
    """Handlers and a list, as the controller uses an informer."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []
        self.served_handlers: list[Any] = []
        self.items: list[Obj] = []

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def add_served_handler(self, handler: Any) -> None:
        self.served_handlers.append(handler)

    def list(self, namespace: str | None = None) -> list[Obj]:
        return [o for o in self.items if namespace is None or o["metadata"].get("namespace") == namespace]

    def get(self, namespace: str, name: str) -> Obj | None:
        return next(
            (
                o
                for o in self.items
                if (o["metadata"]["namespace"], o["metadata"]["name"]) == (namespace, name)
            ),
            None,
        )

    def emit(self, event: str, obj: Obj) -> None:
        for handler in self.handlers:
            handler(event, obj)


def controller(waiting: list[tuple[str, str]]) -> tuple[Controller, Any]:
    names = (
        "orders",
        "classes",
        "plans",
        "statefulsets",
        "deployments",
        "pods",
        "claims",
        "ingresses",
        "services",
        "autoscalers",
        "priority_classes",
    )
    kube = SimpleNamespace(**{n: Informer() for n in names})
    c = Controller(
        cast(KubeCluster, kube),
        cast(OrderReconciler, None),
        cast(ClassReconciler, None),
        registry=CollectorRegistry(),
    )
    return c, kube


def claim(order: str) -> Obj:
    return {"metadata": {"namespace": "ns", "name": f"{order}-gpu", "labels": {LABEL_ORDER: order}}}


def drain(c: Controller, timeout: float) -> set[tuple[str, str]]:
    keys = set()
    while (key := c.order_queue.get(timeout=timeout)) is not None:
        keys.add(key)
        c.order_queue.done(key)
    return keys


def test_a_claim_going_away_passes_only_its_own_order_the_planners_room_wakes_the_waiting() -> None:
    """Issue 26: the room is passed when the planner's ledger frees room (any claim, slice, node or class
    it watches), in one call for every waiting order, not each waiting order on every claim of ours."""
    c, kube = controller([("ns", "wait-1"), ("other", "wait-2")])
    kube.claims.emit("DELETED", claim("blocker"))
    assert drain(c, 1.5) == {("ns", "blocker")}


def test_a_claim_that_changes_passes_only_its_own_order() -> None:
    c, kube = controller([("ns", "wait-1")])
    kube.claims.emit("MODIFIED", claim("blocker"))
    assert drain(c, 1.5) == {("ns", "blocker")}


def test_orders_and_classes_wait_in_queues_of_their_own() -> None:
    c, kube = controller([])
    kube.classes.emit("ADDED", {"metadata": {"name": "default-llm"}})
    kube.orders.emit("ADDED", {"metadata": {"namespace": "ns", "name": "chat"}})
    assert c.class_queue.get(timeout=0.2) == "default-llm"
    assert drain(c, 0.2) == {("ns", "chat")}


def test_a_new_order_is_passed_before_the_retries_already_waiting() -> None:
    """Issue 18: with 130 orders waiting for room a new order got its answer after 15.5 s, queued behind
    every waiting order's pass."""
    c, kube = controller([])
    for i in range(200):
        c.order_queue.add(("ns", f"waiting-{i}"))
    kube.orders.emit("ADDED", {"metadata": {"namespace": "ns", "name": "new", "generation": 1}})
    kube.orders.emit(
        "MODIFIED",
        {
            "metadata": {"namespace": "ns", "name": "waiting-7", "generation": 1},
            "status": {"observedGeneration": 1},
        },
    )  # a status write: not urgent
    assert c.order_queue.get(timeout=0.1) == ("ns", "new")
    assert c.order_queue.get(timeout=0.1) == ("ns", "waiting-0")


def test_orders_are_counted_by_phase_and_reason_from_the_cache() -> None:
    _, kube = controller([])
    kube.orders.items = [
        {"metadata": {"name": "a"}, "status": {"phase": "Ready"}},
        {"metadata": {"name": "b"}, "status": {"phase": "Pending", "reason": "NoCapacity"}},
        {"metadata": {"name": "c"}, "status": {"phase": "Pending", "reason": "NoCapacity"}},
        {"metadata": {"name": "d"}},
    ]
    registry = CollectorRegistry()
    registry.register(OrdersByPhase(kube.orders.list))
    assert registry.get_sample_value("isvc_orders", {"phase": "Pending", "reason": "NoCapacity"}) == 2
    assert registry.get_sample_value("isvc_orders", {"phase": "Ready", "reason": ""}) == 1
    assert registry.get_sample_value("isvc_orders", {"phase": "Pending", "reason": ""}) == 1


def test_the_queues_report_their_depth_and_passes_their_duration() -> None:
    registry = CollectorRegistry()
    names = (
        "orders",
        "classes",
        "plans",
        "statefulsets",
        "deployments",
        "pods",
        "claims",
        "ingresses",
        "services",
        "autoscalers",
        "priority_classes",
    )
    kube = SimpleNamespace(**{n: Informer() for n in names})
    c = Controller(
        cast(KubeCluster, kube), cast(OrderReconciler, None), cast(ClassReconciler, None), registry=registry
    )
    c.order_queue.add(("ns", "a"))
    c.order_queue.add(("ns", "b"))
    assert registry.get_sample_value("isvc_workqueue_depth", {"kind": "order"}) == 2
    assert registry.get_sample_value("isvc_reconcile_duration_seconds_count", {"kind": "order"}) is None


def test_a_catalog_model_that_changes_passes_the_orders_that_name_it() -> None:
    """Issue 12: ModelNotReady lifted on a 15 s retry, ModelNotFound only on the 5-minute resync."""
    c, kube = controller([])
    kube.catalog = [Informer()]
    c = Controller(
        cast(KubeCluster, kube),
        cast(OrderReconciler, None),
        cast(ClassReconciler, None),
        registry=CollectorRegistry(),
    )
    kube.orders.items = [
        {
            "metadata": {"namespace": "ns", "name": "uses-it"},
            "spec": {"model": {"src": "AIModels", "ref": {"kind": "Model", "name": "qwen"}}},
        },
        {
            "metadata": {"namespace": "other", "name": "same-name-elsewhere"},
            "spec": {"model": {"src": "AIModels", "ref": {"kind": "Model", "name": "qwen"}}},
        },
        {
            "metadata": {"namespace": "ns", "name": "hub"},
            "spec": {"model": {"src": "HuggingFace", "ref": {"name": "qwen"}}},
        },
    ]
    kube.catalog[0].emit("MODIFIED", {"kind": "Model", "metadata": {"namespace": "ns", "name": "qwen"}})
    assert drain(c, 0.2) == {("ns", "uses-it")}


def test_a_new_leader_passes_orders_the_planner_holds_room_for_that_are_gone(monkeypatch: Any) -> None:
    """Issue 15: a leader killed between reserving and writing the plan left room no object points to."""
    import isvc_operator._controller as module

    monkeypatch.setattr(module, "SWEEP_RETRY", 0.01)
    answers: list[Any] = [
        ConnectionError("planner starting"),
        [("team-a", "here"), ("team-a", "gone"), ("team-b", "gone-too")],
    ]

    def holders() -> list[tuple[str, str]]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return cast(list[tuple[str, str]], answer)

    c, kube = controller([])
    c.holders = holders
    kube.orders.items.append({"metadata": {"namespace": "team-a", "name": "here"}})
    assert c.sweep() is True
    assert drain(c, 0.2) == {("team-a", "gone"), ("team-b", "gone-too")}


def test_a_pass_in_progress_shows_in_the_longest_running_gauge() -> None:
    """Issue 15: a stuck pass was invisible; the gauge reads how long the oldest pass in progress has run."""
    import threading
    import time

    from isvc_operator import PassResult

    entered, release = threading.Event(), threading.Event()

    class Slow:
        def reconcile(self, namespace: str, name: str) -> PassResult:
            entered.set()
            release.wait(10)
            return PassResult()

    c, _ = controller([])
    c.orders = cast(OrderReconciler, Slow())
    c._spawn("order-worker-test", c.order_queue, "order", c._order_pass)
    assert c.longest_running() == 0.0
    c.order_queue.add(("ns", "slow"))
    assert entered.wait(5)
    time.sleep(0.3)
    assert c.longest_running() >= 0.3
    release.set()
    deadline = time.monotonic() + 5
    while c.longest_running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.longest_running() == 0.0
    c.order_queue.shut_down()


def test_a_metrics_path_installed_after_the_controller_passes_every_order() -> None:
    """An order planned before the cluster served PodMetric scaled on CPU and was never passed again: installing
    the metrics adapter after the module left it on CPU until the hourly replay."""
    c, kube = controller([])
    kube.pod_metrics = Informer()
    c = Controller(
        cast(KubeCluster, kube),
        cast(OrderReconciler, None),
        cast(ClassReconciler, None),
        registry=CollectorRegistry(),
    )
    kube.orders.items = [
        {"metadata": {"namespace": "ns", "name": "grows"}},
        {"metadata": {"namespace": "other", "name": "steady"}},
    ]
    assert drain(c, 0.1) == set()
    [served] = kube.pod_metrics.served_handlers
    served()
    assert drain(c, 0.2) == {("ns", "grows"), ("other", "steady")}


def test_a_quota_that_changes_passes_the_orders_of_its_namespace_whose_workload_is_not_up() -> None:
    """Issue 27: a raised quota lifted its refusal only after the cluster's own retry delay (~4 min)."""
    c, kube = controller([])
    kube.quotas = Informer()
    c = Controller(
        cast(KubeCluster, kube),
        cast(OrderReconciler, None),
        cast(ClassReconciler, None),
        registry=CollectorRegistry(),
    )

    def order(namespace: str, name: str, workload: str | None) -> Obj:
        conditions = [{"type": "WorkloadReady", "status": workload}] if workload else []
        return {"metadata": {"namespace": namespace, "name": name}, "status": {"conditions": conditions}}

    kube.orders.items = [
        order("ns", "refused", "False"),
        order("ns", "new", None),
        order("ns", "serving", "True"),
        order("other", "refused-elsewhere", "False"),
    ]
    kube.quotas.emit("MODIFIED", {"metadata": {"namespace": "ns", "name": "gpus"}})
    assert drain(c, 0.2) == {("ns", "refused"), ("ns", "new")}
