"""The ledger kept from events as it would be built from scratch, and refusals read from a survey as from a
walk over every device (issue 32: at 10,000 nodes × 8 devices each refusal of a waiting batch walked the
whole fleet, and a batch of 1,000 waiting orders took minutes)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from isvc_api import LABEL_ORDER, AcceleratorPolicy
from isvc_planner import Inventory, Planner
from isvc_planner._survey import Surveys
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse
from isvc_testing import (
    DRIVER,
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_mig,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)
from isvc_testing._models import sized_facts as _facts

PRODUCTS = {24: "NVIDIA L4", 40: "NVIDIA A100-SXM4-40GB", 80: "NVIDIA H100 80GB HBM3"}


def _node_slice(rng: random.Random, node: str, generation: int = 0) -> dict[str, Any]:
    kind = rng.choice(["shares", "whole", "mig", "unprofiled"])
    if kind == "mig":
        devices = [fleet_mig(node, 0, "3g.40gb", slot, 40) for slot in range(2)]
    else:
        memory = rng.choice(sorted(PRODUCTS))
        devices = [
            fleet_gpu(
                node,
                i,
                memory_gi=None if kind == "unprofiled" else memory,
                product=PRODUCTS[memory],
                shares=kind == "shares",
                taint=rng.random() < 0.1,
            )
            for i in range(rng.randint(1, 4))
        ]
    return fleet_slice(node, devices, generation=generation)


def _claim(rng: random.Random, slices: dict[str, dict[str, Any]], n: int) -> dict[str, Any]:
    node = rng.choice(sorted(slices))
    device = rng.choice(slices[node]["spec"]["devices"])
    share = rng.randint(5, 50) if device.get("allowMultipleAllocations") else None
    order = f"held-{n}" if rng.random() < 0.8 else None
    return fleet_claim("ns", f"c{n}", order, [(node, device["name"], share)])


def _state(inv: Inventory) -> dict[str, object]:
    """What placement reads of a ledger, comparable across two ledgers."""
    view = inv.view
    return {
        "devices": sorted(view.fleet.devices),
        "rooms": {k: view.ledger.room(k) for k in sorted(view.fleet.devices)},
        "blocked": sorted(k for k in view.fleet.devices if view.ledger.blocked(k)),
        "classes": {c: [d.key for d in view.fleet.class_devices(c)] for c in sorted(view.classes.selectors)},
        "index": {
            c: {
                g: (
                    list(group.entries),
                    sorted(group.devices),
                    {p: sorted(v) for p, v in group.full_free.items()},
                )
                for g, group in sorted(view.index.groups(c).items())
                if group.entries
            }
            for c in sorted(view.classes.selectors)
        },
        "closed": sorted(view.fleet.closed_nodes),
        "states": dict(sorted(view.fleet.node_states.items())),
    }


@pytest.mark.parametrize("seed", range(6))
def test_a_ledger_kept_from_events_is_the_one_built_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    slices = {f"n{i}": _node_slice(rng, f"n{i}") for i in range(8)}
    claims: dict[str, dict[str, Any]] = {}
    nodes: dict[str, dict[str, Any]] = {name: {"metadata": {"name": name}, "spec": {}} for name in slices}
    classes = fleet_device_classes()
    kept = Inventory()
    for dc in classes:
        kept.upsert_device_class(dc)
    for sl in slices.values():
        kept.upsert_slice(copy.deepcopy(sl))
    kept.synced = True
    for step in range(120):
        what = rng.random()
        if what < 0.35:
            claim = _claim(rng, slices, step)
            claims[claim["metadata"]["name"]] = claim
            kept.upsert_claim(claim)
        elif what < 0.55 and claims:
            gone = claims.pop(rng.choice(sorted(claims)))
            kept.delete_claim(gone)
        elif what < 0.75:  # a node's driver publishes its pool again, possibly other devices
            node = rng.choice(sorted(slices))
            slices[node] = _node_slice(rng, node, slices[node]["spec"]["pool"]["generation"] + 1)
            kept.upsert_slice(copy.deepcopy(slices[node]))
        elif what < 0.85:  # cordoned, or opened again
            node = rng.choice(sorted(nodes))
            nodes[node] = {"metadata": {"name": node}, "spec": {"unschedulable": rng.random() < 0.5}}
            kept.upsert_node(nodes[node])
        elif what < 0.9:  # a node and its slice gone, then back
            node = rng.choice(sorted(slices))
            kept.delete_slice(slices[node]["metadata"]["name"])
            kept.upsert_slice(copy.deepcopy(slices[node]))
        else:  # a class's selector changed
            classes = fleet_device_classes()
            if rng.random() < 0.5:
                classes[0]["spec"]["selectors"].append(
                    {"cel": {"expression": "device.allowMultipleAllocations"}}
                )
            kept.upsert_device_class(classes[0])
        if step % 10 == 9:
            scratch = Inventory.from_objects(
                classes, list(slices.values()), list(claims.values()), nodes=list(nodes.values())
            )
            assert _state(kept) == _state(scratch), f"after step {step}"


@pytest.mark.parametrize("many", [4, 256])
def test_a_listing_applied_at_once_is_the_same_ledger_as_one_applied_claim_by_claim(
    many: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claims of a listing are counted and indexed once at the end (`Inventory.applying`), sorting each
    group again when many devices changed: the ledger is the one applying them one by one makes."""
    monkeypatch.setattr("isvc_ledger._books._MANY", many)
    rng = random.Random(3)
    slices = {f"n{i}": _node_slice(rng, f"n{i}") for i in range(120)}
    claims = [_claim(rng, slices, n) for n in range(900)]
    at_once = Inventory.from_objects(fleet_device_classes(), list(slices.values()), claims)
    one_by_one = Inventory.from_objects(fleet_device_classes(), list(slices.values()), [])
    for claim in claims:
        one_by_one.upsert_claim(claim)
    assert _state(at_once) == _state(one_by_one)
    with at_once.applying():  # and a relist that changes some of them, passing the rest again
        for claim in claims[::3]:
            at_once.delete_claim(claim)
        for claim in claims[1::3]:
            at_once.upsert_claim(claim)
    for claim in claims[::3]:
        one_by_one.delete_claim(claim)
    assert _state(at_once) == _state(one_by_one)


