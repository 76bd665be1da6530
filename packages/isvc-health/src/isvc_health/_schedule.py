"""Probes apart from reconcile passes: every watched order once a period, on a few threads of their own.

A Ready order that keeps answering then costs its controller one probe a period and nothing else: its
pass is woken only when the health judgement has something to fold — a failed probe, or the first
success after one. What the schedule holds is a cache of the latest results: losing it (a restart)
costs each order one probe made by its next pass, which then watches it again.

Probes fall due at times spread over the period; they go out together once a tick (a tenth of the
period, at most a second). Woken for each probe alone, the scheduler and a worker cost more than the probe
itself (≈ 0.35 ms of CPU a probe more, measured: at 2,000 orders and a 30 s period, half the controller's
budget at rest); a tick's batch is handed over at one wake, the workers taking it back to back.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from isvc_api import OrderKey

from isvc_health._probe import Prober, ProbeResult

__all__ = ["ProbeSchedule", "ProbeTarget"]

log = logging.getLogger(__name__)


class ProbeTarget(NamedTuple):
    """What a probe of one order dials and asks: a new token or served name is a new target."""

    namespace: str
    name: str
    service: str
    port: int
    token: str | None
    model: str | None

    @property
    def key(self) -> OrderKey:
        return self.namespace, self.name


@dataclass
class _Entry:
    target: ProbeTarget
    result: ProbeResult
    seen: float  # monotonic time of the result
    generation: int


class ProbeSchedule:
    """Probe each watched order every `period` seconds; call `wake(namespace, name)` when its pass has
    something new to judge. Results older than two periods (the schedule fell behind) are not offered."""

    def __init__(
        self, prober: Prober, period: float, *, workers: int = 4, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if period < 1:
            raise ValueError("the probe period must be at least one second (probe times are kept in seconds)")
        self.prober = prober
        self.period = period
        self._tick = min(1.0, period / 10)  # probes due within one tick go out together
        self._clock = clock
        self._wake: Callable[[str, str], None] = lambda namespace, name: None
        self._lock = threading.Condition()
        self._entries: dict[OrderKey, _Entry] = {}
        self._due: list[tuple[float, int, OrderKey]] = []
        self._generations = itertools.count()
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def release_at(self, due: float) -> float:
        """When a probe due at `due` goes out: the end of its tick, with every other probe due in it."""
        return math.ceil(due / self._tick) * self._tick

    def on_change(self, wake: Callable[[str, str], None]) -> None:
        """Who to tell that an order's pass has a new result to judge (the controller's queue)."""
        self._wake = wake

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def latest(self, target: ProbeTarget) -> ProbeResult | None:
        """The latest result for this very target, when the schedule keeps it fresh; else None."""
        with self._lock:
            entry = self._entries.get(target.key)
            if entry is None or entry.target != target:
                return None
            if self._clock() - entry.seen > 2 * self.period + self.prober.timeout:
                return None
            return entry.result

    def watch(self, target: ProbeTarget, result: ProbeResult) -> None:
        """Probe `target` from now on, `result` being the probe its pass just made."""
        with self._lock:
            generation = next(self._generations)
            self._entries[target.key] = _Entry(target, result, self._clock(), generation)
            heapq.heappush(self._due, (self._clock() + self.period, generation, target.key))
            self._lock.notify()

    def forget(self, namespace: str, name: str) -> None:
        """Stop probing the order (gone, or no replica to probe)."""
        with self._lock:
            self._entries.pop((namespace, name), None)

    def start(self) -> None:
        """Start the scheduling thread and its probe workers."""
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="probe")
        self._thread = threading.Thread(target=self._run, name="probe-schedule", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop scheduling; probes in flight finish and are dropped."""
        with self._lock:
            self._stopped = True
            self._lock.notify()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while True:
            with self._lock:
                ready = self._next_due()
                if ready is None:
                    return
            assert self._pool is not None
            self._pool.submit(self._probe, *ready)

    def _next_due(self) -> tuple[ProbeTarget, int] | None:
        """Wait (holding the lock) for the next probe that is due and still wanted; None once stopped."""
        while not self._stopped:
            if not self._due:
                self._lock.wait()
                continue
            due, generation, key = self._due[0]
            delay = self.release_at(due) - self._clock()
            if delay > 0:
                self._lock.wait(delay)
                continue
            heapq.heappop(self._due)
            entry = self._entries.get(key)
            if entry is None or entry.generation != generation:
                continue  # forgotten, or watched again since: that watch has its own turn
            return entry.target, generation
        return None

    def _probe(self, target: ProbeTarget, generation: int) -> None:
        try:
            result = self.prober.probe(
                target.namespace,
                target.name,
                service=target.service,
                port=target.port,
                token=target.token,
                model=target.model,
            )
        except Exception:  # the prober never raises for a failed probe; anything else must not stop the loop
            log.exception("probing %s/%s failed", target.namespace, target.name)
            result = None
        with self._lock:
            entry = self._entries.get(target.key)
            if entry is None or entry.generation != generation:
                return
            due = (self._clock() + self.period, generation, target.key)
            heapq.heappush(self._due, due)
            if self._due[0] is due:
                self._lock.notify()  # the scheduler sleeps until a later probe: this one is now first
            if result is None:
                return
            previous, entry.result, entry.seen = entry.result, result, self._clock()
        if not result.ok or not previous.ok or _more_errors(previous, result):
            self._wake(*target.key)


def _more_errors(previous: ProbeResult, result: ProbeResult) -> bool:
    """Whether the request meter counted more of the runtime's 5xx answers since the last probe (issue 42): the
    pass judges whether that is a sustained rate."""
    return result.meter is not None and (previous.meter is None or result.meter[2] != previous.meter[2])
