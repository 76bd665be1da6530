"""Benchmark: plan latency by fleet size, a long sequence, orders waiting together, packing quality, and packing
sized to serve beside sized to start."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isvc_api import PlacementMode
from isvc_planner import (
    SOLVER_SECONDS,
    Inventory,
    Planner,
)
from isvc_planner_client import (
    OrderRef,
    PlanRequest,
    PlanResponse,
)

from isvc_testing._fleet import fleet_claim, fleet_device_classes
from isvc_testing._models import Tally, bench_fleet, sized_facts
from isvc_testing._packing import (
    LARGE_DEVICES,
    LARGE_INSTANCES,
    LARGE_ORDERS,
    LARGE_SEED,
    LARGE_TIME_LIMIT,
    LargePacked,
    Packed,
    packing,
    packing_large,
)
from isvc_testing._serving_bench import serving_section

__all__ = ["latency", "main", "sequence"]

PACKING_SEED = 20260802
WIDE = 2000  # a larger sample, for the share of instances below FLOOR
FLOOR = 0.85
PLAN_MANY_BUDGET = 20_000  # Planner.plan_many's default search budget, in nodes


def _claim_for(namespace: str, order: str, response: PlanResponse) -> dict[str, Any] | None:
    """The claim the scheduler would allocate for a plan, labelled with its order."""
    p = response.placement
    if p is None or not p.devices or p.pool is None:
        return None
    share = p.share_percent if p.placement_mode == PlacementMode.SHARED else None
    return fleet_claim(namespace, f"{order}-gpu", order, [(p.pool, d, share) for d in p.devices])


def latency(nodes: int, rng: random.Random, samples: int = 300) -> tuple[float, float, float]:
    """p50/p99 ms of planning one order on a half-full fleet of `nodes` × 8 devices; build seconds."""
    slices = bench_fleet(nodes, rng)
    started = time.perf_counter()
    inv = Inventory.from_objects(fleet_device_classes(), slices, [])
    build = time.perf_counter() - started
    planner = Planner(inv)
    for i in range(nodes * 4):  # fill about half
        r = planner.plan(
            PlanRequest(
                order=OrderRef(namespace="fill", name=f"f{i}"), facts=sized_facts(rng.uniform(5, 60), rng)
            )
        )
        claim = _claim_for("fill", f"f{i}", r)
        if claim is not None:
            inv.upsert_claim(claim)
    times = []
    for i in range(samples):
        req = PlanRequest(
            order=OrderRef(namespace="bench", name=f"p{i}"), facts=sized_facts(rng.uniform(5, 120), rng)
        )
        t = time.perf_counter()
        planner.plan(req)
        times.append((time.perf_counter() - t) * 1000)
        inv.release(("bench", f"p{i}"))
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, math.ceil(len(times) * 0.99) - 1)], build


def sequence(nodes: int, orders: int, rng: random.Random) -> tuple[float, int, int]:
    """Seconds to plan `orders` one after another (claims appear as they are placed); placed; over-commits."""
    inv = Inventory.from_objects(fleet_device_classes(), bench_fleet(nodes, rng), [])
    planner = Planner(inv)
    tally = Tally()
    placed = 0
    started = time.perf_counter()
    for i in range(orders):
        r = planner.plan(
            PlanRequest(
                order=OrderRef(namespace="bench", name=f"order-{i}"),
                facts=sized_facts(rng.uniform(5, 120), rng),
            )
        )
        tally.take(r)
        claim = _claim_for("bench", f"order-{i}", r)
        if claim is not None:
            placed += 1
            if rng.random() < 0.5:
                inv.upsert_claim(claim)
    return time.perf_counter() - started, placed, tally.overcommits


# ---------------------------------------------------------------- packing against the exact optimum


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * q) - 1)]


def _row(rows: list[tuple[str, ...]], *cells: str) -> None:
    rows.append(tuple(cells))


def _ledger_section(result: dict[str, Any], rows: list[tuple[str, ...]], rng: random.Random) -> None:
    """The ledger at 10,000 × 8: built from the watches' listings, then kept by single events."""
    from isvc_testing import _scale

    # Three fleets, each in a fresh process: this machine's speed moves by up to half from one minute to the
    # next, so the run with the median build is reported, beside the three builds.
    runs = sorted(
        (_scale.isolated(_scale.build_and_events, 10_000, rng.randrange(10**6)) for _ in range(3)),
        key=lambda run: run["build_s"],
    )
    built = runs[1]
    result["scale_10000"] = {k: round(v, 4) for k, v in built.items()}
    result["scale_10000"]["builds_s"] = [round(run["build_s"], 3) for run in runs]
    _row(
        rows,
        "ledger of 10,000 nodes × 8 (half held), from the watches' listings",
        f"median of three fleets {built['build_s']:.2f} s (all: "
        + ", ".join(f"{run['build_s']:.2f}" for run in runs)
        + f"): {int(built['devices']):,} devices {built['slices_s']:.2f} s",
        f"+ {int(built['claims']):,} claims {built['claims_s']:.2f} s + counted and indexed {built['index_s']:.2f} s",
        f"+{built['rss_mib']:.0f} MiB",
        f"a full collector pass {built['full_gc_s']:.2f} s (frozen after the first sync)",
    )
    _row(
        rows,
        "  one event applied",
        f"claim p50 {built['claim_event_ms_p50']:.3f} ms p99 {built['claim_event_ms_p99']:.3f} ms "
        f"max {built['claim_event_ms_max']:.2f} ms",
        f"slice (pool published again) p50 {built['slice_event_ms_p50']:.3f} ms "
        f"p99 {built['slice_event_ms_p99']:.3f} ms max {built['slice_event_ms_max']:.2f} ms",
    )
    memory = _scale.isolated(_scale.resident, 10_000, rng.randrange(10**6))
    result["memory_10000"] = {k: round(v, 1) for k, v in memory.items()}
    _row(
        rows,
        "  the planner's resident memory, its ledger built from JSON pages as its watches read them",
        f"{memory['built_mib']:.0f} MiB (at start {memory['start_mib']:.0f} MiB)",
    )
    kept = _scale.isolated(_scale.kept_slices, 10_000, rng.randrange(10**6))
    result["kept_slices_10000"] = {k: round(v) for k, v in kept.items()}
    _row(
        rows,
        "  the listed slices per device (goal: at most 1,500 B kept)",
        f"{kept['kept_b']:,.0f} B as the books keep them",
        f"{kept['parsed_b']:,.0f} B as parsed",
    )


