"""Orders refused for want of room wait in the waiting room; one pass plans them all together when the planner's
ledger may have made room (issue 26: not on a timer, not carried by the next order)."""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from isvc_api import InferenceService, ModelFacts, Placement, PlacementMode, Reason, SharingMode
from isvc_operator import EffectivePolicy, Judgement, PlannerService, PlanOutcome, WaitingRoom
from isvc_planner import (
    Inventory,
    Planner,
)
from isvc_planner_client import (
    PlannerClient,
    PlanRequest,
    PlanResponse,
)
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_slice,
)
from isvc_testing._models import sized_facts as _facts

from .fakes import order

# The packing bench's instance that one order at a time loses: two shareable 24 GiB cards.
SIZES = [11.88, 5.0, 20.37, 4.37, 4.7, 15.53]


def facts(size: float) -> ModelFacts:
    """A model of about `size` GiB in all (the planner's estimate, by the benchmark's inversion of the
    memory model)."""
    return _facts(size, random.Random(int(size * 100))).model_copy(update={"name": f"m/{size}"})


class Wire:
    """The planner's HTTP routes served in-process by a real Planner; counts the calls."""

    def __init__(self, planner: Planner, instance: str = "p1") -> None:
        self.planner = planner
        self.instance = instance
        self.calls: list[tuple[str, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/room":
            self.calls.append(("room", 1))
            after, wait = request.url.params.get("after"), float(request.url.params.get("wait", "0"))
            inv = self.planner.inventory
            seen = int(after.split(":")[1]) if after and after.startswith(f"{self.instance}:") else None
            freed = inv.freed if seen is None else inv.wait_freed(seen, wait)
            return httpx.Response(200, json={"epoch": f"{self.instance}:{freed}"})
        body: Any = json.loads(request.content)
        if request.url.path == "/v1/plans":
            answers = self.planner.plan_many([PlanRequest.model_validate(o) for o in body["orders"]])
            self.calls.append(("plans", len(answers)))
            return httpx.Response(200, json={"answers": [_wire(a) for a in answers]})
        if request.url.path == "/v1/release":
            self.calls.append(("release", 1))
            released = self.planner.release(body["namespace"], body["name"])
            return httpx.Response(200, json={"released": released})
        if request.url.path == "/v1/hold":
            self.calls.append(("hold", 1))
            lost = self.planner.standing(body["order"]["namespace"], body["order"]["name"])
            return httpx.Response(200, json={"lost": lost})
        self.calls.append(("plan", 1))
        return httpx.Response(200, json=_wire(self.planner.plan(PlanRequest.model_validate(body))))


def _wire(answer: PlanResponse) -> Any:
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True)


class Port:
    """The planner port as the controller builds it (client, waiting room, service); the room's passes wake
    the orders they placed, as the controller's queue would take them."""

    def __init__(
        self, client: PlannerClient, still_waiting: Any = lambda *_: True, period: float = 300.0
    ) -> None:
        self.room = WaitingRoom(client, still_waiting=still_waiting, period=period, settle=0.0)
        self.service = PlannerService(client, self.room)
        self.woken: list[tuple[str, str]] = []
        self.room._wake = lambda namespace, name: self.woken.append((namespace, name))

    def plan(self, *args: Any) -> PlanOutcome:
        return self.service.plan(*args)

    def release(self, namespace: str, name: str) -> None:
        self.service.release(namespace, name)

    def waiting(self) -> list[tuple[str, str]]:
        return self.room.waiting()


BLOCKER = fleet_claim("ns", "big-gpu", "big", [("n0", "gpu-0", 100), ("n0", "gpu-1", 100)])


@pytest.fixture
def world() -> tuple[Inventory, Wire, Port, set[str]]:
    slices = [fleet_slice("n0", [fleet_gpu("n0", i, memory_gi=24, product="NVIDIA L4") for i in range(2)])]
    inv = Inventory.from_objects(fleet_device_classes(), slices, [BLOCKER])
    wire = Wire(Planner(inv))
    gone: set[str] = set()
    service = Port(
        PlannerClient("http://planner", transport=httpx.MockTransport(wire)),
        still_waiting=lambda namespace, name, uid, holding: name not in gone,
    )
    return inv, wire, service, gone


def ask(service: Port, i: int, holding: Placement | None = None) -> Any:
    o = InferenceService.model_validate(order(name=f"o{i}", namespace="ns"))
    return service.plan(o, facts(SIZES[i]), EffectivePolicy.builtin(), None, holding)


def test_orders_that_found_no_room_are_placed_together_in_one_pass_when_room_comes(world: Any) -> None:
    inv, wire, service, _ = world
    for i in range(6):  # the cards are full: each order is refused and waits, asking the planner alone
        assert ask(service, i).refusal.reason == Reason.NO_CAPACITY
    assert service.waiting() == [("ns", f"o{i}") for i in range(6)]
    assert wire.calls == [("plan", 1)] * 6
    inv.delete_claim(BLOCKER)  # the blocker goes
    placed = service.room.sweep()
    assert wire.calls[-1] == ("plans", 6)  # one call for every order waiting
    # Five of six fit together (the 85 % order is left out); one at a time would place four.
    assert sorted(placed) == sorted(service.woken) == [("ns", f"o{i}") for i in (0, 1, 3, 4, 5)]
    assert service.waiting() == [("ns", "o2")]
    # Each placed order's own pass gets the device reserved for it.
    for i in (0, 1, 3, 4, 5):
        assert ask(service, i).placement is not None
    assert ask(service, 2).refusal.reason == Reason.NO_CAPACITY


def test_the_room_tells_the_planner_since_when_each_order_waits_oldest_first_issue_45(world: Any) -> None:
    inv, wire, service, _ = world
    sent: list[list[PlanRequest]] = []
    many = wire.planner.plan_many
    wire.planner.plan_many = lambda requests, *a: sent.append(list(requests)) or many(requests, *a)  # type: ignore[method-assign]
    started = datetime.now(UTC)
    for i in range(3):
        ask(service, i)
    inv.delete_claim(BLOCKER)
    service.room.sweep()
    [requests] = sent
    since = [r.waiting_since for r in requests]
    assert [r.order.name for r in requests] == ["o0", "o1", "o2"]
    assert all(s is not None and started - timedelta(seconds=1) <= s <= datetime.now(UTC) for s in since)
    assert since == sorted(since)  # type: ignore[type-var]


def test_an_order_gone_or_planned_is_not_planned_again_by_the_room(world: Any) -> None:
    _, wire, service, gone = world
    for i in range(3):
        ask(service, i)
    gone.add("o0")
    service.room.sweep()
    assert wire.calls[-1] == ("plans", 2)
    assert ("ns", "o0") not in service.waiting()


def test_a_room_pass_during_an_orders_refusal_plans_it_once_more(world: Any) -> None:
    """A pass of the room that ran while an order's own request was refused may have found the room it
    lacked: that order asks once more instead of waiting for the next change."""
    inv, wire, service, _ = world
    real = wire.__call__

    def racing(request: httpx.Request) -> httpx.Response:
        answer = real(request)
        if request.url.path == "/v1/plan" and len(wire.calls) == 1:
            inv.delete_claim(BLOCKER)
            service.room.sweep()  # runs between the refusal and the order joining the room
        return answer

    service.room.client = PlannerClient("http://planner", transport=httpx.MockTransport(racing))
    assert ask(service, 0).placement is not None
    assert service.waiting() == []


def test_the_room_is_passed_when_the_ledger_frees_room_and_costs_nothing_at_rest(world: Any) -> None:
    inv, wire, service, _ = world
    for i in range(6):
        ask(service, i)
    service.room.period = 600.0
    woken = threading.Event()
    service.room.start(lambda namespace, name: (service.woken.append((namespace, name)), woken.set()))
    try:
        deadline = time.monotonic() + 5
        while ("room", 1) not in wire.calls[6:] or wire.calls.count(("room", 1)) < 2:
            assert time.monotonic() < deadline, wire.calls
            time.sleep(0.01)
        rest = list(wire.calls)  # the first pass (at start), then a long poll that waits
        time.sleep(0.5)
        assert wire.calls == rest  # nothing changes, nothing is asked
        inv.delete_claim(BLOCKER)
        assert woken.wait(5)
        time.sleep(0.2)
        assert wire.calls[len(rest) :].count(("plans", 6)) == 1
        assert sorted(service.woken) == [("ns", f"o{i}") for i in (0, 1, 3, 4, 5)]
    finally:
        service.room.stop()
        inv._free()  # ends the long poll the thread is in


def test_a_restarted_planner_passes_the_room(world: Any) -> None:
    _, wire, service, _ = world
    ask(service, 0)
    token = service.room.client.room_changed(None, 0)
    wire.instance = "p2"
    assert service.room.client.room_changed(token, 30) != token  # at once: another planner's token


def test_a_replan_of_an_order_holding_a_placement_waits_with_what_it_holds(world: Any) -> None:
    _, wire, service, _ = world
    held = Placement(
        device_class_name="gpu.nvidia.com",
        driver="gpu.nvidia.com",
        pool="n0",
        devices=["gpu-0"],
        placement_mode=PlacementMode.SHARED,
        sharing_mode=SharingMode.SHARES,
        share_percent=50,
    )
    ask(service, 1, holding=held)
    assert wire.calls[-1] == ("plan", 1)
    assert service.room._waiting[("ns", "o1")][1].holding == held


def test_an_order_released_stops_waiting_and_its_reservation_goes(world: Any) -> None:
    inv, _, service, _ = world
    ask(service, 0)
    assert service.waiting() == [("ns", "o0")]
    inv.delete_claim(BLOCKER)
    assert ask(service, 1).placement is not None
    assert inv.reserved_by(("ns", "o1"))
    service.release("ns", "o1")
    service.release("ns", "o0")
    assert not inv.reserved_by(("ns", "o1")) and service.waiting() == []


def test_a_release_the_planner_does_not_answer_is_left_to_lapse() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    service = Port(PlannerClient("http://planner", transport=httpx.MockTransport(down)))
    service.release("ns", "o0")  # no error: the reservation lapses on its own


def test_after_a_restart_the_waiting_orders_rejoin_on_their_next_pass_and_are_placed_together(
    world: Any,
) -> None:
    inv, _, service, _ = world
    for i in range(6):
        ask(service, i)
    fresh = Port(service.room.client)  # a restarted controller: an empty room
    for i in range(6):  # every order gets a pass as the informers list; the waiting ones rejoin
        assert ask(fresh, i).refusal.reason == Reason.NO_CAPACITY
    assert fresh.waiting() == service.waiting()
    inv.delete_claim(BLOCKER)
    assert sorted(fresh.room.sweep()) == [("ns", f"o{i}") for i in (0, 1, 3, 4, 5)]  # the same decision


def test_a_plan_judged_a_moment_ago_is_not_sent_to_the_planner_again_unless_it_was_displaced() -> None:
    """Issue 15: every pass of every steady order asked the planner to judge its plan. Issue 26: a
    preemption names the orders it displaces, and their next pass asks again."""
    calls: list[str] = []

    def planner(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == "/v1/plan":
            answer = {
                "refusal": {"reason": "NoCapacity", "message": "m"},
                "preempt": [{"namespace": "ns", "name": "low"}],
            }
            return httpx.Response(200, json=answer)
        return httpx.Response(200, json={"lost": []})

    client = PlannerClient("http://planner", transport=httpx.MockTransport(planner))
    service = PlannerService(client, WaitingRoom(client))
    held = Placement(
        device_class_name="gpu.nvidia.com",
        pool="n0",
        devices=["gpu-0"],
        placement_mode=PlacementMode.SHARED,
        share_percent=50,
    )
    assert not service.judge("ns", "low", held).lost and not service.judge("ns", "low", held).lost
    assert calls == ["/v1/hold"]
    service.judge("ns", "low", held.model_copy(update={"share_percent": 60}))
    assert calls == ["/v1/hold", "/v1/hold"]
    service.plan(
        InferenceService.model_validate(order(name="vip", namespace="ns")),
        facts(5.0),
        EffectivePolicy.builtin(),
        None,
        None,
    )
    service.judge("ns", "low", held.model_copy(update={"share_percent": 60}))
    assert calls == ["/v1/hold", "/v1/hold", "/v1/plan", "/v1/hold"]


def test_orders_stranded_on_hardware_out_of_service_are_judged_afresh_and_passed(world: Any) -> None:
    """Issue 27: a cordon or a lost node is heard of through the planner's room; the orders it names are
    passed at once and their plan judged anew (not from the minute-long cache of judgements)."""
    _, _, port, _ = world
    port.service.judged[("ns", "a")] = ("{}", Judgement())
    port.room.strand([("ns", "a")])
    assert ("ns", "a") not in port.service.judged
    assert port.woken == [("ns", "a")]
