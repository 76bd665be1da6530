"""The controller's benchmark (`nox -s bench-operator`): figures to `.bench/operator.json`.

A real test bed as the e2e tests run it (control plane, KWOK GPU nodes, the chart, the controller and the
planner as host processes, the stand-in inference server), with a fleet sized for the orders. Measured:

- order → Ready: the first order after start alone, then the rest created at a steady pace (median, p95);
- API writes, from the API server's own `apiserver_request_total` (read as admin): per order create →
  Ready and per steady minute, by verb and resource; the controller's share is the writes on the kinds it
  owns (the order's status, its children), the bench's own order creates left out;
- the controller's RSS and CPU from `/proc/<pid>` over the steady minute;
- after a controller restart: the time until it passed every order again, and the writes it made;
- what the controller's own `/metrics` exports (queue depth, if it does).

The pure parts (metrics text, write counts, percentiles, /proc parsing) are unit-tested in
`e2e/tests/unit/test_bench.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from isvc_api import GROUP, LABEL_ORDER, VERSION
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from isvc_testbed.cluster import SLOW_START_NAMESPACE, Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.module import NAMESPACE, ROOT, ModuleProcesses, install_chart
from isvc_testbed.standin import StandIn

__all__ = [
    "CONTROLLER_KINDS",
    "Bed",
    "Sample",
    "controller_writes",
    "cpu_seconds",
    "main",
    "parse_metrics",
    "percentile",
    "rss_bytes",
    "writes",
]

BENCH_NS = "bench"
MODEL: dict[str, Any] = {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"}}  # README order
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
# resource[/subresource] the controller writes and no other component of the bed does (kcm writes
# statefulsets/status and the model volumes' claims, the scheduler resourceclaims/status and pods/binding,
# KWOK pods/status and leases)
CONTROLLER_KINDS = frozenset(
    {
        "inferenceservices",
        "inferenceservices/status",
        "launchplans",
        "launchplans/status",
        "resourceclaimtemplates",
        "statefulsets",
        "services",
        "ingresses",
        "secrets",
        "certificates",
    }
)

Labels = tuple[tuple[str, str], ...]
Sample = dict[tuple[str, Labels], float]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


# ---- pure parts ------------------------------------------------------------------------------------------


def parse_metrics(text: str, names: Iterable[str] | None = None) -> Sample:
    """Prometheus text exposition → {(name, sorted labels): value}; only `names` when given."""
    wanted = set(names) if names is not None else None
    out: Sample = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        if wanted is not None and name not in wanted:
            continue
        pairs = tuple(
            sorted((k, v.replace('\\"', '"').replace("\\\\", "\\")) for k, v in _LABEL.findall(labels))
        )
        try:
            out[(name, pairs)] = float(value)
        except ValueError:
            continue
    return out


def writes(before: Sample, after: Sample) -> dict[str, int]:
    """API writes between two samples of `apiserver_request_total`, as {"VERB resource[/sub]": count}."""
    counts: dict[str, int] = {}
    for (name, labels), value in after.items():
        if name != "apiserver_request_total":
            continue
        d = dict(labels)
        if d.get("verb") not in WRITE_VERBS or d.get("dry_run"):
            continue
        delta = value - before.get((name, labels), 0.0)
        if delta <= 0:
            continue
        kind = d.get("resource", "") + (f"/{d['subresource']}" if d.get("subresource") else "")
        key = f"{d['verb']} {kind}"
        counts[key] = counts.get(key, 0) + round(delta)
    return dict(sorted(counts.items()))


def controller_writes(counts: Mapping[str, int], bench_creates: int = 0) -> int:
    """The controller's share of `writes(...)`: writes on the kinds only it writes, less the bench's own
    `bench_creates` order creates (POST inferenceservices)."""
    total = sum(n for key, n in counts.items() if key.split(" ", 1)[1] in CONTROLLER_KINDS)
    return total - bench_creates


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks; NaN for no values."""
    data = sorted(values)
    if not data:
        return math.nan
    rank = (len(data) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return data[low] + (data[high] - data[low]) * (rank - low)


def cpu_seconds(stat: str, ticks: int) -> float:
    """User + system CPU seconds from the text of /proc/<pid>/stat."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat


def rss_bytes(status: str) -> int:
    """VmRSS from the text of /proc/<pid>/status, in bytes."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS line")


def bench_fleet(orders: int) -> dict[str, Any]:
    """A fleet with room for `orders` small orders: a system node and shareable H100 nodes."""
    nodes: list[dict[str, Any]] = [{"name": "system-0", "role": "system", "cpu": "16", "memory": "64Gi"}]
    for n in range(max(2, math.ceil(orders / 12))):
        nodes.append(
            {
                "name": f"gpu-h100-{n}",
                "cpu": "4000",
                "memory": "64Ti",
                "pods": "500",
                "gpus": [
                    {
                        "product": "NVIDIA H100 80GB HBM3",
                        "count": 8,
                        "memory": "80Gi",
                        "architecture": "Hopper",
                        "cudaComputeCapability": "9.0",
                    }
                ],
            }
        )
    # the default fleet's installation of the driver: main with consumableShares 100
    driver = {"release": "main", "consumableShares": "100"}
    return {"driver": driver, "driverVersion": "580.95.05", "cudaDriverVersion": "13.0", "nodes": nodes}


