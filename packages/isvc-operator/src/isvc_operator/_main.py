"""`isvc-controller`: run the controller out of the cluster (kubeconfig) or in it (service account)."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import isvc_catalog
import isvc_health
import isvc_planner_client
import isvc_runtime_recipes
import isvc_workload
import yaml
from isvc_api import ConditionType, LoadMetrics, Reason, conditions_of
from prometheus_client import REGISTRY, Counter, Gauge, start_http_server

from isvc_operator._adapters import CatalogModels, Health, PlannerService, Workload
from isvc_operator._class import ClassReconciler
from isvc_operator._controller import Controller
from isvc_operator._estimate import Estimator
from isvc_operator._flags import parser
from isvc_operator._kube import KubeCluster, api_client
from isvc_operator._leader import LeaderElector
from isvc_operator._order import OrderReconciler
from isvc_operator._ports import Deps
from isvc_operator._recipes import Recipes
from isvc_operator._rollout import RollPacer, StartWaiters
from isvc_operator._seal import Sealer
from isvc_operator._waiting import WaitingRoom
from isvc_operator._webhook import serve_estimates, serve_health

__all__ = ["build", "main", "parser"]

log = logging.getLogger("isvc_operator")


def _recipes(path: Path | None) -> Recipes:
    extra = yaml.safe_load(path.read_text()) if path else None
    version = hashlib.sha256(json.dumps(extra or [], sort_keys=True).encode()).hexdigest()[:12]
    return Recipes(isvc_runtime_recipes.load_recipes(extra or None), version)


def _health(args: argparse.Namespace) -> Health:
    seam: Any = (
        isvc_health.TemplateResolver(args.probe_url_template)
        if args.probe_url_template
        else isvc_health.ServiceDNSResolver()
    )
    settings = isvc_health.HealthSettings(
        failure_threshold=args.health_failure_threshold,
        sustained_seconds=args.health_period_seconds * (args.health_failure_threshold - 1),
    )
    prober = isvc_health.Prober(seam, metrics=isvc_health.ProbeMetrics(REGISTRY))
    schedule = isvc_health.ProbeSchedule(prober, args.health_period_seconds, workers=args.probe_workers)
    Gauge("isvc_health_probed_orders", "Served orders probed between passes", registry=REGISTRY).set_function(
        lambda: len(schedule)
    )
    return Health(prober=prober, settings=settings, period=args.health_period_seconds, schedule=schedule)


def _selector_error(judge: isvc_planner_client.CelJudge) -> Callable[[str], str | None]:
    def error(expression: str) -> str | None:
        try:
            judge.check(expression)
            return None
        except isvc_planner_client.SelectorError as exc:
            return str(exc)

    return error


def _kube(args: argparse.Namespace) -> KubeCluster:
    """The API server, each request counted by verb and answer code."""
    requests = Counter(
        "isvc_api_requests_total",
        "Requests to the Kubernetes API by verb and answer code",
        ["verb", "code"],
        registry=REGISTRY,
    )
    return KubeCluster(
        api_client(args.kubeconfig),
        catalog_enabled=args.catalog_mode != "None",
        requests=lambda verb, code: requests.labels(verb, code).inc(),
        resync=args.resync_seconds or None,
    )


def _models(args: argparse.Namespace, kube: KubeCluster) -> CatalogModels:
    """Model resolution: the Hugging Face Hub, and the ai-models catalog unless it is off."""
    catalog = None
    if args.catalog_mode != "None":
        catalog = isvc_catalog.CatalogReader(isvc_catalog.KubeCatalogApi(kube.api))
    hub = isvc_catalog.HubClient(
        args.huggingface_endpoint, limits=isvc_catalog.HubLimits(deadline=args.hub_deadline_seconds)
    )
    return CatalogModels(isvc_catalog.Resolver(hub, catalog))


def _workload(args: argparse.Namespace, kube: KubeCluster, recipes: Recipes) -> Workload:
    """The children's builder and judge, with what it asks of the cluster as it is now (discovery)."""
    settings = isvc_workload.WorkloadSettings(
        public_domain_template=args.public_domain_template,
        cluster_issuer_name=args.cluster_issuer,
        model_fetch_image=args.model_fetch_image,
        meter_image=args.meter_image or None,
        model_volume_storage_class=(args.model_volume_storage_class or None),
        huggingface_endpoint=args.huggingface_endpoint,
        model_cache_endpoint=args.model_cache_endpoint or None,
        controller_namespace=args.namespace,
        ingress_controller_namespaces=tuple(args.ingress_controller_namespace or ("d8-ingress-nginx",)),
        monitoring_namespaces=tuple(args.monitoring_namespace or ("d8-monitoring",)),
        start_gate_wait_seconds=args.start_gate_wait_seconds,
    )

    def cert_manager() -> bool:
        if args.cert_manager is not None:
            return bool(args.cert_manager)
        return kube.served("cert-manager.io/v1", "Certificate")

    def metrics_apis() -> isvc_workload.MetricsApis:
        """Which metrics paths the cluster serves now (discovery; a kind installed later is found)."""
        return isvc_workload.MetricsApis(
            pod_metric=kube.served("deckhouse.io/v1alpha1", "PodMetric"),
            scaled_object=kube.served("keda.sh/v1alpha1", "ScaledObject"),
            pod_monitor=kube.served("monitoring.coreos.com/v1", "PodMonitor"),
            prometheus_url=args.autoscaling_prometheus_url or None,
        )

    def recipe_load(name: str) -> LoadMetrics | None:
        recipe = recipes.book.get(name)
        return recipe.load_metrics if recipe is not None else None

    return Workload(settings, cert_manager, kube.priority_value, metrics_apis, recipe_load)