def _scale_section(result: dict[str, Any], rows: list[tuple[str, ...]], rng: random.Random) -> None:
    """The ledger at 10,000 × 8, waiting orders at 1,000 and 10,000 × 8, the HTTP path at 10,000 × 8."""
    from isvc_testing import _scale

    _ledger_section(result, rows, rng)
    result["waiting"] = {}
    for nodes in (1_000, 10_000):
        for fill, label in ((0.5, "half held"), (0.97, "97 % held")):
            answered = _scale.isolated(
                _scale.waiting_orders, nodes, fill, (1, 10, 100, 1000), rng.randrange(10**6)
            )
            key = f"{nodes}_{int(fill * 100)}"
            result["waiting"][key] = {
                str(count): {"s": round(took, 3), "placed": placed, "solver": outcomes}
                for count, (took, placed, outcomes) in answered.items()
            }
            _row(
                rows,
                f"orders waiting together (one plan_many), {nodes:,} nodes × 8, {label}",
                *(
                    f"{count}: {took:.2f} s ({placed} placed{', solver ' + '/'.join(outcomes) if outcomes else ''})"
                    for count, (took, placed, outcomes) in answered.items()
                ),
            )
    _row(
        rows,
        "  the controller waits for an answer",
        f"{_scale.CONTROLLER_TIMEOUT:g} s (PlannerClient's timeout)",
        f"the solver's budget {SOLVER_SECONDS:g} s a pass",
    )
    result["controller_timeout_s"] = _scale.CONTROLLER_TIMEOUT
    result["solver_seconds"] = SOLVER_SECONDS
    http = _scale.http_plan(10_000, rng)
    result["http_plan_10000"] = {k: round(v, 3) for k, v in http.items()}
    _row(
        rows,
        "POST /v1/plan through the app, 10,000 nodes × 8 (half held), authentication on",
        f"p50 {http['p50_ms']:.2f} ms",
        f"p99 {http['p99_ms']:.2f} ms",
        f"max {http['max_ms']:.1f} ms",
        f"{int(http['token_reviews'])} TokenReview for {int(http['calls'])} calls",
        f"the transport alone (a canned answer): p50 {http['floor_p50_ms']:.2f} ms p99 {http['floor_p99_ms']:.2f} ms",
        f"a fixed loop after each call: p50 {http['yardstick_p50_ms']:.2f} ms p99 {http['yardstick_p99_ms']:.2f} ms",
    )
    _goals(result, rows)


