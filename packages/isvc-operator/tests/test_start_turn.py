"""Issue 25: runtimes sharing a card start one at a time, whichever order, namespace or replica they are.

Two orders on one device, each with one replica waiting at its start gate (isvc_workload): the first pass
takes the device's turn Lease and permits its replica; the other waits and says for whom, naming no other
namespace; the turn passes when the first is Ready, when it restarts, or after the bounded turn, and the
stuck one says why. Nothing lives in the controller between passes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from isvc_api import PlacementMode, Reason, SharingMode, Verdict
from isvc_operator import PlanOutcome, StartWaiters
from isvc_workload import (
    START_PERMIT_ANNOTATION,
    START_PERMIT_SEAL_ANNOTATION,
    gate_pod_spec,
    turn_lease_name,
    turn_of,
)

from .fakes import ESTIMATES, PLACEMENT, World, order

HALF = PLACEMENT.model_copy(
    update={"placement_mode": PlacementMode.SHARED, "sharing_mode": SharingMode.SHARES, "share_percent": 50}
)

DEVICE = ("gpu.nvidia.com", "gpu-h100-0", "gpu-0")
A = ("team-a", "chat-a")
B = ("team-b", "chat-b")


@pytest.fixture
def world() -> World:
    w = World()
    w.planner.outcome = PlanOutcome(placement=HALF, estimates=ESTIMATES, refusal=None, preempt=[])
    w.workload.verdict = Verdict.refuse(Reason.WORKLOAD_NOT_READY, "0 of 1 replicas ready: coming up.")
    for ns, name in (A, B):
        w.run(order(name, ns))  # the set is applied; give it the uid the API server would
        w.cluster.objects[("StatefulSet", ns, name)]["metadata"]["uid"] = f"set-{name}"
        _waiting_pod(w, ns, name)
    w.clock_offset = timedelta(
        seconds=10
    )  # past the first seconds of coming up, whose stages are not written
    return w


def _waiting_pod(
    w: World,
    ns: str,
    name: str,
    restarts: int = 0,
    ready: bool = False,
    permit: str = "0",
    sealed: bool = False,
    seal: str | None = None,
) -> None:
    pod = f"{name}-0"
    _, volumes = gate_pod_spec({"name": "server", "command": ["vllm"]}, 600)
    annotations = {START_PERMIT_ANNOTATION: permit} | ({START_PERMIT_SEAL_ANNOTATION: seal} if seal else {})
    w.cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"volumes": volumes if sealed else []},
            "metadata": {
                "name": pod,
                "namespace": ns,
                "uid": f"uid-{pod}",
                "labels": {"ai.deckhouse.io/inference-service": name},
                "annotations": annotations,
                "ownerReferences": [
                    {"kind": "StatefulSet", "name": name, "uid": f"set-{name}", "controller": True}
                ],
            },
            "status": {
                "containerStatuses": [
                    {"name": "server", "ready": ready, "restartCount": restarts, "state": {"running": {}}}
                ],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{pod}-gpu"}],
            },
        }
    )
    w.cluster.put(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": f"{pod}-gpu",
                "namespace": ns,
                "labels": {"ai.deckhouse.io/inference-service": name},
                "ownerReferences": [{"kind": "Pod", "name": pod, "uid": f"uid-{pod}"}],
            },
            "status": {
                "allocation": {
                    "devices": {"results": [dict(zip(("driver", "pool", "device"), DEVICE, strict=True))]}
                }
            },
        }
    )


def _update_pod(w: World, ns: str, name: str, **status: Any) -> None:
    pod = w.cluster.objects[("Pod", ns, f"{name}-0")]
    pod["status"]["containerStatuses"][0].update(status)


def _permit(w: World, ns: str, name: str) -> str:
    return str(
        w.cluster.objects[("Pod", ns, f"{name}-0")]["metadata"]["annotations"][START_PERMIT_ANNOTATION]
    )


def _workload(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "WorkloadReady")


def _turn(w: World) -> Any:
    return turn_of(w.cluster.lease("d8-isvc", turn_lease_name(DEVICE)))


def test_the_first_to_ask_starts_and_the_other_waits_naming_it_but_not_its_namespace(world: World) -> None:
    world.run(order(A[1], A[0]))
    status = world.run(order(B[1], B[0]))
    assert (_permit(world, *A), _permit(world, *B)) == ("1", "0")
    turn = _turn(world)
    assert (turn.namespace, turn.pod, turn.start, turn.order) == ("team-a", "chat-a-0", 1, "chat-a")
    said = _workload(status)
    assert said["reason"] == "WorkloadNotReady"
    assert (
        "order chat-a of another namespace is starting" in said["message"] and "team-a" not in said["message"]
    )
    assert world.last is not None and world.last.requeue_after is not None and world.last.requeue_after <= 5


def test_the_turn_passes_when_the_one_starting_is_ready(world: World) -> None:
    world.run(order(A[1], A[0]))
    world.run(order(B[1], B[0]))
    _update_pod(world, *A, ready=True)
    world.run(order(B[1], B[0]))
    assert _permit(world, *B) == "1" and _turn(world).pod == "chat-b-0"


def test_the_orders_waiting_are_passed_as_soon_as_the_start_holding_the_turn_is_over(world: World) -> None:
    """Co-tenants looked again every 5 s: four orders on a card took 15 s to start after the first, and 200
    orders on the bench's cards were Ready at a median of 2-18 s, where each start on the bed takes a second."""
    world.start_waiters = StartWaiters()
    world.restart()
    world.run(order(A[1], A[0]))
    world.run(order(B[1], B[0]))  # waits for A's start
    world.run(order(A[1], A[0]))  # A still starting: nobody is woken
    assert world.last is not None and world.last.wake == ()
    _update_pod(world, *A, ready=True)
    world.run(order(A[1], A[0]))  # A's start is over: B is passed now
    assert world.last is not None and world.last.wake == (B,)
    world.run(order(A[1], A[0]))  # once
    assert world.last is not None and world.last.wake == ()
    world.run(order(B[1], B[0]))
    assert _permit(world, *B) == "1"


