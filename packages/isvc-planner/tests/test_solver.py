"""Orders waiting together placed by a solver (issue 32): more of them than the search, never fewer, never
an over-commit; a solver that fails or runs out of time leaves the search's packing, logged once."""

from __future__ import annotations

import logging
import math
import random
from decimal import Decimal
from typing import Any

import pytest
from isvc_api import PlacementMode, SharingMode, parse_quantity
from isvc_ledger import consumption, fits, parse_capacities
from isvc_planner import Inventory, Planner
from isvc_planner._solver import Solution
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)
from isvc_testing._models import sized_facts as _facts
from isvc_testing._packing import large_instance

DRIVER = "gpu.nvidia.com"
MEMORY_POLICIES = [
    {"default": "0", "validRange": {"min": "0", "step": "1Mi"}},  # the NVIDIA driver's
    {"default": "0", "validRange": {"min": "0", "step": "1Gi"}},
    {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},  # dra-example-driver's shape
    {"default": "0", "validValues": ["0", "4Gi", "8Gi", "16Gi", "24Gi", "40Gi", "48Gi", "80Gi"]},
]


def _partitioned(node: str, gpus: int) -> list[dict[str, Any]]:
    """A pool of A100-40GB GPUs, each published whole and as 2 × 3g.20gb and 7 × 1g.5gb on one counter set."""
    sets, devices = [], []
    for minor in range(gpus):
        counter_set = f"gpu-{minor}-counter-set"
        sets.append({"name": counter_set, "counters": {"memory": {"value": "40Gi"}, "sms": {"value": "98"}}})
        shapes = [(f"gpu-{minor}", "gpu", 40, 98)]
        shapes += [(f"gpu-{minor}-mig-3g20gb-{i}", "mig", 20, 42) for i in range(2)]
        shapes += [(f"gpu-{minor}-mig-1g5gb-{i}", "mig", 5, 14) for i in range(7)]
        for name, kind, memory, sms in shapes:
            used = {"memory": {"value": f"{memory}Gi"}, "sms": {"value": str(sms)}}
            devices.append(
                {
                    "name": name,
                    "attributes": {
                        "type": {"string": kind},
                        "uuid": {"string": f"UUID-{node}-{name}"},
                        "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                    },
                    "capacity": dict(used),
                    "consumesCounters": [{"counterSet": counter_set, "counters": used}],
                }
            )
    spec = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 0, "resourceSliceCount": 2},
    }
    return [
        {"metadata": {"name": f"{node}-0"}, "spec": {**spec, "sharedCounters": sets}},
        {"metadata": {"name": f"{node}-1"}, "spec": {**spec, "devices": devices}},
    ]


def _instance(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[PlanRequest]]:
    """Slices, claims already allocated (foreign or of lower priority) and orders waiting together."""
    slices: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    for n in range(rng.randint(2, 5)):
        node = f"n{n}"
        mode = rng.choice(["shares", "shares", "whole", "mig"])
        if mode == "mig":
            slices += _partitioned(node, rng.randint(1, 2))
            if rng.random() < 0.5:
                claims.append(fleet_claim("x", f"{node}-p", None, [(node, "gpu-0-mig-3g20gb-0", None)]))
            continue
        memory = rng.choice(["23034Mi", "40Gi", "80Gi", "81559Mi"])
        devices = [
            fleet_gpu(node, i, memory_gi=memory, shares=mode == "shares") for i in range(rng.randint(1, 4))
        ]
        policy = rng.choice(MEMORY_POLICIES)
        for d in devices:
            if mode == "shares":
                d["capacity"]["memory"]["requestPolicy"] = policy
            if rng.random() < 0.4:
                share = rng.randint(10, 60) if mode == "shares" else None
                claim = fleet_claim("x", f"{node}-{d['name']}", None, [(node, d["name"], share)])
                if share is not None:  # what the scheduler recorded: the share and its memory, rounded up
                    result = claim["status"]["allocation"]["devices"]["results"][0]
                    recorded = math.ceil(parse_quantity(memory) * share / 100 / (1 << 30)) << 30
                    result["consumedCapacity"] = {"shares": str(share), "memory": str(recorded)}
                claims.append(claim)
        slices.append(fleet_slice(node, devices))
    requests = []
    for i in range(rng.randint(8, 40)):
        size = math.exp(rng.uniform(math.log(3.5), math.log(30)))
        body: dict[str, Any] = {"order": OrderRef(namespace="ns", name=f"o{i}"), "facts": _facts(size, rng)}
        if rng.random() < 0.2:
            body["priority_class_name"] = "high"
        requests.append(PlanRequest.model_validate(body))
    return slices, claims, requests


