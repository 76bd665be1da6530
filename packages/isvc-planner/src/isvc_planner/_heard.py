"""What the scheduler said of an order's claim: its refusals, heard from the controller, kept while they
stand, and learned as disagreements where the ledger saw room."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from isvc_api import DeviceKey, OrderKey, PlacementMode, SharingMode
from isvc_ledger import UNITS, View
from isvc_planner_client import SchedulerRefusal

from isvc_planner._inventory import Inventory

__all__ = ["SCHEDULER_RETRY", "Heard"]

log = logging.getLogger("isvc_planner")

# How long room the ledger saw appear after a refusal may go untried by kube-scheduler: it retries an
# unschedulable pod at once on a change that may make room, after its backoff otherwise (podMaxBackoffSeconds,
# 10 by default: kubernetes v1.36.3 pkg/scheduler/apis/config/v1/defaults.go), and a loaded control plane
# shows the pod's binding later still (measured: over 10 s at load 10 on 2 cores). Room that appeared less than
# this long ago, after the refusal, is room the scheduler may not have tried yet: its refusal predates it.
SCHEDULER_RETRY = 30.0


class Heard:
    """Each order's last refusal by the scheduler while it stands, and when each was first heard here."""

    def __init__(self, inventory: Inventory, distrust_ttl: float) -> None:
        self.inventory = inventory
        self.distrust_ttl = distrust_ttl
        self.on_disagreement: Callable[[], None] | None = None
        # order -> (devices refused, units asked (UNITS: whole), where, the scheduler's words)
        self._refused: dict[OrderKey, tuple[list[DeviceKey], int, str, str]] = {}
        # order -> (the refusal last reported: its condition's time and words, when it was first reported here)
        self._heard: dict[OrderKey, tuple[tuple[float | None, str], float]] = {}

    def forget(self, order: OrderKey) -> None:
        """The order's plan was released: what was heard of it goes."""
        self._heard.pop(order, None)

    def standing(
        self, view: View, order: OrderKey, distrust: dict[DeviceKey, int | None], own: set[DeviceKey]
    ) -> tuple[str, str] | None:
        """(where, the scheduler's words) of the order's last refusal, while the cluster has not changed
        where it was refused."""
        refused = self._refused.get(order)
        if refused is None:
            return None
        if not any(
            k in distrust or (k in own and view.ledger.room(k, (order,)) < refused[1]) for k in refused[0]
        ):
            del self._refused[order]  # the cluster changed where it was refused: that refusal is over
            return None
        return refused[2], refused[3]

    def learn(self, view: View, order: OrderKey, refused: SchedulerRefusal) -> None:
        """The scheduler refused the claim pinned to these devices.

        Where the ledger has no room for it either, it already counts what took the room (a claim the
        scheduler allocated first, a victim of preemption still leaving): no disagreement, and the refusal
        stands while that room is missing. Where the room appeared after the refusal, within the scheduler's
        retry, its words predate it: nothing is learned. Otherwise the ledger saw room the scheduler did not:
        no claim of that size or larger is offered there (to this order or any other) until the cluster
        changes there (someone else's holding released or smaller, the pool published again; `distrust_ttl`
        at most). Logged and counted once per refusal learned, not once per pass that reports it again."""
        p, inv = refused.placement, self.inventory
        said = (refused.since.timestamp() if refused.since is not None else None, refused.message)
        heard = self._heard.get(order)
        if heard is None or heard[0] != said:
            heard = self._heard[order] = (said, time.time())
        if not (p.driver and p.pool and p.devices):
            return
        keys = [(p.driver, p.pool, d) for d in p.devices]
        shared = p.sharing_mode == SharingMode.SHARES
        units = (p.share_percent if p.placement_mode == PlacementMode.SHARED else UNITS) if shared else None
        where = f"{', '.join(f'{p.pool}/{d}' for d in p.devices)} ({p.device_class_name})"
        rooms = [view.ledger.room(k, (order,)) for k in keys]
        asked = units or UNITS
        if any(r < asked for r in rooms):
            self._refused[order] = (keys, asked, where, refused.message)
            return
        # The refusal is no later than the end of its condition's second (metav1.Time keeps seconds) nor than
        # when it was first reported here: room freed within that second is older unless this refusal was heard
        # before it (a refusal the ledger explained, then room: its retry has not come yet).
        since = min(refused.since.timestamp() + 1.0 if refused.since is not None else 0.0, heard[1])
        now = time.time()
        if any(since < (freed := inv.freed_at(k)) and now - freed < SCHEDULER_RETRY for k in keys):
            return
        self._refused[order] = (keys, asked, where, refused.message)
        if not inv.distrust(keys, units, self.distrust_ttl, order):
            return
        if self.on_disagreement is not None:
            self.on_disagreement()
        log.warning(
            "the scheduler refused the claim of %s/%s for %s on %s although the ledger saw room (free units "
            "%s beside what others hold there); not offered there again until the cluster changes there: %s",
            order[0],
            order[1],
            f"{units} shares" if units is not None else "the whole device",
            where,
            rooms,
            refused.message,
        )
