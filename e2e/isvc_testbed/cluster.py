"""A real control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.

Every component runs as a subprocess in its own process group, in a temporary directory (on /dev/shm when
there is one). `stop()` ends exactly the process groups it started and removes the directory.

`Cluster(existing=KUBECONFIG)` brings no control plane: it uses the cluster that kubeconfig names (as its
administrator), makes alice there through the certificates API and runs only KWOK for the fake nodes.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import httpx
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed._bins import require_bins
from isvc_testbed._errors import ComponentDied, StartTimeout, TestbedError
from isvc_testbed._kube import api_client
from isvc_testbed._pki import CertFiles, Pki, client_request, cluster_of, kubeconfig, write_kubeconfig
from isvc_testbed.helpers import wait_for
from isvc_testbed.realnode import REAL_NODE_NAME, RealNode

__all__ = ["HPA_SYNC_SECONDS", "Cluster", "ClusterState", "install_crds", "stop_recorded"]

SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
KWOK_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"
# KWOK's stand-in for the start gate of pods on a share of a card (e2e/README.md, "The start gate")
START_GATE_STAGES = Path(__file__).with_name("kwok-start-gate.yaml")
HANGING_NAMESPACE = "start-hangs"  # pods here start behind the gate and never get Ready
SLOW_START_NAMESPACE = "start-slow"  # pods here take 1.5 s from their start permit to Ready
ALICE = ("alice", ("team-a",))
# The client certificate the API server presents to admission webhooks (its AdmissionConfiguration): the
# estimate webhook believes only reviews that come with it (issue 29).
WEBHOOK_CLIENT = "isvc-testbed-apiserver-webhook-client"
FRONT_PROXY_CLIENT = "front-proxy-client"  # the only name the API server's proxy certificate may carry
HPA_SYNC_SECONDS = 5  # --horizontal-pod-autoscaler-sync-period
_PR_SET_PDEATHSIG = 1


def _free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held open together so they differ, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _work_parent() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec hook asking the kernel to SIGTERM the child when its parent dies (Linux; else None).

    libc is loaded here, in the parent, so the hook does nothing but one system call after fork.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class _Component:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, cwd: Path, die_with_parent: bool) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent_hook() if die_with_parent else None,
            )

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ComponentDied(self.name, self.proc.returncode, _tail(self.log))


@dataclass(frozen=True)
class ClusterState:
    """What `up` records so that `down` (another process) can stop the cluster by pid."""

    workdir: str
    server: str
    pids: dict[str, int]
    ports: dict[str, int]
    kubeconfigs: dict[str, str]
    bin_dir: str

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        return cls(**json.loads(text))


@dataclass
class Cluster:
    """One throw-away control plane. Use as a context manager, or call start() and stop().

    With `existing` (an administrator's kubeconfig) it starts no control plane: start() makes alice in that
    cluster and, unless `kwok` is False, runs KWOK for the fake nodes; stop() ends KWOK and leaves the
    cluster running. `kwok=False` on a cluster of our own gives a bare control plane, like one you bring.
    """

    bin_dir: Path | None = None
    existing: Path | None = None
    kwok: bool = True
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    workdir_parent: str | None = None
    timeout: float = 120.0
    die_with_parent: bool = True
    real_node: bool = False
    log: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))

    workdir: Path = field(init=False)
    ports: dict[str, int] = field(init=False, default_factory=dict)
    kubeconfigs: dict[str, Path] = field(init=False, default_factory=dict)
    startup_seconds: float = field(init=False, default=0.0)
    _components: list[_Component] = field(init=False, default_factory=list)
    _pki: Pki = field(init=False, repr=False)
    _attached: bool = field(init=False, default=False)
    _server: str = field(init=False, default="")
    _real: RealNode | None = field(init=False, default=None, repr=False)

    # ---- public surface -------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The API server URL."""
        return self._server or f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def admin_kubeconfig(self) -> Path:
        """Kubeconfig of the cluster administrator (group system:masters)."""
        return self.kubeconfigs["admin"]

    @property
    def alice_kubeconfig(self) -> Path:
        """Kubeconfig of the namespace user alice (group team-a); she has no rights until bound."""
        return self.kubeconfigs["alice"]

    @property
    def ca_pem(self) -> bytes:
        """The cluster CA certificate in PEM form."""
        return (self.workdir / "pki" / "ca.crt").read_bytes()

    @property
    def pids(self) -> dict[str, int]:
        """Process id (= process group id) of every running component."""
        return {c.name: c.proc.pid for c in self._components if c.proc is not None}

    @property
    def node(self) -> RealNode:
        """The real node (only with real_node=True)."""
        if self._real is None:
            raise TestbedError("this cluster has no real node (Cluster(real_node=True))")
        return self._real

    def api_client(self, identity: str = "admin") -> k8s.ApiClient:
        """A kubernetes ApiClient for one of the kubeconfigs (admin, alice, or one made for an SA)."""
        return api_client(self.kubeconfigs[identity])

    def service_account_kubeconfig(
        self, namespace: str, name: str, *, expiration_seconds: int = 24 * 3600
    ) -> Path:
        """Write a kubeconfig that authenticates as ServiceAccount namespace/name (TokenRequest API)."""
        with self.api_client() as api:
            # a cluster we did not start: its API server's own audiences (the default when none is named)
            audiences = [SA_ISSUER] if self.existing is None else None
            req = k8s.AuthenticationV1TokenRequest(
                spec=k8s.V1TokenRequestSpec(audiences=audiences, expiration_seconds=expiration_seconds)
            )
            resp = k8s.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, req)
        identity = f"sa-{namespace}-{name}"
        path = write_kubeconfig(
            self.workdir / f"{identity}.kubeconfig",
            kubeconfig(self.server, self.ca_pem, identity, token=_token(resp), namespace=namespace),
        )
        self.kubeconfigs[identity] = path
        return path

    def metrics_text(self) -> str:
        """The API server's own Prometheus metrics (`/metrics`), read as the administrator."""
        r = httpx.get(f"{self.server}/metrics", verify=self._ssl_context(), timeout=10)
        r.raise_for_status()
        return r.text

    def restart_apiserver(self) -> float:
        """Stop the API server (SIGTERM) and start it again on the same port; seconds until `/readyz`.

        Every watch breaks; clients re-list or re-watch as they would after an API server rollout.
        """
        old = next(c for c in self._components if c.name == "kube-apiserver")
        t0 = time.monotonic()
        if old.proc is not None:
            _terminate([old.proc], 10.0)
        self._components.remove(old)
        self._start("kube-apiserver")
        self._wait("kube-apiserver", self._apiserver_ready)
        return time.monotonic() - t0

    @property
    def runs_scheduler(self) -> bool:
        """Whether the bed started this cluster's kube-scheduler (not so for a cluster brought along)."""
        return any(c.name == "kube-scheduler" for c in self._components)

    @contextlib.contextmanager
    def scheduler_stopped(self) -> Iterator[None]:
        """The bed's kube-scheduler stopped for the block (new pods stay unscheduled, their claims
        unallocated), then started again; a cluster the bed did not start has none of its own to stop."""
        if not self.runs_scheduler:
            raise TestbedError("this cluster's scheduler is not the test bed's to stop")
        self._stop_named(["kube-scheduler"])
        try:
            yield
        finally:
            self._start("kube-scheduler")

    def compact_etcd(self) -> int:
        """Compact etcd up to its current revision, so a watch resumed from an older resourceVersion
        gets 410 Gone (expired) and must list again; returns the revision."""
        base = f"http://127.0.0.1:{self.ports['etcd']}/v3"
        # an empty range read answers with the store's header (its revision); key "\0" in base64
        r = httpx.post(f"{base}/kv/range", json={"key": "AA=="}, timeout=10)
        r.raise_for_status()
        revision = int(r.json()["header"]["revision"])
        httpx.post(
            f"{base}/kv/compaction", json={"revision": revision, "physical": True}, timeout=30
        ).raise_for_status()
        return revision

    def check(self) -> None:
        """Raise ComponentDied if any component has exited."""
        for c in self._components:
            c.check()

    def state(self) -> ClusterState:
        """The record `python -m isvc_testbed down` needs."""
        return ClusterState(
            workdir=str(self.workdir),
            server=self.server,
            pids=self.pids,
            ports=dict(self.ports),
            kubeconfigs={k: str(v) for k, v in self.kubeconfigs.items()},
            bin_dir=str(self.bin_dir),
        )

    @classmethod
    def attach(cls, state_file: str | Path) -> Cluster:
        """A handle on a cluster started by `python -m isvc_testbed up`; its stop() leaves it running."""
        state = ClusterState.from_json(Path(state_file).read_text())
        cluster = cls(bin_dir=Path(state.bin_dir))
        cluster.workdir = Path(state.workdir)
        cluster.ports = dict(state.ports)
        cluster.kubeconfigs = {k: Path(v) for k, v in state.kubeconfigs.items()}
        cluster._attached = True
        return cluster

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Start every component, wait until the API is ready and the default ServiceAccount exists."""
        if self.existing is not None:
            return self._start_on_existing(self.existing)
        t0 = time.monotonic()
        self.bin_dir = require_bins(self.bin_dir)
        self.workdir = Path(
            tempfile.mkdtemp(prefix="isvc-testbed-", dir=self.workdir_parent or _work_parent())
        )
        try:
            self._prepare()
            self._start("etcd")
            self._wait("etcd", self._etcd_healthy)
            self._start("kube-apiserver")
            self._wait("kube-apiserver", self._apiserver_ready)
            for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
                if name != "kwok" or self.kwok:
                    self._start(name)
            self._wait("kube-controller-manager", self._default_sa_exists)
            if self.real_node:
                self._start_real_node()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        self.log(f"isvc-testbed: cluster up in {self.startup_seconds:.1f}s at {self.server} ({self.workdir})")
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Terminate every process group this cluster started, then remove its directory."""
        if self._attached:
            return
        if self._real is not None:
            self._real.stop(grace)
            self._real = None
        # clients first, then the API server, then etcd: an API server whose etcd is gone stalls its shutdown
        phases = [
            [c for c in self._components if c.name not in ("kube-apiserver", "etcd")],
            [c for c in self._components if c.name == "kube-apiserver"],
            [c for c in self._components if c.name == "etcd"],
        ]
        for phase in phases:
            _terminate([c.proc for c in phase if c.proc is not None], grace)
        self._components.clear()
        if getattr(self, "workdir", None) is not None and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- internals ------------------------------------------------------------------------------------

    def _start_on_existing(self, admin: Path) -> Cluster:
        t0 = time.monotonic()
        if self.kwok:
            self.bin_dir = require_bins(self.bin_dir)
        self.workdir = Path(
            tempfile.mkdtemp(prefix="isvc-testbed-byo-", dir=self.workdir_parent or _work_parent())
        )
        try:
            (self.workdir / "logs").mkdir()
            self._server, ca = cluster_of(admin)
            (self.workdir / "pki").mkdir()
            (self.workdir / "pki" / "ca.crt").write_bytes(ca)
            self.kubeconfigs["admin"] = admin
            with self.api_client() as api:
                version = k8s.VersionApi(api).get_code()
                cert = _request_client_cert(api, self.workdir / "pki", ALICE[0], ALICE[1])
            self.kubeconfigs["alice"] = write_kubeconfig(
                self.workdir / "alice.kubeconfig", kubeconfig(self.server, ca, "alice", cert=cert)
            )
            if self.kwok:
                self._argv = {"kwok": self._kwok_argv()}
                self._start("kwok")
                with self.api_client() as api:
                    stale = _drop_stale_fake_pods(api)
                if stale:
                    self.log(f"isvc-testbed: deleted {stale} pods an earlier KWOK left not ready")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        self.log(
            f"isvc-testbed: using the cluster at {self.server} (Kubernetes {version.git_version}), "
            f"KWOK {'started' if self.kwok else 'not started'} ({self.workdir})"
        )
        return self

    def _kwok_argv(self) -> list[str]:
        b = self.bin_dir
        assert b is not None
        return [
            str(b / "kwok"),
            f"--kubeconfig={self.kubeconfigs['admin']}",
            f"--config={b / 'kwok-stages.yaml'}",
            f"--config={START_GATE_STAGES}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
            "--node-lease-duration-seconds=40",
            f"--cidr={POD_CIDR}",
            "--node-ip=127.0.0.1",
        ]

    def _prepare(self) -> None:
        d = self.workdir
        (d / "logs").mkdir()
        etcd_client, etcd_peer, api = _free_ports(3)
        self.ports = {"etcd": etcd_client, "etcd-peer": etcd_peer, "apiserver": api}
        self._pki = pki = Pki(d / "pki")
        serving = pki.serving()
        certs = {
            "admin": pki.client("admin", "isvc-testbed-admin", ("system:masters",)),
            "kcm": pki.client("kcm", "system:kube-controller-manager"),
            "scheduler": pki.client("scheduler", "system:kube-scheduler"),
            "alice": pki.client("alice", ALICE[0], ALICE[1]),
        }
        # the aggregation layer: the API server proxies to aggregated API servers (a metrics adapter) with this
        # client certificate, and they trust the user it names in X-Remote-* headers (requestheader flags)
        front_proxy = pki.client("front-proxy-client", FRONT_PROXY_CLIENT)
        real_node_args: list[str] = []
        if self.real_node:
            # the node's credential (Node authorizer, NodeRestriction) and the API server's to its kubelet;
            # InternalIP only: the API server must never look a node's name up (it would ask a resolver)
            pki.client("real-node", f"system:node:{REAL_NODE_NAME}", ("system:nodes",))
            kubelet_client = pki.client(
                "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
            )
            real_node_args = [
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
            ]
        webhook_client = pki.client("apiserver-webhook-client", WEBHOOK_CLIENT)
        admission = self._admission_config(webhook_client)
        for ident, cert in certs.items():
            self.kubeconfigs[ident] = write_kubeconfig(
                d / f"{ident}.kubeconfig", kubeconfig(self.server, pki.ca_pem, ident, cert=cert)
            )
        sched_cfg = d / "scheduler.yaml"
        sched_cfg.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "kubeconfig": str(self.kubeconfigs["scheduler"]),
                        "qps": 100,
                        "burst": 200,
                    },
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        b = self.bin_dir
        assert b is not None
        gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
        gate_args = [f"--feature-gates={gates}"] if gates else []
        kcm_cfg = str(self.kubeconfigs["kcm"])
        sched = str(self.kubeconfigs["scheduler"])
        argv: dict[str, list[str]] = {
            "etcd": [
                str(b / "etcd"),
                "--name=isvc-testbed",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=isvc-testbed=http://127.0.0.1:{etcd_peer}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ],
            "kube-apiserver": [
                str(b / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                "--bind-address=127.0.0.1",
                f"--secure-port={api}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={d / 'apiserver-certs'}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={pki.ca.cert}",
                f"--requestheader-client-ca-file={pki.ca.cert}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={front_proxy.cert}",
                f"--proxy-client-key-file={front_proxy.key}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--admission-control-config-file={admission}",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=0",
                *gate_args,
                *real_node_args,
            ],
            "kube-controller-manager": [
                str(b / "kube-controller-manager"),
                f"--kubeconfig={kcm_cfg}",
                f"--authentication-kubeconfig={kcm_cfg}",
                f"--authorization-kubeconfig={kcm_cfg}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--cluster-signing-cert-file={pki.ca.cert}",
                f"--cluster-signing-key-file={pki.ca.key}",
                # the HPA controller's pass over every autoscaler (default 15s): the growth tests wait on it
                f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_SECONDS}s",
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                "--profiling=false",
                "--v=0",
                *gate_args,
            ],
            "kube-scheduler": [
                str(b / "kube-scheduler"),
                f"--config={sched_cfg}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--profiling=false",
                "--v=0",
                *gate_args,
            ],
            "kwok": self._kwok_argv(),
        }
        self._argv = argv

    def _admission_config(self, client: CertFiles) -> Path:
        """The API server's admission configuration: every webhook it calls gets this client certificate
        (kubeconfig user `*`), as a production API server configured for webhook authentication does."""
        d = self.workdir
        creds = d / "webhook-client.kubeconfig"
        creds.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "users": [
                        {
                            "name": "*",
                            "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
                        }
                    ],
                }
            )
        )
        plugin = {
            "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "WebhookAdmissionConfiguration",
                "kubeConfigFile": str(creds),
            }
        }
        config = d / "admission.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "AdmissionConfiguration",
                    "plugins": [
                        {"name": "ValidatingAdmissionWebhook", **plugin},
                        {"name": "MutatingAdmissionWebhook", **plugin},
                    ],
                }
            )
        )
        return config

    @property
    def webhook_client(self) -> tuple[Path, str] | None:
        """The authority and common name of the client certificate this bed's API server presents to
        admission webhooks; None for a cluster the bed did not start (its API server's are unknown)."""
        cert = self.workdir / "pki" / "apiserver-webhook-client.crt"
        return (self.workdir / "pki" / "ca.crt", WEBHOOK_CLIENT) if cert.exists() else None

    def _start(self, name: str) -> None:
        c = _Component(name, self._argv[name], self.workdir / "logs" / f"{name}.log")
        self._components.append(c)
        c.start(self.workdir, self.die_with_parent)

    def _start_argv(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        self._argv[name] = argv
        self._start(name)
        proc = self._components[-1].proc
        assert proc is not None
        return proc

    def _stop_named(self, names: Sequence[str], grace: float = 10.0) -> None:
        chosen = [c for c in self._components if c.name in names]
        _terminate([c.proc for c in chosen if c.proc is not None], grace)
        self._components = [c for c in self._components if c not in chosen]

    def _start_real_node(self) -> None:
        assert self.bin_dir is not None
        node = RealNode(
            workdir=self.workdir,
            bin_dir=self.bin_dir,
            api_port=self.ports["apiserver"],
            ca_cert=self._pki.ca.cert,
            node_cert=(self._pki.dir / "real-node.crt", self._pki.dir / "real-node.key"),
            admin_kubeconfig=self.admin_kubeconfig,
            start_component=self._start_argv,
            stop_components=self._stop_named,
            timeout=self.timeout,
            log=self.log,
        )
        self._real = node
        node.start()

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            self.check()
            try:
                if ready():
                    return
            except (httpx.HTTPError, ApiException, OSError):
                pass
            if time.monotonic() > deadline:
                log = self.workdir / "logs" / f"{name}.log"
                raise StartTimeout(
                    f"{name} not ready after {self.timeout:.0f}s; last log lines:\n{_tail(log)}"
                )
            time.sleep(0.2)

    def _etcd_healthy(self) -> bool:
        r = httpx.get(f"http://127.0.0.1:{self.ports['etcd']}/health", timeout=2)
        return r.status_code == 200 and r.json().get("health") == "true"

    def _ssl_context(self, identity: str = "admin") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self._pki.ca.cert))
        ctx.load_cert_chain(str(self._pki.dir / f"{identity}.crt"), str(self._pki.dir / f"{identity}.key"))
        return ctx

    def _apiserver_ready(self) -> bool:
        r = httpx.get(f"{self.server}/readyz", verify=self._ssl_context(), timeout=5)
        return r.status_code == 200

    def _default_sa_exists(self) -> bool:
        r = httpx.get(
            f"{self.server}/api/v1/namespaces/default/serviceaccounts/default",
            verify=self._ssl_context(),
            timeout=5,
        )
        return r.status_code == 200


