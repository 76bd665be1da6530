"""ScalingHealthy and the settled model volume: what a Ready order may still be refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from isvc_api import Reason, Refusal, StatusReason, Verdict, parse_quantity
from pydantic import BaseModel, ConfigDict

from isvc_workload._claim_template import CLAIM_NAME
from isvc_workload._judge import claims_exhausted, short_of_room
from isvc_workload._kube import (
    claim_device_class,
    is_ready,
    is_terminating,
    name_of,
    pod_claim_name,
    unscheduled,
)

__all__ = [
    "EVENT_GROWTH_CLAIM_UNPLACED",
    "EVENT_SETTLED_REGION_TOO_SMALL",
    "GrowthJudgement",
    "Outranked",
    "UnplacedReplica",
    "judge_growth",
    "settled_region_check",
]

EVENT_GROWTH_CLAIM_UNPLACED = "GrowthClaimUnplaced"  # an autoscaled replica's claim got no device
EVENT_SETTLED_REGION_TOO_SMALL = "SettledRegionTooSmall"  # the model volume held is smaller than needed


class UnplacedReplica(BaseModel):
    """A replica beyond the first whose claim got no device."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pod: str
    claim: str | None
    scheduler_message: str
    device_class: str | None = None

    @property
    def event_message(self) -> str:
        """Text of the GrowthClaimUnplaced event on the order."""
        claim = f"its claim {self.claim}" if self.claim else "its claim"
        where = f" on device class {self.device_class}" if self.device_class else ""
        return (
            f"Replica pod {self.pod}: {claim} got no device{where}: {self.scheduler_message}. The order "
            f"keeps serving on its device class; the scheduler places the replica as soon as capacity frees up."
        )


GrowthJudgement = tuple[Verdict, tuple[UnplacedReplica, ...]]
"""The ScalingHealthy verdict of one pass, and the replicas whose claims got no device (for events)."""

Outranked = Callable[[], Sequence[str]]
"""Asked only when a replica got no device: the devices of the order's plan where orders of higher priority
than it hold the room the replica needs, each with who (the planner's ledger says); empty when the device is
simply full."""


def judge_growth(
    deployment: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    *,
    autoscaler: bool,
    min_replicas: int = 1,
    outranked: Outranked = tuple,
) -> GrowthJudgement:
    """Judge growth: replicas beyond a Ready one whose claims the scheduler cannot place.

    Only the device search failing counts (the "cannot allocate all claims" tally, no node short of CPU,
    memory or pod room: such a replica waits for a node, and says so); a replica that is merely starting is
    not blocked growth. A replica without a device on a device simply full waits
    for capacity, and growth stays healthy (True: the order is Ready, the GrowthClaimUnplaced event says it);
    growth is blocked (ScaleUpBlocked, phase Degraded) only under preemption: the room the replica needs is
    held by orders of higher priority (`outranked`), which the ranking keeps ahead of this order.
    """
    live = sorted((p for p in pods if not is_terminating(p)), key=name_of)
    ready = [p for p in live if is_ready(p)]
    if deployment is None or not ready:
        return Verdict(
            status="Unknown",
            reason=StatusReason.WAITING.value,
            message="Growth is judged once a replica serves.",
        ), ()
    device_class = claim_device_class(claims)
    unplaced = _unplaced(live, device_class)
    desired = (deployment.get("spec") or {}).get("replicas")
    desired_count = int(desired) if desired is not None else len(live)
    if not unplaced:
        return Verdict.ok(
            StatusReason.SCALING_OK,
            f"{len(ready)} of {desired_count} replicas ready; growth is not blocked{_short_of_room(live)}.",
        ), ()
    who = (
        f"the autoscaler asked for {desired_count}"
        if autoscaler and desired_count > min_replicas
        else f"the class asks for {desired_count}"
    )
    where = f" on device class {device_class}" if device_class else ""
    named = ", ".join(r.pod for r in unplaced)
    above = list(outranked())
    if not above:
        return Verdict.ok(
            StatusReason.SCALING_OK,
            (
                f"{len(ready)} of {desired_count} replicas ready, {who}: {len(unplaced)} replica(s) wait for "
                f"capacity{where} ({named}); the device is full, and the scheduler places them as soon as "
                "capacity frees up there. The order serves meanwhile."
            ),
        ), unplaced
    return Verdict.refuse(
        Reason.SCALE_UP_BLOCKED,
        (
            f"The endpoint serves with {len(ready)} replica(s), {who}: {len(unplaced)} replica(s) got no "
            f"device{where} ({named}). Scaling up is blocked by preemption: orders of higher priority hold the "
            f"room they need ({'; '.join(above)}); it frees when they release it."
        ),
    ), unplaced


def _short_of_room(live: list[dict[str, Any]]) -> str:
    """What replicas waiting for a node's CPU, memory or pod room (not for a device) say, as a clause."""
    short = [(name_of(p), ", ".join(n)) for p in live if (s := unscheduled(p)) and (n := short_of_room(*s))]
    held = "; ".join(f"{pod} waits for a node with room for it ({why})" for pod, why in short)
    return (
        f", but {held}: CPU, memory or room for pods on a node, which a full device is not said to be"
        if held
        else ""
    )


def _unplaced(live: list[dict[str, Any]], device_class: str | None) -> tuple[UnplacedReplica, ...]:
    """The replicas whose device search failed (not those merely starting)."""
    return tuple(
        UnplacedReplica(
            pod=name_of(p),
            claim=pod_claim_name(p, CLAIM_NAME),
            scheduler_message=s[1],
            device_class=device_class,
        )
        for p in live
        if (s := unscheduled(p)) is not None and claims_exhausted(*s)
    )


def _bytes(quantity: str) -> Decimal:
    return parse_quantity(quantity)


def settled_region_check(current_volume_size: str | None, needed_size: str) -> Refusal | None:
    """WorkloadError when the model volume the workload holds is smaller than the order now needs.

    A volume cannot be resized, so the refusal stands until the workload is taken down (Release
    notes give the procedure); the operator also emits the SettledRegionTooSmall event.
    None when there is no volume yet or it is large enough.
    """
    if current_volume_size is None:
        return None
    if _bytes(current_volume_size) >= _bytes(needed_size):
        return None
    return Refusal(
        reason=Reason.WORKLOAD_ERROR,
        message=(
            f"The model volume the workload holds ({current_volume_size}) is smaller than the order now "
            f"needs ({needed_size}); a volume cannot be resized, so the workload is refused: follow the "
            f"SettledRegionTooSmall procedure in the Release notes."
        ),
    )