# ---- the bed ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Bed:
    """A test bed for many orders: cluster, fleet, chart, stand-in, planner, controller(s) with /metrics."""

    cluster: Cluster
    standin: StandIn
    module: ModuleProcesses
    admin: k8s.ApiClient
    alice: k8s.ApiClient
    metrics_ports: dict[str, int] = field(default_factory=dict)
    health_period: float | None = None  # None: the bed's 3 s; the product's default is 30 s
    resync: float | None = None  # None: the product's default (3600 s)
    controller_args: tuple[str, ...] = ()  # more flags of every controller start

    def start_controller(self, name: str = "controller") -> None:
        """A controller (leader-elect, as the bed runs it) with its /metrics on a free loopback port."""
        port = _free_port()
        self.metrics_ports[name] = port
        extra = ["--metrics-port", str(port), "--metrics-host", "127.0.0.1"]
        if self.health_period is not None:
            extra += ["--health-period-seconds", str(self.health_period)]
        if self.resync is not None:
            extra += ["--resync-seconds", str(self.resync)]
        self.module.start_controller(*extra, *self.controller_args, name=name)

    def controller_metrics(self, name: str = "controller") -> Sample:
        """The controller's own /metrics, {} while it does not answer."""
        try:
            r = httpx.get(f"http://127.0.0.1:{self.metrics_ports[name]}/metrics", timeout=5)
        except httpx.HTTPError:
            return {}
        return parse_metrics(r.text) if r.status_code == 200 else {}

    def api_sample(self) -> Sample:
        return parse_metrics(self.cluster.metrics_text(), ["apiserver_request_total"])

    def orders_api(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.alice)

    def create(self, name: str, model: Mapping[str, Any] = MODEL) -> None:
        self.orders_api().create_namespaced_custom_object(
            GROUP,
            VERSION,
            BENCH_NS,
            "inferenceservices",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceService",
                "metadata": {"name": name},
                "spec": {"inferenceServiceClassName": "default-llm", "model": dict(model)},
            },
        )

    def list_orders(self) -> list[dict[str, Any]]:
        got: Any = self.orders_api().list_namespaced_custom_object(
            GROUP, VERSION, BENCH_NS, "inferenceservices"
        )
        return list(got["items"])

    def leader(self) -> str | None:
        """The Lease holder's identity (host_pid), None when none holds it."""
        try:
            lease = k8s.CoordinationV1Api(self.admin).read_namespaced_lease("isvc-controller", NAMESPACE)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return lease.spec.holder_identity if lease.spec else None


@contextmanager
def bed(
    orders: int,
    controllers: Iterable[str] = ("controller",),
    health_period: float | None = None,
    fleet_spec: dict[str, Any] | None = None,
    resync: float | None = None,
    planner_args: Iterable[str] = (),
    controller_args: Iterable[str] = (),
) -> Iterator[Bed]:
    """Start everything for `orders` orders (or on `fleet_spec`); stop exactly what was started on leaving.

    `planner_args` are added to every planner start (the chaos run lengthens `--reservation-ttl`)."""
    cluster = Cluster().start()
    standin: StandIn | None = None
    module: ModuleProcesses | None = None
    try:
        fleet_file = cluster.workdir / "bench-fleet.yaml"
        fleet_file.write_text(yaml.safe_dump(fleet_spec or bench_fleet(orders)))
        with cluster.api_client("admin") as admin, cluster.api_client("alice") as alice:
            fleet = Fleet.load(fleet_file)
            fleet.publish(admin)
            core = k8s.CoreV1Api(admin)

            def nodes_ready() -> bool:
                nodes: list[Any] = core.list_node().items
                return len(nodes) == len(fleet.nodes) and all(
                    any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
                    for n in nodes
                )

            wait_for(nodes_ready, 60, what="fleet nodes Ready")
            install_chart(cluster)
            user_namespace(admin, BENCH_NS, user="alice", cluster_role="d8:user-authz:isvc:editor")
            standin = StandIn.from_kubeconfig(cluster.admin_kubeconfig)
            standin.start()
            module = ModuleProcesses(cluster, standin.url_template)
            module.planner_args = tuple(planner_args)
            module.start_volumes()
            module.start_hub()
            module.start_planner()
            b = Bed(
                cluster,
                standin,
                module,
                admin,
                alice,
                health_period=health_period,
                resync=resync,
                controller_args=tuple(controller_args),
            )
            for name in controllers:
                b.start_controller(name)
            wait_for(b.leader, 60, what="a controller leading")
            yield b
    finally:
        if module is not None:
            module.stop()
        if standin is not None:
            standin.stop()
        cluster.stop()


