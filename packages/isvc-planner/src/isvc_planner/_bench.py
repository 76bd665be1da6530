"""Benchmark: plan latency by fleet size, a long sequence of orders, packing against the optimum."""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

from isvc_api import ModelFacts, ModelSource, PlacementMode

from isvc_planner._estimate import memory_need
from isvc_planner._fleet import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice
from isvc_planner._inventory import Inventory
from isvc_planner._models import OrderRef, PlanRequest, PlanResponse
from isvc_planner._planner import Planner

__all__ = ["main"]

GIB = 1 << 30
_PRODUCTS = {80: "NVIDIA H100 80GB HBM3", 40: "NVIDIA A100-SXM4-40GB", 24: "NVIDIA L4", 141: "NVIDIA H200"}


def _facts(need_gib: float, rng: random.Random) -> ModelFacts:
    """A model of about `need_gib` GiB in total (KV unknown: 10 % of weights)."""
    weights = max(0.5, (need_gib - 1) / 1.2)
    return ModelFacts(source=ModelSource.HUGGING_FACE, name=f"bench/{rng.randrange(10**6)}",
                      parameter_count=int(weights * GIB / 2), dtype="bfloat16")


def _fleet(nodes: int, rng: random.Random) -> list[dict[str, Any]]:
    slices = []
    for n in range(nodes):
        mem = rng.choice([80, 80, 40, 141])
        shares = rng.random() < 0.75
        slices.append(fleet_slice(f"node-{n:04d}", [
            fleet_gpu(f"node-{n:04d}", i, memory_gi=mem, product=_PRODUCTS[mem], shares=shares)
            for i in range(8)]))
    return slices


class _Tally:
    """An independent count of what plans took, to catch over-commit."""

    def __init__(self) -> None:
        self.units: dict[tuple[str, str], int] = {}
        self.overcommits = 0

    def take(self, response: PlanResponse) -> None:
        p = response.placement
        if p is None or not p.devices or p.pool is None:
            return
        units = p.share_percent if p.placement_mode == PlacementMode.SHARED and p.share_percent else 100
        for d in p.devices:
            key = (p.pool, d)
            self.units[key] = self.units.get(key, 0) + units
            if self.units[key] > 100:
                self.overcommits += 1


def _claim_for(namespace: str, order: str, response: PlanResponse) -> dict[str, Any] | None:
    """The claim the scheduler would allocate for a plan, labelled with its order."""
    p = response.placement
    if p is None or not p.devices or p.pool is None:
        return None
    share = p.share_percent if p.placement_mode == PlacementMode.SHARED else None
    return fleet_claim(namespace, f"{order}-gpu", order, [(p.pool, d, share) for d in p.devices])


def latency(nodes: int, rng: random.Random, samples: int = 300) -> tuple[float, float, float]:
    """p50/p99 ms of planning one order on a half-full fleet of `nodes` × 8 devices; build seconds."""
    slices = _fleet(nodes, rng)
    started = time.perf_counter()
    inv = Inventory.from_objects(fleet_device_classes(), slices, [])
    build = time.perf_counter() - started
    planner = Planner(inv)
    for i in range(nodes * 4):  # fill about half
        r = planner.plan(PlanRequest(order=OrderRef(namespace="fill", name=f"f{i}"),
                                     facts=_facts(rng.uniform(5, 60), rng)))
        claim = _claim_for("fill", f"f{i}", r)
        if claim is not None:
            inv.upsert_claim(claim)
    times = []
    for i in range(samples):
        req = PlanRequest(order=OrderRef(namespace="bench", name=f"p{i}"),
                          facts=_facts(rng.uniform(5, 120), rng))
        t = time.perf_counter()
        planner.plan(req)
        times.append((time.perf_counter() - t) * 1000)
        inv.release(("bench", f"p{i}"))
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, math.ceil(len(times) * 0.99) - 1)], build


def sequence(nodes: int, orders: int, rng: random.Random) -> tuple[float, int, int]:
    """Seconds to plan `orders` one after another (claims appear as they are placed); placed; over-commits."""
    inv = Inventory.from_objects(fleet_device_classes(), _fleet(nodes, rng), [])
    planner = Planner(inv)
    tally = _Tally()
    placed = 0
    started = time.perf_counter()
    for i in range(orders):
        r = planner.plan(PlanRequest(order=OrderRef(namespace="bench", name=f"order-{i}"),
                                     facts=_facts(rng.uniform(5, 120), rng)))
        tally.take(r)
        claim = _claim_for("bench", f"order-{i}", r)
        if claim is not None:
            placed += 1
            if rng.random() < 0.5:
                inv.upsert_claim(claim)
    return time.perf_counter() - started, placed, tally.overcommits


# ---------------------------------------------------------------- packing against the exact optimum