def _inventory(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> Inventory:
    return Inventory.from_objects(
        fleet_device_classes(),
        slices,
        claims,
        [fleet_priority_class("high", 1000)],
        [fleet_order("ns", f"o{i}") for i in range(60)],
        [fleet_service_class("plain")],
    )


def _placed(answers: list[PlanResponse]) -> int:
    return sum(a.placement is not None for a in answers)


def _check_counters(
    slices: list[dict[str, Any]], devices: dict[tuple[str, str], dict[str, Any]], taken: set[tuple[str, str]]
) -> None:
    """The devices taken draw no more of a pool's shared counters than it has."""
    counters = {
        (s["spec"]["pool"]["name"], cs["name"], c): int(parse_quantity(v["value"]))
        for s in slices
        for cs in s["spec"].get("sharedCounters") or []
        for c, v in cs["counters"].items()
    }
    drawn: dict[tuple[str, str, str], int] = {}
    for key in taken:
        for c in devices[key].get("consumesCounters") or []:
            for name, v in c["counters"].items():
                slot = (key[0], c["counterSet"], name)
                drawn[slot] = drawn.get(slot, 0) + int(parse_quantity(v["value"]))
    for slot, amount in drawn.items():
        assert amount <= counters[slot], f"counter {slot} overdrawn: {amount} > {counters[slot]}"


def _check(slices: list[dict[str, Any]], claims: list[dict[str, Any]], answers: list[PlanResponse]) -> None:
    """Every placement together beside what the claims hold, counted apart from the planner's ledger: each
    claim consumes what kube-scheduler's arithmetic makes of its requests (`_capacity`, itself checked
    against a transliteration of the scheduler's functions in test_capacity.py), each whole device holds
    one claim, and the devices taken draw no more of a counter set than it has."""
    devices = {
        (s["spec"]["pool"]["name"], d["name"]): d for s in slices for d in s["spec"].get("devices") or []
    }
    used: dict[tuple[str, str], dict[str, Decimal]] = {}
    whole: dict[tuple[str, str], int] = {}
    taken: set[tuple[str, str]] = set()

    def hold(key: tuple[str, str], asked: dict[str, Decimal] | None) -> None:
        taken.add(key)
        if asked is None:
            whole[key] = whole.get(key, 0) + 1
            assert whole[key] == 1 and key not in used, f"{key} taken whole beside another holder"
            return
        capacities = parse_capacities(devices[key])
        take = consumption(asked, capacities)
        assert take is not None, f"{key} refuses {asked}"
        assert key not in whole and fits(used.get(key, {}), take, capacities), f"{key} over-committed"
        for name, amount in take.items():
            used.setdefault(key, {})[name] = used.get(key, {}).get(name, Decimal(0)) + amount

    for claim in claims:
        for r in claim["status"]["allocation"]["devices"]["results"]:
            key = (r["pool"], r["device"])
            if "consumedCapacity" in r:
                recorded = {n: parse_quantity(v) for n, v in r["consumedCapacity"].items()}
                for name, amount in recorded.items():
                    used.setdefault(key, {})[name] = used.get(key, {}).get(name, Decimal(0)) + amount
                taken.add(key)
            else:
                hold(key, None)
    for answer in answers:
        p = answer.placement
        if p is None:
            continue
        assert p.pool is not None and p.devices
        for device in p.devices:
            asked = (
                {n: parse_quantity(v) for n, v in (p.capacity_requests or {}).items()}
                if p.sharing_mode == SharingMode.SHARES
                else None
            )
            hold((p.pool, device), asked)
    _check_counters(slices, devices, taken)


@pytest.mark.parametrize("seed", range(12))
def test_the_solvers_packing_keeps_the_ledgers_rules_and_never_places_fewer_than_the_search(
    seed: int,
) -> None:
    rng = random.Random(seed)
    slices, claims, requests = _instance(rng)
    runs: list[str] = []
    solved = Planner(_inventory(slices, claims), solver_seconds=5.0, on_solver=runs.append)
    # A search budget of one node leaves its greedy floor: the solver then has something to improve on.
    answers = solved.plan_many(requests, budget=1)
    floor = Planner(_inventory(slices, claims), solver_seconds=0).plan_many(requests, budget=1)
    searched = Planner(_inventory(slices, claims), solver_seconds=0).plan_many(requests)
    _check(slices, claims, answers)
    inv = solved.inventory  # the ledger, holding what it reserved, has nothing overdrawn either
    assert all(v >= 0 for key in inv.view.fleet.devices for v in (inv.view.ledger.left(key) or {}).values())
    assert _placed(answers) >= _placed(floor)
    assert set(runs) <= {"optimal", "better", "limit"}
    if runs and set(runs) == {"optimal"}:
        assert _placed(answers) >= _placed(searched)
    for request, answer in zip(requests, answers, strict=True):  # each order's own pass: the same devices
        again = solved.plan(request)
        if answer.placement is not None:
            assert again.placement is not None and again.placement.devices == answer.placement.devices


def test_the_solver_places_more_than_the_search_on_a_large_instance_within_the_rules() -> None:
    nodes, sizes = large_instance(random.Random(7))
    slices = [node.slice(f"n{i:02d}") for i, node in enumerate(nodes)]
    requests = [
        PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=_facts(s, random.Random(i)))
        for i, s in enumerate(sizes)
    ]
    runs: list[str] = []
    answers = Planner(_inventory(slices, []), solver_seconds=5.0, on_solver=runs.append).plan_many(requests)
    searched = Planner(_inventory(slices, []), solver_seconds=0).plan_many(requests)
    _check(slices, [], answers)
    assert runs and runs[0] in ("optimal", "better")
    assert _placed(answers) > _placed(searched)


