"""Packing quality: instances of shared and whole devices, the exact optimum, the planner as shipped beside
textbook heuristics; large instances with MIG partitions against HiGHS's bound."""

from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from isvc_api import GIB, visible_bytes
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse

from isvc_testing._driver import MIG_PROFILES
from isvc_testing._fleet import fleet_device_classes, fleet_gpu, fleet_mig, fleet_slice
from isvc_testing._milp import Solved, milp_optimum
from isvc_testing._models import PRODUCTS, Tally, required_bytes, sized_facts

__all__ = [
    "LARGE_DEVICES",
    "LARGE_INSTANCES",
    "LARGE_ORDERS",
    "LARGE_SEED",
    "LARGE_TIME_LIMIT",
    "LargePacked",
    "Node",
    "Packed",
    "best_fit_decreasing",
    "first_fit",
    "in_support",
    "instance",
    "large_instance",
    "need_of",
    "optimum",
    "pack",
    "pack_large",
    "packing",
    "packing_large",
    "units_for",
]


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
    return required_bytes(sized_facts(size, random.Random(0)))


def in_support(layout: list[Layout], sizes: list[float]) -> bool:
    """Whether `instance` can draw these nodes and order sizes (for hand-made instances)."""
    kinds = [devs[0] for devs in layout]
    if not 1 <= len(layout) <= 3 or any(
        not 1 <= len(devs) <= 4 or set(devs) != {kind} or kind[0] not in (24, 40, 80)
        for devs, kind in zip(layout, kinds, strict=True)
    ):
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
    seen = visible_bytes(memory)  # shares are of the memory the runtime sees
    if shareable:
        units = max(1, math.ceil(need * 100 / seen))
        return units if units <= 100 else None
    return 100 if seen >= need else None


def optimum(
    devices: list[tuple[int, bool]], needs: list[int], *, in_sequence: bool, free: list[int] | None = None
) -> int:
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
    """One packing instance and how the planner did on it, jointly and one order at a time."""

    layout: list[Layout]
    sizes: list[float]
    needs: list[int]
    chosen: list[str | None]  # joint: "node/device share%" per order, None when refused
    placed: int  # joint (plan_many)
    offline: int  # exact optimum, any subset
    arrival_chosen: list[str | None]
    arrival_placed: int  # one at a time, in arrival order (plan)
    in_sequence: int  # exact optimum when what fits on arrival must be placed

    @property
    def ratio(self) -> float:
        """Orders placed jointly ÷ the exact optimum."""
        return 1.0 if self.offline == 0 else self.placed / self.offline

    @property
    def arrival_ratio(self) -> float:
        """Orders placed one at a time ÷ the in-sequence optimum."""
        return 1.0 if self.in_sequence == 0 else self.arrival_placed / self.in_sequence

    def describe(self) -> str:
        """The instance in a few lines, to see why it loses."""
        kinds = "; ".join(
            f"n{i}: {len(devs)} × {devs[0][0]} GiB {'shares' if devs[0][1] else 'whole'}"
            for i, devs in enumerate(self.layout)
        )
        needs = ", ".join(f"{n / GIB:.1f}" for n in self.needs)
        return (
            f"jointly {self.ratio:.3f} ({self.placed}/{self.offline}), one at a time "
            f"{self.arrival_ratio:.3f} ({self.arrival_placed}/{self.in_sequence})  devices {kinds}\n"
            f"    needs GiB  [{needs}]\n    jointly    [{', '.join(c or '-' for c in self.chosen)}]\n"
            f"    one by one [{', '.join(c or '-' for c in self.arrival_chosen)}]"
        )


def _where(response: PlanResponse) -> str | None:
    p = response.placement
    if p is None:
        return None
    share = f" {p.share_percent}%" if p.share_percent else ""
    return f"{p.pool}/{','.join(p.devices or ())}{share}"


