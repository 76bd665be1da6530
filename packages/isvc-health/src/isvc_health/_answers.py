"""A sustained rate of the runtime's own failed answers, from the request meter's counts the probes carry.

The meter in front of each replica counts the runtime's answers and its HTTP 5xx (`_meter`); every probe of the
order reads one replica's counts since its meter started. This keeps, per order, what each replica's counts
were at each probe over the last `window` seconds, and says when the runtime's own 5xx are a rate, not a blip:
at least `min_errors` of them within the window, at least `min_share` of its answers there, counted at two
probes or more. It is said once until the window passes without a new one (then it may be said again).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field

from isvc_api import OrderKey

__all__ = ["RuntimeErrors"]

Sample = tuple[float, int, int]  # (when, answered, 5xx) of one replica's meter


@dataclass
class _Order:
    pods: dict[str, deque[Sample]] = field(default_factory=dict)
    said: bool = False


class RuntimeErrors:
    """Per order: the replicas' meter counts over a window, and whether a sustained rate was said."""

    def __init__(self, window: float = 300.0, min_errors: int = 5, min_share: float = 0.05) -> None:
        self.window, self.min_errors, self.min_share = window, min_errors, min_share
        self._orders: dict[OrderKey, _Order] = {}
        self._lock = threading.Lock()

    def observe(self, key: OrderKey, meter: tuple[str, int, int] | None, at: float) -> None:
        """One probe's counts (None: the answer carried none)."""
        if meter is None:
            return
        pod, answered, errors = meter
        with self._lock:
            samples = self._orders.setdefault(key, _Order()).pods.setdefault(pod, deque())
            if samples and (answered < samples[-1][1] or errors < samples[-1][2]):
                samples.clear()  # the meter started again (a restarted replica): its counts begin anew
            samples.append((at, answered, errors))
            while len(samples) > 1 and samples[0][0] < at - self.window:
                samples.popleft()

    def rate(self, key: OrderKey, at: float) -> tuple[int, int, list[str]]:
        """The 5xx, the answers and the pods with 5xx within the window, over the order's replicas."""
        with self._lock:
            order = self._orders.get(key)
            pods = dict(order.pods) if order is not None else {}
        errors = answered = 0
        failing = []
        for pod, samples in sorted(pods.items()):
            kept = [s for s in samples if s[0] >= at - self.window] or list(samples)[-1:]
            first, last = kept[0], kept[-1]
            if last[2] > first[2] and any(b[2] > a[2] for a, b in itertools.pairwise(kept)):
                failing.append(pod)
            errors += last[2] - first[2]
            answered += last[1] - first[1]
        return errors, answered, failing

    def news(self, key: OrderKey, at: float) -> str | None:
        """The words of a sustained rate that began since it was last said, else None."""
        errors, answered, failing = self.rate(key, at)
        sustained = errors >= self.min_errors and answered > 0 and errors >= self.min_share * answered
        with self._lock:
            order = self._orders.get(key)
            if order is None:
                return None
            if not sustained:
                order.said = order.said and errors > 0  # quiet for a window: a new rate is said again
                return None
            if order.said:
                return None
            order.said = True
        minutes = round(self.window / 60)
        return (
            f"The runtime answered {errors} of {answered} requests with HTTP 5xx in the last {minutes} minutes "
            f"(its own errors, counted by the request meter in front of it: isvc_runtime_responses_total"
            f'{{code="5xx"}}; replicas {", ".join(failing) or "-"}). The order stays Ready while its API '
            "answers; the runtime's own output says why (kubectl logs <pod> -c server)."
        )

    def forget(self, key: OrderKey) -> None:
        with self._lock:
            self._orders.pop(key, None)
