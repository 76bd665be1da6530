"""Properties: no plan over-commits a device, and plans are deterministic for one inventory."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isvc_api import GIB, ModelFacts, ModelSource, Placement, PlacementMode
from isvc_planner import (
    Inventory,
    Planner,
    memory_need,
)
from isvc_planner_client import (
    OrderRef,
    PlanRequest,
)
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_slice,
)

device_st = st.tuples(st.sampled_from([24, 40, 80, 141]), st.booleans())
fleet_st = st.lists(st.lists(device_st, min_size=1, max_size=4), min_size=1, max_size=3)
orders_st = st.lists(st.tuples(st.integers(1, 60), st.booleans()), min_size=1, max_size=12)


def facts(billions: int) -> ModelFacts:
    return ModelFacts(
        source=ModelSource.HUGGING_FACE,
        name=f"m{billions}",
        parameter_count=billions * 10**9 // 2,
        dtype="bfloat16",
        num_layers=24,
        num_attention_heads=16,
        num_kv_heads=4,
        head_dim=128,
        context_length=4096,
    )


def build(fleet: list[list[tuple[int, bool]]]) -> list[dict[str, Any]]:
    return [
        fleet_slice(f"n{n}", [fleet_gpu(f"n{n}", i, memory_gi=m, shares=s) for i, (m, s) in enumerate(devs)])
        for n, devs in enumerate(fleet)
    ]


def memory_of(slices: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Bytes per (pool, device) as the slices publish them."""
    return {
        (s["spec"]["pool"]["name"], d["name"]): int(d["capacity"]["memory"]["value"][:-2]) * GIB
        for s in slices
        for d in s["spec"]["devices"]
    }


def take(
    held: dict[tuple[str, str], int], memory: dict[tuple[str, str], int], f: ModelFacts, p: Placement
) -> int:
    """Count a placement's units into `held`, asserting no device goes over 100 or below the need."""
    need = memory_need(f)
    assert need is not None and p.devices and p.pool
    units = p.share_percent if p.placement_mode == PlacementMode.SHARED else 100
    assert units is not None
    for d in p.devices:
        key = (p.pool, d)
        held[key] = held.get(key, 0) + units
        assert held[key] <= 100, f"device {key} over-committed"
        assert units * memory[key] // 100 >= need.per_device(len(p.devices)), "share smaller than the need"
    return units


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleet_st, orders=orders_st)
def test_no_plan_over_commits_memory_or_shares(
    fleet: list[list[tuple[int, bool]]], orders: list[tuple[int, bool]]
) -> None:
    slices = build(fleet)
    memory = memory_of(slices)
    inv = Inventory.from_objects(fleet_device_classes(), slices, [])
    planner = Planner(inv)
    held: dict[tuple[str, str], int] = {}
    for i, (size, as_claim) in enumerate(orders):
        f = facts(size)
        r = planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=f))
        if r.placement is None:
            continue
        p = r.placement
        units = take(held, memory, f, p)
        assert p.pool and p.devices
        if as_claim:
            share = units if p.share_percent is not None else None
            inv.upsert_claim(fleet_claim("ns", f"c{i}", f"o{i}", [(p.pool, d, share) for d in p.devices]))


@settings(max_examples=60, deadline=None)
@given(fleet=fleet_st, orders=orders_st)
def test_plans_are_deterministic_for_the_same_inventory(
    fleet: list[list[tuple[int, bool]]], orders: list[tuple[int, bool]]
) -> None:
    def run() -> list[str]:
        planner = Planner(Inventory.from_objects(fleet_device_classes(), build(fleet), []))
        out = []
        for i, (size, _) in enumerate(orders):
            r = planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=facts(size)))
            out.append(r.model_dump_json())
        return out

    assert run() == run()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleet_st, orders=orders_st, held=st.lists(st.integers(1, 60), max_size=3))
def test_orders_placed_together_never_over_commit_and_come_out_the_same_each_time(
    fleet: list[list[tuple[int, bool]]], orders: list[tuple[int, bool]], held: list[int]
) -> None:
    slices = build(fleet)
    memory = memory_of(slices)

    def run() -> tuple[list[str], dict[tuple[str, str], int]]:
        inv = Inventory.from_objects(fleet_device_classes(), slices, [])
        planner = Planner(inv)
        taken: dict[tuple[str, str], int] = {}
        for i, size in enumerate(held):  # some devices are partly held already, as claims
            p = planner.plan(PlanRequest(order=OrderRef(namespace="old", name=f"h{i}"), facts=facts(size)))
            inv.release(("old", f"h{i}"))
            if p.placement is not None and p.placement.pool and p.placement.devices:
                take(taken, memory, facts(size), p.placement)
                inv.upsert_claim(
                    fleet_claim(
                        "old",
                        f"c{i}",
                        f"h{i}",
                        [(p.placement.pool, d, p.placement.share_percent) for d in p.placement.devices],
                    )
                )
        requests = [
            PlanRequest(order=OrderRef(namespace="ns", name=f"o{i}"), facts=facts(size))
            for i, (size, _) in enumerate(orders)
        ]
        answers = planner.plan_many(requests)
        for r, request in zip(answers, requests, strict=True):
            assert (r.placement is None) != (r.refusal is None)
            if r.placement is not None:
                take(taken, memory, request.facts, r.placement)
        return [r.model_dump_json() for r in answers], taken

    first, _ = run()
    assert run()[0] == first