def test_a_restart_is_a_start_like_any_other(world: World) -> None:
    """The first served; it restarts while the second is starting: it waits, then goes when that one is Ready."""
    world.run(order(A[1], A[0]))
    _update_pod(world, *A, ready=True)
    world.run(order(B[1], B[0]))  # B starts
    _update_pod(world, *A, ready=False, restartCount=1)  # A's container restarted: start 2
    status = world.run(order(A[1], A[0]))
    assert (
        _permit(world, *A) == "1"
        and "order chat-b of another namespace is starting" in _workload(status)["message"]
    )
    _update_pod(world, *B, ready=True)
    world.run(order(A[1], A[0]))
    assert _permit(world, *A) == "2" and (_turn(world).pod, _turn(world).start) == ("chat-a-0", 2)


def test_a_start_that_never_gets_ready_holds_the_others_only_for_the_bounded_turn(world: World) -> None:
    world.run(order(A[1], A[0]))
    world.run(order(B[1], B[0]))
    assert _permit(world, *B) == "0"
    world.clock_offset = timedelta(seconds=612)
    waiting = world.run(order(B[1], B[0]))
    assert _permit(world, *B) == "1", _workload(waiting)
    stuck = _workload(world.run(order(A[1], A[0])))
    assert stuck["reason"] == "WorkloadNotReady"
    assert (
        "not Ready after the 600 s" in stuck["message"]
        and "start now without waiting for it" in stuck["message"]
    )


def test_a_restarted_controller_finds_the_turn_where_it_left_it(world: World) -> None:
    world.run(order(A[1], A[0]))
    world.restart()
    world.run(order(B[1], B[0]))
    assert (_permit(world, *A), _permit(world, *B)) == ("1", "0")