# Goals read against the machine's own floor, measured beside each figure (issue 43): this machine's speed
# moves by half from one minute to the next, so each is a ratio to, or a margin over, what the same minute
# gives with none of the planner's code.
GOALS = {
    "build_over_full_gc": 2.0,  # the ledger's build ÷ a full collector pass over the same heap, at most
    "plan_p50_over_transport_ms": 1.5,  # POST /v1/plan's median minus the transport's alone, at most
    "plan_p99_over_transport": 1.5,  # POST /v1/plan's p99 ÷ the transport's alone, at most
    "kept_bytes_per_device": 1500.0,  # the listed slices as the books keep them, per device, at most
}


def _goals(result: dict[str, Any], rows: list[tuple[str, ...]]) -> None:
    """Each goal's figure with the machine's floor beside it, and whether it is met."""
    built, http, kept = result["scale_10000"], result["http_plan_10000"], result["kept_slices_10000"]
    figures = {
        "build_over_full_gc": (
            built["build_s"] / built["full_gc_s"],
            f"build {built['build_s']:.2f} s, full pass {built['full_gc_s']:.2f} s",
        ),
        "plan_p50_over_transport_ms": (
            http["p50_ms"] - http["floor_p50_ms"],
            f"p50 {http['p50_ms']:.2f} ms, transport {http['floor_p50_ms']:.2f} ms",
        ),
        "plan_p99_over_transport": (
            http["p99_ms"] / http["floor_p99_ms"],
            f"p99 {http['p99_ms']:.2f} ms, transport {http['floor_p99_ms']:.2f} ms",
        ),
        "kept_bytes_per_device": (kept["kept_b"], f"{kept['parsed_b']:,.0f} B as parsed"),
    }
    result["goals"] = {}
    for name, (value, beside) in figures.items():
        met = value <= GOALS[name]
        result["goals"][name] = {"value": round(value, 3), "goal": GOALS[name], "met": met}
        _row(rows, f"  goal {name} ≤ {GOALS[name]:g}", f"{value:.3g} ({'met' if met else 'NOT met'})", beside)


def _large_section(result: dict[str, Any], rows: list[tuple[str, ...]]) -> list[LargePacked]:
    """Packing on the large instances: the planner as shipped beside its search, floor and the yardsticks."""
    large, over_large = packing_large(LARGE_INSTANCES, random.Random(LARGE_SEED))
    result["overcommits"] += over_large
    result["packing_large_instances"] = len(large)
    result["packing_large_budget_hits"] = sum(p.search_nodes > PLAN_MANY_BUDGET for p in large)
    result["packing_large_search_p99_ms"] = round(_pct([p.search_seconds for p in large], 0.99) * 1000, 3)
    result["packing_large_shipped_s_p50"] = round(statistics.median(p.shipped_seconds for p in large), 3)
    result["packing_large_shipped_s_max"] = round(max(p.shipped_seconds for p in large), 3)
    runs = [o for p in large for o in p.outcomes]
    result["packing_large_solver_runs"] = {o: runs.count(o) for o in sorted(set(runs))}
    result["packing_large_below_floor"] = sum(p.shipped < p.floor for p in large)
    result["packing_large_below_search"] = sum(p.shipped < p.search for p in large)
    result["packing_large_solver_optimal"] = sum(p.solved.optimal for p in large)
    result["packing_large_solver_gap_max"] = round(max(p.solved.gap for p in large), 4)
    result["packing_large_solver_s_max"] = round(max(p.solved.seconds for p in large), 3)
    _row(
        rows,
        f"packing, {len(large)} large instances ({LARGE_ORDERS} orders, {LARGE_DEVICES} devices)",
        "orders placed ÷ the yardstick's proven bound",
    )
    _large_ratios(result, rows, large)
    _row(
        rows,
        "  as shipped",
        f"{result['packing_large_shipped_s_p50']:.2f} s p50, {result['packing_large_shipped_s_max']:.2f} s max",
        "solver " + ", ".join(f"{o} {n}" for o, n in result["packing_large_solver_runs"].items()),
        f"below the greedy floor on {result['packing_large_below_floor']}, "
        f"below the search on {result['packing_large_below_search']}",
    )
    _row(
        rows,
        "  yardstick (HiGHS)",
        f"optimal on {result['packing_large_solver_optimal']}/{len(large)}",
        f"gap max {result['packing_large_solver_gap_max']:.4f}",
        f"{result['packing_large_solver_s_max']:.1f} s max ({LARGE_TIME_LIMIT:.0f} s limit)",
    )
    _row(
        rows,
        "  the joint search",
        f"budget hit on {result['packing_large_budget_hits']}/{len(large)}",
        f"p99 {result['packing_large_search_p99_ms']:.1f} ms",
        f"over-commits {over_large}",
    )
    return large


