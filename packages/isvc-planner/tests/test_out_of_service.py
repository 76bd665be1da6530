"""Hardware that goes out of service is an inventory change (issue 27): a node cordoned, not ready, tainted or
deleted, a device withdrawn. Plans naming it are replanned (never called a defect), the orders stranded there are
named to the controller, and an order that cannot move is told which node holds the devices it would fit on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from isvc_api import GIB, ModelFacts, Placement, Reason
from isvc_planner import Inventory, Planner, create_app
from isvc_planner._auth import CallerCheck
from isvc_planner_client import OrderRef, PlannerClient, PlanRequest
from isvc_testing import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice

GPU = "gpu.nvidia.com"
H100 = (GPU, "big", "gpu-0")


def large(facts: ModelFacts) -> ModelFacts:
    """A model of about 38 GiB: it fits the H100 and not the 24 GiB card."""
    return facts.model_copy(
        update={
            "parameter_count": int((38 - 1) / 1.2 * GIB / 2),
            "dtype": "bfloat16",
            "num_layers": None,
            "quantization": "None",
        }
    )


def launch_plan(name: str, placement: Placement) -> dict[str, Any]:
    """A LaunchPlan as the controller stores it: named after its order."""
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "LaunchPlan",
        "metadata": {"namespace": "ns", "name": name},
        "spec": {"placement": placement.to_wire(), "plannedAt": "2026-12-01T10:00:00Z"},
    }


@contextmanager
def serve(inv: Inventory) -> Iterator[str]:
    """The planner's HTTP service on a loopback port, answering the token `controller-token`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    caller = CallerCheck({"controller-token": "controller"}.get, ["controller"])
    config = uvicorn.Config(
        create_app(Planner(inv), caller=caller), host="127.0.0.1", port=port, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


def fleet() -> Inventory:
    """An H100 node `big` and an L4-sized node `small` (24 GiB)."""
    return Inventory.from_objects(
        fleet_device_classes(),
        [
            fleet_slice("big", [fleet_gpu("big", 0)]),
            fleet_slice(
                "small",
                [fleet_gpu("small", 0, memory_gi=24, product="NVIDIA L4", compute_capability="8.9.0")],
            ),
        ],
        [],
    )


def placed(inv: Inventory, facts: ModelFacts, name: str) -> Placement:
    answer = Planner(inv).plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts))
    assert answer.placement is not None, answer.refusal
    inv.upsert_plan(launch_plan(name, answer.placement))
    return answer.placement


def node(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def test_a_cordon_strands_a_plan_only_where_no_pod_of_the_order_runs(models: dict[str, ModelFacts]) -> None:
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    assert placement.pool == "big"
    planner = Planner(inv)
    inv.upsert_node(node("big", unschedulable=True))
    assert inv.stranded() == [("ns", "a")]
    assert planner.gone("ns", "a", placement) == [
        "big/gpu-0: node big is cordoned, so no new pod starts there"
    ]
    # Its pod runs there (the claim is allocated): closing a node stops new pods, not the ones it runs.
    inv.upsert_claim(fleet_claim("ns", "a-0-gpu", "a", [("big", "gpu-0", placement.share_percent)]))
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []
    inv.delete_claim(fleet_claim("ns", "a-0-gpu", "a", []))  # evicted by a drain: its claim goes
    assert inv.stranded() == [("ns", "a")]
    inv.upsert_node(node("big"))  # uncordoned
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []


def test_a_replica_waiting_to_start_on_a_closed_node_strands_the_plan_though_another_runs_there(
    models: dict[str, ModelFacts],
) -> None:
    """Every replica's claim names the plan's devices, so all replicas of an order run on one node. A drain
    cordoned it and evicted one replica; the replica made again waited there, the other still ran, so the plan
    stood, the order was never moved, and the disruption budget refused the next eviction for ever."""
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    planner = Planner(inv)
    share = placement.share_percent
    for replica in ("a-0-gpu", "a-1-gpu"):
        inv.upsert_claim(fleet_claim("ns", replica, "a", [("big", "gpu-0", share)]))
    inv.upsert_node(node("big", unschedulable=True))
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []
    inv.delete_claim(fleet_claim("ns", "a-0-gpu", "a", []))  # evicted by the drain
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []  # the other runs there
    before = inv.freed
    waiting = {**fleet_claim("ns", "a-0-gpu-x", "a", []), "status": {}}  # made again: nobody allocates it
    inv.upsert_claim(waiting)
    assert inv.freed > before  # room moved: the controller judges the order again
    assert inv.stranded() == [("ns", "a")]
    assert planner.gone("ns", "a", placement) == [
        "big/gpu-0: node big is cordoned, so no new pod starts there"
    ]
    inv.upsert_node(
        node("big")
    )  # uncordoned: a replica waiting on a node in service is a start like any other
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []
    inv.upsert_node(node("big", unschedulable=True))
    inv.delete_claim(waiting)  # it went (the order moved, or its replica count fell): the plan stands again
    assert inv.stranded() == [] and planner.gone("ns", "a", placement) == []


def test_the_node_state_is_said_in_words(models: dict[str, ModelFacts]) -> None:
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    inv.upsert_node(
        node(
            "big",
            taints=[
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},
                {"key": "example.com/soft", "effect": "PreferNoSchedule"},
            ],
        )
    )
    [why] = Planner(inv).gone("ns", "a", placement)
    assert "node big is unreachable, not ready, tainted example.com/maintenance=true:NoSchedule" in why


