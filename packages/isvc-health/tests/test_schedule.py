"""The probe schedule against a stand-in on loopback: quiet while answers hold, a wake when they change."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from health_standin import StandIn
from isvc_health import ProbeOutcome, Prober, ProbeResult, ProbeSchedule, ProbeTarget, TemplateResolver

TARGET = ProbeTarget("team", "llm-a", "llm-a", 8000, "secret-token", "org/model")
OK = ProbeResult(outcome=ProbeOutcome.OK)


class Wakes:
    """The wakes the schedule sent, with a way to wait for the next one."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []
        self._event = threading.Event()

    def __call__(self, namespace: str, name: str) -> None:
        self.keys.append((namespace, name))
        self._event.set()

    def wait(self, timeout: float = 10.0) -> bool:
        woken = self._event.wait(timeout)
        self._event.clear()
        return woken


@pytest.fixture
def schedule(stand_in: StandIn) -> Iterator[tuple[ProbeSchedule, Wakes]]:
    prober = Prober(TemplateResolver(stand_in.url + "/{namespace}/{name}"), timeout=2.0)
    schedule = ProbeSchedule(prober, period=1.0, workers=2)
    wakes = Wakes()
    schedule.on_change(wakes)
    schedule.start()
    try:
        yield schedule, wakes
    finally:
        schedule.stop()
        prober.close()


def probes(stand_in: StandIn) -> int:
    return len(stand_in.behaviour.seen_paths)


def wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_order_that_keeps_answering_is_probed_every_period_and_wakes_nothing(
    schedule: tuple[ProbeSchedule, Wakes], stand_in: StandIn
) -> None:
    sched, wakes = schedule
    sched.watch(TARGET, OK)
    wait_for(lambda: probes(stand_in) >= 3)
    assert wakes.keys == []
    assert set(stand_in.behaviour.seen_paths) == {"/team/llm-a/v1/models"}
    assert stand_in.behaviour.seen_auth[-1] == "Bearer secret-token"
    latest = sched.latest(TARGET)
    assert latest is not None and latest.ok


def test_a_failure_wakes_the_order_each_probe_and_the_recovery_once(
    schedule: tuple[ProbeSchedule, Wakes], stand_in: StandIn
) -> None:
    sched, wakes = schedule
    sched.watch(TARGET, OK)
    stand_in.behaviour.status = 503
    assert wakes.wait()
    failed = sched.latest(TARGET)
    assert failed is not None and failed.outcome == ProbeOutcome.HTTP_STATUS
    assert wakes.wait(), "every failed probe is a new result to count"
    stand_in.behaviour.status = None
    wait_for(lambda: (sched.latest(TARGET) or failed).ok)
    assert wakes.wait(), "the first success after failures is a change"
    woken = len(wakes.keys)
    seen = probes(stand_in)
    wait_for(lambda: probes(stand_in) >= seen + 2)
    assert len(wakes.keys) == woken
    assert set(wakes.keys) == {("team", "llm-a")}


def test_a_forgotten_order_is_not_probed_again(
    schedule: tuple[ProbeSchedule, Wakes], stand_in: StandIn
) -> None:
    sched, _ = schedule
    sched.watch(TARGET, OK)
    wait_for(lambda: probes(stand_in) >= 1)
    sched.forget("team", "llm-a")
    seen = probes(stand_in)
    time.sleep(2.5)  # two and a half periods: a probe in flight may still land, no new one starts
    assert probes(stand_in) <= seen + 1
    assert sched.latest(TARGET) is None and len(sched) == 0


def test_a_new_token_or_served_name_is_a_new_target() -> None:
    sched = ProbeSchedule(Prober(), period=5.0)
    sched.watch(TARGET, OK)
    assert sched.latest(TARGET) == OK
    assert sched.latest(TARGET._replace(token="rotated")) is None
    assert sched.latest(TARGET._replace(model="org/other")) is None


def test_a_result_the_schedule_stopped_refreshing_is_not_offered() -> None:
    now = [100.0]
    prober = Prober(timeout=5.0)
    sched = ProbeSchedule(prober, period=10.0, clock=lambda: now[0])
    sched.watch(TARGET, OK)
    now[0] += 24.0
    assert sched.latest(TARGET) == OK
    now[0] += 2.0  # beyond two periods and a probe's timeout
    assert sched.latest(TARGET) is None


def test_probes_due_within_one_tick_go_out_together() -> None:
    """One wake a tick, not one a probe: at 2,000 orders the wakes alone cost more than the probes."""
    schedule = ProbeSchedule(Prober(), period=30.0)
    released = {due: schedule.release_at(due) for due in (100.01, 100.5, 100.99, 101.0, 101.2)}
    assert released == {100.01: 101.0, 100.5: 101.0, 100.99: 101.0, 101.0: 101.0, 101.2: 102.0}
    assert ProbeSchedule(Prober(), period=3.0).release_at(100.05) == pytest.approx(100.2)


def test_periods_shorter_than_the_probe_times_resolution_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one second"):
        ProbeSchedule(Prober(), period=0.5)
