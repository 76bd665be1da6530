"""Rolls nobody asked for, one order of a class at a time (issue 27: a class's priorityClassName changed, and
every order of the class recreated its pods in the same second)."""

from __future__ import annotations

from typing import Any

from isvc_operator import PlanOutcome, RollPacer

from .fakes import ESTIMATES, PLACEMENT, World, klass, order

A, B, C = ("team-a", "a"), ("team-a", "b"), ("team-b", "c")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_order_of_a_class_rolls_at_a_time_and_the_next_goes_when_it_settles() -> None:
    pacer = RollPacer(deadline=300)
    assert pacer.may_roll("chat", A)
    assert pacer.may_roll("chat", A)  # its own turn, asked again
    assert not pacer.may_roll("chat", B)
    assert pacer.may_roll("embed", C)  # another class rolls beside it
    assert pacer.turn("chat") == A
    assert pacer.settled("chat", B) == []  # not its turn: nothing changes
    assert pacer.settled("chat", A) == [B]
    assert pacer.may_roll("chat", B)


def test_a_roll_that_never_finishes_holds_the_turn_for_the_deadline_only() -> None:
    clock = Clock()
    pacer = RollPacer(deadline=300, clock=clock)
    assert pacer.may_roll("chat", A)
    clock.now = 299
    assert not pacer.may_roll("chat", B)
    clock.now = 300
    assert pacer.may_roll("chat", B)
    assert pacer.turn("chat") == B


def test_a_deleted_order_hands_its_turn_on() -> None:
    pacer = RollPacer()
    assert pacer.may_roll("chat", A)
    assert not pacer.may_roll("chat", B)
    assert pacer.forget(A) == [B]
    assert pacer.may_roll("chat", B)


def run(world: World, name: str, **model: Any) -> dict[str, Any]:
    """A pass of order `name`, which the planner places on a device of its own."""
    placement = PLACEMENT.model_copy(update={"devices": [f"gpu-{name}"], "device_uuids": [f"GPU-{name}"]})
    world.planner.outcome = PlanOutcome(placement=placement, estimates=ESTIMATES, refusal=None, preempt=[])
    obj = order(name, **model)
    if model:
        obj["metadata"]["generation"] = 2
        world.cluster.put({**obj, "status": world.cluster.status_of("team-a", name)})
    return world.run(obj)


def serving(world: World, name: str, **status: Any) -> None:
    held = world.cluster.objects[("StatefulSet", "team-a", name)]
    held["metadata"]["generation"] = 2
    held["status"] = {
        "readyReplicas": 1,
        "observedGeneration": 2,
        "currentRevision": "r1",
        "updateRevision": "r1",
        **status,
    }


def priority(world: World, name: str) -> Any:
    held = world.cluster.objects[("StatefulSet", "team-a", name)]
    return held.get("spec", {}).get("template", {}).get("spec", {}).get("priorityClassName")


def test_a_class_edit_that_recreates_pods_rolls_its_serving_orders_one_at_a_time() -> None:
    world = World()
    world.rolls = RollPacer()
    world.cluster.priority_classes.update({"low": 1, "high": 2})
    world.cluster.put(klass(priorityClassName="low"))
    for name in ("a", "b"):
        run(world, name)
        serving(world, name)
    world.cluster.put(klass(priorityClassName="high"))
    run(world, "a")
    status = run(world, "b")
    assert (priority(world, "a"), priority(world, "b")) == ("high", "low")  # b waits: a rolls
    ready = next(c for c in status["conditions"] if c["type"] == "WorkloadReady")
    assert ready["status"] == "True"
    assert (
        "waits its turn: the class default-llm roll one order at a time (order team-a/a is rolling now)"
        in (ready["message"])
    )
    assert world.last is not None and world.last.requeue_after == 15.0
    run(world, "b")
    assert priority(world, "b") == "low"  # still waiting
    serving(world, "a", updateRevision="r2")  # a's set rolls its pod
    run(world, "a")
    assert world.last.wake == ()
    serving(world, "a", currentRevision="r2", updateRevision="r2")  # a serves on its new pod
    run(world, "a")
    assert world.last.wake == (("team-a", "b"),)
    run(world, "b")
    assert priority(world, "b") == "high"


def test_an_order_that_does_not_serve_or_edits_itself_is_not_paced() -> None:
    world = World()
    world.rolls = RollPacer()
    world.cluster.priority_classes.update({"low": 1, "high": 2})
    world.cluster.put(klass(priorityClassName="low"))
    for name in ("a", "b", "c"):
        run(world, name)
        serving(world, name)
    world.cluster.objects[("StatefulSet", "team-a", "b")]["status"]["readyReplicas"] = 0
    world.cluster.put(klass(priorityClassName="high"))
    run(world, "a")
    run(world, "b")
    assert priority(world, "b") == "high"  # it serves nothing: nothing to keep up
    run(world, "c", model="Qwen/Qwen2.5-3B-Instruct")
    assert priority(world, "c") == "high"  # its own edit rolls at once
