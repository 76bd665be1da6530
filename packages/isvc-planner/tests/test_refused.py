"""Issue 18: what the scheduler refuses is planned again, and a class the policy excludes does not count.

When kube-scheduler cannot allocate the claim of a plan ("cannot allocate all claims") the operator sends
the plan back as `refused`: the order avoids those devices and is placed elsewhere in any class it may use;
ResourceClaimExhausted, in the scheduler's words, once there is no other room.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from isvc_api import GIB, AcceleratorPolicy, ModelFacts, Placement, PlacementMode, Reason
from isvc_planner import SCHEDULER_RETRY, Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse, SchedulerRefusal
from isvc_testing import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice

WORDS = (
    "0/5 nodes are available: 1 cannot allocate all claims, 4 node(s) didn't match Pod's node "
    "affinity/selector. still not schedulable, preemption: 0/5 nodes are available: 5 Preemption is not "
    "helpful for scheduling."
)


def sized(facts: ModelFacts, gib: float) -> ModelFacts:
    weights = (gib - 1) / 1.2
    return facts.model_copy(
        update={
            "parameter_count": int(weights * GIB / 2),
            "dtype": "bfloat16",
            "num_layers": None,
            "quantization": "None",
        }
    )


def plan(planner: Planner, facts: ModelFacts, name: str, **kw: Any) -> PlanResponse:
    return planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts, **kw))


def whole(n: int) -> Inventory:
    gpus = [fleet_gpu("n1", i, shares=False) for i in range(n)]
    return Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", gpus)], [])


def refused(p: Placement) -> SchedulerRefusal:
    return SchedulerRefusal(placement=p, message=WORDS)


def test_a_claim_the_scheduler_refuses_is_planned_onto_another_device(models: dict[str, ModelFacts]) -> None:
    planner = Planner(whole(2))
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None and first.devices == ["gpu-0"]
    again = plan(planner, models["qwen7b"], "a", holding=first, refused=refused(first)).placement
    assert again is not None and again.devices == ["gpu-1"]
    # remembered: the next pass, without `refused`, does not move it back
    assert plan(planner, models["qwen7b"], "a", holding=again).placement == again


def test_with_no_other_room_it_says_resource_claim_exhausted_in_the_schedulers_words(
    models: dict[str, ModelFacts],
) -> None:
    planner = Planner(whole(1))
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    answer = plan(planner, models["qwen7b"], "a", holding=first, refused=refused(first))
    assert answer.refusal is not None and answer.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    message = answer.refusal.message
    assert "n1/gpu-0 (gpu.nvidia.com)" in message and "cannot allocate all claims" in message
    assert (
        "Every device class the order may use was tried (gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com)"
        in message
    )


def test_another_class_the_order_may_use_is_tried(models: dict[str, ModelFacts]) -> None:
    migs = [
        {
            "name": "gpu-1-mig-7g80gb-0",
            "attributes": {
                "type": {"string": "mig"},
                "uuid": {"string": "MIG-1"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
    ]
    slices = [fleet_slice("n1", [fleet_gpu("n1", 0, shares=False), *migs])]
    planner = Planner(Inventory.from_objects(fleet_device_classes(), slices, []))
    policy = AcceleratorPolicy(device_class_names=["gpu.nvidia.com", "mig.nvidia.com"])
    first = plan(planner, models["qwen7b"], "a", accelerator_policy=policy).placement
    assert first is not None and first.device_class_name == "gpu.nvidia.com"
    again = plan(
        planner, models["qwen7b"], "a", accelerator_policy=policy, holding=first, refused=refused(first)
    ).placement
    assert again is not None and (again.device_class_name, again.devices) == (
        "mig.nvidia.com",
        ["gpu-1-mig-7g80gb-0"],
    )


def test_a_refused_device_is_distrusted_for_everyone_until_the_ledger_sees_it_change(
    models: dict[str, ModelFacts],
) -> None:
    inv = whole(1)
    planner = Planner(inv)
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    plan(planner, models["qwen7b"], "a", holding=first, refused=refused(first))
    planner.release("ns", "a")
    assert plan(planner, models["qwen7b"], "b").refusal is not None  # the scheduler said no room there
    # The claim the ledger had not seen yet (what the scheduler saw) shows up, then goes.
    unseen = fleet_claim("x", "unseen", "x", [("n1", "gpu-0", None)])
    inv.upsert_claim(unseen)
    assert plan(planner, models["qwen7b"], "b").refusal is not None
    inv.delete_claim(unseen)
    assert plan(planner, models["qwen7b"], "b").placement is not None


def test_orders_waiting_together_keep_avoiding_what_the_scheduler_refused(
    models: dict[str, ModelFacts],
) -> None:
    planner = Planner(whole(2))
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    plan(planner, models["qwen7b"], "a", holding=first, refused=refused(first))
    planner.release("ns", "a")
    answers = planner.plan_many(
        [PlanRequest(order=OrderRef(namespace="ns", name=n), facts=models["qwen7b"]) for n in ("a", "b")]
    )
    assert answers[0].placement is not None and answers[0].placement.devices == ["gpu-1"]


def test_a_larger_card_the_selector_excludes_does_not_forbid_tensor_parallel_issue_18(
    models: dict[str, ModelFacts],
) -> None:
    slices = [
        fleet_slice(
            "n1", [fleet_gpu("n1", i, shares=False, memory_gi=24, product="NVIDIA L4") for i in range(2)]
        ),
        fleet_slice("n2", [fleet_gpu("n2", 0, shares=False)]),
    ]
    planner = Planner(Inventory.from_objects(fleet_device_classes(), slices, []))
    policy = AcceleratorPolicy(selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'")
    p = plan(planner, sized(models["qwen7b"], 30), "tp", accelerator_policy=policy).placement
    assert p is not None and p.placement_mode == PlacementMode.MULTI_DEVICE and len(p.devices) == 2


def test_a_refusal_is_learned_logged_and_counted_once_not_every_pass_issue_26(
    models: dict[str, ModelFacts], caplog: Any
) -> None:
    counted: list[None] = []
    planner = Planner(whole(1), on_disagreement=lambda: counted.append(None))
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    with caplog.at_level("WARNING", logger="isvc_planner"):
        answers = [
            plan(planner, models["qwen7b"], "a", holding=first, refused=refused(first)) for _ in range(5)
        ]
    assert {a.refusal.reason for a in answers if a.refusal} == {Reason.RESOURCE_CLAIM_EXHAUSTED}
    lines = [r for r in caplog.records if "the scheduler refused the claim" in r.getMessage()]
    assert len(lines) == 1 and len(counted) == 1
    assert "free units [100]" in lines[0].getMessage()  # the figures the ledger saw


def test_a_refused_share_is_not_offered_again_but_a_smaller_one_is(models: dict[str, ModelFacts]) -> None:
    """The refusal is for that shape: a smaller claim may still fit where the scheduler said no."""
    inv = Inventory.from_objects(fleet_device_classes(), [fleet_slice("n1", [fleet_gpu("n1", 0)])], [])
    planner = Planner(inv)
    big = plan(planner, sized(models["qwen7b"], 40), "big").placement
    assert big is not None and big.share_percent is not None
    assert plan(planner, sized(models["qwen7b"], 40), "big", holding=big, refused=refused(big)).refusal
    assert plan(planner, sized(models["qwen7b"], 40), "same").refusal is not None
    small = plan(planner, sized(models["qwen7b"], 10), "small").placement
    assert small is not None and small.devices == ["gpu-0"]


def test_a_refusal_the_ledger_explains_is_no_disagreement_and_lasts_while_the_room_is_taken_issue_26(
    models: dict[str, ModelFacts], caplog: Any
) -> None:
    """A claim of another party, allocated by the scheduler between the plan and the order's pod: the ledger
    counts it once it is allocated, so the refusal is explained. Not learned as a disagreement (no log, no
    count, nothing distrusted); ResourceClaimExhausted naming the device and the scheduler's words while that
    claim holds it; once it goes, the order is given its device again."""
    counted: list[None] = []
    inv = whole(1)
    planner = Planner(inv, on_disagreement=lambda: counted.append(None))
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    since = datetime.now(UTC) - timedelta(seconds=5)  # the pod has been refused for a while
    first_come = fleet_claim("other", "first-come", None, [("n1", "gpu-0", None)])
    inv.upsert_claim(first_come)
    said = SchedulerRefusal(placement=first, message=WORDS, since=since)
    with caplog.at_level("WARNING", logger="isvc_planner"):
        answer = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert answer.refusal is not None and answer.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    assert "n1/gpu-0 (gpu.nvidia.com)" in answer.refusal.message and "cannot allocate all claims" in (
        answer.refusal.message
    )
    assert not [r for r in caplog.records if "the scheduler refused the claim" in r.getMessage()]
    assert (counted, inv.distrusted()) == ([], {})
    again = plan(planner, models["qwen7b"], "a", holding=first)  # a later pass, from the waiting room
    assert again.refusal is not None and again.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    inv.delete_claim(first_come)
    # the waiting room asks again at once, the refusal still reported: room newer than it is not refused
    back = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert back.placement is not None and back.placement.devices == first.devices
    assert (counted, inv.distrusted()) == ([], {})


def test_room_that_appeared_after_the_refusal_is_not_taken_for_a_disagreement_until_the_scheduler_retried(
    models: dict[str, ModelFacts], monkeypatch: Any
) -> None:
    """The scheduler's words predate room that appeared after them: within its retry (podMaxBackoffSeconds)
    nothing is learned; after it, a refusal still reported is the scheduler's answer to that room."""
    counted: list[None] = []
    inv = whole(1)
    planner = Planner(inv, on_disagreement=lambda: counted.append(None))
    blocker = fleet_claim("other", "blocker", None, [("n1", "gpu-0", None)])
    inv.upsert_claim(blocker)
    since = datetime.now(UTC) - timedelta(seconds=5)
    inv.delete_claim(blocker)  # room, after the refusal began
    first = plan(planner, models["qwen7b"], "a").placement
    assert first is not None
    said = SchedulerRefusal(placement=first, message=WORDS, since=since)
    fresh = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert fresh.placement == first and counted == []
    later = time.time() + SCHEDULER_RETRY + 1
    monkeypatch.setattr(time, "time", lambda: later)
    learned = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert learned.refusal is not None and learned.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    assert len(counted) == 1


