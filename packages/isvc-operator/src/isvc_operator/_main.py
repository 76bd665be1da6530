"""`isvc-controller`: run the controller out of the cluster (kubeconfig) or in it (service account)."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import isvc_catalog
import isvc_health
import isvc_planner_client
import isvc_runtime_recipes
import isvc_workload
import yaml
from isvc_api import ConditionType, LoadMetrics, Reason
from prometheus_client import REGISTRY, Counter, Gauge, start_http_server

from isvc_operator._adapters import CatalogModels, Health, PlannerService, Recipes, Workload
from isvc_operator._class import ClassReconciler
from isvc_operator._controller import Controller
from isvc_operator._estimate import Estimator
from isvc_operator._kube import KubeCluster, api_client
from isvc_operator._leader import LeaderElector
from isvc_operator._order import OrderReconciler
from isvc_operator._ports import Deps
from isvc_operator._rollout import RollPacer
from isvc_operator._seal import Sealer
from isvc_operator._waiting import WaitingRoom

__all__ = ["main", "parser"]

log = logging.getLogger("isvc_operator")


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def _period(text: str) -> float:
    seconds = float(text)
    if seconds < 1:
        raise argparse.ArgumentTypeError("at least 1 (probe times are kept in whole seconds)")
    return seconds


def parser() -> argparse.ArgumentParser:
    """The flags the module chart passes (module/templates/controller/deployment.yaml)."""
    p = argparse.ArgumentParser(prog="isvc-controller", description=__doc__)
    p.add_argument("--kubeconfig", help="out-of-cluster credentials; absent: the pod's service account")
    p.add_argument("--namespace", default="d8-isvc", help="the module's own namespace")
    p.add_argument("--planner-url", default="https://isvc-planner.d8-isvc.svc:8080")
    p.add_argument(
        "--planner-ca-file",
        type=Path,
        default=None,
        help="the authority the planner's serving certificate is checked against (the chart's Secret "
        "isvc-planner-tls, ca.crt); default: the system's trust store",
    )
    p.add_argument(
        "--planner-token-file",
        type=Path,
        default=isvc_planner_client.SERVICE_ACCOUNT_TOKEN,
        help="bearer token the planner checks (TokenReview), re-read when it rotates; "
        "default: the pod's ServiceAccount token",
    )
    p.add_argument("--catalog-mode", default="AIModels", choices=["AIModels", "None"])
    p.add_argument("--huggingface-endpoint", default=isvc_catalog.DEFAULT_ENDPOINT)
    p.add_argument(
        "--hub-deadline-seconds",
        type=float,
        default=isvc_catalog.HubLimits().deadline,
        help="longest one model resolution may read from the Hub, every request together; past it "
        "the order is InvalidModelSource",
    )
    p.add_argument(
        "--public-domain-template",
        default=None,
        help="e.g. %%s.example.com: External endpoints are <order>--<namespace>.example.com",
    )
    p.add_argument("--cluster-issuer", default=None)
    p.add_argument(
        "--autoscaling-prometheus-url",
        default=None,
        help="Prometheus that KEDA's triggers query, where KEDA (and not Deckhouse's adapter) is served",
    )
    p.add_argument(
        "--cert-manager",
        type=_bool,
        default=None,
        help="whether cert-manager is installed; absent: ask the API server",
    )
    p.add_argument(
        "--health-period-seconds",
        type=_period,
        default=30.0,
        help="how often each served order's inference API is probed, apart from its passes",
    )
    p.add_argument(
        "--probe-workers",
        type=int,
        default=4,
        help="threads that probe served orders (a probe that hangs holds one for its timeout)",
    )
    p.add_argument("--health-failure-threshold", type=int, default=3)
    p.add_argument(
        "--runtime-recipes",
        type=Path,
        default=None,
        help="YAML list of administrator recipes that add to or override the shipped ones",
    )
    p.add_argument(
        "--probe-url-template",
        default=None,
        help="endpoint-resolution seam: where the probe dials, e.g. "
        "http://127.0.0.1:18080/{namespace}/{name}; absent: the order's Service DNS name",
    )
    p.add_argument(
        "--model-fetch-image",
        default=None,
        help="image with the `hf` CLI; when set, an init container downloads Hugging Face models "
        "onto the model volume before the runtime starts",
    )
    p.add_argument(
        "--model-volume-storage-class",
        default=None,
        help="StorageClass of the model volumes of new sets; absent: the cluster's default class",
    )
    p.add_argument(
        "--seal-key-file",
        type=Path,
        default=None,
        help="the key children are sealed with (the chart's Secret): a child whose seal does not hold was "
        "changed by someone else and is restored; absent: a key of this process, so a restart writes "
        "every child again once",
    )
    p.add_argument(
        "--ingress-controller-namespace",
        action="append",
        default=None,
        help="namespace of the ingress controller, admitted to External runtimes' API port (repeatable); "
        "default: d8-ingress-nginx",
    )
    p.add_argument(
        "--monitoring-namespace",
        action="append",
        default=None,
        help="namespace admitted to every runtime's metrics port (repeatable); default: d8-monitoring",
    )
    p.add_argument(
        "--start-turn-seconds",
        type=int,
        default=600,
        help="how long one runtime's start may keep the others sharing its card waiting; then the next starts",
    )
    p.add_argument(
        "--start-gate-wait-seconds",
        type=int,
        default=3600,
        help="how long a runtime on a shared card waits for its turn when no controller hands one out, then "
        "starts without one (written into the pods)",
    )
    p.add_argument("--leader-elect", type=_bool, default=False)
    p.add_argument("--metrics-port", type=int, default=9090)
    p.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        help="address /metrics binds to; 127.0.0.1 behind kube-rbac-proxy in the same pod",
    )
    p.add_argument("--health-port", type=int, default=8081)
    p.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="HTTPS port of the estimate webhook (POST /estimate); 0: not served",
    )
    p.add_argument("--webhook-host", default="0.0.0.0")
    p.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=Path("/etc/isvc/webhook"),
        help="directory with tls.crt and tls.key the estimate webhook serves",
    )
    p.add_argument(
        "--webhook-client-ca",
        type=Path,
        default=None,
        help="PEM authority of the client certificate the API server presents to admission webhooks: every "
        "caller must then present one it signed, with a name of --webhook-client-name, and only such reviews "
        "are believed (their namespace and user: the token Secret an order names is read for an estimate only "
        "then); absent: no caller is asked for a certificate and no review is believed",
    )
    p.add_argument(
        "--webhook-client-name",
        action="append",
        default=[],
        help="the common name of the API server's client certificate (repeatable); with --webhook-client-ca",
    )
    p.add_argument(
        "--webhook-max-connections",
        type=int,
        default=64,
        help="connections the estimate webhook holds at once (each a thread); more are closed at once",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=4,
        help="orders passed at once; a pass mostly waits on the API server and the planner, "
        "so more workers than cores keep a burst or a restart moving (an order is never passed "
        "twice at once)",
    )
    p.add_argument(
        "--waiting-room-seconds",
        type=float,
        default=300.0,
        help="orders waiting for room are planned again together at least this often; otherwise only when "
        "the planner's ledger may have made room (a safety net, not the way waiting orders move)",
    )
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=3600.0,
        help="every order gets a pass this often even when nothing changed, its plan judged again "
        "by the planner (replayed from the cache: no API call); a safety net only — changes "
        "arrive by watch and each wait names its own timer; 0: never",
    )
    p.add_argument("--log-level", default="Info")
    return p


def _serve_health(port: int, ready: threading.Event) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz" or (self.path == "/readyz" and ready.is_set())
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"not ready")

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


_MAX_REVIEW = 1 << 20  # bytes of one AdmissionReview; the API server's own request limit is larger
_HANDSHAKE_SECONDS = 10.0  # a client that has not finished its TLS handshake by then is dropped
_REQUEST_SECONDS = 10.0  # each read or write of a request after the handshake (the API server waits 10 s)


class _TLSThreadingServer(ThreadingHTTPServer):
    """HTTPS where each connection's TLS handshake happens in that connection's own thread, with a deadline,
    and at most `max_connections` connections are held at once.

    `SSLContext.wrap_socket` on the listening socket handshakes inside `accept()`, that is in the one
    accept loop: a client that connects and never speaks stalls every other request. Here the listening
    socket is wrapped with `do_handshake_on_connect=False` and `finish_request` (run in the per-request
    thread) handshakes under `handshake_timeout`; a silent or failing client costs its own thread only, for
    the handshake deadline at most. Issue 29: a thousand silent connections held a thousand threads; past
    `max_connections` a connection is closed as soon as it is accepted, before any thread is started.
    """

    request_queue_size = 128  # connections the kernel queues before accept: a burst is accepted, then judged

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        context: ssl.SSLContext,
        handshake_timeout: float = _HANDSHAKE_SECONDS,
        max_connections: int = 64,
    ) -> None:
        super().__init__(address, handler)
        self.handshake_timeout = handshake_timeout
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self._slots = threading.BoundedSemaphore(max_connections)
        self.turned_away = 0  # connections closed at once, all slots being held

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.turned_away += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        assert isinstance(request, ssl.SSLSocket)
        try:
            request.settimeout(self.handshake_timeout)
            request.do_handshake()
        except OSError as error:  # ssl.SSLError and TimeoutError among them: this client only
            log.debug("estimate webhook: TLS handshake with %s failed: %s", client_address, error)
            return
        super().finish_request(request, client_address)


def _common_name(cert: Any) -> str | None:
    """The subject common name of a peer certificate as `SSLSocket.getpeercert()` gives it."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _serve_estimates(
    host: str,
    port: int,
    cert_dir: Path,
    estimator: Estimator,
    handshake_timeout: float = _HANDSHAKE_SECONDS,
    client_ca: Path | None = None,
    client_names: tuple[str, ...] = (),
    max_connections: int = 64,
) -> _TLSThreadingServer:
    """The estimate webhook over TLS: the API server sends AdmissionReviews of dry-run creations.

    With `client_ca`, a caller must present a certificate it signed (the handshake fails otherwise) whose
    common name is one of `client_names` (403 otherwise): such a review is the API server's, vouched for.
    """
    if client_ca is not None and not client_names:
        raise ValueError("--webhook-client-ca needs --webhook-client-name: the authority may sign others too")

    class Handler(BaseHTTPRequestHandler):
        timeout = _REQUEST_SECONDS  # a client that handshakes and then stalls lets its thread go

        def do_POST(self) -> None:
            vouched = False
            if client_ca is not None:
                name = _common_name(self.connection.getpeercert())
                if name not in client_names:
                    self.send_error(403, "the webhook answers the API server only")
                    return
                vouched = True
            announced = self.headers.get("Content-Length") or "0"
            length = int(announced) if announced.isdigit() else 0
            if self.path.split("?", 1)[0] != "/estimate" or not 0 < length <= _MAX_REVIEW:
                self.send_error(404 if self.path.split("?", 1)[0] != "/estimate" else 413)
                return
            try:
                review = json.loads(self.rfile.read(length))
            except ValueError:
                review = None
            if not isinstance(review, dict):
                self.send_error(400, "not an AdmissionReview")
                return
            body = json.dumps(estimator.review(review, vouched=vouched)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    server = _TLSThreadingServer((host, port), Handler, context, handshake_timeout, max_connections)
    threading.Thread(target=server.serve_forever, name="estimate-webhook", daemon=True).start()
    return server


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


def build(args: argparse.Namespace) -> tuple[Controller, Deps]:
    """Wire the controller from flags; the dependencies are shared with the estimate webhook."""
    requests = Counter(
        "isvc_api_requests_total",
        "Requests to the Kubernetes API by verb and answer code",
        ["verb", "code"],
        registry=REGISTRY,
    )
    kube = KubeCluster(
        api_client(args.kubeconfig),
        catalog_enabled=args.catalog_mode != "None",
        requests=lambda verb, code: requests.labels(verb, code).inc(),
        resync=args.resync_seconds or None,
    )
    catalog = None
    if args.catalog_mode != "None":
        catalog = isvc_catalog.CatalogReader(isvc_catalog.KubeCatalogApi(kube.api))
    hub = isvc_catalog.HubClient(
        args.huggingface_endpoint, limits=isvc_catalog.HubLimits(deadline=args.hub_deadline_seconds)
    )
    resolver = isvc_catalog.Resolver(hub, catalog)
    settings = isvc_workload.WorkloadSettings(
        public_domain_template=args.public_domain_template,
        cluster_issuer_name=args.cluster_issuer,
        model_fetch_image=args.model_fetch_image,
        model_volume_storage_class=(args.model_volume_storage_class or None),
        huggingface_endpoint=args.huggingface_endpoint,
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

    recipes = _recipes(args.runtime_recipes)

    def recipe_load(name: str) -> LoadMetrics | None:
        recipe = recipes.book.get(name)
        return recipe.load_metrics if recipe is not None else None

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
        said = {c.get("type"): c.get("reason") for c in (obj.get("status") or {}).get("conditions") or []}
        return (
            said.get(ConditionType.WORKLOAD_READY.value) == Reason.RESOURCE_CLAIM_EXHAUSTED.value
            or said.get(ConditionType.PLANNED.value) == Reason.LAUNCH_PLAN_IN_FORCE.value
        )

    client = isvc_planner_client.PlannerClient(
        args.planner_url, token_file=args.planner_token_file, ca_file=args.planner_ca_file
    )
    room = WaitingRoom(client, still_waiting=still_waiting, period=args.waiting_room_seconds)
    health = _health(args)
    deps = Deps(
        cluster=kube,
        models=CatalogModels(resolver),
        recipes=recipes,
        planner=PlannerService(client, room),
        workload=Workload(settings, cert_manager, kube.priority_value, metrics_apis, recipe_load),
        health=health,
        catalog_enabled=catalog is not None,
        sealer=Sealer.from_file(args.seal_key_file),
        rolls=RollPacer(),
        namespace=args.namespace,
        start_turn_seconds=args.start_turn_seconds,
    )
    classes = ClassReconciler(kube, _selector_error(isvc_planner_client.CelJudge()))

    def holders() -> list[tuple[str, str]]:
        return [(r.order.namespace, r.order.name) for r in client.reservations()]

    controller = Controller(
        kube,
        OrderReconciler(deps),
        classes,
        workers=args.workers,
        registry=REGISTRY,
        room=room,
        probes=health.schedule,
        holders=holders,
    )
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
    return controller, deps


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ready = threading.Event()
    health_server = _serve_health(args.health_port, ready) if args.health_port else None
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_host)
    controller, deps = build(args)
    # Every replica answers estimates (the Service picks any): a standby reads classes live.
    webhook = (
        _serve_estimates(
            args.webhook_host,
            args.webhook_port,
            args.webhook_cert_dir,
            Estimator(deps),
            client_ca=args.webhook_client_ca,
            client_names=tuple(args.webhook_client_name),
            max_connections=args.webhook_max_connections,
        )
        if args.webhook_port
        else None
    )
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
