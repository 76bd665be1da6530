"""Condition conventions: one entry per type; lastTransitionTime moves only when the status flips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from isvc_api import Condition, find_condition, set_condition

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cond(status: str, reason: str = "R", generation: int = 1) -> Condition:
    return Condition(type="Ready", status=status, reason=reason, message="m", observed_generation=generation)


def test_a_new_condition_gets_the_current_time() -> None:
    out = set_condition([], cond("False"), at=T0)
    assert out[0].last_transition_time == T0


def test_the_transition_time_stays_when_only_reason_and_generation_change() -> None:
    first = set_condition([], cond("False", "A", 1), at=T0)
    second = set_condition(first, cond("False", "B", 2), at=T0 + timedelta(minutes=5))
    assert second[0].last_transition_time == T0
    assert (second[0].reason, second[0].observed_generation) == ("B", 2)


def test_the_transition_time_moves_when_the_status_flips() -> None:
    first = set_condition([], cond("False"), at=T0)
    later = T0 + timedelta(minutes=5)
    assert set_condition(first, cond("True"), at=later)[0].last_transition_time == later


def test_other_types_are_kept_and_not_duplicated() -> None:
    other = Condition(type="Planned", status="True", reason="Planned", last_transition_time=T0)
    out = set_condition([other], cond("True"), at=T0)
    out = set_condition(out, cond("True"), at=T0)
    assert [c.type for c in out] == ["Planned", "Ready"]
    assert find_condition(out, "Planned") == other
