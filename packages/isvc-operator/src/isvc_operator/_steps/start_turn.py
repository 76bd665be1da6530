"""WorkloadReady on a shared card: each replica takes its device's turn before its runtime starts.

The turn is a coordination Lease per device in the module's namespace (isvc_workload's start gate): an
order's pass takes it for its own waiting replica with an optimistic write, then writes that replica's
start permit. A turn passes when the start is Ready, ends (the container exits or restarts, the pod goes)
or outlasts `Deps.start_turn_seconds`; a waiting replica's pass sees that and takes it. The orders waiting
are passed again at once when the start that held the turn is over (`Deps.start_waiters`, a hint in memory),
else within 5 s: a restarted controller reads the Leases and the pods and goes on.
"""

from __future__ import annotations

import logging

from isvc_api import Obj, Reason, Verdict
from isvc_workload import (
    CONTAINER_NAME,
    device_of,
    overdue_message,
    permit_manifest,
    permitted_at,
    permitted_start,
    start_asked,
    start_state,
    turn_lease,
    turn_lease_name,
    turn_of,
    waiting_message,
)

from isvc_operator._outcome import Apply, Decisions
from isvc_operator._ports import Deps
from isvc_operator._scope import RETRY_SOON, OrderScope, controlled_by

__all__ = ["take_turns"]

log = logging.getLogger(__name__)
_LOST_RACE = 1.0  # another pass took the turn between read and write: look again in a second


def _of_set(pod: Obj, workload: Obj | None) -> bool:
    """Whether the set of the order made the pod (a namespace user can make pods with the order's label)."""
    uid = ((workload or {}).get("metadata") or {}).get("uid")
    return bool(uid) and controlled_by(pod, "StatefulSet", uid)


def _permit(scope: OrderScope, d: Decisions, pod: Obj, start: int) -> None:
    d.write(Apply(permit_manifest(pod, start, scope.now)))
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
        _permit(scope, d, pod, start)
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
    _permit(scope, d, pod, start)
    return None


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
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        if not _of_set(pod, workload):
            continue
        start = start_asked(pod, CONTAINER_NAME)
        if start is None:
            _wake_waiters(deps, d, pod, claims)
        words = (
            _take(scope, deps, d, pod, start, claims) if start is not None else _overdue(scope, deps, d, pod)
        )
        if words is not None:
            (waits if start is not None else overdue).append(words)
    said = waits + overdue
    if not said or verdict.holds or verdict.reason != Reason.WORKLOAD_NOT_READY.value:
        return verdict
    return Verdict.refuse(Reason.WORKLOAD_NOT_READY, said[0])
