"""Ready from probe results over time: a blip is not a failure, a sustained failure is."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from isvc_api import Condition, ConditionType, Phase, Reason, StatusReason
from pydantic import BaseModel, ConfigDict, Field

from isvc_health._probe import ProbeResult

__all__ = ["HealthSettings", "HealthState", "HealthTracker", "HealthVerdict", "judge_health"]


class HealthSettings(BaseModel):
    """When a run of failed probes after Ready stops being a blip."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failure_threshold: int = Field(default=3, ge=1, description="Consecutive failures that can be sustained.")
    sustained_seconds: float = Field(
        default=60.0, ge=0, description="How long the failures must span, first to last."
    )


class HealthState(BaseModel):
    """What the tracker knows of one order; serialisable, and recoverable from the Ready condition."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ever_ready: bool = Field(default=False, description="Whether a probe of the order ever succeeded.")
    failures: int = Field(default=0, ge=0, description="Consecutive failed probes.")
    first_failure_at: float | None = Field(default=None, description="Clock time of the first of them.")
    last_reason: str = Field(default="", description="Reason of the last failed probe.")

    @classmethod
    def from_ready_condition(
        cls, ready: Condition | Mapping[str, Any] | None, settings: HealthSettings | None = None
    ) -> HealthState:
        """Rebuild the state after a restart from the order's own Ready condition.

        True means the order was Ready; False with ServiceUnhealthy means it was Ready and the
        failure was already sustained, so it stays so until a probe succeeds. Anything else
        (absent, HealthCheckFailed, a reason of an earlier step) counts as never Ready.
        """
        if ready is None:
            return cls()
        cond = ready if isinstance(ready, Condition) else Condition.model_validate(dict(ready))
        if cond.status == "True":
            return cls(ever_ready=True)
        if cond.status == "False" and cond.reason == Reason.SERVICE_UNHEALTHY:
            settings = settings or HealthSettings()
            since = cond.last_transition_time.timestamp() if cond.last_transition_time else None
            return cls(
                ever_ready=True,
                failures=settings.failure_threshold,
                first_failure_at=since,
                last_reason=cond.message,
            )
        return cls()


class HealthVerdict(BaseModel):
    """The Ready condition and phase that health gives on this pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["True", "False"]
    reason: str
    phase: Phase
    message: str

    def condition(self, observed_generation: int | None = None) -> Condition:
        """The verdict as the Ready condition of the order."""
        return Condition(
            type=ConditionType.READY,
            status=self.status,
            reason=str(self.reason),
            message=self.message,
            observed_generation=observed_generation,
        )


def _sustained(state: HealthState, now: float, settings: HealthSettings) -> bool:
    if state.failures < settings.failure_threshold:
        return False
    return state.first_failure_at is None or now - state.first_failure_at >= settings.sustained_seconds


def judge_health(
    state: HealthState, result: ProbeResult, now: float, settings: HealthSettings
) -> tuple[HealthState, HealthVerdict]:
    """Fold one probe result into the state, and say what Ready is now."""
    if result.ok:
        return HealthState(ever_ready=True), HealthVerdict(
            status="True",
            reason=StatusReason.SERVING,
            phase=Phase.READY,
            message="The inference API answers.",
        )
    first = state.first_failure_at if state.failures and state.first_failure_at is not None else now
    state = HealthState(
        ever_ready=state.ever_ready,
        failures=state.failures + 1,
        first_failure_at=first,
        last_reason=result.reason,
    )
    if not state.ever_ready:
        return state, HealthVerdict(
            status="False",
            reason=Reason.HEALTH_CHECK_FAILED,
            phase=Phase.PENDING,
            message=(
                f"The inference API has not answered yet ({result.reason}); the order becomes Ready "
                f"after the first successful probe."
            ),
        )
    if _sustained(state, now, settings):
        return state, HealthVerdict(
            status="False",
            reason=Reason.SERVICE_UNHEALTHY,
            phase=Phase.FAILED,
            message=(
                f"The inference API stopped answering: {result.reason}; {state.failures} probes failed "
                f"in a row over {now - first:.0f}s. The workload stays; the order is Ready again "
                f"after the next successful probe."
            ),
        )
    return state, HealthVerdict(
        status="True",
        reason=StatusReason.SERVING,
        phase=Phase.READY,
        message=(
            f"The inference API answers; the last probe failed ({result.reason}), "
            f"{state.failures} of {settings.failure_threshold} before it counts as sustained."
        ),
    )


class HealthTracker:
    """Per-order health over time. Pure but for the injected clock; state is plain and serialisable."""

    def __init__(
        self, settings: HealthSettings | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings or HealthSettings()
        self._clock = clock
        self._states: dict[str, HealthState] = {}

    def state(self, key: str) -> HealthState | None:
        """What is known of the order `key` (e.g. namespace/name), or None."""
        return self._states.get(key)

    def recover(self, key: str, ready: Condition | Mapping[str, Any] | None) -> HealthState:
        """Seed the state of an order not tracked yet from its Ready condition; a held state wins."""
        if key not in self._states:
            self._states[key] = HealthState.from_ready_condition(ready, self.settings)
        return self._states[key]

    def observe(self, key: str, result: ProbeResult) -> HealthVerdict:
        """Fold a probe result of the order `key` in, at the clock's now."""
        state, verdict = judge_health(
            self._states.get(key, HealthState()), result, self._clock(), self.settings
        )
        self._states[key] = state
        return verdict

    def forget(self, key: str) -> None:
        """Drop a deleted order."""
        self._states.pop(key, None)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every state, as JSON-ready dicts."""
        return {key: state.model_dump(mode="json") for key, state in self._states.items()}

    def restore(self, snapshot: Mapping[str, Mapping[str, Any]]) -> None:
        """Load states saved by snapshot()."""
        self._states.update({key: HealthState.model_validate(dict(v)) for key, v in snapshot.items()})
