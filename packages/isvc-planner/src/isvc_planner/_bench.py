"""Benchmark: plan latency by fleet size, a long sequence of orders, packing against the optimum."""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isvc_api import ModelFacts, ModelSource, PlacementMode

from isvc_planner._estimate import memory_need
from isvc_planner._fleet import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice
from isvc_planner._inventory import Inventory
from isvc_planner._models import OrderRef, PlanRequest, PlanResponse
from isvc_planner._planner import Planner

__all__ = ["Packed", "in_support", "instance", "main", "need_of", "optimum", "pack", "packing", "units_for"]

GIB = 1 << 30
PACKING_SEED = 20260802
WIDE = 2000  # a larger sample, for the share of instances below FLOOR
FLOOR = 0.85
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

Layout = list[tuple[int, bool]]  # (memory GiB, shareable) per device, nodes in order


def instance(rng: random.Random) -> tuple[list[Layout], list[float]]:
    """One random small packing instance: nodes of devices, and order sizes in GiB (see README).

    1–3 nodes; each carries 1–4 devices of one kind: 24, 40 or 80 GiB, shareable with probability 0.7.
    A load factor is drawn uniformly from [0.7, 1.3]; orders of a size uniform in
    [4, min(largest device − 2, 60)] GiB are drawn until their total reaches load × fleet memory,
    with at least 3 and at most 10 orders. Every order fits one device on an empty fleet.
    """
    nodes = rng.randint(1, 3)
    layout: list[Layout] = []
    for _ in range(nodes):  # a node carries one product in one sharing mode, as drivers publish
        kind = (rng.choice([24, 40, 80]), rng.random() < 0.7)
        layout.append([kind] * rng.randint(1, 4))
    largest = max(m for devs in layout for m, _ in devs)
    capacity = sum(m for devs in layout for m, _ in devs)
    load = rng.uniform(0.7, 1.3)  # orders until their memory is this share of the fleet's
    sizes: list[float] = []
    while len(sizes) < 10 and (len(sizes) < 3 or sum(sizes) < load * capacity):
        sizes.append(rng.uniform(4, min(largest - 2, 60)))
    return layout, sizes


def need_of(size: float) -> int:
    """The memory need in bytes the planner computes for an order of `size` GiB."""
    need = memory_need(_facts(size, random.Random(0)))
    assert need is not None
    return need.required


def in_support(layout: list[Layout], sizes: list[float]) -> bool:
    """Whether `instance` can draw these nodes and order sizes (for hand-made instances)."""
    kinds = [devs[0] for devs in layout]
    if not 1 <= len(layout) <= 3 or any(not 1 <= len(devs) <= 4 or set(devs) != {kind}
                                          or kind[0] not in (24, 40, 80)
                                          for devs, kind in zip(layout, kinds, strict=True)):
        return False
    largest = max(m for m, _ in kinds)
    capacity = sum(m for devs in layout for m, _ in devs)
    if not 3 <= len(sizes) <= 10 or not all(4 <= s <= min(largest - 2, 60) for s in sizes):
        return False
    # Some load × capacity in [0.7, 1.3] × capacity above every earlier total from the third order
    # on (drawing went on) and reached by the full total (it stopped), unless 10 orders stopped it.
    low = max([0.7 * capacity] + [sum(sizes[:j]) for j in range(3, len(sizes))])
    high = 1.3 * capacity if len(sizes) == 10 else min(1.3 * capacity, sum(sizes))
    return low < high


def units_for(need: int, memory: int, shareable: bool) -> int | None:
    """Units of a device one order takes (the planner's rule, every percent permitted), or None."""
    if shareable:
        units = max(1, math.ceil(need * 100 / memory))
        return units if units <= 100 else None
    return 100 if memory >= need else None


def optimum(devices: list[tuple[int, bool]], needs: list[int], *, in_sequence: bool,
            free: list[int] | None = None) -> int:
    """Most orders placed, by exhaustive search over every device choice (one device per order).

    in_sequence: orders arrive in the given order and one that fits somewhere must be placed, as the
    planner must; this measures device choice alone. Otherwise any subset may be chosen (offline).
    free: units free per device at the start (all 100 when None).
    """
    table = [[units_for(n, m, s) for (m, s) in devices] for n in needs]
    free = [100] * len(devices) if free is None else list(free)
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


