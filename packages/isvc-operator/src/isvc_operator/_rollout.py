"""The pace of rolls nobody asked for order by order: one order of a class at a time.

A class edit that changes its orders' pods (their priority class, or an endpoint token the class now asks for
or no longer does), a new runtime recipe, or a module setting that reaches the pod template would have every
serving order of the class recreate its pods in the same second: every endpoint of the class down at once,
and every model loaded again at once. Such a change rolls one order of the class at a time instead: the next
order starts once the previous one's set has every replica updated and ready again, or `deadline` seconds
after it started if it never gets there (a roll that cannot finish never holds the rest for ever). An edit of
the order itself, a new plan (another claim template) and an order that does not serve are not paced.

What it holds is in memory and harmless to lose: after a restart the first order of a class that asks takes
the turn again (a roll that was in progress then is not counted: at most one more at once).

`StartWaiters` is the same kind of hint for the start turns of a shared card (`_steps/start_turn`): who waits
for a device's turn, so that the start that held it, once over, wakes them at once instead of on their next
look (every 5 s, which stays as the safety: a restart loses the hint, never a start).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import attrs
from isvc_api import DeviceKey, OrderKey

__all__ = ["ROLL_DEADLINE", "RollPacer", "StartWaiters"]

ROLL_DEADLINE = 300.0  # seconds one order's roll holds its class's turn at most


@attrs.frozen
class _Turn:
    order: OrderKey
    since: float


class RollPacer:
    """Turns to roll, one per class (the name of the class; "" for orders without one)."""

    def __init__(self, deadline: float = ROLL_DEADLINE, clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline = deadline
        self.clock = clock
        self._lock = threading.Lock()
        self._turns: dict[str, _Turn] = {}
        self._waiting: dict[str, set[OrderKey]] = {}

    def may_roll(self, group: str, order: OrderKey) -> bool:
        """Whether `order` may roll now: the class's turn is free, its own, or overdue. False: it waits, and
        is handed back by `settled` when the turn frees."""
        now = self.clock()
        with self._lock:
            turn = self._turns.get(group)
            if turn is None or turn.order == order or now - turn.since >= self.deadline:
                if turn is None or turn.order != order:
                    self._turns[group] = _Turn(order, now)
                self._waiting.get(group, set()).discard(order)
                return True
            self._waiting.setdefault(group, set()).add(order)
            return False

    def settled(self, group: str, order: OrderKey) -> list[OrderKey]:
        """`order` serves on its new pods (or has nothing to roll): its turn, if it held one, goes; the orders
        waiting for it are returned, to be passed now."""
        with self._lock:
            turn = self._turns.get(group)
            if turn is None or turn.order != order:
                return []
            del self._turns[group]
            return sorted(self._waiting.pop(group, set()))

    def forget(self, order: OrderKey) -> list[OrderKey]:
        """A deleted order: its turn goes, and the orders waiting for it are returned."""
        woken: list[OrderKey] = []
        with self._lock:
            for group in [g for g, t in self._turns.items() if t.order == order]:
                del self._turns[group]
                woken.extend(self._waiting.pop(group, set()))
            for waiting in self._waiting.values():
                waiting.discard(order)
        return sorted(woken)

    def turn(self, group: str) -> OrderKey | None:
        """The order whose roll holds the class's turn now, if any."""
        with self._lock:
            turn = self._turns.get(group)
            return turn.order if turn is not None else None


class StartWaiters:
    """Orders waiting for a device's start turn, by device."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[DeviceKey, set[OrderKey]] = {}

    def wait(self, device: DeviceKey, order: OrderKey) -> None:
        """`order` has a replica waiting for the device's turn."""
        with self._lock:
            self._waiting.setdefault(device, set()).add(order)

    def freed(self, device: DeviceKey) -> list[OrderKey]:
        """The start holding the device's turn is over: the orders waiting for it, to be passed now."""
        with self._lock:
            return sorted(self._waiting.pop(device, set()))