def test_pages_of_claims_applied_at_once_are_the_ledger_claim_by_claim_makes() -> None:
    """A listed page of claims is applied at once (`Inventory.upsert_claims`, how the watches apply claims;
    a first listing's new holdings on a short path): the ledger, each order's holdings and the claims that
    wait are those applying each claim alone makes, for a first listing and for a relist that passes some
    claims unchanged, moves some, takes the allocation of others and lists one twice in a page."""
    rng = random.Random(5)
    slices = {f"n{i}": _node_slice(rng, f"n{i}") for i in range(40)}
    first = [_claim(rng, slices, n) for n in range(300)]
    node, shared = next(
        (n, d)
        for n, sl in sorted(slices.items())
        for d in sl["spec"]["devices"]
        if d.get("allowMultipleAllocations")
    )
    first.append(
        fleet_claim("ns", "two", "held-two", [(node, shared["name"], 10), (node, shared["name"], 15)])
    )
    relist = []
    for n, claim in enumerate(first):
        if n % 4 == 1:  # moved to another device
            claim = {**_claim(rng, slices, n), "metadata": claim["metadata"]}
        elif n % 4 == 2:  # no longer allocated: it waits, and holds nothing
            claim = {**claim, "status": {}}
        relist.append(claim)
    relist.insert(10, relist[40])  # listed twice in one page
    paged = Inventory.from_objects(fleet_device_classes(), list(slices.values()), [])
    alone = Inventory.from_objects(fleet_device_classes(), list(slices.values()), [])
    for listing in (first, relist, first):  # the last: every claim allocated again
        with paged.applying():
            for page in range(0, len(listing), 50):
                paged.upsert_claims(listing[page : page + 50])
        for claim in listing:
            alone.upsert_claim(claim)
        orders = sorted(
            {("ns", c["metadata"]["labels"][LABEL_ORDER]) for c in first if c["metadata"]["labels"]}
        )
        assert _state(paged) == _state(alone)
        assert [paged.view.ledger.held_by(o) for o in orders] == [
            alone.view.ledger.held_by(o) for o in orders
        ]
        assert paged.view.ledger.unallocated == alone.view.ledger.unallocated
        # the relist's unallocated claims of orders wait; allocated again, none does
        assert bool(paged.view.ledger.unallocated) == (listing is relist)
    assert (
        paged.view.ledger.held_by(("ns", "held-two"))
        == alone.view.ledger.held_by(("ns", "held-two"))
        == {(DRIVER, node, shared["name"]): 25}
    )