def _one_second(
    planner: Planner, inv: Inventory, facts: ModelFacts, monkeypatch: Any
) -> tuple[Any, list[float]]:
    """The clock at 1000.2 s, an order planned on the one card and a claim of another party taking it."""
    clock = [1000.2]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    first = plan(planner, facts, "a").placement
    assert first is not None
    inv.upsert_claim(fleet_claim("other", "first-come", None, [("n1", "gpu-0", None)]))
    return first, clock


def test_a_refusal_heard_before_room_appeared_within_its_second_predates_that_room_issue_26(
    models: dict[str, ModelFacts], monkeypatch: Any
) -> None:
    """A condition keeps its time to the second: a refusal at 1000.3 s reads 1000. Reported while the ledger
    counted the claim that took the card (explained), then that claim goes at 1000.7 s: the refusal was heard
    before the room appeared, so reported again it is no disagreement, and the order gets its card back."""
    counted: list[None] = []
    inv = whole(1)
    planner = Planner(inv, on_disagreement=lambda: counted.append(None))
    first, clock = _one_second(planner, inv, models["qwen7b"], monkeypatch)
    said = SchedulerRefusal(placement=first, message=WORDS, since=datetime.fromtimestamp(1000, UTC))
    clock[0] = 1000.3
    exhausted = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert exhausted.refusal is not None and exhausted.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    clock[0] = 1000.7
    inv.delete_claim(fleet_claim("other", "first-come", None, [("n1", "gpu-0", None)]))
    clock[0] = 1000.8
    back = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert back.placement is not None and back.placement.devices == first.devices
    assert (counted, inv.distrusted()) == ([], {})


def test_a_refusal_first_heard_after_room_appeared_within_its_second_answers_that_room_issue_26(
    models: dict[str, ModelFacts], monkeypatch: Any
) -> None:
    """The other way round: the claim goes at 1000.2 s and the refusal, reading 1000, is first reported at
    1000.6 s: it may be the scheduler's answer to that room, so it is learned (the agreement harness's
    planted disagreement, e2e)."""
    counted: list[None] = []
    inv = whole(1)
    planner = Planner(inv, on_disagreement=lambda: counted.append(None))
    first, clock = _one_second(planner, inv, models["qwen7b"], monkeypatch)
    inv.delete_claim(fleet_claim("other", "first-come", None, [("n1", "gpu-0", None)]))
    clock[0] = 1000.6
    said = SchedulerRefusal(placement=first, message=WORDS, since=datetime.fromtimestamp(1000, UTC))
    learned = plan(planner, models["qwen7b"], "a", holding=first, refused=said)
    assert learned.refusal is not None and learned.refusal.reason == Reason.RESOURCE_CLAIM_EXHAUSTED
    assert len(counted) == 1
