"""A deduplicating, rate-limited work queue of keys, with the semantics of client-go's workqueue."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ShutDownError", "WorkQueue"]

K = TypeVar("K", bound=Hashable)


class ShutDownError(Exception):
    """The queue was shut down while a worker waited on it."""


# Urgent keys (new or edited objects) handed out in a row before one other waiting key gets its turn.
URGENT_RUN = 2


class WorkQueue(Generic[K]):
    """Keys wait once however often they are added; a key being processed is never handed out twice.

    A key added while it is being processed is marked dirty and handed out again after `done`.
    Failures back off exponentially per key until `forget`.
    """

    def __init__(
        self,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._queue: list[K] = []
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # the one timer that counts per key: the earliest
        self._seq = 0
        self._failures: dict[K, int] = {}
        self._base = base_delay
        self._max = max_delay
        self._clock = clock
        self._shut = False
        self._urgent: set[K] = set()
        self._urgent_run = 0  # urgent keys handed out in a row while others waited

    def add(self, key: K, urgent: bool = False) -> None:
        """Queue a key unless it already waits; an urgent key (a new or edited object) is handed out
        before the ones already waiting, so it is not answered after every timed retry in the queue."""
        with self._cond:
            if self._shut:
                return
            if key in self._dirty:
                if urgent and key in self._queue:
                    self._queue.remove(key)
                    self._queue.insert(self._urgent_end(), key)
                    self._urgent.add(key)
                return
            self._dirty.add(key)
            if key not in self._processing:
                if urgent:
                    self._queue.insert(self._urgent_end(), key)
                    self._urgent.add(key)
                else:
                    self._queue.append(key)
                self._cond.notify()

    def _next_index(self) -> int:
        """The head of the queue, except that after URGENT_RUN urgent keys in a row the oldest of the others
        goes: a burst of new orders must not starve the orders whose pods became ready meanwhile."""
        if self._queue[0] not in self._urgent:
            self._urgent_run = 0
            return 0
        others = self._urgent_end()
        if others < len(self._queue) and self._urgent_run >= URGENT_RUN:
            self._urgent_run = 0
            return others
        self._urgent_run += 1
        return 0

    def _urgent_end(self) -> int:
        """The place after the urgent keys already waiting (first come, first served among them)."""
        count = 0
        for key in self._queue:
            if key not in self._urgent:
                break
            count += 1
        return count

    def add_after(self, key: K, delay: float) -> None:
        """Queue a key after a delay; one timer per key, the earliest (later ones are dropped), so a key
        requeued by every pass an event causes still comes back once per delay, not once per pass."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            due = self._clock() + delay
            if self._due.get(key, float("inf")) <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Queue a key after its per-key exponential backoff; return the delay chosen."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = float(min(self._max, self._base * (2**n)))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset a key's backoff after a successful pass."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """How many times in a row the key failed."""
        with self._cond:
            return self._failures.get(key, 0)

    def _promote_due(self) -> float | None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue  # superseded by an earlier timer that already fired
            del self._due[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to process, or None after `timeout`; raises ShutDownError when shut down."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shut:
                    raise ShutDownError
                wait = self._promote_due()
                if self._queue:
                    key = self._queue.pop(self._next_index())
                    self._urgent.discard(key)
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        """Mark a key processed; hand it out again if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shut_down(self) -> None:
        """Wake every waiting worker with ShutDownError."""
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)
