"""Install the isvc module into a test-bed cluster and run its controller and planner on loopback.

The chart is installed for real (CRDs, RBAC, ServiceAccounts, the default-llm class, Deployments that
KWOK simulates). The controller and the planner then run here as processes, authenticated as the
chart's own ServiceAccounts, so every call they make is checked against the chart's RBAC. They reach
the stand-in Hugging Face hub and the stand-in inference server on 127.0.0.1 only. A stand-in volume
provisioner (isvc_testbed.volumes) gives the orders' model volumes, claims of its StorageClass, their volumes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s

from isvc_testbed._bins import bin_dir
from isvc_testbed._pki import SERVING_DNS, Pki
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.helpers import wait_for
from isvc_testbed.volumes import STORAGE_CLASS

__all__ = ["ROOT", "ModuleProcesses", "chart_flags", "chart_values", "install_chart"]

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "d8-isvc"
RELEASE = "isvc"
# the stand-in Hub's repositories beside isvc-testing's: hostile ones (issue 14), downloadable ones (issue 46)
HOSTILE_REPOS = ROOT / "e2e" / "hub"
# One model resolution's Hub deadline on the bed: the slow hostile repository must not hold a worker (and
# the suite) for the product's 60 s; every honest fixture resolves in well under a second.
HUB_DEADLINE = 15.0
START_TURN_SECONDS = (
    12  # the bed's --start-turn-seconds (600 in a cluster): how long a hanging start holds its card
)


def _free_port() -> int:
    """A free loopback port below the kernel's ephemeral range. The bed restarts a process on the port it
    gave it, and a port from that range can meanwhile become an outgoing connection's own (a controller
    restarted on its metrics port found it in use, and every test after it waited for a controller)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(64 if low > 20_000 else 0):  # above a node's well-known ports (the kubelet's 10250)
        port = random.randrange(20_000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken: another
                continue
            return port
    with socket.socket() as s:  # no room below the range, or none free: any port the kernel gives
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# What `nox -s images` tags; the chart is installed as plain Helm does it, naming its images.
IMAGES = {
    "controller": "localhost/isvc/controller:0.1.0",
    "planner": "localhost/isvc/planner:0.1.0",
    "modelFetcher": "localhost/isvc/model-fetcher:0.1.0",
    "modelCache": "localhost/isvc/model-cache:0.1.0",
}


def chart_values(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Helm values for module settings (the config-values shape, e.g. {"catalog": {"mode": "None"}}).

    The chart reads its settings under `.Values.isvc`, as Deckhouse passes them; settings given at the
    top level would be ignored by every template. Without Deckhouse the chart needs its images named.
    """
    base = {"publicDomainTemplate": "%s.example.test", "images": dict(IMAGES)}
    return {"isvc": _deep_merge(base, settings or {})}


def _serving_dir(
    directory: Path, stem: str, names: tuple[str, ...] = SERVING_DNS, cn: str = "kube-apiserver"
) -> None:
    """tls.crt, tls.key and ca.crt in `directory`, as a chart's kubernetes.io/tls Secret mounts them: a serving
    certificate (`Pki.serving`) from an authority made for it alone."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory / "pki")
    files = pki.serving(stem, names=names, cn=cn)
    (directory / "tls.crt").write_bytes(files.cert.read_bytes())
    (directory / "tls.key").write_bytes(files.key.read_bytes())
    (directory / "tls.key").chmod(0o600)
    (directory / "ca.crt").write_bytes(pki.ca_pem)


def estimate_webhook(cluster: Cluster) -> tuple[int, Path]:
    """The loopback port and certificate directory of this test bed's estimate webhook, made once.

    The controller runs here, not in a pod: the chart is told (internal values) to send estimate reviews
    to https://127.0.0.1:<port>/estimate with a certificate of the test bed's own authority.
    """
    directory = cluster.workdir / "estimate-webhook"
    port_file = directory / "port"
    if not port_file.exists():
        _serving_dir(directory, "webhook")  # an authority of its own: the webhook is not the API server
        port_file.write_text(str(_free_port()))
    return int(port_file.read_text()), directory


def planner_tls(cluster: Cluster) -> Path:
    """The directory of the bed's planner certificate (tls.crt, tls.key, ca.crt), made once per cluster: as
    in the chart, the planner serves HTTPS alone and the controller checks it against ca.crt."""
    directory = cluster.workdir / "planner-tls"
    if not (directory / "ca.crt").exists():  # an authority of its own, as the chart's planner/tls.yaml makes
        _serving_dir(directory, "planner", names=(f"isvc-planner.{NAMESPACE}.svc",), cn="isvc-planner")
    return directory


def seal_key(cluster: Cluster) -> Path:
    """The key the bed's controllers seal children with, made once per cluster (the chart's Secret)."""
    path = cluster.workdir / "seal.key"
    if not path.exists():
        path.write_text(os.urandom(32).hex())
        path.chmod(0o600)
    return path


def install_chart(cluster: Cluster, values: dict[str, Any] | None = None) -> None:
    """Apply crds/ and `helm upgrade --install` the module chart with these module settings (idempotent)."""
    with cluster.api_client("admin") as api:
        # doc-ru-*.yaml are Deckhouse's Russian description twins, not objects
        crds = [p for p in (ROOT / "module" / "crds").glob("*.yaml") if not p.name.startswith("doc-ru-")]
        install_crds(api, sorted(crds))
    port, certs = estimate_webhook(cluster)
    chart = chart_values(values)
    client = cluster.webhook_client
    if client is not None and "estimateWebhook" not in chart["isvc"]:
        chart["isvc"]["estimateWebhook"] = {"clientCA": client[0].read_text(), "clientNames": [client[1]]}
    chart["isvc"]["internal"] = {
        "estimateWebhookURL": f"https://127.0.0.1:{port}/estimate",
        "webhookCert": {
            "crt": (certs / "tls.crt").read_text(),
            "key": (certs / "tls.key").read_text(),
            "ca": (certs / "ca.crt").read_text(),
        },
    }
    values_file = cluster.workdir / "module-values.yaml"
    values_file.write_text(yaml.safe_dump(chart))
    helm = bin_dir() / "helm"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(cluster.workdir / "helm-cache"),
        "HELM_CONFIG_HOME": str(cluster.workdir / "helm-config"),
        "HELM_DATA_HOME": str(cluster.workdir / "helm-data"),
    }
    done = subprocess.run(
        [
            str(helm),
            "upgrade",
            "--install",
            RELEASE,
            str(ROOT / "module"),
            "--namespace",
            "default",
            "--kubeconfig",
            str(cluster.admin_kubeconfig),
            "--values",
            str(values_file),
            "--wait",
            "--timeout",
            "120s",
        ],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"helm upgrade --install failed ({done.returncode}):\n{done.stderr[-3000:]}\n{_not_ready(cluster)}"
        )


def _not_ready(cluster: Cluster) -> str:
    """What a timed-out `helm --wait` was waiting for: the module's Deployments short of Ready pods, with each of
    their pods' last event (a FailedScheduling says why it has no node), and its claims not Bound."""
    lines = []
    try:
        with cluster.api_client("admin") as api:
            apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
            deployments: list[Any] = apps.list_namespaced_deployment(NAMESPACE).items
            for d in deployments:
                if (d.status.ready_replicas or 0) >= (d.spec.replicas or 0):
                    continue
                lines.append(f"{d.metadata.name}: {d.status.ready_replicas or 0}/{d.spec.replicas} Ready")
                selector = ",".join(f"{k}={v}" for k, v in d.spec.selector.match_labels.items())
                pods: list[Any] = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
                for pod in pods:
                    name = pod.metadata.name
                    events = core.list_namespaced_event(
                        NAMESPACE, field_selector=f"involvedObject.name={name}"
                    )
                    last = [f"{e.reason}: {e.message}" for e in events.items][-1:]
                    lines.append(f"  {name} {pod.status.phase} on {pod.spec.node_name}: {last}")
            claims: list[Any] = core.list_namespaced_persistent_volume_claim(NAMESPACE).items
            for claim in claims:
                if claim.status.phase != "Bound":
                    lines.append(f"claim {claim.metadata.name}: {claim.status.phase}")
    except Exception as e:  # the API server is away: the helm error alone
        lines.append(f"(the module's objects could not be read: {e})")
    return "\n".join(lines or ["every Deployment of the module Ready, every claim Bound"])


def chart_flags(cluster: Cluster, *names: str) -> tuple[str, ...]:
    """The flags `names` (`--name=value`) as the installed chart passes them to the controller: the args of its
    Deployment, which KWOK simulates and the local controller process stands in for."""
    with cluster.api_client("admin") as api:
        deployment: Any = k8s.AppsV1Api(api).read_namespaced_deployment("isvc-controller", NAMESPACE)
    [container] = [c for c in deployment.spec.template.spec.containers if c.name == "controller"]
    return tuple(a for a in container.args or [] if a.split("=", 1)[0] in names)


def token_file(kubeconfig: Path) -> Path:
    """The bearer token of a kubeconfig's user, written beside it (as a pod's ServiceAccount token is)."""
    config = yaml.safe_load(kubeconfig.read_text())
    path = kubeconfig.with_suffix(".token")
    path.write_text(config["users"][0]["user"]["token"])
    path.chmod(0o600)
    return path


class ModuleProcesses:
    """The controller, the planner and the stand-in hub as local processes, stopped by their pids."""

    def __init__(self, cluster: Cluster, standin_template: str, catalog_mode: str = "AIModels") -> None:
        self.cluster = cluster
        self.standin_template = standin_template
        self.catalog_mode = catalog_mode
        self.logs = cluster.workdir / "module-logs"
        self.logs.mkdir(exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.planner_port = _free_port()
        self.hub_port = _free_port()
        self.metrics_port = _free_port()  # the first controller's /metrics on loopback (a standby has none)
        self.cache_port, self.cache_metrics_port = _free_port(), _free_port()
        self.planner_args: tuple[str, ...] = ()  # extra flags of every planner start (e.g. --reservation-ttl)
        self.controller_args: tuple[str, ...] = ()  # flags of every controller start after the defaults

    @property
    def planner_url(self) -> str:
        return f"https://127.0.0.1:{self.planner_port}"

    @property
    def planner_ca(self) -> Path:
        """The authority of the planner's serving certificate (the controller's --planner-ca-file)."""
        return planner_tls(self.cluster) / "ca.crt"

    def planner_verify(self) -> ssl.SSLContext:
        """What an HTTP client of the planner verifies its certificate with (httpx's `verify`)."""
        return ssl.create_default_context(cafile=str(self.planner_ca))

    @property
    def metrics_url(self) -> str:
        """The first controller's /metrics."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def hub_url(self) -> str:
        return f"http://127.0.0.1:{self.hub_port}"

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def _wait_http(
        self, name: str, url: str, timeout: float = 60.0, verify: ssl.SSLContext | bool = True
    ) -> None:
        def up() -> bool:
            self.check(name)
            try:
                return httpx.get(url, timeout=2, verify=verify).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout, what=f"{name} at {url}")

    def start_hub(self, *extra_models: Path) -> None:
        """The stand-in Hugging Face hub on loopback: isvc-testing's fixture models, the repositories of e2e/hub
        (hostile ones — oversized, malformed, slow, many-shard: e2e/tests/test_isvc_hostile.py — and small
        ones a download fetches whole: e2e/tests/test_isvc_model_cache.py), and
        of isvc_testing.standin_hub.hostile_repositories (each read limit just under and just over);
        `extra_models`: more directories of repositories (the real node's tiny model, realnode.py)."""
        more = [a for d in extra_models for a in ("--extra-models", str(d))]
        self._spawn(
            "hub",
            [
                sys.executable,
                "-m",
                "isvc_testing.standin_hub",
                "--port",
                str(self.hub_port),
                "--extra-models",
                str(HOSTILE_REPOS),
                "--hostile",  # a repository just under and one just over each read limit (issue 29)
                *more,
            ],
        )
        self._wait_http("hub", f"{self.hub_url}/api/models/Qwen/Qwen2.5-7B-Instruct")

    @property
    def cache_url(self) -> str:
        """The model cache (`start_cache`): what the bed's controller gets as --model-cache-endpoint."""
        return f"http://127.0.0.1:{self.cache_port}"

    def start_cache(self, max_bytes: int = 1 << 30) -> None:
        """The model cache (isvc-model-cache) in front of the stand-in Hub, its files in the work dir (kept
        over a restart, as its volume is), its /metrics on a loopback port of its own."""
        self._spawn(
            "cache",
            [
                sys.executable,
                "-m",
                "isvc_model_cache",
                "serve",
                "--data-dir",
                str(self.cluster.workdir / "model-cache"),
                "--max-bytes",
                str(max_bytes),
                "--hub-endpoint",
                self.hub_url,
                "--port",
                str(self.cache_port),
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(self.cache_metrics_port),
            ],
        )
        self._wait_http("cache", f"{self.cache_url}/readyz")

    def cache_metric(self, name: str, **labels: str) -> float:
        """One sample of the cache's /metrics (0 when absent)."""
        text = httpx.get(f"http://127.0.0.1:{self.cache_metrics_port}/metrics", timeout=5).text
        wanted = name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else ""
        )
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return 0.0

    def hub_served(self) -> dict[str, int]:
        """Bytes of content the stand-in Hub sent, by repository/file (its GET /_control/served)."""
        return dict(httpx.get(f"{self.hub_url}/_control/served", timeout=5).json())

    def start_volumes(self, host_dir: Path | None = None) -> None:
        """The stand-in volume provisioner, as the administrator; its StorageClass exists once it runs.
        `host_dir`: the volumes are directories there, for a real node to mount (volumes.volume_for)."""
        where = ["--host-dir", str(host_dir)] if host_dir is not None else []
        self._spawn(
            "volumes",
            [
                sys.executable,
                "-m",
                "isvc_testbed.volumes",
                "--kubeconfig",
                str(self.cluster.admin_kubeconfig),
                *where,
            ],
        )
        with self.cluster.api_client() as api:
            storage = k8s.StorageV1Api(api)

            def made() -> bool:
                self.check("volumes")
                return any(
                    c.metadata is not None and c.metadata.name == STORAGE_CLASS
                    for c in storage.list_storage_class().items
                )

            wait_for(made, 30, what=f"StorageClass {STORAGE_CLASS}")

    def start_planner(self) -> None:
        """The planner service, as the chart's planner ServiceAccount."""
        kubeconfig = self.cluster.service_account_kubeconfig(NAMESPACE, "planner")
        self._spawn(
            "planner",
            [
                sys.executable,
                "-m",
                "isvc_planner",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.planner_port),
                "--tls-cert-dir",
                str(planner_tls(self.cluster)),
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-port",
                "0",
                "--allowed-caller",
                f"system:serviceaccount:{NAMESPACE}:controller",
                *self.planner_args,
            ],
        )
        self._wait_http("planner", f"{self.planner_url}/readyz", verify=self.planner_verify())

    def stop_planner(self) -> None:
        """Kill the planner (a crash, not a shutdown)."""
        self._kill("planner", signal.SIGKILL)

    def start_controller(self, *extra: str, name: str = "controller") -> None:
        """The controller, as the chart's controller ServiceAccount; `name` tells several apart (a standby).

        Flags in `extra` come last, so they override the defaults (e.g. `--metrics-port 18090`).
        """
        kubeconfig = self.cluster.service_account_kubeconfig(NAMESPACE, "controller")
        self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "isvc_operator",
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                NAMESPACE,
                "--planner-url",
                self.planner_url,
                "--planner-ca-file",
                str(self.planner_ca),
                "--planner-token-file",
                str(token_file(kubeconfig)),
                "--huggingface-endpoint",
                self.hub_url,
                "--catalog-mode",
                self.catalog_mode,
                "--public-domain-template",
                "%s.example.test",
                "--cert-manager",
                "false",
                "--probe-url-template",
                self.standin_template,
                "--health-period-seconds",
                "3",
                "--hub-deadline-seconds",
                str(HUB_DEADLINE),
                "--health-failure-threshold",
                "2",
                # the bed's turns are short: a start that hangs holds its card's co-tenants for seconds
                "--start-turn-seconds",
                str(START_TURN_SECONDS),
                "--health-port",
                "0",
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(self.metrics_port) if name == "controller" else "0",
                "--model-volume-storage-class",
                STORAGE_CLASS,
                # the chart's Secret in a cluster: one key for every controller of the bed, kept across restarts
                "--seal-key-file",
                str(seal_key(self.cluster)),
                # the chart's webhook names one address here: only the first controller serves it (in a
                # cluster every replica does, each in its own pod)
                "--leader-elect",
                "true",
                *(self._webhook_flags() if name == "controller" else []),
                "--log-level",
                "Info",
                *self.controller_args,
                *extra,
            ],
        )
        time.sleep(1.0)
        self.check(name)

    def _webhook_flags(self) -> list[str]:
        port, certs = estimate_webhook(self.cluster)
        flags = ["--webhook-host", "127.0.0.1", "--webhook-port", str(port), "--webhook-cert-dir", str(certs)]
        client = self.cluster.webhook_client
        if client is not None:  # the bed's API server presents a client certificate to webhooks: ask for it
            flags += ["--webhook-client-ca", str(client[0]), "--webhook-client-name", client[1]]
        return flags

    def start(self) -> ModuleProcesses:
        self.start_volumes()
        self.start_hub()
        self.start_planner()
        self.start_controller()
        return self

    def restart_controller(self, *extra: str) -> None:
        """Stop and start the controller with other flags (e.g. another catalog mode)."""
        self._kill("controller", signal.SIGTERM)
        self.start_controller(*extra)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one process by its name (SIGKILL: a crash; SIGTERM: a shutdown); gone already is fine."""
        self._kill(name, sig)

    def pid(self, name: str) -> int | None:
        """The pid of a running process of that name, None when it is not running."""
        proc = self.procs.get(name)
        return proc.pid if proc is not None and proc.poll() is None else None

    def check(self, name: str | None = None) -> None:
        """Raise with the log tail of a process that died."""
        for proc_name, proc in self.procs.items():
            if (name is None or name == proc_name) and proc.poll() is not None:
                tail = (self.logs / f"{proc_name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{proc_name} exited with {proc.returncode}:\n{tail}")

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def _kill(self, name: str, sig: int) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def stop(self) -> None:
        """Stop every process this object started."""
        for name in list(self.procs):
            self._kill(name, signal.SIGTERM)

    def state(self) -> dict[str, Any]:
        return {
            "pids": {n: p.pid for n, p in self.procs.items()},
            "planner": self.planner_url,
            "hub": self.hub_url,
            "logs": str(self.logs),
        }


def order_status(api: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """The status of an order, or {} while it has none."""
    obj: Any = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        "ai.deckhouse.io", "v1alpha1", namespace, "inferenceservices", name
    )
    return dict(obj.get("status") or {})


def conditions_line(status: dict[str, Any]) -> str:
    """ClassResolved=True Resolved ... in one line, as the FAQ's jsonpath prints them."""
    return " ".join(f"{c['type']}={c['status']}/{c['reason']}" for c in status.get("conditions", []))


if __name__ == "__main__":
    print(json.dumps({"root": str(ROOT)}))
