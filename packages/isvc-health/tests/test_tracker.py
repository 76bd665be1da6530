"""Ready over time: bootstrapping, blips, sustained failures, recovery after a restart."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from isvc_api import Condition, Phase, Reason, StatusReason
from isvc_health import HealthSettings, HealthState, HealthTracker, ProbeOutcome, ProbeResult

OK = ProbeResult(outcome=ProbeOutcome.OK)
DOWN = ProbeResult(outcome=ProbeOutcome.CONNECTION_REFUSED, reason="connection refused")
SETTINGS = HealthSettings(failure_threshold=3, sustained_seconds=30)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# Each step: (seconds since the previous probe, result) → expected (status, reason, phase).
Step = tuple[float, ProbeResult, str, str, Phase]
PENDING = ("False", Reason.HEALTH_CHECK_FAILED, Phase.PENDING)
SERVING = ("True", StatusReason.SERVING, Phase.READY)
UNHEALTHY = ("False", Reason.SERVICE_UNHEALTHY, Phase.FAILED)


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [(0, DOWN, *PENDING), (10, DOWN, *PENDING), (100, DOWN, *PENDING), (10, OK, *SERVING)],
            id="before the first Ready every failure is HealthCheckFailed",
        ),
        pytest.param(
            [(0, OK, *SERVING), (10, DOWN, *SERVING), (10, DOWN, *SERVING), (10, OK, *SERVING)],
            id="a blip after Ready keeps it Ready",
        ),
        pytest.param(
            [
                (0, OK, *SERVING),
                (10, DOWN, *SERVING),
                (10, DOWN, *SERVING),
                (10, DOWN, *SERVING),
                (10, DOWN, *UNHEALTHY),
            ],
            id="three failures are not enough until they span the window",
        ),
        pytest.param(
            [(0, OK, *SERVING), (0, DOWN, *SERVING), (40, DOWN, *SERVING), (1, DOWN, *UNHEALTHY)],
            id="a long gap is not enough until the count is reached",
        ),
        pytest.param(
            [
                (0, OK, *SERVING),
                (0, DOWN, *SERVING),
                (20, DOWN, *SERVING),
                (20, DOWN, *UNHEALTHY),
                (10, OK, *SERVING),
                (10, DOWN, *SERVING),
            ],
            id="a success clears a sustained failure, and counting starts over",
        ),
    ],
)
def test_ready_follows_the_probes(steps: list[Step]) -> None:
    clock = Clock()
    tracker = HealthTracker(SETTINGS, clock)
    for gap, result, status, reason, phase in steps:
        clock.now += gap
        verdict = tracker.observe("team/llm-a", result)
        assert (verdict.status, verdict.reason, verdict.phase) == (status, reason, phase)


def test_the_messages_say_what_failed() -> None:
    clock = Clock()
    tracker = HealthTracker(HealthSettings(failure_threshold=1, sustained_seconds=0), clock)
    assert "connection refused" in tracker.observe("a", DOWN).message
    tracker.observe("a", OK)
    unhealthy = tracker.observe("a", DOWN)
    assert unhealthy.reason == Reason.SERVICE_UNHEALTHY
    assert "connection refused" in unhealthy.message
    assert unhealthy.condition(4).type == "Ready"


def test_orders_are_tracked_apart() -> None:
    tracker = HealthTracker(SETTINGS, Clock())
    tracker.observe("a", OK)
    assert tracker.observe("b", DOWN).reason == Reason.HEALTH_CHECK_FAILED
    assert tracker.observe("a", DOWN).reason == StatusReason.SERVING


def test_state_survives_a_snapshot() -> None:
    clock = Clock()
    tracker = HealthTracker(SETTINGS, clock)
    tracker.observe("a", OK)
    tracker.observe("a", DOWN)
    again = HealthTracker(SETTINGS, clock)
    again.restore(tracker.snapshot())
    assert again.state("a") == tracker.state("a")


@pytest.mark.parametrize(
    ("ready", "next_result", "expected"),
    [
        (None, DOWN, Reason.HEALTH_CHECK_FAILED),
        ({"type": "Ready", "status": "True", "reason": "Serving"}, DOWN, StatusReason.SERVING),
        (
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed"},
            DOWN,
            Reason.HEALTH_CHECK_FAILED,
        ),
        (
            {
                "type": "Ready",
                "status": "False",
                "reason": "ServiceUnhealthy",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            DOWN,
            Reason.SERVICE_UNHEALTHY,
        ),
        ({"type": "Ready", "status": "False", "reason": "ServiceUnhealthy"}, OK, StatusReason.SERVING),
    ],
    ids=[
        "no condition",
        "was Ready: a failure is a blip",
        "never Ready",
        "stays unhealthy",
        "a success clears",
    ],
)
def test_after_a_restart_the_state_comes_from_the_ready_condition(
    ready: dict[str, str] | None, next_result: ProbeResult, expected: str
) -> None:
    clock = Clock()
    clock.now = datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp()
    tracker = HealthTracker(SETTINGS, clock)
    tracker.recover("a", ready)
    assert tracker.observe("a", next_result).reason == expected


def test_a_held_state_wins_over_the_condition() -> None:
    tracker = HealthTracker(SETTINGS, Clock())
    tracker.observe("a", OK)
    state = tracker.recover("a", Condition(type="Ready", status="False", reason="HealthCheckFailed"))
    assert state.ever_ready


def test_state_from_a_condition_object() -> None:
    cond = Condition(type="Ready", status="True", reason="Serving")
    assert HealthState.from_ready_condition(cond) == HealthState(ever_ready=True)