def test_a_plan_on_a_deleted_node_is_gone_not_a_defect_issue_27(
    models: dict[str, ModelFacts], tmp_path: Path
) -> None:
    """Deleting the only H100 node: the plan read LaunchPlanNotAPlacement ("acceleratorMemoryGiB=80.0 ...
    report this as a defect") and stayed there."""
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    # Its pod ran there: the claim stays allocated until the cluster collects the pod of a deleted node.
    inv.upsert_claim(fleet_claim("ns", "a-0-gpu", "a", [("big", "gpu-0", placement.share_percent)]))
    inv.delete_node(node("big"))
    inv.delete_slice("big-gpu.nvidia.com-0-0")
    assert H100 not in inv.view.fleet.devices
    (tmp_path / "token").write_text("controller-token")
    with serve(inv) as url, PlannerClient(url, timeout=5, token_file=tmp_path / "token") as client:
        verdict = client.hold(OrderRef(namespace="ns", name="a"), placement)
        room = client.room_change(None, 0)
    assert verdict.refusal is None and verdict.gone == ["big/gpu-0: node big was deleted"]
    assert [(o.namespace, o.name) for o in room.stranded] == [("ns", "a")]


def test_a_withdrawn_device_is_gone_with_words_of_its_own(models: dict[str, ModelFacts]) -> None:
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    inv.upsert_slice(fleet_slice("big", [], generation=2))
    assert Planner(inv).gone("ns", "a", placement) == [
        "big/gpu-0 is no longer published (its driver withdrew it, or its node is gone)"
    ]


def test_an_order_that_cannot_move_is_told_which_nodes_hold_the_devices_it_would_fit(
    models: dict[str, ModelFacts],
) -> None:
    """It read ResourceClaimExhausted "This is capacity: free some, or wait" while the cause was a cordon."""
    inv = fleet()
    inv.upsert_node(node("big", unschedulable=True))
    answer = Planner(inv).plan(
        PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=large(models["qwen7b"]))
    )
    assert answer.refusal is not None and answer.refusal.reason == Reason.NO_CAPACITY
    assert "devices that would hold it are on nodes out of service: big (cordoned)" in answer.refusal.message
    inv.delete_node(node("big"))
    inv.delete_slice("big-gpu.nvidia.com-0-0")
    answer = Planner(inv).plan(
        PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=large(models["qwen7b"]))
    )
    assert answer.refusal is not None and answer.refusal.reason == Reason.NO_CAPACITY
    assert "big (deleted)" in answer.refusal.message
    inv.upsert_node(node("big"))  # it comes back
    inv.upsert_slice(fleet_slice("big", [fleet_gpu("big", 0)]))
    answer = Planner(inv).plan(
        PlanRequest(order=OrderRef(namespace="ns", name="a"), facts=large(models["qwen7b"]))
    )
    assert answer.placement is not None and answer.placement.pool == "big"


def test_a_deleted_nodes_slices_seen_gone_first_still_say_the_node_was_deleted(
    models: dict[str, ModelFacts],
) -> None:
    """The slices of a deleted node are collected after it, but their watch may be read before the node's:
    the refusal read "no usable device is published" and never named the node (a CI run under load)."""
    inv = fleet()
    placement = placed(inv, large(models["qwen7b"]), "a")
    inv.delete_slice("big-gpu.nvidia.com-0-0")
    assert Planner(inv).gone("ns", "a", placement) == [
        "big/gpu-0 is no longer published (its driver withdrew it, or its node is gone)"
    ]
    inv.delete_node(node("big"))
    assert Planner(inv).gone("ns", "a", placement) == ["big/gpu-0: node big was deleted"]
    answer = Planner(inv).plan(
        PlanRequest(order=OrderRef(namespace="ns", name="b"), facts=large(models["qwen7b"]))
    )
    assert answer.refusal is not None and answer.refusal.reason == Reason.NO_CAPACITY
    assert "big (deleted)" in answer.refusal.message
