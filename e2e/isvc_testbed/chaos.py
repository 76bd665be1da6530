"""Chaos (`nox -s chaos`): churn orders while the controller, the planner and the API server die.

Two controllers run with `--leader-elect` (a leader and a standby) beside the planner, on the bench's
test bed (`isvc_testbed.bench.bed`). N orders are created, edited (their class flips between
`default-llm` and a copy of it) and deleted at random, and at random points between those steps one fault
is injected: the leading controller killed (SIGKILL) and started again later, the planner killed and
started again, the API server restarted, or etcd compacted before an API server restart so that every
watch resumed from an older resourceVersion expires (410 Gone) and lists again. The first leader kill
also measures how long the standby takes to lead. A process that exits by itself (a controller that
cannot reach the API server does) is started again a second later, as the kubelet would, and recorded.

At the end every process runs again and the object set is compared with the expected one: no order
lost or left over, no child duplicated, none orphaned (its order gone), no ResourceClaim leaked, and every
order Ready; and the planner's reservations (`GET /v1/reservations`, asked with the controller's
ServiceAccount token on loopback) each belong to an order that exists. The planner runs with
`--reservation-ttl` of an hour here, so that a reservation nobody released cannot lapse (120 s in the
chart) before it is counted.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from isvc_api import GROUP, VERSION
from isvc_planner_client import PlannerClient
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed.bench import BENCH_NS, Bed, bed, diagnose, say
from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.module import NAMESPACE, ROOT, token_file

__all__ = ["FAULTS", "Verdict", "judge", "main", "run"]

LABEL_ORDER = "ai.deckhouse.io/inference-service"
CLASSES = ("default-llm", "chaos-alt")
FAULTS = ("kill-leader", "kill-planner", "restart-apiserver", "expire-watches")
# children of which an order has exactly one
SINGLE = ("LaunchPlan", "StatefulSet", "Service", "Ingress", "Secret")
# longer than any run: a reservation left behind stays to be counted instead of lapsing
RESERVATION_TTL = 3600


@dataclass
class Verdict:
    """What the object set says against the expected one (every list empty: as expected)."""

    lost: list[str] = field(default_factory=list)  # expected orders that are gone
    left_over: list[str] = field(default_factory=list)  # deleted orders still there
    duplicate: list[str] = field(default_factory=list)  # "Kind/order" with more than one
    orphaned: list[str] = field(default_factory=list)  # "Kind/order" whose order is gone
    leaked_claims: list[str] = field(default_factory=list)  # ResourceClaims of orders that are gone
    leaked_reservations: list[str] = field(default_factory=list)  # planner reservations of orders gone
    unanswered: list[str] = field(default_factory=list)  # what could not be asked at the last judgement
    wrong_class: list[str] = field(default_factory=list)  # spec not as last written
    not_ready: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(asdict(self).values())


def judge(
    expected: Mapping[str, str],
    orders: Mapping[str, tuple[str, str]],
    children: Mapping[str, Counter[str]],
    reserved: Iterable[tuple[str, str]] = (),
) -> Verdict:
    """Compare: `expected` {order: class}, `orders` {order: (class, phase)} as found in BENCH_NS,
    `children` {Kind: Counter(order label)} of the labelled objects found (ResourceClaim among them),
    `reserved` (namespace, name) of each order the planner holds a reservation for."""
    v = Verdict()
    v.leaked_reservations = sorted(
        f"{ns}/{name}" for ns, name in reserved if ns != BENCH_NS or name not in orders
    )
    v.lost = sorted(set(expected) - set(orders))
    v.left_over = sorted(set(orders) - set(expected))
    for kind, counts in sorted(children.items()):
        for order, n in sorted(counts.items()):
            if order not in orders:
                (v.leaked_claims if kind == "ResourceClaim" else v.orphaned).append(f"{kind}/{order}")
            elif kind in SINGLE and n > 1:
                v.duplicate.append(f"{kind}/{order}")
    v.wrong_class = sorted(n for n, k in expected.items() if n in orders and orders[n][0] != k)
    v.not_ready = sorted(n for n in expected if n in orders and orders[n][1] != "Ready")
    return v


def _children(b: Bed) -> dict[str, Counter[str]]:
    a = b.admin
    found: dict[str, list[Any]] = {
        "LaunchPlan": _items(
            k8s.CustomObjectsApi(a).list_namespaced_custom_object(
                GROUP, VERSION, BENCH_NS, "launchplans", label_selector=LABEL_ORDER
            )
        ),
        "ResourceClaimTemplate": k8s.ResourceV1Api(a)
        .list_namespaced_resource_claim_template(BENCH_NS, label_selector=LABEL_ORDER)
        .items,
        "ResourceClaim": k8s.ResourceV1Api(a)
        .list_namespaced_resource_claim(BENCH_NS, label_selector=LABEL_ORDER)
        .items,
        "StatefulSet": k8s.AppsV1Api(a)
        .list_namespaced_stateful_set(BENCH_NS, label_selector=LABEL_ORDER)
        .items,
        "Service": k8s.CoreV1Api(a).list_namespaced_service(BENCH_NS, label_selector=LABEL_ORDER).items,
        "Ingress": k8s.NetworkingV1Api(a).list_namespaced_ingress(BENCH_NS, label_selector=LABEL_ORDER).items,
        "Secret": k8s.CoreV1Api(a).list_namespaced_secret(BENCH_NS, label_selector=LABEL_ORDER).items,
    }
    out: dict[str, Counter[str]] = {}
    for kind, items in found.items():
        out[kind] = Counter(_labels(i).get(LABEL_ORDER, "") for i in items)
    return out


def _reserved(b: Bed, token: Path) -> list[tuple[str, str]]:
    """(namespace, name) of every order the planner holds a reservation for, asked with the controller's
    ServiceAccount token (file `token`): the planner answers no one else."""
    with PlannerClient(
        b.module.planner_url, timeout=10, token_file=token, ca_file=b.module.planner_ca
    ) as planner:
        return [(r.order.namespace, r.order.name) for r in planner.reservations()]


def _items(listed: Any) -> list[Any]:
    return list(listed["items"])


def _labels(obj: Any) -> dict[str, str]:
    if isinstance(obj, dict):
        return dict(obj["metadata"].get("labels") or {})
    return dict(obj.metadata.labels or {})


def _orders(b: Bed) -> dict[str, tuple[str, str]]:
    return {
        o["metadata"]["name"]: (
            o["spec"].get("inferenceServiceClassName", ""),
            (o.get("status") or {}).get("phase", ""),
        )
        for o in b.list_orders()
        if not o["metadata"].get("deletionTimestamp")
    }


class Chaos:
    """The churn and the faults on one bed."""

    def __init__(self, b: Bed, rng: random.Random) -> None:
        self.b = b
        self.rng = rng
        self.expected: dict[str, str] = {}
        self.faults: list[dict[str, Any]] = []
        self.down: dict[str, float] = {}  # process → when to start it again
        self.takeover: dict[str, Any] | None = None
        self.exits: list[dict[str, Any]] = []  # processes that exited without being killed
        self.t0 = time.monotonic()

    # ---- orders (as alice; the API server may be restarting: retried)

    def _call(self, what: str, call: Any) -> None:
        for attempt in range(60):
            try:
                call()
                return
            except ApiException as e:
                if e.status in (404, 409) and what != "edit":
                    return
                if e.status == 409:  # edit on a stale object: read again
                    continue
                if e.status not in (500, 503, 504, 429):
                    raise
            except Exception:  # the API server is restarting: connection refused or reset
                pass
            time.sleep(0.5 if attempt < 40 else 1.0)
        raise TimeoutError(f"{what}: the API server did not come back")

    def create(self, name: str) -> None:
        klass = self.rng.choice(CLASSES)
        self._call("create", lambda: self._create(name, klass))
        self.expected[name] = klass

    def _create(self, name: str, klass: str) -> None:
        self.b.orders_api().create_namespaced_custom_object(
            GROUP,
            VERSION,
            BENCH_NS,
            "inferenceservices",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceService",
                "metadata": {"name": name},
                "spec": {
                    "inferenceServiceClassName": klass,
                    "model": {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"}},
                },
            },
        )

    def edit(self, name: str) -> None:
        klass = CLASSES[1 - CLASSES.index(self.expected[name])]
        self._call(
            "edit",
            lambda: self.b.orders_api().patch_namespaced_custom_object(
                GROUP,
                VERSION,
                BENCH_NS,
                "inferenceservices",
                name,
                {"spec": {"inferenceServiceClassName": klass}},
            ),
        )
        self.expected[name] = klass

    def delete(self, name: str) -> None:
        self._call(
            "delete",
            lambda: ignore_404(
                lambda: self.b.orders_api().delete_namespaced_custom_object(
                    GROUP, VERSION, BENCH_NS, "inferenceservices", name
                )
            ),
        )
        del self.expected[name]

    # ---- faults

    def leader_process(self) -> str | None:
        """Which of our controller processes holds the Lease."""
        try:
            holder = self.b.leader()
        except Exception:
            return None
        for name in ("controller", "standby"):
            pid = self.b.module.pid(name)
            if holder and pid is not None and holder.endswith(f"_{pid}"):
                return name
        return None

    def fault(self, kind: str) -> None:
        at = round(time.monotonic() - self.t0, 1)
        record: dict[str, Any] = {"fault": kind, "at": at}
        if kind == "kill-leader":
            leader = self.leader_process()
            if leader is None:
                record["skipped"] = "no controller of ours leads right now"
            else:
                record["killed"] = leader
                self.b.module.kill(leader, signal.SIGKILL)
                if self.takeover is None:
                    self.takeover = self._measure_takeover(leader)
                    record["takeover"] = self.takeover
                self.down[leader] = time.monotonic() + self.rng.uniform(0, 5)
        elif kind == "kill-planner":
            self.b.module.kill("planner", signal.SIGKILL)
            self.down["planner"] = time.monotonic() + self.rng.uniform(0, 5)
        elif kind == "restart-apiserver":
            record["seconds"] = round(self.b.cluster.restart_apiserver(), 1)
        elif kind == "expire-watches":
            record["compacted_to"] = self.b.cluster.compact_etcd()
            record["seconds"] = round(self.b.cluster.restart_apiserver(), 1)
        say(f"fault: {record}")
        self.faults.append(record)

    def _measure_takeover(self, killed: str) -> dict[str, Any]:
        """Seconds from the leader's death until the other controller holds the Lease (goal ≤ 15)."""
        other = "standby" if killed == "controller" else "controller"
        t0 = time.monotonic()
        try:
            wait_for(lambda: self.leader_process() == other, 40, 0.2, f"{other} leading")
            return {"by": other, "seconds": round(time.monotonic() - t0, 1)}
        except TimeoutError:
            return {"by": None, "seconds": None}

    def supervise(self) -> None:
        """Start again, a second later, a process that exited by itself, as the kubelet would
        (restartPolicy Always); each such exit is recorded with the last line of its log."""
        for name in ("controller", "standby", "planner"):
            proc = self.b.module.procs.get(name)
            if name in self.down or proc is None or proc.poll() is None:
                continue
            lines = self.b.module.log(name).strip().splitlines()
            self.exits.append(
                {
                    "process": name,
                    "at": round(time.monotonic() - self.t0, 1),
                    "code": proc.returncode,
                    "last_line": lines[-1][:300] if lines else "",
                }
            )
            say(f"exited by itself: {self.exits[-1]}")
            del self.b.module.procs[name]
            self.down[name] = time.monotonic() + 1.0

    def revive(self, now: bool = False) -> None:
        """Start again the processes whose time came (all of them when `now`)."""
        self.supervise()
        for name, when in list(self.down.items()):
            if now or time.monotonic() >= when:
                try:
                    if name == "planner":
                        self.b.module.start_planner()
                    else:
                        self.b.start_controller(name)
                except Exception as e:  # the API server is not back yet: try again on the next step
                    say(f"{name} did not start ({e.__class__.__name__}); again later")
                    self.b.module.procs.pop(name, None)
                    continue
                del self.down[name]