class ReadyWatch:
    """When each order of the namespace was first seen Ready (a watch as admin, in a thread), and the
    statuses each went through before: which step a status write beyond the goal's count was."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = k8s.CustomObjectsApi(api)
        self.ready: dict[str, float] = {}
        self.statuses: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadyWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            w = k8s_watch.Watch()
            try:
                for event in w.stream(
                    self.api.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    BENCH_NS,
                    "inferenceservices",
                    timeout_seconds=30,
                ):
                    obj = event["object"]
                    name = obj["metadata"]["name"]
                    if name not in self.ready:
                        seen, now = self.statuses.setdefault(name, []), _status_line(obj)
                        if now is not None and (not seen or seen[-1] != now):
                            seen.append(now)
                    if (obj.get("status") or {}).get("phase") == "Ready" and name not in self.ready:
                        self.ready[name] = time.monotonic()
                    if self._stop.is_set():
                        w.stop()
            except Exception:  # a broken watch is started again
                time.sleep(0.5)


def _status_line(obj: dict[str, Any]) -> str | None:
    """An order's status in one line: phase, then each condition as type=status/reason: message."""
    status = obj.get("status")
    if not status:
        return None
    conds = "; ".join(
        f"{c['type']}={c['status']}/{c.get('reason', '')}: {c.get('message', '')[:80]}"
        for c in status.get("conditions", [])
    )
    return f"{status.get('phase')} [{conds}]"


def status_paths(statuses: Mapping[str, list[str]]) -> dict[str, Any]:
    """How many orders went through how many statuses before Ready, and the longest path seen."""
    counts: dict[int, int] = {}
    for seen in statuses.values():
        counts[len(seen)] = counts.get(len(seen), 0) + 1
    longest = max(statuses.values(), key=len, default=[])
    return {"orders_by_statuses": {str(k): v for k, v in sorted(counts.items())}, "longest": longest}


def diagnose(b: Bed, limit: int = 5) -> str:
    """The conditions, pods and claims of up to `limit` orders that are not Ready, and the log tails."""
    lines: list[str] = []
    for o in b.list_orders():
        status = o.get("status") or {}
        if status.get("phase") != "Ready" and len(lines) < limit:
            conds = " ".join(
                f"{c['type']}={c['status']}/{c['reason']}: {c.get('message', '')}"
                for c in status.get("conditions", [])
                if c["status"] != "True"
            )
            lines.append(f"{o['metadata']['name']} phase={status.get('phase')} {conds}")
            lines += _workload_lines(b, o["metadata"]["name"])
    for name in ("controller", "planner"):
        with suppress(OSError):
            lines.append(f"--- {name} log tail\n{b.module.log(name)[-3000:]}")
    return "\n".join(lines)


def _workload_lines(b: Bed, order: str) -> list[str]:
    """The order's StatefulSet, pods (node, phase, conditions) and claims (allocated, reserved for)."""
    label = f"ai.deckhouse.io/inference-service={order}"
    lines: list[str] = []
    with suppress(ApiException):
        sets: list[Any] = (
            k8s.AppsV1Api(b.admin).list_namespaced_stateful_set(BENCH_NS, label_selector=label).items
        )
        pods: list[Any] = k8s.CoreV1Api(b.admin).list_namespaced_pod(BENCH_NS).items
        claims: list[Any] = k8s.ResourceV1Api(b.admin).list_namespaced_resource_claim(BENCH_NS).items
        for d in sets:
            st = d.status
            lines.append(
                f"  statefulset {d.metadata.name}: replicas {st.replicas if st else None} "
                f"ready {st.ready_replicas if st else None}"
            )
        for pod in pods:
            if not pod.metadata.name.startswith(f"{order}-"):
                continue
            conds = {c.type: c.status for c in (pod.status.conditions or [])} if pod.status else {}
            lines.append(
                f"  pod {pod.metadata.name}: node {pod.spec.node_name if pod.spec else None} "
                f"phase {pod.status.phase if pod.status else None} {conds}"
            )
        for c in claims:
            if c.metadata.name.startswith(f"{order}-"):
                allocated = bool(c.status and c.status.allocation)
                reserved = [r.name for r in ((c.status.reserved_for if c.status else None) or [])]
                lines.append(f"  claim {c.metadata.name}: allocated {allocated} reserved for {reserved}")
    return lines


@contextmanager
def explained(b: Bed) -> Iterator[None]:
    """On a timeout, say what the orders and the controller said."""
    try:
        yield
    except TimeoutError:
        say(diagnose(b))
        raise


