"""Ready over time: bootstrapping, blips, sustained failures, recovery after a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from isvc_api import Condition, HealthStatus, Reason, StatusReason
from isvc_health import HealthSettings, ProbeOutcome, ProbeResult, judge_health, record_from_ready

OK = ProbeResult(outcome=ProbeOutcome.OK)
DOWN = ProbeResult(outcome=ProbeOutcome.CONNECTION_REFUSED, reason="connection refused")
GONE = ProbeResult(outcome=ProbeOutcome.NO_REPLICA, reason="no replica is ready")
SETTINGS = HealthSettings(failure_threshold=3, sustained_seconds=30)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(result: ProbeResult, when: datetime) -> ProbeResult:
    """The result as a probe that ran at `when`."""
    return result.model_copy(update={"probed_at": when})


# Each step: (seconds since the previous probe, result) → expected (status, reason).
Step = tuple[float, ProbeResult, str, str]
PENDING = ("False", Reason.HEALTH_CHECK_FAILED)
SERVING = ("True", StatusReason.SERVING)
UNHEALTHY = ("False", Reason.SERVICE_UNHEALTHY)


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
        pytest.param(
            [(0, OK, *SERVING), (10, GONE, *PENDING), (10, GONE, *PENDING), (10, OK, *SERVING)],
            id="issue 45: with no replica ready nothing serves, blip or not",
        ),
        pytest.param(
            [
                (0, OK, *SERVING),
                (10, GONE, *PENDING),
                (10, DOWN, *SERVING),
                (10, GONE, *PENDING),
                (10, GONE, *UNHEALTHY),
            ],
            id="no replica counts towards a sustained failure like a failed probe",
        ),
    ],
)
def test_ready_follows_the_probes(steps: list[Step]) -> None:
    now, record = T0, None
    for gap, result, status, reason in steps:
        now += timedelta(seconds=gap)
        record, verdict = judge_health(record, at(result, now), now, SETTINGS)
        assert (verdict.status, verdict.reason) == (status, reason)


def test_a_failed_probe_is_counted_once_however_many_passes_see_it() -> None:
    """Passes woken by other events judge the same latest result: it must not count twice."""
    record, _ = judge_health(None, at(OK, T0), T0, SETTINGS)
    failed = at(DOWN, T0 + timedelta(seconds=10))
    for later in (10, 11, 50, 120):
        record, verdict = judge_health(record, failed, T0 + timedelta(seconds=later), SETTINGS)
        assert record.consecutive_failures == 1
        assert verdict.reason == StatusReason.SERVING
    record, _ = judge_health(
        record, at(DOWN, T0 + timedelta(seconds=20)), T0 + timedelta(seconds=20), SETTINGS
    )
    assert record.consecutive_failures == 2
    assert record.first_failure_time == T0 + timedelta(seconds=10)
    assert record.last_failure_time == T0 + timedelta(seconds=20)


def test_the_messages_say_what_failed() -> None:
    settings = HealthSettings(failure_threshold=1, sustained_seconds=0)
    record, verdict = judge_health(None, at(DOWN, T0), T0, settings)
    assert "connection refused" in verdict.message
    record, _ = judge_health(record, at(OK, T0), T0, settings)
    _, unhealthy = judge_health(record, at(DOWN, T0), T0, settings)
    assert unhealthy.reason == Reason.SERVICE_UNHEALTHY
    assert "connection refused" in unhealthy.message


def test_the_record_is_plain_data_a_status_can_carry() -> None:
    record, _ = judge_health(None, at(OK, T0), T0, SETTINGS)
    later = T0 + timedelta(seconds=5)
    record, _ = judge_health(record, at(DOWN, later), later, SETTINGS)
    again = HealthStatus.model_validate(record.to_wire())
    assert (
        again
        == record
        == HealthStatus(
            ever_ready=True,
            consecutive_failures=1,
            first_failure_time=later,
            last_failure_time=later,
            last_failure="connection refused",
        )
    )


@pytest.mark.parametrize(
    ("ready", "next_result", "expected"),
    [
        (None, DOWN, Reason.HEALTH_CHECK_FAILED),
        (Condition(type="Ready", status="True", reason="Serving"), DOWN, StatusReason.SERVING),
        (
            Condition(type="Ready", status="False", reason="HealthCheckFailed"),
            DOWN,
            Reason.HEALTH_CHECK_FAILED,
        ),
        (
            Condition(type="Ready", status="False", reason="ServiceUnhealthy", last_transition_time=T0),
            DOWN,
            Reason.SERVICE_UNHEALTHY,
        ),
        (Condition(type="Ready", status="False", reason="ServiceUnhealthy"), OK, StatusReason.SERVING),
    ],
    ids=[
        "no condition",
        "was Ready: a failure is a blip",
        "never Ready",
        "stays unhealthy",
        "a success clears",
    ],
)
def test_a_status_without_a_record_is_judged_from_its_ready_condition(
    ready: Condition | None, next_result: ProbeResult, expected: str
) -> None:
    _, verdict = judge_health(record_from_ready(ready), next_result, T0 + timedelta(minutes=5), SETTINGS)
    assert verdict.reason == expected
