"""WorkloadReady on a shared card: each replica takes its device's turn before its runtime starts.

The turn is a coordination Lease per device in the module's namespace (isvc_workload's start gate): an
order's pass takes it for its own waiting replica with an optimistic write, then writes that replica's
start permit. A turn passes when the start is Ready, ends (the container exits or restarts, the pod goes)
or outlasts `Deps.start_turn_seconds`; a waiting replica's pass sees that and takes it. The orders waiting
are passed again at once when the start that held the turn is over (`Deps.start_waiters`, a hint in memory),
else within 5 s: a restarted controller reads the Leases and the pods and goes on.
"""

from __future__ import annotations

import hmac
import logging

from isvc_api import Obj, Reason, Verdict
from isvc_workload import (
    CONTAINER_NAME,
    device_of,
    memory_taken,
    overdue_message,
    permit_manifest,
    permit_seal,
    permit_view,
    permitted_at,
    permitted_start,
    sealed_gate,
    serving,
    settled_lease,
    start_asked,
    start_state,
    turn_lease,
    turn_lease_name,
    turn_of,
    waiting_message,
)

from isvc_operator._outcome import Apply, Decisions, Delete
from isvc_operator._ports import Deps
from isvc_operator._scope import RETRY_SOON, OrderScope, controlled_by

__all__ = ["FORGED_PERMIT", "take_turns"]

log = logging.getLogger(__name__)
FORGED_PERMIT = (
    "StartPermitForged"  # the event on an order whose replica carried a permit the module did not seal
)
_LOST_RACE = 1.0  # another pass took the turn between read and write: look again in a second
SETTLE_LOOK = 2.0  # while a start holds its device's turn, its output is read this often for its memory taken


def _of_set(pod: Obj, workload: Obj | None) -> bool:
    """Whether the set of the order made the pod (a namespace user can make pods with the order's label)."""
    uid = ((workload or {}).get("metadata") or {}).get("uid")
    return bool(uid) and controlled_by(pod, "StatefulSet", uid)


def _permit(scope: OrderScope, deps: Deps, d: Decisions, pod: Obj, start: int) -> None:
    d.write(Apply(permit_manifest(pod, start, scope.now, deps.sealer.seal(permit_view(pod, start)))))
    log.info(
        "%s/%s: pod %s may start (start %d)", scope.namespace, scope.name, pod["metadata"]["name"], start
    )


def _overdue(scope: OrderScope, deps: Deps, d: Decisions, pod: Obj) -> str | None:
    """The message of a permitted start that outlasted its turn; asks for a pass when it would."""
    permit = permitted_start(pod)
    since = permitted_at(pod)
    if since is None or permit < 1:
        return None
    if start_state(pod, CONTAINER_NAME, permit) != "starting":
        return None
    elapsed = (scope.now - since).total_seconds()
    if elapsed < deps.start_turn_seconds:
        d.requeue(deps.start_turn_seconds - elapsed + 1)
        return None
    return overdue_message(pod["metadata"]["name"], since, deps.start_turn_seconds)


def _take(scope: OrderScope, deps: Deps, d: Decisions, pod: Obj, start: int, claims: list[Obj]) -> str | None:
    """Take the device's turn for this start if nobody holds it; the wait's message when someone does."""
    device = device_of(pod, claims)
    if device is None:
        return None
    lease = deps.cluster.lease(deps.namespace, turn_lease_name(device))
    turn = turn_of(lease)
    if turn is not None and turn.of(pod, start):  # taken on an earlier pass; its permit may not be written
        _permit(scope, deps, d, pod, start)
        return None
    if turn is not None and scope.now < turn.until and turn.uid != pod["metadata"].get("uid"):
        holder = deps.cluster.cached("Pod", turn.namespace, turn.pod)
        same = holder is not None and (holder.get("metadata") or {}).get("uid") == turn.uid
        if same and start_state(holder, CONTAINER_NAME, turn.start) == "starting":
            d.requeue(min(RETRY_SOON, (turn.until - scope.now).total_seconds() + 1))
            if deps.start_waiters is not None:
                deps.start_waiters.wait(device, scope.key)
            return waiting_message(pod["metadata"]["name"], scope.namespace, device, turn)
    version = ((lease or {}).get("metadata") or {}).get("resourceVersion")
    wanted = turn_lease(
        deps.namespace, device, pod, start, scope.name, scope.now, deps.start_turn_seconds, version
    )
    if not deps.cluster.take_lease(wanted):
        d.requeue(_LOST_RACE)
        return None
    _permit(scope, deps, d, pod, start)
    return None