def _proc(pid: int) -> tuple[float, int]:
    ticks = os.sysconf("SC_CLK_TCK")
    return (
        cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), ticks),
        rss_bytes(Path(f"/proc/{pid}/status").read_text()),
    )


def _passes(sample: Sample, kind: str = "order") -> float:
    return sum(
        v
        for (n, labels), v in sample.items()
        if n == "isvc_reconcile_total" and dict(labels).get("kind") == kind
    )


def _sum(sample: Sample, name: str, kind: str = "order") -> float:
    return sum(v for (n, labels), v in sample.items() if n == name and dict(labels).get("kind") == kind)


def _loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run(
    orders: int,
    rate: float,
    steady: float,
    timeout: float,
    health_period: float | None = None,
    resync: float | None = None,
) -> dict[str, Any]:
    """The whole benchmark; returns the figures."""
    out: dict[str, Any] = {
        "orders": orders,
        "model": MODEL["ref"]["name"],
        "create_rate_per_s": rate,
        "health_period_seconds": health_period or 3.0,
        "resync_seconds": resync or 3600.0,
        "machine": {"cpus": os.cpu_count(), "loadavg_start": _loadavg()},
    }
    t_start = time.monotonic()
    with (
        bed(orders, health_period=health_period, resync=resync) as b,
        ReadyWatch(b.admin) as watch,
        explained(b),
    ):
        out["bed_seconds"] = round(time.monotonic() - t_start, 1)
        pid = b.module.pid("controller")
        assert pid is not None
        # -- the first order after start, alone
        before = b.api_sample()
        created: dict[str, float] = {"bench-0000": time.monotonic()}
        b.create("bench-0000")
        wait_for(lambda: "bench-0000" in watch.ready, 120, 0.05, "the first order Ready")
        first_writes = writes(before, b.api_sample())
        out["first_order"] = {
            "ready_seconds": round(watch.ready["bench-0000"] - created["bench-0000"], 2),
            "writes": first_writes,
            "controller_writes": controller_writes(first_writes, 1),
            "statuses": list(watch.statuses.get("bench-0000", [])),
        }
        plan_kinds = _children(b, "bench-0000")
        out["objects_per_order"] = plan_kinds
        say(
            f"first order Ready in {out['first_order']['ready_seconds']}s, "
            f"{out['first_order']['controller_writes']} controller writes"
        )
        # -- the rest at a steady pace
        before = b.api_sample()
        t0 = time.monotonic()
        for i in range(1, orders):
            name = f"bench-{i:04d}"
            due = t0 + (i - 1) / rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            created[name] = time.monotonic()
            b.create(name)
        wait_for(lambda: len(watch.ready) >= orders, timeout, 1.0, f"{orders} orders Ready")
        batch = writes(before, b.api_sample())
        latencies = [watch.ready[n] - created[n] for n in created if n != "bench-0000"]
        out["ready_seconds"] = {
            "median": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
            "max": round(max(latencies), 2),
            "count": len(latencies),
        }
        out["create_to_ready"] = {
            "writes": batch,
            "controller_writes": controller_writes(batch, orders - 1),
            "controller_writes_per_order": round(controller_writes(batch, orders - 1) / (orders - 1), 2),
        }
        out["create_to_ready"]["status_paths"] = status_paths(
            {n: watch.statuses.get(n, []) for n in created if n != "bench-0000"}
        )
        ready = out["ready_seconds"]
        say(f"{orders} orders Ready: median {ready['median']}s p95 {ready['p95']}s")
        # -- a steady minute
        time.sleep(10)
        before, (cpu0, _), m0 = b.api_sample(), _proc(pid), b.controller_metrics()
        t0 = time.monotonic()
        time.sleep(steady)
        after, (cpu1, rss), m1 = b.api_sample(), _proc(pid), b.controller_metrics()
        span = time.monotonic() - t0
        passes = _passes(m1) - _passes(m0)
        pass_time = _sum(m1, "isvc_reconcile_seconds_sum") - _sum(m0, "isvc_reconcile_seconds_sum")
        minute = writes(before, after)
        per_minute = {k: round(v * 60 / span, 1) for k, v in minute.items()}
        not_ready = [
            o["metadata"]["name"] for o in b.list_orders() if (o.get("status") or {}).get("phase") != "Ready"
        ]
        out["steady"] = {
            "seconds": round(span, 1),
            "writes_per_minute": per_minute,
            "controller_writes_per_minute": round(controller_writes(minute) * 60 / span, 1),
            "controller_writes_per_order_minute": round(controller_writes(minute) * 60 / span / orders, 3),
            "controller_rss_mb": round(rss / 2**20, 1),
            "controller_cpu_percent": round(100 * (cpu1 - cpu0) / span, 1),
            "order_passes_per_second": round(passes / span, 1),
            "mean_pass_seconds": round(pass_time / passes, 3) if passes else None,
            "orders_not_ready": not_ready,
            "loadavg": _loadavg(),
        }
        say(f"steady: {out['steady']}")
        # -- what the controller exports
        exported = sorted({n for n, _ in b.controller_metrics()})
        out["controller_metric_names"] = [n for n in exported if n.startswith("isvc_")]
        queue = [n for n in exported if "queue" in n or "depth" in n]
        out["queue_depth_metric"] = queue or None
        # -- restart: every order passed again, and what it wrote
        passes_before = _passes(b.controller_metrics())
        before = b.api_sample()
        t0 = time.monotonic()
        b.module.kill("controller", signal.SIGTERM)
        b.start_controller("controller")
        pid = b.module.pid("controller")
        assert pid is not None, "the controller did not start again"
        leading_s: float | None = None
        judged_s: float | None = None

        def judged() -> bool:
            nonlocal leading_s
            if leading_s is None and (b.leader() or "").endswith(f"_{pid}"):
                leading_s = round(time.monotonic() - t0, 1)
            return _passes(b.controller_metrics()) >= orders

        judged_cpu: float | None = None
        with suppress(TimeoutError):
            wait_for(judged, 120, 0.2, "every order passed after the restart")
            judged_s = round(time.monotonic() - t0, 1)
            judged_cpu = _proc(pid)[0]
        # writes over the 60 s after the restart: goal 0 for unchanged orders
        rest = 60 - (time.monotonic() - t0)
        if rest > 0:
            time.sleep(rest)
        restart = writes(before, b.api_sample())
        # A replay of every order (each --resync-seconds) costs at most what judging them all after a
        # start did (that also imported, listed and filled the caches): its share of a core, amortized.
        resync_s = resync or 3600.0
        if judged_cpu is not None:
            out["steady"]["replay_cpu_seconds_at_most"] = round(judged_cpu, 1)
            out["steady"]["replay_cpu_percent_amortized_at_most"] = round(100 * judged_cpu / resync_s, 2)
            out["steady"]["cpu_percent_at_rest_with_replays_at_most"] = round(
                out["steady"]["controller_cpu_percent"] + 100 * judged_cpu / resync_s, 1
            )
        out["restart"] = {
            "leading_seconds": leading_s,
            "judged_seconds": judged_s,
            "cpu_seconds": judged_cpu,
            "passes_before_restart": passes_before,
            "passes_first_60s": _passes(b.controller_metrics()),
            "writes_60s": restart,
            "controller_writes_60s": controller_writes(restart),
        }
        say(f"restart: {out['restart']}")
        out["total_seconds"] = round(time.monotonic() - t_start, 1)
    return out