def run(orders: int, seed: int, gap: float, faults: int, settle: float) -> dict[str, Any]:
    """The whole chaos run; returns its figures and the verdict."""
    rng = random.Random(seed)
    t_start = time.monotonic()
    with bed(
        orders,
        controllers=("controller", "standby"),
        planner_args=("--reservation-ttl", str(RESERVATION_TTL)),
    ) as b:
        custom = k8s.CustomObjectsApi(b.admin)
        alt: Any = custom.get_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", CLASSES[0])
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "inferenceserviceclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceServiceClass",
                "metadata": {"name": CLASSES[1]},
                "spec": alt["spec"],
            },
        )
        chaos = Chaos(b, rng)
        # the faults at random steps: the first kills the leader (the standby's takeover is measured), then
        # every other kind once in a random order, then random kinds
        others = list(FAULTS[1:])
        rng.shuffle(others)
        kinds = (["kill-leader", *others] + [rng.choice(FAULTS) for _ in range(faults)])[:faults]
        at = sorted(rng.sample(range(1, orders), min(faults, orders - 1)))
        plan = dict(zip(at, kinds, strict=False))
        for i in range(orders):
            chaos.revive()
            if i in plan:
                chaos.fault(plan[i])
            chaos.create(f"chaos-{i:04d}")
            live = sorted(chaos.expected)
            if len(live) > 2 and rng.random() < 0.3:
                chaos.edit(rng.choice(live))
            if len(live) > 2 and rng.random() < 0.25:
                chaos.delete(rng.choice(live))
            time.sleep(gap)
        chaos.revive(now=True)
        churn_s = round(time.monotonic() - t_start, 1)
        say(f"churn done: {len(chaos.expected)} orders expected; converging (≤ {settle:.0f}s)")
        verdict = Verdict()
        reserved: list[tuple[str, str]] = []
        token = token_file(b.cluster.service_account_kubeconfig(NAMESPACE, "controller"))
        t0 = time.monotonic()

        def converged() -> bool:
            nonlocal verdict, reserved
            chaos.revive(now=True)
            orders_found, children = _orders(b), _children(b)
            try:
                reserved = _reserved(b, token)
            except Exception as e:  # the planner is starting again: judged on the next round
                verdict = judge(chaos.expected, orders_found, children)
                verdict.unanswered = [f"planner GET /v1/reservations: {e.__class__.__name__}: {e}"]
                return False
            verdict = judge(chaos.expected, orders_found, children, reserved)
            return verdict.ok

        try:
            wait_for(converged, settle, 2.0, "the object set as expected")
        except TimeoutError:
            say(diagnose(b))
        converge_s = round(time.monotonic() - t0, 1)
        return {
            "orders_churned": orders,
            "seed": seed,
            "orders_expected": len(chaos.expected),
            "faults": chaos.faults,
            "takeover": chaos.takeover,
            "exited_by_themselves": chaos.exits,
            "churn_seconds": churn_s,
            "converge_seconds": converge_s,
            "verdict": asdict(verdict),
            "ok": verdict.ok,
            "reservations_at_end": len(reserved),
            "reservations_leaked": len(verdict.leaked_reservations),
            "total_seconds": round(time.monotonic() - t_start, 1),
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.chaos", description=__doc__.split("\n")[0])
    p.add_argument("--orders", type=int, default=50, help="orders created (edits, deletes among them)")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--gap", type=float, default=0.3, help="seconds between steps")
    p.add_argument("--faults", type=int, default=None, help="faults injected (default: orders / 8, ≥ 4)")
    p.add_argument("--settle", type=float, default=240.0, help="longest wait for the expected object set")
    p.add_argument("--out", type=Path, default=ROOT / ".bench" / "chaos.json")
    args = p.parse_args(argv)
    faults = args.faults if args.faults is not None else max(4, args.orders // 8)
    figures = run(args.orders, args.seed, args.gap, faults, args.settle)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