def test_a_turn_taken_but_not_yet_permitted_is_permitted_on_the_next_pass(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller died between the Lease and the permit: the holder's next pass writes the permit."""
    real = world.cluster.apply
    monkeypatch.setattr(world.cluster, "apply", lambda m: None if m["kind"] == "Pod" else real(m))
    world.run(order(A[1], A[0]))
    assert _permit(world, *A) == "0" and _turn(world).pod == "chat-a-0"
    monkeypatch.setattr(world.cluster, "apply", real)
    world.run(order(B[1], B[0]))
    assert _permit(world, *B) == "0"
    world.run(order(A[1], A[0]))
    assert _permit(world, *A) == "1"


def test_two_passes_never_both_win_the_turn(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """A's pass read the Lease before B's pass wrote it: A's write carries the old version and loses."""
    stale = world.cluster.lease
    before = stale("d8-isvc", turn_lease_name(DEVICE))
    world.run(order(B[1], B[0]))
    monkeypatch.setattr(world.cluster, "lease", lambda ns, name: before)
    world.run(order(A[1], A[0]))
    assert (_permit(world, *A), _permit(world, *B)) == ("0", "1")
    assert world.last is not None and world.last.requeue_after == 1.0


def test_a_pod_the_set_did_not_make_takes_no_turn(world: World) -> None:
    pod = (
        world.cluster.objects[("Pod", *A[:1], f"{A[1]}-0")]
        if False
        else world.cluster.objects[("Pod", A[0], "chat-a-0")]
    )
    pod["metadata"]["ownerReferences"] = []  # a namespace user's pod with the order's label
    world.run(order(A[1], A[0]))
    assert _permit(world, *A) == "0" and _turn(world) is None


def test_a_permit_the_module_did_not_seal_gets_the_replica_deleted_to_wait_its_turn_issue_44(
    world: World,
) -> None:
    """A namespace user (Kubernetes' `edit`) wrote the start permit on her pod herself: its runtime would start
    beside a co-tenant's start. The module seals its permits; a pod of the sealed gate whose permit it did not
    seal is deleted (its set makes it anew, behind the gate), with one event."""
    world.run(order(A[1], A[0]))  # A holds the card's turn
    _waiting_pod(world, *B, permit="1", sealed=True, seal="0123456789abcdef0123456789abcdef")
    status = world.run(order(B[1], B[0]))
    assert ("Pod", B[0], "chat-b-0") not in world.cluster.objects  # deleted: the set makes it anew
    said = _workload(status)
    assert said["reason"] == "WorkloadNotReady" and "its start permit was not the module's" in said["message"]
    [event] = [e for e in world.cluster.events if e[2] == "StartPermitForged"]
    assert event[1] == "Warning" and "a seal that does not hold" in event[3]
    assert _turn(world).pod == "chat-a-0"  # A's turn is untouched


def test_the_modules_own_sealed_permit_stands_and_an_earlier_gates_pod_is_left_alone(world: World) -> None:
    _waiting_pod(world, *A, sealed=True)
    world.run(order(A[1], A[0]))
    assert _permit(world, *A) == "1"  # permitted, with the module's seal
    world.run(order(A[1], A[0]))
    assert ("Pod", A[0], "chat-a-0") in world.cluster.objects
    _waiting_pod(world, *B, permit="3")  # a pod of the earlier gate (no seal mounted): nothing to check
    world.run(order(B[1], B[0]))
    assert ("Pod", B[0], "chat-b-0") in world.cluster.objects
    assert not [e for e in world.cluster.events if e[2] == "StartPermitForged"]


VLLM_TOOK_ITS_MEMORY = (
    "INFO [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens\n"
    "INFO [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB\n"
)


def test_the_turn_passes_once_the_runtime_says_its_memory_is_taken_not_at_ready_issue_45(
    world: World,
) -> None:
    """Each turn was held until the start was Ready: the warm-up and the readiness probe's period after the
    runtime had taken its memory kept every co-tenant of a freed card waiting, one after the other."""
    world.start_waiters = StartWaiters()
    world.restart()
    world.run(order(A[1], A[0]))
    world.run(order(B[1], B[0]))  # waits for A's start
    world.cluster.start_logs[(A[0], "chat-a-0")] = "INFO Loading weights took 4.1 seconds\n"
    world.run(order(A[1], A[0]))  # still loading: its output is looked at again shortly
    assert world.last is not None and world.last.requeue_after is not None and world.last.requeue_after <= 2
    assert world.last.wake == () and _turn(world).settled is None
    world.cluster.start_logs[(A[0], "chat-a-0")] += VLLM_TOOK_ITS_MEMORY
    world.run(order(A[1], A[0]))  # not Ready yet, but its memory is taken: B is passed now
    assert world.last is not None and world.last.wake == (B,)
    assert _turn(world).settled is not None
    world.run(order(B[1], B[0]))
    assert (_permit(world, *A), _permit(world, *B)) == ("1", "1") and _turn(world).pod == "chat-b-0"
    reads = len(world.cluster.start_log_reads)
    world.run(order(A[1], A[0]))  # A no longer holds the turn: its output is not read again
    assert len(world.cluster.start_log_reads) == reads