@dataclass(frozen=True)
class Packed:
    """One packing instance and how the planner did on it."""

    layout: list[Layout]
    sizes: list[float]
    needs: list[int]
    chosen: list[str | None]  # "node/device share%" per order, None when refused
    placed: int
    optimum: int  # exact, in sequence
    offline: int  # exact, any subset

    @property
    def ratio(self) -> float:
        """Orders placed ÷ the in-sequence optimum."""
        return 1.0 if self.optimum == 0 else self.placed / self.optimum

    def describe(self) -> str:
        """The instance in a few lines, to see why it loses."""
        kinds = "; ".join(f"n{i}: {len(devs)} × {devs[0][0]} GiB {'shares' if devs[0][1] else 'whole'}"
                          for i, devs in enumerate(self.layout))
        needs = ", ".join(f"{n / GIB:.1f}" for n in self.needs)
        chosen = ", ".join(c or "-" for c in self.chosen)
        return (f"ratio {self.ratio:.3f} ({self.placed}/{self.optimum})  devices {kinds}\n"
                f"    needs GiB [{needs}]\n    placed    [{chosen}]")


def pack(layout: list[Layout], sizes: list[float], rng: random.Random) -> tuple[Packed, int]:
    """Plan one instance's orders in sequence on an empty fleet; the result and its over-commits."""
    facts = [_facts(size, rng) for size in sizes]
    needs = []
    for f in facts:
        need = memory_need(f)
        assert need is not None
        needs.append(need.required)
    slices = [fleet_slice(f"n{n}", [fleet_gpu(f"n{n}", i, memory_gi=m, product=_PRODUCTS[m], shares=s)
                                     for i, (m, s) in enumerate(devs)]) for n, devs in enumerate(layout)]
    inv = Inventory.from_objects(fleet_device_classes(), slices, [])
    planner = Planner(inv)
    tally = _Tally()
    chosen: list[str | None] = []
    for i, f in enumerate(facts):
        r = planner.plan(PlanRequest(order=OrderRef(namespace="pack", name=f"o{i}"), facts=f))
        tally.take(r)
        p = r.placement
        share = f" {p.share_percent}%" if p is not None and p.share_percent else ""
        chosen.append(None if p is None else f"{p.pool}/{','.join(p.devices or ())}{share}")
    flat = [(m * GIB, s) for devs in layout for m, s in devs]
    placed = sum(c is not None for c in chosen)
    return Packed(layout, sizes, needs, chosen, placed, optimum(flat, needs, in_sequence=True),
                  optimum(flat, needs, in_sequence=False)), tally.overcommits


def packing(instances: int, rng: random.Random) -> tuple[list[Packed], int]:
    """The planner on random small instances against the exact optimum; over-commits."""
    results = []
    overcommits = 0
    for _ in range(instances):
        layout, sizes = instance(rng)
        packed, over = pack(layout, sizes, rng)
        results.append(packed)
        overcommits += over
    return results, overcommits


def main() -> int:
    """Run everything, print a table, write .bench/planner.json."""
    rng = random.Random(20260801)
    result: dict[str, Any] = {"p50_ms": {}, "p99_ms": {}, "build_s": {}}
    rows: list[tuple[str, ...]] = []
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
    # Packing draws from its own generator, so its instances do not depend on the policy under test.
    packed, over_pack = packing(200, random.Random(PACKING_SEED))
    ratios = [p.ratio for p in packed]
    offline = [1.0 if p.offline == 0 else p.placed / p.offline for p in packed]
    below = [p for p in packed if p.ratio < FLOOR]
    wider, over_wide = packing(WIDE, random.Random(PACKING_SEED + 1))
    wide_below = sum(p.ratio < FLOOR for p in wider)
    result["packing_ratio_min"] = round(min(ratios), 4)
    result["packing_ratio_mean"] = round(statistics.mean(ratios), 4)
    result["packing_below_floor"] = len(below)
    result["packing_offline_ratio_min"] = round(min(offline), 4)
    result["packing_offline_ratio_mean"] = round(statistics.mean(offline), 4)
    result[f"packing_{WIDE}_ratio_mean"] = round(statistics.mean(p.ratio for p in wider), 4)
    result[f"packing_{WIDE}_below_floor"] = wide_below
    result["overcommits"] = over_seq + over_pack + over_wide
    rows.append(("packing, 200 instances vs optimum in sequence", f"mean {statistics.mean(ratios):.4f}",
                 f"min {min(ratios):.4f}", f"{len(below)} below {FLOOR}",
                 f"over-commits {over_seq + over_pack}"))
    rows.append(("packing vs offline optimum (any subset)", f"mean {statistics.mean(offline):.4f}",
                 f"min {min(offline):.4f}", "(arrival order counts here)"))
    rows.append((f"packing, {WIDE:,} more instances (other seed)",
                 f"mean {statistics.mean(p.ratio for p in wider):.4f}",
                 f"min {min(p.ratio for p in wider):.4f}",
                 f"{wide_below} below {FLOOR} ({wide_below * 100 / WIDE:.1f} %)",
                 f"over-commits {over_wide}"))
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  result")
    for row in rows:
        print(f"{row[0]:<{width}}  " + "  ".join(row[1:]))
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    if below:
        print(f"\nthe {len(below)} instance(s) below {FLOOR} of the in-sequence optimum:")
        for p in below:
            print("  " + p.describe())
    (out / "planner.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
