"""Orders refused for want of room wait in the waiting room and are placed together with the next one."""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest
from isvc_api import InferenceService, ModelFacts, Placement, PlacementMode, Reason
from isvc_operator import EffectivePolicy, PlannerService, PlanOutcome, WaitingRoom
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
from isvc_testing._bench import _facts

from .fakes import order

GIB = 1 << 30
# The packing bench's instance that one order at a time loses: two shareable 24 GiB cards.
SIZES = [11.88, 5.0, 20.37, 4.37, 4.7, 15.53]


def facts(size: float) -> ModelFacts:
    """A model of about `size` GiB in all (the planner's estimate, by the benchmark's inversion of the
    memory model)."""
    return _facts(size, random.Random(int(size * 100))).model_copy(update={"name": f"m/{size}"})


class Wire:
    """The planner's HTTP routes served in-process by a real Planner; counts the calls."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.calls: list[tuple[str, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body: Any = json.loads(request.content)
        if request.url.path == "/v1/plans":
            answers = self.planner.plan_many([PlanRequest.model_validate(o) for o in body["orders"]])
            self.calls.append(("plans", len(answers)))
            return httpx.Response(200, json={"answers": [_wire(a) for a in answers]})
        if request.url.path == "/v1/release":
            self.calls.append(("release", 1))
            released = self.planner.release(body["namespace"], body["name"])
            return httpx.Response(200, json={"released": released})
        self.calls.append(("plan", 1))
        return httpx.Response(200, json=_wire(self.planner.plan(PlanRequest.model_validate(body))))


class Port:
    """The planner port as the controller builds it (client, waiting room, service); it records the
    waiting orders each answer placed together, which the controller would pass at once."""

    def __init__(self, client: PlannerClient, still_waiting: Any = lambda *_: True) -> None:
        self.room = WaitingRoom(client, still_waiting=still_waiting)
        self.service = PlannerService(client, self.room)
        self.queued: list[tuple[str, str]] = []

    def plan(self, *args: Any) -> PlanOutcome:
        outcome = self.service.plan(*args)
        self.queued += outcome.placed_together
        return outcome

    def release(self, namespace: str, name: str) -> None:
        self.service.release(namespace, name)

    def waiting(self) -> list[tuple[str, str]]:
        return self.room.waiting()


def _wire(answer: PlanResponse) -> Any:
    return answer.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.fixture
def world() -> tuple[Inventory, Wire, Port, list[tuple[str, str]], set[str]]:
    slices = [fleet_slice("n0", [fleet_gpu("n0", i, memory_gi=24, product="NVIDIA L4") for i in range(2)])]
    blocker = fleet_claim("ns", "big-gpu", "big", [("n0", "gpu-0", 100), ("n0", "gpu-1", 100)])
    inv = Inventory.from_objects(fleet_device_classes(), slices, [blocker])
    wire = Wire(Planner(inv))
    gone: set[str] = set()
    service = Port(
        PlannerClient("http://planner", transport=httpx.MockTransport(wire)),
        still_waiting=lambda namespace, name, uid: name not in gone,
    )
    return inv, wire, service, service.queued, gone


def ask(service: Port, i: int, holding: Placement | None = None) -> Any:
    o = InferenceService.model_validate(order(name=f"o{i}", namespace="ns"))
    return service.plan(o, facts(SIZES[i]), EffectivePolicy.builtin(), None, holding)


def test_orders_that_found_no_room_are_placed_together_when_room_comes(world: Any) -> None:
    inv, wire, service, queued, _ = world
    for i in range(5):  # the cards are full: each order is refused and waits
        assert ask(service, i).refusal.reason == Reason.NO_CAPACITY
    assert service.waiting() == [("ns", f"o{i}") for i in range(5)]
    assert wire.calls[0] == ("plan", 1) and wire.calls[1] == ("plans", 2) and wire.calls[4] == ("plans", 5)
    inv.delete_claim(fleet_claim("ns", "big-gpu", "big", []))  # the blocker goes
    last = ask(service, 5)
    assert wire.calls[-1] == ("plans", 6)
    assert last.placement is not None
    # Five of six fit together (the 85 % order is left out); one at a time would place four.
    assert sorted(queued) == [("ns", f"o{i}") for i in (0, 1, 3, 4)]
    assert service.waiting() == [("ns", "o2")]
    # Each placed order's own pass gets the device reserved for it.
    for i in (0, 1, 3, 4):
        assert ask(service, i).placement is not None
    assert ask(service, 2).refusal.reason == Reason.NO_CAPACITY


def test_an_order_gone_or_planned_is_not_planned_again_for_others(world: Any) -> None:
    _, wire, service, _, gone = world
    ask(service, 0)
    ask(service, 1)
    gone.add("o0")
    ask(service, 2)
    assert wire.calls[-1] == ("plans", 2)  # o2 with o1; o0 was forgotten
    assert ("ns", "o0") not in service.waiting()


def test_waiting_is_forgotten_after_its_time(world: Any) -> None:
    _, wire, service, _, _ = world
    now = [0.0]
    service.room.clock = lambda: now[0]
    ask(service, 0)
    now[0] = service.room.ttl + 1
    ask(service, 1)
    assert wire.calls[-1] == ("plan", 1)
    assert service.waiting() == [("ns", "o1")]


def test_a_replan_of_an_order_holding_a_placement_is_planned_alone(world: Any) -> None:
    _, wire, service, _, _ = world
    ask(service, 0)
    held = Placement(
        device_class_name="gpu.nvidia.com",
        pool="n0",
        devices=["gpu-0"],
        placement_mode=PlacementMode.SHARED,
        share_percent=50,
    )
    ask(service, 1, holding=held)
    assert wire.calls[-1] == ("plan", 1)


def test_a_planner_without_planning_together_still_plans_the_order_alone(world: Any) -> None:
    inv, wire, _, _, _ = world

    def old_planner(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/plans":
            return httpx.Response(404, json={"detail": "Not Found"})
        return wire(request)

    service = Port(PlannerClient("http://planner", transport=httpx.MockTransport(old_planner)))
    ask(service, 0)
    inv.delete_claim(fleet_claim("ns", "big-gpu", "big", []))
    assert ask(service, 1).placement is not None
    assert wire.calls == [("plan", 1), ("plan", 1)]


def test_an_order_released_stops_waiting_and_its_reservation_goes(world: Any) -> None:
    inv, _, service, _, _ = world
    ask(service, 0)
    assert service.waiting() == [("ns", "o0")]
    inv.delete_claim(fleet_claim("ns", "big-gpu", "big", []))
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
    inv, _, service, _, _ = world
    for i in range(5):
        ask(service, i)
    fresh = Port(service.room.client)  # a restarted controller: an empty room
    for i in range(5):  # every order gets a pass as the informers list; the waiting ones rejoin
        assert ask(fresh, i).refusal.reason == Reason.NO_CAPACITY
    assert fresh.waiting() == service.waiting()
    inv.delete_claim(fleet_claim("ns", "big-gpu", "big", []))
    assert ask(fresh, 5).placement is not None
    assert sorted(fresh.queued) == [("ns", f"o{i}") for i in (0, 1, 3, 4)]  # the same decision as before


def test_a_placement_judged_a_moment_ago_is_not_sent_to_the_planner_again() -> None:
    """Issue 15: every pass of every steady order asked the planner to judge its plan."""
    calls: list[str] = []

    def judge(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(200, content=b"null", headers={"content-type": "application/json"})

    client = PlannerClient("http://planner", transport=httpx.MockTransport(judge))
    service = PlannerService(client, WaitingRoom(client))
    held = Placement(
        device_class_name="gpu.nvidia.com",
        pool="n0",
        devices=["gpu-0"],
        placement_mode=PlacementMode.SHARED,
        share_percent=50,
    )
    assert service.judge(held) is None and service.judge(held) is None
    assert calls == ["/v1/judge"]
    service.judge(held.model_copy(update={"share_percent": 60}))
    assert calls == ["/v1/judge", "/v1/judge"]