def _optimum(devices: list[tuple[int, bool]], needs: list[int], *, in_sequence: bool) -> int:
    """Most orders placed, by exhaustive search over every device choice (one device per order).

    in_sequence: orders arrive in the given order and one that fits somewhere must be placed, as the
    planner must; this measures device choice alone. Otherwise any subset may be chosen (offline).
    """
    def units_for(need: int, mem: int, shareable: bool) -> int | None:
        if shareable:
            units = max(1, math.ceil(need * 100 / mem))
            return units if units <= 100 else None
        return 100 if mem >= need else None

    table = [[units_for(n, m, s) for (m, s) in devices] for n in needs]
    free = [100] * len(devices)
    best = 0

    def go(i: int, placed: int) -> None:
        nonlocal best
        best = max(best, placed)
        if i == len(needs) or placed + (len(needs) - i) <= best:
            return
        seen = set()
        fitted = False
        for d, units in enumerate(table[i]):
            if units is None or free[d] < units:
                continue
            fitted = True
            state = (devices[d], free[d])
            if state in seen:
                continue
            seen.add(state)
            free[d] -= units
            go(i + 1, placed + 1)
            free[d] += units
        if not (in_sequence and fitted):
            go(i + 1, placed)

    go(0, 0)
    return best


def packing(instances: int, rng: random.Random) -> tuple[list[float], list[float], int]:
    """Orders placed ÷ exact optimum (in sequence, and offline) on random small instances; over-commits."""
    ratios = []
    offline = []
    overcommits = 0
    for _ in range(instances):
        nodes = rng.randint(1, 3)
        layout = []
        for _ in range(nodes):  # a node carries one product in one sharing mode, as drivers publish
            kind = (rng.choice([24, 40, 80]), rng.random() < 0.7)
            layout.append([kind] * rng.randint(1, 4))
        slices = [fleet_slice(f"n{n}", [fleet_gpu(f"n{n}", i, memory_gi=m, product=_PRODUCTS[m], shares=s)
                                         for i, (m, s) in enumerate(devs)]) for n, devs in enumerate(layout)]
        largest = max(m for devs in layout for m, _ in devs)
        capacity = sum(m for devs in layout for m, _ in devs)
        load = rng.uniform(0.7, 1.3)  # orders until their memory is this share of the fleet's
        facts: list[ModelFacts] = []
        demand = 0.0
        while len(facts) < 10 and (len(facts) < 3 or demand < load * capacity):
            size = rng.uniform(4, min(largest - 2, 60))
            facts.append(_facts(size, rng))
            demand += size
        needs = []
        for f in facts:
            need = memory_need(f)
            assert need is not None
            needs.append(need.required)
        inv = Inventory.from_objects(fleet_device_classes(), slices, [])
        planner = Planner(inv)
        tally = _Tally()
        placed = 0
        for i, f in enumerate(facts):
            r = planner.plan(PlanRequest(order=OrderRef(namespace="pack", name=f"o{i}"), facts=f))
            tally.take(r)
            placed += r.placement is not None
        overcommits += tally.overcommits
        flat = [(m * GIB, s) for devs in layout for m, s in devs]
        best = _optimum(flat, needs, in_sequence=True)
        ratios.append(1.0 if best == 0 else placed / best)
        best = _optimum(flat, needs, in_sequence=False)
        offline.append(1.0 if best == 0 else placed / best)
    return ratios, offline, overcommits


def main() -> int:
    """Run everything, print a table, write .bench/planner.json."""
    rng = random.Random(20260801)
    result: dict[str, Any] = {"p50_ms": {}, "p99_ms": {}, "build_s": {}}
    rows = []
    for nodes in (10, 100, 1000):
        p50, p99, build = latency(nodes, rng)
        result["p50_ms"][str(nodes)] = round(p50, 3)
        result["p99_ms"][str(nodes)] = round(p99, 3)
        result["build_s"][str(nodes)] = round(build, 3)
        rows.append((f"plan one order, {nodes} nodes × 8", f"p50 {p50:.2f} ms", f"p99 {p99:.2f} ms",
                     f"inventory built in {build:.2f} s"))
    seconds, placed, over_seq = sequence(1000, 1000, rng)
    result["sequence_1000_s"] = round(seconds, 3)
    result["sequence_1000_placed"] = placed
    rows.append(("1,000 orders in sequence, 1000 nodes × 8", f"{seconds:.2f} s total",
                 f"{seconds * 1000 / 1000:.3f} ms/order", f"{placed} placed, over-commits {over_seq}"))
    ratios, offline, over_pack = packing(200, rng)
    result["packing_ratio_min"] = round(min(ratios), 4)
    result["packing_ratio_mean"] = round(statistics.mean(ratios), 4)
    result["packing_offline_ratio_min"] = round(min(offline), 4)
    result["packing_offline_ratio_mean"] = round(statistics.mean(offline), 4)
    result["overcommits"] = over_seq + over_pack
    rows.append(("packing, 200 instances vs optimum in sequence", f"mean {statistics.mean(ratios):.4f}",
                 f"min {min(ratios):.4f}", f"over-commits {over_seq + over_pack}"))
    rows.append(("packing vs offline optimum (any subset)", f"mean {statistics.mean(offline):.4f}",
                 f"min {min(offline):.4f}", "(arrival order counts here)"))
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  result")
    for row in rows:
        print(f"{row[0]:<{width}}  " + "  ".join(row[1:]))
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    (out / "planner.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