L4_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"


def waiting_fleet() -> dict[str, Any]:
    """One L4 for the orders that wait, one node of eight shareable H100s for the order that must not."""
    fleet = bench_fleet(1)
    l4 = {
        "name": "gpu-l4-0",
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "gpus": [
            {
                "product": "NVIDIA L4",
                "count": 1,
                "memory": "23034Mi",
                "architecture": "Ada Lovelace",
                "cudaComputeCapability": "8.9",
            }
        ],
    }
    fleet["nodes"] = [*fleet["nodes"][:2], l4]
    return fleet


def waiting_room(
    waiting: int, window: float = 330.0, period: float = 300.0, timeout: float = 1800.0
) -> dict[str, Any]:
    """Issue 26: `waiting` orders on a full fleet (one L4, the first of them on it, the rest waiting for room).
    At rest, over `window` seconds (a waiting-room safety period of `period` and a little more): controller and
    planner CPU, and the planner's calls by endpoint. Then the L4 frees (its order is deleted): the seconds
    until the best waiting order is Ready."""
    port = _free_port()
    planner_args = ("--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    room_args = ("--waiting-room-seconds", str(period))
    with bed(
        0, fleet_spec=waiting_fleet(), health_period=30, planner_args=planner_args, controller_args=room_args
    ) as b:
        custom = k8s.CustomObjectsApi(b.admin)
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "inferenceserviceclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceServiceClass",
                "metadata": {"name": "bench-one-l4"},
                "spec": {
                    "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                    "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                    "acceleratorPolicy": {"deviceClassNames": ["gpu.nvidia.com"], "selector": L4_ONLY},
                },
            },
        )
        say(f"waiting room: {waiting} orders on one L4")
        t_create = time.monotonic()
        names = [f"wait-{i:04d}" for i in range(waiting)]
        for name in names:
            b.orders_api().create_namespaced_custom_object(
                GROUP,
                VERSION,
                BENCH_NS,
                "inferenceservices",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "InferenceService",
                    "metadata": {"name": name},
                    "spec": {"inferenceServiceClassName": "bench-one-l4", "model": dict(MODEL)},
                },
            )

        def room() -> float:
            return sum(
                v for (name, _), v in b.controller_metrics().items() if name == "isvc_orders_waiting_for_room"
            )

        def ready() -> list[str]:
            return [
                o["metadata"]["name"]
                for o in b.list_orders()
                if (o.get("status") or {}).get("phase") == "Ready"
            ]

        with explained(b):
            wait_for(lambda: room() >= waiting - 1, timeout, interval=2, what=f"{waiting - 1} orders waiting")
            held = wait_for(lambda: ready() or None, timeout, interval=2, what="the order on the L4 Ready")
        filled = round(time.monotonic() - t_create, 1)
        say(f"  {waiting - 1} waiting, {held} on the L4, after {filled} s; at rest for {window:.0f} s")
        time.sleep(10)  # the last statuses written

        def planner_metrics() -> Sample:
            try:
                return parse_metrics(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
            except httpx.HTTPError:
                return {}

        def calls(sample: Sample) -> dict[str, float]:
            out: dict[str, float] = {}
            for (name, labels), v in sample.items():
                if name == "isvc_planner_plan_duration_seconds_count":
                    endpoint = dict(labels).get("endpoint", "")
                    out[endpoint] = out.get(endpoint, 0) + v
            return out

        pids = {"controller": b.module.pid("controller"), "planner": b.module.pid("planner")}
        before = {n: _proc(p) for n, p in pids.items() if p}
        p0, c0, a0 = calls(planner_metrics()), b.controller_metrics(), b.api_sample()
        t0 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        after = {n: _proc(p) for n, p in pids.items() if p}
        p1, c1, a1 = calls(planner_metrics()), b.controller_metrics(), b.api_sample()
        per_minute = {k: round((p1.get(k, 0) - p0.get(k, 0)) * 60 / elapsed, 2) for k in sorted(p1)}
        in_window = {k: int(p1.get(k, 0) - p0.get(k, 0)) for k in sorted(p1)}
        rest = {
            "window_seconds": round(elapsed, 1),
            "safety_period_seconds": period,
            "controller_cpu_percent": round(
                (after["controller"][0] - before["controller"][0]) * 100 / elapsed, 2
            ),
            "planner_cpu_percent": round((after["planner"][0] - before["planner"][0]) * 100 / elapsed, 2),
            "controller_rss_mb": round(after["controller"][1] / 1e6, 1),
            "planner_rss_mb": round(after["planner"][1] / 1e6, 1),
            "planner_calls_in_window": in_window,
            "planner_calls_per_minute": per_minute,
            "room_passes_in_window": int(
                sum(v for (n, _), v in c1.items() if n == "isvc_waiting_room_passes")
                - sum(v for (n, _), v in c0.items() if n == "isvc_waiting_room_passes")
            ),
            "order_passes_in_window": int(_passes(c1) - _passes(c0)),
            "controller_writes_in_window": controller_writes(writes(a0, a1)),
        }
        say(f"  at rest: {rest}")
        first = held[0]
        claims = k8s.ResourceV1Api(b.admin)

        def device_free() -> bool:  # its pod gone and its claim with it: what the scheduler frees the L4 on
            items = claims.list_namespaced_resource_claim(
                BENCH_NS, label_selector=f"{LABEL_ORDER}={first}"
            ).items
            return not any(c.status and c.status.allocation for c in items)

        t_delete = time.monotonic()
        b.orders_api().delete_namespaced_custom_object(GROUP, VERSION, BENCH_NS, "inferenceservices", first)
        with explained(b):
            wait_for(device_free, 300, interval=0.05, what=f"the claim of {first} released")
            t_free = time.monotonic()
            moved = wait_for(
                lambda: [n for n in ready() if n != first] or None,
                300,
                interval=0.1,
                what="a waiting order Ready",
            )
        freed = round(time.monotonic() - t_free, 2)
        released = round(t_free - t_delete, 2)
        disagreements = sum(
            v for (n, _), v in planner_metrics().items() if n == "isvc_planner_scheduler_disagreements_total"
        )
        say(
            f"  {first} deleted, its claim released {released} s later; {moved[0]} Ready {freed} s after that;"
            f" the planner's scheduler disagreements over the run: {int(disagreements)}"
        )
        return {
            "waiting": waiting - 1,
            "fill_seconds": filled,
            "at_rest": rest,
            "order_deleted_to_device_free_seconds": released,
            "device_freed_to_ready_seconds": freed,
            "ready_after_freeing": moved[0],
            "scheduler_disagreements": int(disagreements),
            "goals": {
                "cpu_percent_at_rest": 2.0,
                "planner_plan_calls_per_safety_period": 1,
                "scheduler_disagreements": 0,
            },
            "loadavg": _loadavg(),
        }


H100_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
EMBEDDINGS: dict[str, Any] = {"src": "HuggingFace", "ref": {"name": "BAAI/bge-m3"}}


def freed_fleet(cards: int) -> dict[str, Any]:
    """A system node and one node of `cards` shareable H100s, CPU and pods to spare."""
    fleet = bench_fleet(1)
    fleet["nodes"] = fleet["nodes"][:2]
    fleet["nodes"][1]["gpus"][0]["count"] = cards
    return fleet


def _orders_in(b: Bed, namespace: str) -> list[dict[str, Any]]:
    listed: Any = b.orders_api().list_namespaced_custom_object(GROUP, VERSION, namespace, "inferenceservices")
    return list(listed["items"])


def _permitted_at(b: Bed, namespace: str) -> dict[str, float]:
    """When each order's replica was permitted to start (its pod's start-permitted-at), in epoch seconds."""
    out: dict[str, float] = {}
    pods: list[Any] = k8s.CoreV1Api(b.admin).list_namespaced_pod(namespace, label_selector=LABEL_ORDER).items
    for pod in pods:
        at = (pod.metadata.annotations or {}).get("ai.deckhouse.io/start-permitted-at")
        if at:
            out[pod.metadata.labels[LABEL_ORDER]] = datetime.fromisoformat(
                at.replace("Z", "+00:00")
            ).timestamp()
    return out


def freed_cards(total: int, freed: int, cards: int, timeout: float = 900.0) -> dict[str, Any]:
    """Issue 45's load run: `total` orders (4 embeddings to 1 7B chat, created alternately) on `cards` shared
    H100s, most waiting; then `freed` Ready ones deleted at once (4 embeddings to 1 chat). The seconds from the
    deletion to each order's start permit and to its Ready, for the orders Ready after it, on a stand-in whose
    start takes 1.5 s (namespace start-slow)."""
    namespace = SLOW_START_NAMESPACE
    with bed(0, fleet_spec=freed_fleet(cards), health_period=30) as b:
        user_namespace(b.admin, namespace, user="alice", cluster_role="d8:user-authz:isvc:editor")
        custom = k8s.CustomObjectsApi(b.admin)
        for name, kind in (("bench-emb", "Embeddings"), ("bench-chat", "Chat")):
            custom.create_cluster_custom_object(
                GROUP,
                VERSION,
                "inferenceserviceclasses",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "InferenceServiceClass",
                    "metadata": {"name": name},
                    "spec": {
                        "modelPolicy": {"allowedEndpointTypes": [kind]},
                        "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                        "acceleratorPolicy": {"deviceClassNames": ["gpu.nvidia.com"], "selector": H100_ONLY},
                    },
                },
            )
        say(f"freed cards: {total} orders on {cards} shared H100s")
        for i in range(total):
            chat = i % 5 == 4
            b.orders_api().create_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                "inferenceservices",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "InferenceService",
                    "metadata": {"name": f"load-{'chat' if chat else 'emb'}-{i:03d}"},
                    "spec": {
                        "inferenceServiceClassName": "bench-chat" if chat else "bench-emb",
                        "model": dict(MODEL if chat else EMBEDDINGS),
                    },
                },
            )

        def ready() -> set[str]:
            return {
                o["metadata"]["name"]
                for o in _orders_in(b, namespace)
                if (o.get("status") or {}).get("phase") == "Ready"
            }

        seen: list[int] = []

        def settled() -> bool:  # no order became Ready over the last 20 s
            seen.append(len(ready()))
            return len(seen) > 10 and seen[-1] == seen[-11] and seen[-1] > 0

        with explained(b):
            wait_for(settled, timeout, interval=2, what="the fleet filled")
        before = ready()
        if len(before) <= freed:
            raise SystemExit(
                f"{len(before)} orders Ready, not more than the {freed} to delete: give more --cards"
            )
        chats = sorted(n for n in before if "chat" in n)[: freed // 5]
        gone = chats + sorted(n for n in before if "emb" in n)[: freed - len(chats)]
        say(f"  {len(before)} Ready, {total - len(before)} waiting; deleting {len(gone)} Ready ones")
        t_delete = time.time()
        for name in gone:
            b.orders_api().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, "inferenceservices", name
            )
        first_ready: dict[str, float] = {}
        quiet_since = time.time()
        while (not first_ready or time.time() - quiet_since < 30) and time.time() - t_delete < timeout:
            for name in ready() - before - set(first_ready):  # until none more for 30 s after the first
                first_ready[name] = time.time()
                quiet_since = time.time()
            time.sleep(0.5)
        permits = _permitted_at(b, namespace)
        after_ready = sorted(t - t_delete for t in first_ready.values())
        after_permit = sorted(permits[n] - t_delete for n in first_ready if n in permits)
        figures = {
            "orders": total,
            "cards": cards,
            "ready_before_deletion": len(before),
            "deleted": len(gone),
            "ready_after_deletion": len(first_ready),
            "chats_ready_after_deletion": sum("chat" in n for n in first_ready),
            "deletion_to_ready_seconds": {
                "median": round(percentile(after_ready, 50), 1) if after_ready else None,
                "last": round(after_ready[-1], 1) if after_ready else None,
            },
            "deletion_to_permit_seconds": {
                "median": round(percentile(after_permit, 50), 1) if after_permit else None,
                "last": round(after_permit[-1], 1) if after_permit else None,
            },
            "standin_start_seconds": 1.5,
            "loadavg": _loadavg(),
        }
        say(f"  {figures}")
        return figures