def _large() -> tuple[list[dict[str, Any]], list[PlanRequest]]:
    nodes, sizes = large_instance(random.Random(7))
    slices = [node.slice(f"n{i:02d}") for i, node in enumerate(nodes)]
    return slices, [
        PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=_facts(s, random.Random(i)))
        for i, s in enumerate(sizes)
    ]


def _where(answers: list[PlanResponse]) -> list[object]:
    return [(a.placement.pool, a.placement.devices) if a.placement else None for a in answers]


@pytest.mark.parametrize(
    ("outcome", "solution"),
    [
        ("failed", Solution([], "failed", 0, 0.1, "HiGHS ended with Infeasible")),
        ("limit", Solution([], "limit", 100, 3.0, "no packing found in time")),
    ],
)
def test_a_solver_that_fails_or_runs_out_of_time_leaves_the_searchs_packing_logged_once(
    outcome: str, solution: Solution, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    slices, requests = _large()
    calls = []

    def solve(problem: Any, seconds: float, start: Any) -> Solution:
        calls.append(seconds)
        return Solution(
            [None] * problem.orders, solution.status, solution.bound, solution.seconds, solution.detail
        )

    monkeypatch.setattr("isvc_planner._together.solve", solve)
    searched = Planner(_inventory(slices, []), solver_seconds=0).plan_many(requests)
    runs: list[str] = []
    planner = Planner(_inventory(slices, []), solver_seconds=2.0, on_solver=runs.append)
    with caplog.at_level(logging.DEBUG, logger="isvc_planner"):
        first = planner.plan_many(requests)
        for r in requests:
            planner.release("ns", r.order.name)
        second = planner.plan_many(requests)
    assert len(calls) == 2 and 0 < calls[0] <= 2.0
    assert _where(first) == _where(searched) and _placed(second) == _placed(searched)
    assert runs == [outcome, outcome]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "solver" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


def test_a_packing_the_ledger_no_longer_admits_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solver runs outside the ledger's lock: claims that appear meanwhile win over its packing."""
    slices, requests = _large()
    inv = _inventory(slices, [])
    real = __import__("isvc_planner._together", fromlist=["solve"]).solve

    def solve(problem: Any, seconds: float, start: Any) -> Solution:
        found = real(problem, seconds, start)
        for s in slices:  # meanwhile, another scheduler's claims take every device
            for d in s["spec"].get("devices") or []:
                pool = s["spec"]["pool"]["name"]
                inv.upsert_claim(fleet_claim("x", f"{pool}-{d['name']}", None, [(pool, d["name"], None)]))
        return found

    monkeypatch.setattr("isvc_planner._together.solve", solve)
    runs: list[str] = []
    answers = Planner(inv, solver_seconds=2.0, on_solver=runs.append).plan_many(requests)
    assert runs == ["stale"]
    assert _placed(answers) == 0


def test_one_order_alone_never_waits_for_the_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    def solve(*_: Any) -> Solution:
        raise AssertionError("the solver ran for one order")

    monkeypatch.setattr("isvc_planner._together.solve", solve)
    slices, requests = _large()
    planner = Planner(_inventory(slices, []), solver_seconds=5.0)
    assert planner.plan_many(requests[:1])[0].placement is not None
    assert planner.plan(requests[1]).placement is not None


def test_a_higher_priority_is_placed_before_the_solver_packs_the_rest() -> None:
    slices = [fleet_slice("n0", [fleet_gpu("n0", i, memory_gi="23034Mi") for i in range(2)])]
    rng = random.Random(3)
    requests = [
        PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=_facts(size, rng))
        for i, size in enumerate([18.5, 18.5, 10.5, 10.5, 10.5, 5.0, 5.0])
    ]
    requests[0] = requests[0].model_copy(update={"priority_class_name": "high"})
    answers = Planner(_inventory(slices, []), solver_seconds=5.0).plan_many(requests, budget=1)
    assert answers[0].placement is not None  # the high one, though two small ones would fit in its room
    assert answers[0].placement.placement_mode == PlacementMode.SHARED
    _check(slices, [], answers)