def _still_waiting(kube: KubeCluster) -> Callable[[str, str, str | None, bool], bool]:
    """Whether the waiting room still holds an order, read from the cache."""

    def still_waiting(namespace: str, name: str, uid: str | None, holding: bool) -> bool:
        """The order is still there (the same one) and still has no plan; or, holding one, still waits to move
        off it: the scheduler could not allocate its claim, or a recomputation found no room (in force)."""
        obj = kube.orders.get(namespace, name)
        if obj is None or uid not in (None, obj["metadata"].get("uid")):
            return False
        if kube.plans.get(namespace, name) is None:  # no plan, or the one it held was taken down: it waits
            return True
        if not holding:
            return False
        said = {c.get("type"): c.get("reason") for c in conditions_of(obj)}
        return (
            said.get(ConditionType.WORKLOAD_READY.value) == Reason.RESOURCE_CLAIM_EXHAUSTED.value
            or said.get(ConditionType.PLANNED.value) == Reason.LAUNCH_PLAN_IN_FORCE.value
        )

    return still_waiting


def _room_gauges(room: WaitingRoom) -> None:
    Gauge(
        "isvc_orders_waiting_for_room",
        "Orders refused for want of room, planned together when room may appear",
        registry=REGISTRY,
    ).set_function(lambda: len(room.waiting()))
    Gauge(
        "isvc_waiting_room_passes",
        "Passes of the waiting room since the controller started: each one plan_many of every waiting order",
        registry=REGISTRY,
    ).set_function(lambda: room.passes)


def _restores_counter() -> Callable[[str, str, str], None]:
    """isvc_child_restores_total: the children someone else changed and the module restored, per order."""
    counter = Counter(
        "isvc_child_restores_total",
        "Children of an order someone other than the module changed, restored",
        ["namespace", "order", "kind"],
        registry=REGISTRY,
    )
    return lambda namespace, order, kind: counter.labels(namespace, order, kind).inc()


def build(args: argparse.Namespace) -> tuple[Controller, Deps]:
    """Wire the controller from flags; the dependencies are shared with the estimate webhook."""
    kube = _kube(args)
    recipes = _recipes(args.runtime_recipes)
    client = isvc_planner_client.PlannerClient(
        args.planner_url, token_file=args.planner_token_file, ca_file=args.planner_ca_file
    )
    room = WaitingRoom(client, still_waiting=_still_waiting(kube), period=args.waiting_room_seconds)
    health = _health(args)
    deps = Deps(
        cluster=kube,
        models=_models(args, kube),
        recipes=recipes,
        planner=PlannerService(client, room),
        workload=_workload(args, kube, recipes),
        health=health,
        catalog_enabled=args.catalog_mode != "None",
        sealer=Sealer.from_file(args.seal_key_file),
        rolls=RollPacer(),
        start_waiters=StartWaiters(),
        namespace=args.namespace,
        start_turn_seconds=args.start_turn_seconds,
        restored=_restores_counter(),
    )
    controller = Controller(
        kube,
        OrderReconciler(deps),
        ClassReconciler(kube, _selector_error(isvc_planner_client.CelJudge())),
        workers=args.workers,
        registry=REGISTRY,
        room=room,
        probes=health.schedule,
        holders=lambda: [(r.order.namespace, r.order.name) for r in client.reservations()],
    )
    _room_gauges(room)
    return controller, deps


def _webhook(args: argparse.Namespace, deps: Deps) -> ThreadingHTTPServer | None:
    """The estimate webhook, when a port is given. Every replica answers estimates (the Service picks any): a
    standby reads classes live."""
    if not args.webhook_port:
        return None
    return serve_estimates(
        args.webhook_host,
        args.webhook_port,
        args.webhook_cert_dir,
        Estimator(deps),
        client_ca=args.webhook_client_ca,
        client_names=tuple(args.webhook_client_name),
        max_connections=args.webhook_max_connections,
    )


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ready = threading.Event()
    health_server = serve_health(args.health_port, ready) if args.health_port else None
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_host)
    controller, deps = build(args)
    webhook = _webhook(args, deps)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # Ready means the process is up, not that it leads: a rollout must not wait on the old pod's lease.
    ready.set()
    leading = Gauge(
        "isvc_leader", "1 while this process leads (reconciles); a standby reads 0", registry=REGISTRY
    )
    elector = None
    if args.leader_elect:
        elector = LeaderElector(controller.kube.api, args.namespace)
        elector.acquire()
        elector.keep(stop.set)
    leading.set(1)
    controller.start()
    log.info("isvc controller started")
    stop.wait()
    controller.stop()
    if elector is not None:
        elector.stop()
    for server in (health_server, webhook):
        if server is not None:
            server.shutdown()
    return 0