@pytest.mark.parametrize("many", [2, 10_000])
def test_slices_of_a_listing_applied_at_once_are_the_ledger_slice_by_slice_makes(
    many: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's slices are counted and indexed with the rest of it (in the order it touched them),
    partitions' counters and claims already held included: the ledger is the one that applying each slice
    alone makes, and so is a relist that publishes some pools again."""
    monkeypatch.setattr("isvc_ledger._books._MANY", many)
    rng = random.Random(5)
    slices = {f"n{i}": _node_slice(rng, f"n{i}") for i in range(80)}
    claims = [_claim(rng, slices, n) for n in range(300)]
    at_once = Inventory.from_objects(fleet_device_classes(), [], claims)
    one_by_one = Inventory.from_objects(fleet_device_classes(), [], claims)
    with at_once.applying():
        for sl in reversed(list(slices.values())):
            at_once.upsert_slice(sl)
    for sl in reversed(list(slices.values())):
        one_by_one.upsert_slice(sl)
    assert _state(at_once) == _state(one_by_one)
    again = [_node_slice(rng, node, generation=1) for node in sorted(slices)[::4]]
    with at_once.applying():
        for sl in again:
            at_once.upsert_slice(sl)
    for sl in again:
        one_by_one.upsert_slice(sl)
    assert _state(at_once) == _state(one_by_one)


def test_first_listings_are_counted_and_indexed_once_the_ledger_is_synced_issue_32() -> None:
    """Each kind's first listing (and any event between them) waits, uncounted and unindexed, for the
    ledger to be marked synced; then it is the ledger that applying everything one by one makes. Once
    synced, a listing is counted at its end again."""
    rng = random.Random(11)
    slices = {f"n{i}": _node_slice(rng, f"n{i}") for i in range(60)}
    claims = [_claim(rng, slices, n) for n in range(400)]
    cordoned = {"metadata": {"name": "n3"}, "spec": {"unschedulable": True}}
    held, one_by_one = Inventory(), Inventory()
    one_by_one.synced = True
    with held.applying(until_synced=True):
        for dc in fleet_device_classes():
            held.upsert_device_class(dc)
    with held.applying(until_synced=True):
        for sl in slices.values():
            held.upsert_slice(sl)
    held.upsert_claim(claims[0])  # a watch's events between two first listings
    held.upsert_node(cordoned)
    with held.applying(until_synced=True):
        for claim in claims[1:]:
            held.upsert_claim(claim)
    assert held.view.index.groups("gpu.nvidia.com") == {}  # nothing counted or indexed yet
    held.synced = True
    for dc in fleet_device_classes():
        one_by_one.upsert_device_class(dc)
    for sl in slices.values():
        one_by_one.upsert_slice(sl)
    one_by_one.upsert_node(cordoned)
    for claim in claims:
        one_by_one.upsert_claim(claim)
    assert held.view.index.groups("gpu.nvidia.com")
    assert _state(held) == _state(one_by_one)
    late = Inventory()  # the classes' first listing after the slices' (the watches race for their turn)
    with late.applying(until_synced=True):
        for sl in slices.values():
            late.upsert_slice(sl)
    with late.applying(until_synced=True):
        for dc in fleet_device_classes():
            late.upsert_device_class(dc)
    late.upsert_node(cordoned)
    with late.applying(until_synced=True):
        for claim in claims:
            late.upsert_claim(claim)
    late.synced = True
    assert _state(late) == _state(one_by_one)
    with held.applying(until_synced=True):  # synced now: a listing is counted at its end
        for claim in claims[::2]:
            held.delete_claim(claim)
    for claim in claims[::2]:
        one_by_one.delete_claim(claim)
    assert _state(held) == _state(one_by_one)


def _fleet(rng: random.Random) -> Inventory:
    slices = [_node_slice(rng, f"n{i}") for i in range(6)]
    by_node = {s["spec"]["pool"]["name"]: s for s in slices}
    claims = [_claim(rng, by_node, n) for n in range(10)]
    nodes = [{"metadata": {"name": node}, "spec": {"unschedulable": rng.random() < 0.2}} for node in by_node]
    return Inventory.from_objects(
        fleet_device_classes(),
        slices,
        claims,
        [fleet_priority_class("low", 10), fleet_priority_class("high", 1000)],
        [fleet_order("ns", f"held-{n}", rng.choice(["lowly", "plain"])) for n in range(10)],
        [fleet_service_class("lowly", "low"), fleet_service_class("plain")],
        nodes,
    )


def _requests(rng: random.Random) -> list[PlanRequest]:
    out = []
    for i in range(25):
        body: dict[str, Any] = {
            "order": OrderRef(namespace="w", name=f"w{i}"),
            "facts": _facts(rng.choice([3.0, 8.0, 20.0, 35.0, 70.0, 150.0]), rng),
        }
        if rng.random() < 0.4:
            body["priority_class_name"] = "high"
        if rng.random() < 0.3:
            body["accelerator_policy"] = AcceleratorPolicy(
                selector="device.attributes['gpu.nvidia.com'].type == 'gpu'"
            )
        out.append(PlanRequest.model_validate(body))
    return out


def test_refusals_read_from_a_survey_are_those_of_a_walk_over_every_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[PlanResponse] = []
    for seed in range(12):
        requests = _requests(random.Random(seed))
        surveyed = Planner(_fleet(random.Random(seed)), solver_seconds=0)
        answers = [surveyed.plan(r) for r in requests]
        with monkeypatch.context() as patch:
            patch.setattr(Surveys, "surveyed", lambda *_: None)
            walked = Planner(_fleet(random.Random(seed)), solver_seconds=0)
            expected = [walked.plan(r) for r in requests]
        assert [_dump(a) for a in answers] == [_dump(a) for a in expected], f"seed {seed}"
        seen += answers
    reasons = {a.refusal.reason for a in seen if a.refusal is not None}
    # the cases were there to compare: refusals of several reasons, some naming nodes out of service, preemption
    assert len(reasons) >= 3 and any(a.preempt for a in seen), reasons
    assert any(a.refusal is not None and "out of service" in a.refusal.message for a in seen)


def _dump(answer: PlanResponse) -> dict[str, Any]:
    return answer.model_dump(mode="json", exclude_none=True)


def test_every_order_of_a_batch_larger_than_one_packing_is_answered() -> None:
    """Issue 32: orders past the first 200 of one priority got an empty answer, neither placed nor refused."""
    slices = [
        fleet_slice(f"n{i}", [fleet_gpu(f"n{i}", 0, memory_gi=24, product="NVIDIA L4")]) for i in range(30)
    ]
    planner = Planner(Inventory.from_objects(fleet_device_classes(), slices, []), solver_seconds=0)
    rng = random.Random(1)
    requests = [
        PlanRequest(order=OrderRef(namespace="w", name=f"w{i}"), facts=_facts(rng.uniform(3, 12), rng))
        for i in range(450)
    ]
    answers = planner.plan_many(requests)
    assert all((a.placement is None) != (a.refusal is None) for a in answers)
    placed = [a for a in answers if a.placement is not None]
    assert 30 < len(placed) < 450
    assert any(a.placement is not None for a in answers[200:])  # later batches get what earlier ones left