def _forged(scope: OrderScope, deps: Deps, d: Decisions, pod: Obj) -> str | None:
    """A replica whose start permit the controller did not seal (issue 44: a namespace user can write a pod's
    annotations and so let its runtime start out of turn) is deleted, and its set makes it anew to wait for
    its turn; what it carried is said once, as an event. None for a permit of the controller's, or a pod of an
    earlier gate that waits for no seal."""
    start = permitted_start(pod)
    if start < 1 or not sealed_gate(pod):
        return None
    seal = permit_seal(pod)
    if seal is not None and hmac.compare_digest(seal, deps.sealer.seal(permit_view(pod, start))):
        return None
    name = pod["metadata"]["name"]
    if not pod["metadata"].get("deletionTimestamp"):
        d.write(Delete("v1", "Pod", name))
        words = (
            f"Replica {name} carried a start permit the module did not write (start {start}, "
            f"{'a seal that does not hold' if seal else 'no seal'}): it is deleted, and made anew to wait for its "
            "turn on its shared device."
        )
        log.warning("%s/%s: %s", scope.namespace, scope.name, words)
        d.event("Warning", FORGED_PERMIT, words)
    d.requeue(RETRY_SOON)
    return (
        f"Replica {name} is made anew: its start permit was not the module's. Runtimes that share a device start "
        "one at a time, in the turns the module gives. This passes on its own."
    )


def _settle(scope: OrderScope, deps: Deps, d: Decisions, pod: Obj, claims: list[Obj]) -> None:
    """A start that holds its device's turn gives it up once its runtime says its memory is taken (issue 45:
    each turn was held until Ready, the warm-up and the readiness probe's period included, so the co-tenants
    of a freed card started one after the other over minutes). Its output is read every SETTLE_LOOK seconds
    while it holds the turn; the orders waiting are passed as soon as it is over."""
    start = permitted_start(pod)
    compiled = scope.plan.runtime if scope.plan is not None else None
    runtime = (compiled.model_extra or {}).get("runtime") if compiled is not None else None
    if start < 1 or runtime is None or start_state(pod, CONTAINER_NAME, start) != "starting":
        return
    device = device_of(pod, claims)
    lease = deps.cluster.lease(deps.namespace, turn_lease_name(device)) if device is not None else None
    turn = turn_of(lease)
    if device is None or lease is None or turn is None or not turn.of(pod, start) or scope.now >= turn.until:
        return
    if not memory_taken(
        runtime, deps.cluster.start_log(scope.namespace, pod["metadata"]["name"], CONTAINER_NAME)
    ):
        d.requeue(SETTLE_LOOK)
        return
    if deps.cluster.take_lease(settled_lease(lease, scope.now)):
        log.info(
            "%s/%s: pod %s took its memory %.1f s after its permit; the device's turn passes on",
            scope.namespace,
            scope.name,
            pod["metadata"]["name"],
            (scope.now - turn.since).total_seconds(),
        )
        if deps.start_waiters is not None:
            d.wake.extend(deps.start_waiters.freed(device))


def _wake_waiters(deps: Deps, d: Decisions, pod: Obj, claims: list[Obj]) -> None:
    """A start of the pod that is over (Ready, ended) no longer holds its device's turn: the orders waiting for
    that turn are passed now, not on their next look."""
    if deps.start_waiters is None:
        return
    permit = permitted_start(pod)
    if permit < 1 or start_state(pod, CONTAINER_NAME, permit) == "starting":
        return
    device = device_of(pod, claims)
    if device is not None:
        d.wake.extend(deps.start_waiters.freed(device))


def take_turns(
    scope: OrderScope,
    deps: Deps,
    d: Decisions,
    workload: Obj | None,
    pods: list[Obj],
    claims: list[Obj],
    verdict: Verdict,
) -> Verdict:
    """Hand the order's waiting replicas their device's turn, and say why one waits or outlasts its turn.

    The verdict changes only where it said the replicas are coming up (WorkloadNotReady)."""
    waits: list[str] = []
    overdue: list[str] = []
    forged: set[str] = set()
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        if not _of_set(pod, workload):
            continue
        remade = _forged(scope, deps, d, pod)
        if remade is not None:
            waits.append(remade)
            forged.add(pod["metadata"]["name"])
            continue
        start = start_asked(pod, CONTAINER_NAME)
        if start is None:
            _wake_waiters(deps, d, pod, claims)
            _settle(scope, deps, d, pod, claims)
        words = (
            _take(scope, deps, d, pod, start, claims) if start is not None else _overdue(scope, deps, d, pod)
        )
        if words is not None:
            (waits if start is not None else overdue).append(words)
    said = waits + overdue
    if forged and {p["metadata"]["name"] for p in serving(pods)} <= forged:  # up only out of its turn
        return Verdict.refuse(Reason.WORKLOAD_NOT_READY, waits[0])
    if not said or verdict.holds or verdict.reason != Reason.WORKLOAD_NOT_READY.value:
        return verdict
    return Verdict.refuse(Reason.WORKLOAD_NOT_READY, said[0])
