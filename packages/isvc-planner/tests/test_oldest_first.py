"""Waiting orders of one priority: those that waited long are placed oldest first, and the oldest that finds no
room keeps the device closest to holding it, so a stream of smaller orders cannot starve it (issue 45)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from isvc_api import GIB, ModelFacts, Reason
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest
from isvc_testing import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice

CARD = ("gpu.nvidia.com", "n1", "gpu-0")


def sized(facts: ModelFacts, gib: float) -> ModelFacts:
    """A model whose whole need is about `gib` GiB (weights only; KV taken as 10 % of them)."""
    weights = (gib - 1) / 1.2
    return facts.model_copy(
        update={
            "parameter_count": int(weights * GIB / 2),
            "dtype": "bfloat16",
            "num_layers": None,
            "quantization": "None",
        }
    )


def _inventory(held: int) -> Inventory:
    """One shareable H100 of which `held` shares are taken by an order outside the test."""
    claims = [fleet_claim("x", "other", "other", [("n1", "gpu-0", held)])] if held else []
    return Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], claims)


def _request(name: str, facts: ModelFacts, waited: float | None) -> PlanRequest:
    since = datetime.now(UTC) - timedelta(seconds=waited) if waited is not None else None
    return PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts, waiting_since=since)


def test_orders_that_waited_long_are_placed_oldest_first_before_the_packing(
    models: dict[str, ModelFacts],
) -> None:
    """45 shares free: packed for the most orders, seven small ones would take them all and the chat none;
    the chat waited longest, so it is placed first and the small ones share what is left."""
    chat = sized(models["qwen7b"], 30)  # about 40 % of the card
    small = sized(models["qwen7b"], 3)  # about 5 %
    requests = [_request("chat", chat, 300)] + [_request(f"emb-{i}", small, 200 - i) for i in range(7)]
    answers = Planner(_inventory(55), solver_seconds=0).plan_many(requests)
    assert answers[0].placement is not None, answers[0].refusal
    packed = Planner(_inventory(55), solver_seconds=0, fifo_after=3600).plan_many(requests)
    assert packed[0].placement is None  # the same pass without the rule: the chat is left out
    assert sum(a.placement is not None for a in packed) > sum(a.placement is not None for a in answers)


def test_the_oldest_that_finds_no_room_keeps_the_device_closest_to_holding_it(
    models: dict[str, ModelFacts],
) -> None:
    """The chat needs about 40 % and 30 % are free: it keeps the card, so newer small orders of its priority
    are not placed there (one alone, or packed together) and the room freed there goes to the chat."""
    inv = _inventory(70)
    planner = Planner(inv, solver_seconds=0, fifo_after=60)
    chat = sized(models["qwen7b"], 30)
    small = sized(models["qwen7b"], 3)
    requests = [_request("chat", chat, 120)] + [_request(f"emb-{i}", small, 10) for i in range(3)]
    answers = planner.plan_many(requests)
    assert answers[0].refusal is not None and answers[0].refusal.reason == Reason.NO_CAPACITY
    assert all(a.placement is None for a in answers[1:])  # the card is kept for the chat
    assert planner.keeps == {CARD: (("ns", "chat"), 0)}
    newcomer = planner.plan(_request("late", small, None))
    assert newcomer.placement is None  # a new order, alone, is not offered the kept card either
    inv.delete_claim(fleet_claim("x", "other", "other", [("n1", "gpu-0", 70)]))
    inv.upsert_claim(fleet_claim("x", "other", "other", [("n1", "gpu-0", 50)]))
    answers = planner.plan_many(requests)
    assert answers[0].placement is not None and planner.keeps == {}


def test_orders_that_did_not_wait_long_are_packed_for_the_most_placed(models: dict[str, ModelFacts]) -> None:
    chat = sized(models["qwen7b"], 30)
    small = sized(models["qwen7b"], 3)
    requests = [_request("chat", chat, 10)] + [_request(f"emb-{i}", small, 5) for i in range(7)]
    answers = Planner(_inventory(55), solver_seconds=0).plan_many(requests)
    assert answers[0].placement is None and all(a.placement is not None for a in answers[1:])