def _large_ratios(result: dict[str, Any], rows: list[tuple[str, ...]], large: list[LargePacked]) -> None:
    """Each way of packing the large instances, as a share of the yardstick's proven bound."""
    measures: list[tuple[str, str, Callable[[LargePacked], int]]] = [
        (
            f"as shipped (search, then HiGHS ≤ {SOLVER_SECONDS:g} s)",
            "packing_large_ratio",
            lambda p: p.shipped,
        ),
        ("the joint search alone (before)", "packing_large_search_ratio", lambda p: p.search),
        ("its greedy floor", "packing_large_floor_ratio", lambda p: p.floor),
        ("one at a time (plan)", "packing_large_arrival_ratio", lambda p: p.arrival),
        ("first fit", "packing_large_first_fit_ratio", lambda p: p.first_fit),
        ("best fit decreasing", "packing_large_bfd_ratio", lambda p: p.bfd),
        (
            f"HiGHS alone, {LARGE_TIME_LIMIT:g} s (yardstick)",
            "packing_large_solver_ratio",
            lambda p: p.solved.best,
        ),
    ]
    for label, key, count_of in measures:
        values = [lp.ratio(count_of(lp)) for lp in large]
        result[f"{key}_mean"] = round(statistics.mean(values), 4)
        result[f"{key}_p5"] = round(_pct(values, 0.05), 4)
        result[f"{key}_min"] = round(min(values), 4)
        result[f"{key}_below_floor"] = sum(v < FLOOR for v in values)
        _row(
            rows,
            f"  {label}",
            f"mean {statistics.mean(values):.4f}",
            f"p5 {_pct(values, 0.05):.4f}",
            f"min {min(values):.4f}",
            f"{result[f'{key}_below_floor']} below {FLOOR}",
        )


def _latency_section(result: dict[str, Any], rows: list[tuple[str, ...]], rng: random.Random) -> int:
    """One order planned on fleets of growing size, then a long sequence; returns its over-commits."""
    for nodes in (10, 100, 1000, 10_000):
        p50, p99, build = latency(nodes, rng)
        result["p50_ms"][str(nodes)] = round(p50, 3)
        result["p99_ms"][str(nodes)] = round(p99, 3)
        result["build_s"][str(nodes)] = round(build, 3)
        _row(
            rows,
            f"plan one order in-process, {nodes:,} nodes × 8",
            f"p50 {p50:.2f} ms",
            f"p99 {p99:.2f} ms",
            f"inventory of its slices built in {build:.2f} s",
        )
    seconds, placed, over_seq = sequence(1000, 1000, rng)
    result["sequence_1000_s"] = round(seconds, 3)
    result["sequence_1000_placed"] = placed
    _row(
        rows,
        "1,000 orders in sequence, 1,000 nodes × 8",
        f"{seconds:.2f} s total",
        f"{seconds * 1000 / 1000:.3f} ms/order",
        f"{placed} placed, over-commits {over_seq}",
    )
    return over_seq


