"""Ready from probe results over time: a blip is not a failure, a sustained failure is.

The record a judgement needs (`isvc_api.HealthStatus`) lives in the order's status, not in the
process: a restarted controller judges the next probe exactly as the one before it would have.
"""

from __future__ import annotations

from datetime import datetime

from isvc_api import Condition, HealthStatus, Reason, StatusReason, Verdict
from pydantic import BaseModel, ConfigDict, Field

from isvc_health._probe import ProbeOutcome, ProbeResult

__all__ = ["HealthSettings", "judge_health", "record_from_ready"]


class HealthSettings(BaseModel):
    """When a run of failed probes after Ready stops being a blip."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failure_threshold: int = Field(default=3, ge=1, description="Consecutive failures that can be sustained.")
    sustained_seconds: float = Field(
        default=60.0, ge=0, description="How long the failures must span, first to last."
    )


def record_from_ready(ready: Condition | None) -> HealthStatus:
    """A record for an order whose status carries none yet (written before records were kept).

    True means the order was Ready; False with ServiceUnhealthy means it was Ready and the failure was
    already sustained, since the condition last moved. Anything else counts as never Ready.
    """
    if ready is None:
        return HealthStatus()
    if ready.status == "True":
        return HealthStatus(ever_ready=True)
    if ready.status == "False" and ready.reason == Reason.SERVICE_UNHEALTHY.value:
        return HealthStatus(
            ever_ready=True,
            consecutive_failures=1 << 16,
            first_failure_time=ready.last_transition_time,
            last_failure=ready.message,
        )
    return HealthStatus()


def _sustained(record: HealthStatus, now: datetime, settings: HealthSettings) -> bool:
    if record.consecutive_failures < settings.failure_threshold:
        return False
    first = record.first_failure_time
    return first is None or (now - first).total_seconds() >= settings.sustained_seconds


def _no_replica(record: HealthStatus, reason: str, settings: HealthSettings) -> Verdict:
    """Not a blip of the API: with no replica ready the endpoint has nothing behind it (issue 45: such an
    order read Degraded, "serves", through every drain and move)."""
    return Verdict.refuse(
        Reason.HEALTH_CHECK_FAILED,
        (
            f"The endpoint does not serve: {reason}. It serves again as soon as a replica is ready; "
            f"{record.consecutive_failures} of {settings.failure_threshold} checks in a row so far, and "
            f"after {settings.sustained_seconds:.0f}s it counts as stopped (ServiceUnhealthy)."
        ),
    )


def judge_health(
    record: HealthStatus | None, result: ProbeResult, now: datetime, settings: HealthSettings
) -> tuple[HealthStatus, Verdict]:
    """Fold one probe result into the order's health record, and say what Ready is now: a failed probe after
    Ready is a blip until sustained; NO_REPLICA (nothing to probe) never holds, since nothing serves.

    A failed probe the record already counts (it ran no later than the last failure counted) is not
    counted again: passes woken for other reasons see the same latest result.
    """
    record = record or HealthStatus()
    if result.ok:
        return HealthStatus(ever_ready=True), Verdict.ok(StatusReason.SERVING, "The inference API answers.")
    counted = (
        record.consecutive_failures > 0
        and record.last_failure_time is not None
        and result.probed_at <= record.last_failure_time
    )
    if not counted:
        first = (
            record.first_failure_time
            if record.consecutive_failures and record.first_failure_time
            else result.probed_at
        )
        record = HealthStatus(
            ever_ready=record.ever_ready,
            consecutive_failures=record.consecutive_failures + 1,
            first_failure_time=first,
            last_failure_time=result.probed_at,
            last_failure=result.reason,
        )
    reason = record.last_failure or result.reason
    if not record.ever_ready:
        return record, Verdict.refuse(
            Reason.HEALTH_CHECK_FAILED,
            (
                f"The inference API has not answered yet ({reason}); the order becomes Ready "
                f"after the first successful probe."
            ),
        )
    first = record.first_failure_time or now
    span = (now - first).total_seconds()
    if _sustained(record, now, settings):
        return record, Verdict.refuse(
            Reason.SERVICE_UNHEALTHY,
            (
                f"The inference API stopped answering: {reason}; {record.consecutive_failures} probes "
                f"failed in a row over {span:.0f}s. The workload stays; the order is Ready again after the "
                f"next successful probe."
            ),
        )
    if result.outcome == ProbeOutcome.NO_REPLICA:
        return record, _no_replica(record, reason, settings)
    return record, Verdict.ok(
        StatusReason.SERVING,
        (
            f"The inference API answers; the last probe failed ({reason}), "
            f"{record.consecutive_failures} of {settings.failure_threshold} before it counts as sustained."
        ),
    )
