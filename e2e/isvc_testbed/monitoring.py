"""The cluster's metrics path on the test bed: a real Prometheus scrapes the runtimes on the real node, a real
prometheus-adapter serves what it scraped as the custom metrics API through the API server's aggregation layer,
and kube-controller-manager's HPA controller reads it there. Both are built from their pinned Go modules
(e2e/tools/build-bins.sh); neither is told a value: Prometheus scrapes `/metrics`, the adapter queries it.

What the test bed does in place of a cluster's operators, and only that: it renders Prometheus's scrape
configuration from the PodMonitors (as prometheus-operator does: Kubernetes service discovery of pods in the
monitor's namespace, its selector, port and path, the bearer token from the Secret it names) and the adapter's
rules from the PodMetrics (as Deckhouse's prometheus-metrics-adapter hook does: one rule per PodMetric, whose
query becomes the rule's metrics query, `<<.LabelMatchers>>` and `<<.GroupBy>>` being the adapter's own
template). Prometheus reloads its configuration; the adapter, which reads its rules once, is restarted.

Safety: only pods on the real node are scraped (a KWOK pod's address has nothing behind it and is never
dialled); the host reaches the real node's pods through the route the node's set-up adds. Prometheus and the
adapter listen on 127.0.0.1; the APIService reaches the adapter through an ExternalName Service naming
127.0.0.1 (the aggregator dials the external name and the APIService's port), its CA bundle the test bed's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import yaml
from isvc_api import LABEL_ORDER
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from isvc_testbed._errors import BinariesMissing, TestbedError
from isvc_testbed._pki import Pki
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.realnode import REAL_NODE_NAME

__all__ = ["METRICS_CRDS", "MONITORING_BINS", "Monitoring", "monitoring"]

MONITORING_BINS = ("prometheus", "prometheus-adapter")
METRICS_CRDS = sorted((Path(__file__).resolve().parent.parent / "crds" / "metrics").glob("*.yaml"))
NAMESPACE = "isvc-testbed-monitoring"
ADAPTER_SERVICE = "prometheus-adapter"
API_SERVICE = "v1beta1.custom.metrics.k8s.io"
SCRAPE_SECONDS = 2  # the HPA controller passes every 5 s (cluster.HPA_SYNC_SECONDS): fresh values each pass
SYNC_SECONDS = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _label_meta(key: str) -> str:
    """Prometheus's meta label of a pod label (every character outside [a-zA-Z0-9_] becomes _)."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in key)