def pack(layout: list[Layout], sizes: list[float], rng: random.Random) -> tuple[Packed, int, float]:
    """Plan one instance on an empty fleet, jointly and one at a time; over-commits; joint seconds."""
    facts = [sized_facts(size, rng) for size in sizes]
    needs = [required_bytes(f) for f in facts]
    slices = [
        fleet_slice(
            f"n{n}",
            [
                fleet_gpu(f"n{n}", i, memory_gi=m, product=PRODUCTS[m], shares=s)
                for i, (m, s) in enumerate(devs)
            ],
        )
        for n, devs in enumerate(layout)
    ]
    requests = [
        PlanRequest(order=OrderRef(namespace="pack", name=f"o{i}"), facts=f) for i, f in enumerate(facts)
    ]
    planner = Planner(Inventory.from_objects(fleet_device_classes(), slices, []))
    tally = Tally()
    started = time.perf_counter()
    joint = planner.plan_many(requests)
    seconds = time.perf_counter() - started
    for r in joint:
        tally.take(r)
    planner = Planner(Inventory.from_objects(fleet_device_classes(), slices, []))
    alone_tally = Tally()
    arrival = [planner.plan(r) for r in requests]
    for r in arrival:
        alone_tally.take(r)
    flat = [(m * GIB, s) for devs in layout for m, s in devs]
    chosen, arrival_chosen = [_where(r) for r in joint], [_where(r) for r in arrival]
    packed = Packed(
        layout,
        sizes,
        needs,
        chosen,
        sum(c is not None for c in chosen),
        optimum(flat, needs, in_sequence=False),
        arrival_chosen,
        sum(c is not None for c in arrival_chosen),
        optimum(flat, needs, in_sequence=True),
    )
    return packed, tally.overcommits + alone_tally.overcommits, seconds


def packing(instances: int, rng: random.Random) -> tuple[list[Packed], int, list[float]]:
    """The planner on random small instances against the exact optimum; over-commits; joint seconds."""
    results = []
    overcommits = 0
    seconds = []
    for _ in range(instances):
        layout, sizes = instance(rng)
        packed, over, took = pack(layout, sizes, rng)
        results.append(packed)
        overcommits += over
        seconds.append(took)
    return results, overcommits, seconds


# ---------------------------------------------------------------- large instances against a MILP

