"""The waiting room: orders refused for want of room are planned together with the next order that asks.

An order the planner refuses for want of room (NoCapacity, NoCompatiblePlacement,
PlanningPreemptionFailed) waits here with the request of its last pass, for `ttl` seconds after each
retry. The next order planned without a placement to keep is sent together with the ones still
waiting (`plan_many`), so room that frees up goes to the most orders; the waiting ones it places are
reserved by the planner and returned, so the controller passes them at once to take their reservation.

What it holds is a cache of requests, not a decision: whether an order waits is its own Planned
condition. Losing it (a restart) costs one retry: every order gets a pass when the controller starts,
and a waiting one is back in the room after that pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from isvc_planner_client import PlannerProtocolError, PlanRequest, PlanResponse

from isvc_operator._ports import NO_ROOM, OrderKey

__all__ = ["PlanningClient", "WaitingRoom"]

log = logging.getLogger(__name__)
MAX_BATCH = 100  # orders sent together, the oldest waiting first: one request stays small and quick


class PlanningClient(Protocol):
    """The part of the planner client the room uses."""

    def plan(self, request: PlanRequest) -> PlanResponse: ...
    def plan_many(self, requests: list[PlanRequest]) -> list[PlanResponse]: ...


class WaitingRoom:
    """Orders waiting for room, keyed by (namespace, name), oldest first."""

    def __init__(
        self,
        client: PlanningClient,
        *,
        still_waiting: Callable[[str, str, str | None], bool] = lambda *_: True,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.still_waiting = still_waiting
        self.ttl = ttl
        self.clock = clock
        self._waiting: dict[OrderKey, tuple[float, PlanRequest]] = {}
        self._lock = threading.Lock()

    def plan(self, request: PlanRequest) -> tuple[PlanResponse, list[OrderKey]]:
        """Plan one order, together with the waiting ones unless it keeps a placement; return its answer
        and the waiting orders placed with it. Raises the client's errors."""
        key = (request.order.namespace, request.order.name)
        others = [] if request.holding is not None else self._others(key)
        answers = self._plan_many(request, others) if others else [self.client.plan(request)]
        answer = answers[0]
        with self._lock:
            if answer.refusal is not None and answer.refusal.reason in NO_ROOM:
                self._waiting[key] = (self.clock(), request)
            else:
                self._waiting.pop(key, None)
            placed = [
                (o.order.namespace, o.order.name)
                for o, a in zip(others, answers[1:], strict=True)
                if a.placement is not None
            ]
            for other in placed:
                self._waiting.pop(other, None)
        if placed:
            log.info(
                "%s/%s planned with %d waiting order(s); placed together: %s",
                *key,
                len(others),
                ", ".join(f"{ns}/{n}" for ns, n in placed),
            )
        return answer, placed

    def _plan_many(self, request: PlanRequest, others: list[PlanRequest]) -> list[PlanResponse]:
        try:
            return self.client.plan_many([request, *others])
        except PlannerProtocolError as exc:
            # A planner that cannot plan orders together (an older one during a rollout) still plans one.
            log.warning(
                "planning together failed (%s); %s/%s planned alone",
                exc,
                request.order.namespace,
                request.order.name,
            )
            return [self.client.plan(request)] + [PlanResponse() for _ in others]

    def forget(self, namespace: str, name: str) -> None:
        """The order no longer waits (deleted, or its placement will not be taken)."""
        with self._lock:
            self._waiting.pop((namespace, name), None)

    def waiting(self) -> list[OrderKey]:
        """The orders waiting for room, oldest first."""
        with self._lock:
            return [k for k, _ in sorted(self._waiting.items(), key=lambda kv: kv[1][0])]

    def _others(self, key: OrderKey) -> list[PlanRequest]:
        """Requests of the other orders still waiting, oldest first; the stale and the gone forgotten."""
        now = self.clock()
        with self._lock:
            entries = sorted(self._waiting.items(), key=lambda kv: kv[1][0])
        others = []
        for other, (since, request) in entries:
            if other == key:
                continue
            if now - since > self.ttl or not self.still_waiting(*other, request.order.uid):
                with self._lock:
                    if self._waiting.get(other, (None, None))[0] == since:
                        del self._waiting[other]
                continue
            others.append(request)
        return others[: MAX_BATCH - 1]