def _packing_section(result: dict[str, Any], rows: list[tuple[str, ...]], over_seq: int) -> list[Packed]:
    """The small instances against their exhaustive optimum; returns those below FLOOR."""
    # Packing draws from its own generator, so its instances do not depend on the policy under test.
    packed, over_pack, joint_s = packing(200, random.Random(PACKING_SEED))
    ratios = [p.ratio for p in packed]
    arrival = [p.arrival_ratio for p in packed]
    below = [p for p in packed if p.ratio < FLOOR]
    wider, over_wide, _ = packing(WIDE, random.Random(PACKING_SEED + 1))
    wide_below = sum(p.ratio < FLOOR for p in wider)
    result["packing_ratio_min"] = round(min(ratios), 4)
    result["packing_ratio_mean"] = round(statistics.mean(ratios), 4)
    result["packing_below_floor"] = len(below)
    result["packing_joint_p99_ms"] = round(_pct(joint_s, 0.99) * 1000, 3)
    result["arrival_ratio_min"] = round(min(arrival), 4)
    result["arrival_ratio_mean"] = round(statistics.mean(arrival), 4)
    result["arrival_below_floor"] = sum(r < FLOOR for r in arrival)
    result[f"packing_{WIDE}_ratio_mean"] = round(statistics.mean(p.ratio for p in wider), 4)
    result[f"packing_{WIDE}_ratio_min"] = round(min(p.ratio for p in wider), 4)
    result[f"packing_{WIDE}_below_floor"] = wide_below
    result[f"arrival_{WIDE}_below_floor"] = sum(p.arrival_ratio < FLOOR for p in wider)
    result["overcommits"] = over_seq + over_pack + over_wide
    rows.append(
        (
            "cross-check, 200 small instances: jointly vs exhaustive optimum",
            f"mean {statistics.mean(ratios):.4f}",
            f"min {min(ratios):.4f}",
            f"{len(below)} below {FLOOR}",
            f"p99 {_pct(joint_s, 0.99) * 1000:.1f} ms",
            f"over-commits {over_seq + over_pack}",
        )
    )
    rows.append(
        (
            "  one at a time vs in-sequence optimum",
            f"mean {statistics.mean(arrival):.4f}",
            f"min {min(arrival):.4f}",
            f"{result['arrival_below_floor']} below {FLOOR}",
        )
    )
    rows.append(
        (
            f"cross-check, {WIDE:,} more small instances (other seed)",
            f"mean {statistics.mean(p.ratio for p in wider):.4f}",
            f"min {min(p.ratio for p in wider):.4f}",
            f"{wide_below} below {FLOOR}",
            f"one at a time: {result[f'arrival_{WIDE}_below_floor']} below",
            f"over-commits {over_wide}",
        )
    )
    return below


def _print(rows: list[tuple[str, ...]], below: list[Packed], large: list[LargePacked]) -> None:
    """The table, the small instances below FLOOR and the large ones furthest below the bound."""
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  result")
    for row in rows:
        print(f"{row[0]:<{width}}  " + "  ".join(row[1:]))
    if below:
        print(f"\nthe {len(below)} instance(s) below {FLOOR} of the exact optimum:")
        for p in below:
            print("  " + p.describe())
    print("\nthe large instances where the planner as shipped falls furthest below the bound:")
    for lp in sorted(large, key=lambda lp: lp.ratio(lp.shipped))[:5]:
        print(
            f"  {lp.devices} devices, {lp.orders} orders: as shipped {lp.shipped} ({', '.join(lp.outcomes)}; "
            f"{lp.shipped_seconds:.1f} s), search {lp.search}, floor {lp.floor}, one at a time {lp.arrival}, "
            f"first fit {lp.first_fit}, best fit decreasing {lp.bfd}, yardstick {lp.solved.best} "
            f"(bound {lp.solved.bound})"
        )


def main() -> int:
    """Run everything, print a table, write .bench/planner.json."""
    rng = random.Random(20260801)
    result: dict[str, Any] = {"p50_ms": {}, "p99_ms": {}, "build_s": {}, "loadavg_start": os.getloadavg()}
    rows: list[tuple[str, ...]] = []
    over_seq = _latency_section(result, rows, rng)
    _scale_section(result, rows, rng)
    below = _packing_section(result, rows, over_seq)
    # Large instances: their own generator too, and a solver's bound as the yardstick.
    large = _large_section(result, rows)
    # Real models on real cards, sized to start beside sized to serve (issue 42).
    serving_section(result, rows)
    result["loadavg_end"] = os.getloadavg()
    _row(
        rows,
        f"machine: {os.cpu_count()} cores, load average (1, 5, 15 min)",
        "at the start " + ", ".join(f"{x:.1f}" for x in result["loadavg_start"]),
        "at the end " + ", ".join(f"{x:.1f}" for x in result["loadavg_end"]),
    )
    _print(rows, below, large)
    out = Path(".bench")
    out.mkdir(exist_ok=True)
    (out / "planner.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0
