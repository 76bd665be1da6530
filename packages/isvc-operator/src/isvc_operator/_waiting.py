"""The waiting room: orders refused for want of room are planned again, all together, when room may appear.

An order the planner refuses for want of room (`NO_ROOM`: no capacity, no placement now, preemption
failed, no device large enough yet, or the scheduler could not allocate its claim and nothing else has
room) waits here with the request of its last pass. One thread asks the planner to answer when its ledger
may have made room (`GET /v1/room`, a long poll: a holding released or smaller, a pool published, a device
class, node, order class or priority changed) or when the safety period has passed. Each answer is one pass
of the room: every waiting order's request goes to the planner at once (`plan_many`), which places the most
of them together and reserves what it placed; the orders placed are passed at once to take it. Nothing
waits on a short timer: at rest, whatever number of orders waits, the room costs the planner one long poll
and one `plan_many` per safety period.

What it holds is a cache of requests, not a decision: whether an order waits is its own Planned condition.
Losing it (a restart) costs nothing: every order gets a pass when the controller starts, and a waiting one
is back in the room after that pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from isvc_api import OrderKey
from isvc_planner_client import PlannerError, PlanRequest, PlanResponse, RoomChange

from isvc_operator._ports import NO_ROOM

__all__ = ["PlanningClient", "WaitingRoom"]

log = logging.getLogger(__name__)
PERIOD = 300.0  # the safety period: waiting orders are planned again at least this often
SETTLE = 1.0  # after a change, changes that follow within this long are taken in the same pass
RETRY = 5.0  # a planner that does not answer the long poll is asked again after this long


class PlanningClient(Protocol):
    """The part of the planner client the room uses."""

    def plan(self, request: PlanRequest) -> PlanResponse: ...
    def plan_many(self, requests: list[PlanRequest]) -> list[PlanResponse]: ...
    def room_change(self, after: str | None, wait: float) -> RoomChange: ...


class WaitingRoom:
    """Orders waiting for room, keyed by (namespace, name), oldest first; a thread plans them together."""

    def __init__(
        self,
        client: PlanningClient,
        *,
        still_waiting: Callable[[str, str, str | None, bool], bool] = lambda *_: True,
        period: float = PERIOD,
        settle: float = SETTLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.still_waiting = still_waiting
        self.period = period
        self.settle = settle
        self.clock = clock
        self.passes = 0  # passes of the room made
        self._waiting: dict[OrderKey, tuple[float, PlanRequest]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake: Callable[[str, str], None] = lambda *_: None
        self._stranded_hooks: list[Callable[[str, str], None]] = []
        self._thread: threading.Thread | None = None

    def plan(self, request: PlanRequest) -> PlanResponse:
        """Plan one order; a refusal for want of room puts it in the room, anything else takes it out.
        Raises the client's errors."""
        key = (request.order.namespace, request.order.name)
        passes = self.passes
        answer = self.client.plan(request)
        if self._waits(answer) and self.passes != passes:
            answer = self.client.plan(request)  # the room was passed meanwhile: what it found may be ours
        with self._lock:
            if self._waits(answer):
                since = self._waiting.get(key, (self.clock(), request))[0]
                self._waiting[key] = (since, request)
            else:
                self._waiting.pop(key, None)
        return answer

    @staticmethod
    def _waits(answer: PlanResponse) -> bool:
        return answer.refusal is not None and answer.refusal.reason in NO_ROOM

    def forget(self, namespace: str, name: str) -> None:
        """The order no longer waits (deleted, or its placement will not be taken)."""
        with self._lock:
            self._waiting.pop((namespace, name), None)

    def waiting(self) -> list[OrderKey]:
        """The orders waiting for room, oldest first."""
        with self._lock:
            return [k for k, _ in sorted(self._waiting.items(), key=lambda kv: kv[1][0])]

    def sweep(self) -> list[OrderKey]:
        """One pass of the room: every order still waiting planned together; those placed are woken (and
        returned). Raises the client's errors."""
        with self._lock:
            self.passes += 1
            entries = sorted(self._waiting.items(), key=lambda kv: kv[1][0])
        requests: list[PlanRequest] = []
        now, wall = self.clock(), time.time()
        for key, (since, request) in entries:
            if self.still_waiting(*key, request.order.uid, request.holding is not None):
                # since when it waits, as the planner reads it: orders that waited long go oldest first
                waited = datetime.fromtimestamp(wall - (now - since), UTC)
                requests.append(request.model_copy(update={"waiting_since": waited}))
                continue
            with self._lock:
                if self._waiting.get(key, (None, None))[0] == since:
                    del self._waiting[key]
        if not requests:
            return []
        answers = self.client.plan_many(requests)
        placed: list[OrderKey] = []
        with self._lock:
            for request, answer in zip(requests, answers, strict=True):
                key = (request.order.namespace, request.order.name)
                if answer.placement is not None:
                    placed.append(key)
                    self._waiting.pop(key, None)
        for key in placed:
            self._wake(*key)
        if placed:
            log.info(
                "the waiting room planned %d order(s) together; placed: %s",
                len(requests),
                ", ".join(f"{ns}/{n}" for ns, n in placed),
            )
        return placed

    def on_stranded(self, hook: Callable[[str, str], None]) -> None:
        """Call `hook(namespace, name)` for each order the planner finds stranded, before it is woken."""
        self._stranded_hooks.append(hook)

    def strand(self, stranded: list[OrderKey]) -> None:
        """Orders whose plan places them on hardware out of service (a node deleted, cordoned or not ready, a
        device withdrawn) with no pod of theirs running there: each is judged again at once, so it moves or
        waits saying why."""
        for key in stranded:
            for hook in self._stranded_hooks:
                hook(*key)
            self._wake(*key)
        if stranded:
            log.info(
                "judging again %d order(s) planned on hardware out of service: %s",
                len(stranded),
                ", ".join(f"{ns}/{n}" for ns, n in stranded[:10]),
            )

    def start(self, wake: Callable[[str, str], None]) -> None:
        """Run passes of the room in a thread, each when the planner's ledger may have made room or after
        the safety period; orders placed are handed to `wake`."""
        self._wake = wake
        self._thread = threading.Thread(target=self._run, name="waiting-room", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread at its next wake-up."""
        self._stop.set()

    def _run(self) -> None:
        token: str | None = None
        while not self._stop.is_set():
            try:
                change = self.client.room_change(token, self.period if token is not None else 0.0)
                token = change.epoch
                if self._stop.wait(self.settle):
                    return
                self.strand([(o.namespace, o.name) for o in change.stranded])
                self.sweep()
            except PlannerError as exc:  # the planner is down or restarting: its next token starts over
                log.info("the waiting room could not ask the planner (%s); again in %.0fs", exc, RETRY)
                token = None
                self._stop.wait(RETRY)
            except Exception:  # the loop must not die: logged, and the next pass tries again
                log.exception("a pass of the waiting room failed")
                self._stop.wait(RETRY)