def _children(b: Bed, order: str) -> dict[str, int]:
    """The objects made for an order, by kind (labelled with its name)."""
    label = f"ai.deckhouse.io/inference-service={order}"
    custom, apps, core = k8s.CustomObjectsApi(b.admin), k8s.AppsV1Api(b.admin), k8s.CoreV1Api(b.admin)
    net, res = k8s.NetworkingV1Api(b.admin), k8s.ResourceV1Api(b.admin)
    plans: Any = custom.list_namespaced_custom_object(
        GROUP, VERSION, BENCH_NS, "launchplans", label_selector=label
    )
    counts = {
        "LaunchPlan": len(plans["items"]),
        "ResourceClaimTemplate": len(
            res.list_namespaced_resource_claim_template(BENCH_NS, label_selector=label).items
        ),
        "StatefulSet": len(apps.list_namespaced_stateful_set(BENCH_NS, label_selector=label).items),
        "Service": len(core.list_namespaced_service(BENCH_NS, label_selector=label).items),
        "Ingress": len(net.list_namespaced_ingress(BENCH_NS, label_selector=label).items),
        "Secret": len(core.list_namespaced_secret(BENCH_NS, label_selector=label).items),
    }
    return counts


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.bench", description=__doc__.split("\n")[0])
    p.add_argument("--orders", type=int, default=200)
    p.add_argument("--rate", type=float, default=4.0, help="orders created per second after the first")
    p.add_argument("--steady", type=float, default=60.0, help="seconds of the steady window")
    p.add_argument("--timeout", type=float, default=600.0, help="longest wait for every order Ready")
    p.add_argument(
        "--health-period",
        type=float,
        default=None,
        help="the controller's --health-period-seconds (default: the bed's 3; product: 30)",
    )
    p.add_argument(
        "--resync",
        type=float,
        default=None,
        help="the controller's --resync-seconds (default: the product's 3600); a steady window at "
        "least this long includes one replay of every order",
    )
    p.add_argument(
        "--waiting",
        type=int,
        default=0,
        help="instead: this many orders waiting for room on a full fleet, at rest (CPU, planner calls) and "
        "when a device frees (issue 26); added to .bench/operator.json as `waiting_room`",
    )
    p.add_argument(
        "--window", type=float, default=330.0, help="with --waiting: seconds at rest that are measured"
    )
    p.add_argument(
        "--freed",
        type=int,
        default=0,
        help="instead: --orders orders on --cards shared H100s, most waiting, then this many Ready ones deleted: "
        "seconds from the deletion to each newly Ready order (issue 45); `freed_cards` in .bench/operator.json",
    )
    p.add_argument(
        "--cards", type=int, default=10, help="with --freed: shared H100s (about 8 orders Ready each)"
    )
    p.add_argument(
        "--room-period",
        type=float,
        default=300.0,
        help="with --waiting: the controller's --waiting-room-seconds (the product's default 300)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default .bench/operator.json (200 orders), else .bench/operator-N.json",
    )
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupted)  # a SIGTERM stops what was started, as Ctrl-C does
    if args.freed:
        target = args.out or ROOT / ".bench" / "operator.json"
        known = json.loads(target.read_text()) if target.exists() else {}
        known["freed_cards"] = freed_cards(args.orders, args.freed, args.cards, args.timeout)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(known, indent=2) + "\n")
        print(json.dumps(known["freed_cards"], indent=2))
        say(f"written to {target}")
        return 0
    if args.waiting:
        target = args.out or ROOT / ".bench" / "operator.json"
        known = json.loads(target.read_text()) if target.exists() else {}
        known["waiting_room"] = waiting_room(args.waiting + 1, args.window, args.room_period)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(known, indent=2) + "\n")
        print(json.dumps(known["waiting_room"], indent=2))
        say(f"written to {target}")
        return 0
    figures = run(args.orders, args.rate, args.steady, args.timeout, args.health_period, args.resync)
    name = "operator.json" if args.orders == 200 else f"operator-{args.orders}.json"
    if args.health_period is not None:
        name = name.replace(".json", f"-health{args.health_period:g}s.json")
    if args.resync is not None:
        name = name.replace(".json", f"-resync{args.resync:g}s.json")
    out: Path = args.out or ROOT / ".bench" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    say(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