def install_crds(api: k8s.ApiClient, paths: Sequence[str | Path], timeout: float = 60.0) -> list[str]:
    """Create or replace the CRDs in these YAML files and wait until each is Established; return names."""
    ext = k8s.ApiextensionsV1Api(api)
    names: list[str] = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            name = doc["metadata"]["name"]
            try:
                ext.create_custom_resource_definition(cast(Any, doc))
            except ApiException as e:
                if e.status != 409:
                    raise
                current = ext.read_custom_resource_definition(name)
                assert current.metadata is not None
                doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                ext.replace_custom_resource_definition(name, cast(Any, doc))
            names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = ext.read_custom_resource_definition(name)
            conds = (crd.status.conditions if crd.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise StartTimeout(f"CRD {name} not Established after {timeout:.0f}s")
            time.sleep(0.1)
    return names


def _drop_stale_fake_pods(api: k8s.ApiClient) -> int:
    """Delete the running pods on fake nodes that are not Ready; return how many.

    While no KWOK ran (between two sessions on a cluster you bring), the node controller marked the fake
    nodes' pods not Ready; KWOK readies only Pending pods, so their owners must make them anew.
    """
    core = k8s.CoreV1Api(api)
    key, value = KWOK_NODE_SELECTOR.split("=", 1)
    nodes: Any = core.list_node()
    pods: Any = core.list_pod_for_all_namespaces()
    fake = {n.metadata.name for n in nodes.items if (n.metadata.annotations or {}).get(key) == value}
    deleted = 0
    for pod in pods.items:
        if pod.spec.node_name not in fake or pod.metadata.deletion_timestamp is not None:
            continue
        conditions = (pod.status.conditions if pod.status else None) or []
        if pod.status.phase == "Running" and not any(
            c.type == "Ready" and c.status == "True" for c in conditions
        ):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
                deleted += 1
    return deleted


def _request_client_cert(
    api: k8s.ApiClient, directory: Path, user: str, groups: tuple[str, ...]
) -> CertFiles:
    """A client certificate for `user` in `groups`, signed by the cluster through the certificates API.

    The request is approved as the administrator and deleted once its certificate is issued.
    """
    key, request = client_request(directory, user, user, groups)
    certs = k8s.CertificatesV1Api(api)
    name = f"isvc-testbed-{user}-{os.getpid()}-{int(time.time())}"
    body = {
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(request).decode(),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
            "expirationSeconds": 24 * 3600,
        },
    }
    certs.create_certificate_signing_request(cast(Any, body))
    try:
        csr: Any = certs.read_certificate_signing_request(name)
        csr.status.conditions = [
            k8s.V1CertificateSigningRequestCondition(
                type="Approved",
                status="True",
                reason="IsvcTestbed",
                message=f"the isvc test bed's user {user}",
            )
        ]
        certs.replace_certificate_signing_request_approval(name, csr)

        def issued() -> str | None:
            status = certs.read_certificate_signing_request(name).status
            issued_cert = status.certificate if status is not None else None
            return issued_cert if isinstance(issued_cert, str) else None

        pem = base64.b64decode(wait_for(issued, 60, what=f"the certificate of {user} (CSR {name})"))
    finally:
        with contextlib.suppress(ApiException):
            certs.delete_certificate_signing_request(name)
    cert = directory / f"{user}.crt"
    cert.write_bytes(pem)
    return CertFiles(cert, key)


def _token(resp: k8s.AuthenticationV1TokenRequest) -> str:
    if resp.status is None or not resp.status.token:
        raise TestbedError("the TokenRequest API returned no token")
    return str(resp.status.token)


def _terminate(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM each process group, wait up to `grace`, then SIGKILL whatever is left of the groups."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        # whatever is left in the group (the leader after the grace, or children it left) goes now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=5)


# ---- stopping a cluster recorded by another process ----------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _ours(pid: int, workdir: str) -> bool:
    """True when pid still runs a command that names our work dir (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return workdir in cmdline


def stop_recorded(state: ClusterState, grace: float = 10.0) -> list[str]:
    """Stop the process groups a ClusterState names (only if they still run our command), remove the dir.

    Returns the names of the components that were still running.
    """
    running = {n: p for n, p in state.pids.items() if _alive(p) and _ours(p, state.workdir)}
    phases = [
        [p for n, p in running.items() if n not in ("kube-apiserver", "etcd")],
        [p for n, p in running.items() if n == "kube-apiserver"],
        [p for n, p in running.items() if n == "etcd"],
    ]
    for pids in phases:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(state.workdir, ignore_errors=True)
    return sorted(running)