LARGE_SEED = 20260803
LARGE_INSTANCES = 60
LARGE_ORDERS = "30–100"
LARGE_DEVICES = "10–50"
LARGE_TIME_LIMIT = 5.0  # seconds HiGHS may take per instance; the gap says what it proved by then
# Static MIG geometries of one H100 80GB HBM3 (GiB per partition, rounded up): 4g+3g, 3g+2g+1g+1g, 2g×3+1g,
# 1g×7, 7g; each partition's profile and placement start, as the card allows them (isvc_testing._driver).
_MIG_GEOMETRIES: dict[tuple[int, ...], tuple[tuple[str, int], ...]] = {
    (40, 40): (("4g.40gb", 0), ("3g.40gb", 4)),
    (40, 20, 10, 10): (("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)),
    (20, 20, 20, 10): (("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)),
    (10,) * 7: tuple(("1g.10gb", start) for start in range(7)),
    (80,): (("7g.80gb", 0),),
}
_MIG_CARD = "NVIDIA H100 80GB HBM3"


def _placements(parts: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """A geometry's partitions, or the first of them when an instance cut it short."""
    whole = next(g for g in _MIG_GEOMETRIES if g[: len(parts)] == parts)
    return _MIG_GEOMETRIES[whole][: len(parts)]


_MIG_MEMORY = {p.name: p.memory_mib << 20 for p in MIG_PROFILES[_MIG_CARD]}


@dataclass(frozen=True)
class Node:
    """A node of a large instance: "shares" (shareable GPUs), "whole" (GPUs given whole) or "mig"."""

    mode: str
    gpus: tuple[tuple[int, ...], ...]  # per GPU: (its memory GiB,), or its partitions' GiB for "mig"

    def flat(self) -> list[tuple[int, bool]]:
        """(memory bytes, shareable) per device the node publishes, in the order of its slice."""
        if self.mode == "mig":
            return [(_MIG_MEMORY[p], False) for parts in self.gpus for p, _ in _placements(parts)]
        return [(m * GIB, self.mode == "shares") for parts in self.gpus for m in parts]

    def slice(self, name: str) -> dict[str, Any]:
        """The node's ResourceSlice."""
        devices = []
        for g, parts in enumerate(self.gpus):
            if self.mode == "mig":
                devices += [
                    fleet_mig(name, g, p, start, product=_MIG_CARD) for p, start in _placements(parts)
                ]
            else:
                devices.append(
                    fleet_gpu(
                        name, g, memory_gi=parts[0], product=PRODUCTS[parts[0]], shares=self.mode == "shares"
                    )
                )
        return fleet_slice(name, devices)


def large_instance(rng: random.Random) -> tuple[list[Node], list[float]]:
    """One random large packing instance: nodes, and order sizes in GiB (see README).

    10–50 devices (uniform), on nodes of 1–8 GPUs of one kind: shareable (probability 0.45), whole
    (0.30) or one H100 80GB HBM3 per GPU cut into a static MIG geometry (0.25, 1–4 GPUs). Shareable and whole
    GPUs have 24, 40, 80 or 141 GiB. Order sizes are log-uniform in [4, min(largest device − 2, 60)] GiB
    (many small orders, some large); their count is the load factor, uniform in [0.9, 1.5], times the
    fleet's memory over the mean size, kept within 30–100. Every order fits one device of the empty fleet.
    """
    target = rng.randint(10, 50)
    nodes: list[Node] = []
    count = 0
    while count < target:
        mode = rng.choices(["shares", "whole", "mig"], weights=[45, 30, 25])[0]
        gpus: tuple[tuple[int, ...], ...]
        if mode == "mig":
            gpus = tuple(rng.choice(list(_MIG_GEOMETRIES)) for _ in range(rng.randint(1, 4)))
        else:
            memory = rng.choice(sorted(PRODUCTS))
            gpus = ((memory,),) * rng.randint(1, 8)
        while gpus and count + sum(len(g) for g in gpus) > target:  # stop at the drawn device count
            gpus = gpus[:-1] if len(gpus) > 1 or len(gpus[0]) == 1 else (gpus[0][: target - count],)
        if gpus:
            nodes.append(Node(mode, gpus))
            count += sum(len(g) for g in gpus)
    flat = [d for node in nodes for d in node.flat()]
    largest = max(m for m, _ in flat) // GIB
    capacity = sum(m for m, _ in flat) / GIB
    high = min(largest - 2, 60)
    mean = (high - 4) / math.log(high / 4)
    load = rng.uniform(0.9, 1.5)
    orders = max(30, min(100, round(load * capacity / mean)))
    return nodes, [math.exp(rng.uniform(math.log(4), math.log(high))) for _ in range(orders)]


def first_fit(devices: list[tuple[int, bool]], needs: list[int]) -> int:
    """Orders placed by first fit: in arrival order, each on the first device with room."""
    free = [100] * len(devices)
    placed = 0
    for need in needs:
        for d, (memory, shareable) in enumerate(devices):
            units = units_for(need, memory, shareable)
            if units is not None and free[d] >= units:
                free[d] -= units
                placed += 1
                break
    return placed


def best_fit_decreasing(devices: list[tuple[int, bool]], needs: list[int]) -> int:
    """Orders placed by best fit decreasing: largest first, each on the device with the least free memory
    that holds it (an untaken whole device counts its full memory)."""
    free = [100] * len(devices)
    placed = 0
    for need in sorted(needs, reverse=True):
        best: tuple[int, int, int] | None = None
        for d, (memory, shareable) in enumerate(devices):
            units = units_for(need, memory, shareable)
            if units is None or free[d] < units:
                continue
            left = free[d] * memory // 100
            if best is None or (left, d) < best[:2]:
                best = (left, d, units)
        if best is not None:
            free[best[1]] -= best[2]
            placed += 1
    return placed


@dataclass(frozen=True)
class LargePacked:
    """One large instance: the planner as shipped, its search alone and its greedy floor, one at a time,
    two textbook heuristics, the solver."""

    devices: int
    orders: int
    shipped: int  # plan_many as shipped: the search, then HiGHS within the planner's budget
    search: int  # plan_many with the solver off: the bounded joint search of before
    floor: int  # plan_many with neither: smallest first, each on its best option
    arrival: int  # plan, one at a time in arrival order
    first_fit: int
    bfd: int
    solved: Solved
    shipped_seconds: float
    search_seconds: float
    search_nodes: int  # nodes the joint search visited (budget + 1 when the budget stopped it)
    outcomes: tuple[str, ...]  # the shipped planner's solver runs

    def ratio(self, placed: int) -> float:
        """Orders placed ÷ the solver's proven bound (the optimum itself when the gap is 0)."""
        return 1.0 if self.solved.bound == 0 else placed / self.solved.bound


def _counting_search(call: Any) -> tuple[Any, int]:
    """Run `call()` and count the nodes of the planner's joint search (calls of `go` in `_joint.py`).

    The planner does not report how far its search went; a profile hook counts it without changing
    what it does. Slows the call down, so the bench times a separate, unhooked run.
    """
    nodes = 0

    def hook(frame: Any, event: str, _: Any) -> None:
        nonlocal nodes
        code = frame.f_code
        if event == "call" and code.co_name == "go" and code.co_filename.endswith("_joint.py"):
            nodes += 1

    sys.setprofile(hook)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, nodes


def pack_large(
    nodes: list[Node], sizes: list[float], rng: random.Random, *, time_limit: float = LARGE_TIME_LIMIT
) -> tuple[LargePacked, int]:
    """Plan one large instance every way, score it against the solver; over-commits."""
    facts = [sized_facts(size, rng) for size in sizes]
    needs = [required_bytes(f) for f in facts]
    slices = [node.slice(f"n{n:02d}") for n, node in enumerate(nodes)]
    requests = [
        PlanRequest(order=OrderRef(namespace="pack", name=f"o{i}"), facts=f) for i, f in enumerate(facts)
    ]

    def planner(**kw: Any) -> Planner:
        return Planner(Inventory.from_objects(fleet_device_classes(), slices, []), **kw)

    outcomes: list[str] = []
    started = time.perf_counter()
    shipped = planner(on_solver=outcomes.append).plan_many(requests)
    shipped_seconds = time.perf_counter() - started
    started = time.perf_counter()
    searched = planner(solver_seconds=0).plan_many(requests)
    search_seconds = time.perf_counter() - started
    counted, search_nodes = _counting_search(lambda: planner(solver_seconds=0).plan_many(requests))
    if [_where(a) for a in counted] != [_where(a) for a in searched]:
        raise AssertionError("the joint plan changed under the profile hook")
    floor = planner(solver_seconds=0).plan_many(requests, budget=0)
    alone_planner = planner()
    alone = [alone_planner.plan(r) for r in requests]
    overcommits = 0
    for answers in (shipped, searched, floor, alone):
        tally = Tally()
        for r in answers:
            tally.take(r)
        overcommits += tally.overcommits
    flat = [d for node in nodes for d in node.flat()]
    solved = milp_optimum(flat, needs, units_for, time_limit=time_limit)

    def placed(answers: list[PlanResponse]) -> int:
        return sum(a.placement is not None for a in answers)

    packed = LargePacked(
        len(flat),
        len(needs),
        placed(shipped),
        placed(searched),
        placed(floor),
        placed(alone),
        first_fit(flat, needs),
        best_fit_decreasing(flat, needs),
        solved,
        shipped_seconds,
        search_seconds,
        search_nodes,
        tuple(outcomes),
    )
    return packed, overcommits


def packing_large(instances: int, rng: random.Random) -> tuple[list[LargePacked], int]:
    """The planner on random large instances against the MILP; over-commits."""
    results = []
    overcommits = 0
    for _ in range(instances):
        nodes, sizes = large_instance(rng)
        packed, over = pack_large(nodes, sizes, rng)
        results.append(packed)
        overcommits += over
    return results, overcommits