class Monitoring:
    """Prometheus and prometheus-adapter on the host for one cluster, fed from its PodMonitors and PodMetrics."""

    def __init__(self, cluster: Cluster, standin_port: int | None = None) -> None:
        assert cluster.bin_dir is not None
        missing = [b for b in MONITORING_BINS if not (cluster.bin_dir / b).is_file()]
        if missing:
            raise BinariesMissing(
                f"the metrics path needs {', '.join(missing)}; run `bash e2e/tools/build-bins.sh realnode`"
            )
        self.cluster = cluster
        self.standin_port = standin_port
        self.dir = cluster.workdir / "monitoring"
        self.dir.mkdir(exist_ok=True)
        self.prometheus_port = _free_port()
        self.adapter_port = _free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="monitoring-sync", daemon=True)
        self._scrape: str | None = None
        self._rules: str | None = None
        self.reloads = 0
        self.restarts = 0

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    # ---- rendering (what prometheus-operator and Deckhouse's adapter hook would write) ----------------

    def _token_file(self, api: k8s.CoreV1Api, namespace: str, ref: dict[str, Any]) -> Path | None:
        try:
            secret: Any = api.read_namespaced_secret(ref["name"], namespace)
        except k8s.ApiException as e:
            if e.status == 404:
                return None
            raise
        data = (secret.data or {}).get(ref.get("key") or "token")
        if data is None:
            return None
        path = self.dir / f"token-{namespace}-{ref['name']}"
        value = base64.b64decode(data)
        if not path.exists() or path.read_bytes() != value:
            path.write_bytes(value)
            path.chmod(0o600)
        return path

    def scrape_configs(self, monitors: list[dict[str, Any]], api: k8s.CoreV1Api) -> list[dict[str, Any]]:
        """One job per endpoint of each PodMonitor, as prometheus-operator renders it (the subset used)."""
        jobs: list[dict[str, Any]] = []
        for monitor in sorted(monitors, key=lambda m: (m["metadata"]["namespace"], m["metadata"]["name"])):
            ns, name = monitor["metadata"]["namespace"], monitor["metadata"]["name"]
            spec = monitor.get("spec") or {}
            keep = [
                {"source_labels": [_label_meta(k)], "regex": v, "action": "keep"}
                for k, v in sorted(((spec.get("selector") or {}).get("matchLabels") or {}).items())
            ]
            for i, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
                for where in ("real-node", "standin") if self.standin_port else ("real-node",):
                    job = self._job(ns, name, i, endpoint, keep, where)
                    credentials = (endpoint.get("authorization") or {}).get("credentials")
                    if credentials:
                        token = self._token_file(api, ns, credentials)
                        if token is None:
                            continue  # prometheus-operator, too, skips a monitor whose Secret it cannot read
                        job["authorization"] = {"type": "Bearer", "credentials_file": str(token)}
                    jobs.append(job)
        return jobs

    def _job(
        self, ns: str, name: str, i: int, endpoint: dict[str, Any], keep: list[dict[str, Any]], where: str
    ) -> dict[str, Any]:
        """The scrape job of one endpoint: the real node's pods at their own address, or (`standin`) the
        simulated pods, whose runtime the stand-in plays at /{namespace}/{order}/metrics on 127.0.0.1."""
        on_node = {
            "source_labels": ["__meta_kubernetes_pod_node_name"],
            "regex": REAL_NODE_NAME,
            "action": "keep" if where == "real-node" else "drop",
        }
        to_standin = [
            {"target_label": "__address__", "replacement": f"127.0.0.1:{self.standin_port}"},
            {
                "source_labels": ["__meta_kubernetes_namespace", _label_meta(LABEL_ORDER)],
                "separator": "/",
                "target_label": "__metrics_path__",
                "replacement": "/${1}/metrics",
            },
        ]
        return {
            "job_name": f"podMonitor/{ns}/{name}/{i}" + ("" if where == "real-node" else "/standin"),
            "scrape_interval": f"{SCRAPE_SECONDS}s",
            "scrape_timeout": f"{SCRAPE_SECONDS}s",
            "metrics_path": endpoint.get("path") or "/metrics",
            "kubernetes_sd_configs": [
                {
                    "role": "pod",
                    "kubeconfig_file": str(self.cluster.admin_kubeconfig),
                    "namespaces": {"names": [ns]},
                }
            ],
            "relabel_configs": [
                on_node,  # a simulated pod's own address has nothing behind it: never dialled
                *keep,
                {
                    "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                    "regex": endpoint.get("port") or ".+",
                    "action": "keep",
                },
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                *(to_standin if where == "standin" else []),
            ],
        }

    @staticmethod
    def adapter_rules(pod_metrics: list[dict[str, Any]]) -> dict[str, Any]:
        """One prometheus-adapter rule per PodMetric: the metric of pods named after it, its query as is.

        A first rule is always there, as Deckhouse's configuration always has its own (cpu_1m, rps_1m ...): the
        adapter serves the custom metrics API only when it has a rule at all."""
        rules: list[dict[str, Any]] = [
            {
                "seriesQuery": 'up{namespace!="",pod!=""}',
                "resources": {
                    "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                },
                "name": {"matches": "^up$", "as": "scraped"},
                "metricsQuery": "max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})",
            }
        ]
        for metric in sorted(pod_metrics, key=lambda m: (m["metadata"]["namespace"], m["metadata"]["name"])):
            ns, name = metric["metadata"]["namespace"], metric["metadata"]["name"]
            rules.append(
                {
                    # discovery: the pods Prometheus scrapes in the namespace (Deckhouse's uses kube_pod_created)
                    "seriesQuery": f'up{{namespace="{ns}",pod!=""}}',
                    "resources": {
                        "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                    },
                    "name": {"matches": "^up$", "as": name},
                    "metricsQuery": metric["spec"]["query"],
                }
            )
        return {"rules": rules}

    # ---- processes ----------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.dir / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ)
            )

    def _kill(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _write_prometheus_config(self, jobs: list[dict[str, Any]]) -> bool:
        text = yaml.safe_dump({"global": {"scrape_interval": f"{SCRAPE_SECONDS}s"}, "scrape_configs": jobs})
        if text == self._scrape:
            return False
        (self.dir / "prometheus.yml").write_text(text)
        self._scrape = text
        return True

    def _start_prometheus(self) -> None:
        b = self.cluster.bin_dir
        assert b is not None
        self._write_prometheus_config([])
        self._spawn(
            "prometheus",
            [
                str(b / "prometheus"),
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'tsdb'}",
                "--storage.tsdb.retention.time=1h",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
        )
        wait_for(self._prometheus_ready, 60, interval=0.5, what="Prometheus ready")

    def _prometheus_ready(self) -> bool:
        self._check("prometheus")
        try:
            return httpx.get(f"{self.prometheus_url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _start_adapter(self) -> None:
        b = self.cluster.bin_dir
        assert b is not None
        admin = str(self.cluster.admin_kubeconfig)
        self._spawn(
            "prometheus-adapter",
            [
                str(b / "prometheus-adapter"),
                f"--secure-port={self.adapter_port}",
                "--bind-address=127.0.0.1",
                f"--tls-cert-file={self._serving.cert}",
                f"--tls-private-key-file={self._serving.key}",
                f"--lister-kubeconfig={admin}",
                f"--authentication-kubeconfig={admin}",
                f"--authorization-kubeconfig={admin}",
                f"--prometheus-url={self.prometheus_url}",
                f"--config={self.dir / 'adapter.yaml'}",
                f"--metrics-relist-interval={SCRAPE_SECONDS}s",
                "--v=1",
            ],
        )

    def _check(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is not None:
            raise TestbedError(f"{name} exited {proc.returncode}: {self.log(name)[-2000:]}")

    # ---- the API side ---------------------------------------------------------------------------------

    def _register(self, api: k8s.ApiClient) -> None:
        core = k8s.CoreV1Api(api)
        with contextlib.suppress(k8s.ApiException):
            core.create_namespace(cast(Any, {"metadata": {"name": NAMESPACE}}))
        ignore_404(lambda: core.delete_namespaced_service(ADAPTER_SERVICE, NAMESPACE))
        core.create_namespaced_service(
            NAMESPACE,
            cast(
                Any,
                {
                    "metadata": {"name": ADAPTER_SERVICE},
                    "spec": {
                        "type": "ExternalName",
                        "externalName": "127.0.0.1",
                        "ports": [{"name": "https", "port": self.adapter_port}],
                    },
                },
            ),
        )
        registration = k8s.ApiregistrationV1Api(api)
        ignore_404(lambda: registration.delete_api_service(API_SERVICE))
        registration.create_api_service(
            cast(
                Any,
                {
                    "metadata": {"name": API_SERVICE},
                    "spec": {
                        "group": "custom.metrics.k8s.io",
                        "version": "v1beta1",
                        "service": {
                            "name": ADAPTER_SERVICE,
                            "namespace": NAMESPACE,
                            "port": self.adapter_port,
                        },
                        "caBundle": base64.b64encode(self._pki.ca_pem).decode(),
                        "groupPriorityMinimum": 100,
                        "versionPriority": 100,
                    },
                },
            )
        )

    def available(self) -> bool:
        """Whether the aggregator reports the custom metrics API available."""
        return self.availability().startswith("True")

    def availability(self) -> str:
        """The APIService's Available condition: status, reason and message."""
        with self.cluster.api_client("admin") as api:
            got: Any = k8s.ApiregistrationV1Api(api).read_api_service(API_SERVICE)
        found = [c for c in (got.status.conditions if got.status else None) or [] if c.type == "Available"]
        return f"{found[0].status} {found[0].reason}: {found[0].message}" if found else "not judged"

    def custom_metric(self, namespace: str, metric: str) -> list[dict[str, Any]]:
        """The custom metrics API's answer for every pod of the namespace (what the HPA controller reads); none
        while it answers no list."""
        path = f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/*/{metric}"
        with self.cluster.api_client("admin") as api:
            try:  # the dynamic client's request: one signature on every kubernetes client the packages accept
                answer: Any = DynamicClient(api).request("get", path, serialize=False)
            except ApiException:  # not served yet, or the adapter restarting on new rules
                return []
            data = answer.data
        items: list[dict[str, Any]] = json.loads(data).get("items") or []
        return items

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Prometheus's answer to an instant query."""
        got = httpx.get(f"{self.prometheus_url}/api/v1/query", params={"query": promql}, timeout=5).json()
        result: list[dict[str, Any]] = got["data"]["result"]
        return result

    # ---- following the cluster --------------------------------------------------------------------------

    def sync(self) -> None:
        """Render both configurations from the cluster; reload Prometheus, restart the adapter on a change."""
        with self.cluster.api_client("admin") as api:
            objects = k8s.CustomObjectsApi(api)
            listed: Any = objects.list_cluster_custom_object("monitoring.coreos.com", "v1", "podmonitors")
            monitors: list[dict[str, Any]] = listed["items"]
            listed = objects.list_cluster_custom_object("deckhouse.io", "v1alpha1", "podmetrics")
            metrics: list[dict[str, Any]] = listed["items"]
            jobs = self.scrape_configs(monitors, k8s.CoreV1Api(api))
        if self._write_prometheus_config(jobs):
            httpx.post(f"{self.prometheus_url}/-/reload", timeout=10).raise_for_status()
            self.reloads += 1
        rules = yaml.safe_dump(self.adapter_rules(metrics))
        if rules != self._rules or "prometheus-adapter" not in self.procs:
            (self.dir / "adapter.yaml").write_text(rules)
            self._rules = rules
            self._kill("prometheus-adapter")
            self._start_adapter()
            self.restarts += 1

    def _follow(self) -> None:
        while not self._stop.wait(SYNC_SECONDS):
            try:
                self.sync()
            except Exception as e:  # the next pass tries again; the log says why
                with (self.dir / "sync.log").open("a") as log:
                    log.write(f"{time.strftime('%H:%M:%S')} {e!r}\n")

    def start(self) -> Monitoring:
        try:
            with self.cluster.api_client("admin") as api:
                install_crds(api, METRICS_CRDS)
                self._pki = Pki(self.dir / "pki")
                self._serving = self._pki.serving(
                    "adapter", names=(f"{ADAPTER_SERVICE}.{NAMESPACE}.svc",), cn=ADAPTER_SERVICE
                )
                self._start_prometheus()
                self.sync()
                self._register(api)
            try:
                wait_for(self.available, 60, interval=0.5, what="the custom metrics API available")
            except TimeoutError as e:
                raise TestbedError(
                    f"{e}; the APIService says {self.availability()}; the adapter's log ends: "
                    f"{self.log('prometheus-adapter')[-3000:]}"
                ) from None
        except BaseException:
            self.stop()
            raise
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        with self.cluster.api_client("admin") as api, contextlib.suppress(k8s.ApiException):
            # the kinds stay, as on a cluster whose adapter is down: a controller that found them served keeps
            # writing them (its discovery keeps what it found), and removing them would refuse its orders
            ignore_404(lambda: k8s.ApiregistrationV1Api(api).delete_api_service(API_SERVICE))
        for name in list(self.procs):
            self._kill(name)


@contextlib.contextmanager
def monitoring(cluster: Cluster, standin_port: int | None = None) -> Iterator[Monitoring]:
    """The metrics path for the duration of the block; with `standin_port`, the simulated pods' runtime
    metrics come from the stand-in there."""
    watch = Monitoring(cluster, standin_port).start()
    try:
        yield watch
    finally:
        watch.stop()
