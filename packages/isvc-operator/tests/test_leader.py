"""Who may hold the controller's lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from isvc_operator._leader import may_take

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_free_lease_may_be_taken() -> None:
    assert may_take(None, None, 15, "me", NOW)


def test_our_own_lease_may_be_renewed() -> None:
    assert may_take("me", NOW - timedelta(seconds=1), 15, "me", NOW)


def test_a_lease_renewed_by_another_within_its_duration_may_not_be_taken() -> None:
    assert not may_take("other", NOW - timedelta(seconds=10), 15, "me", NOW)


def test_a_lease_its_holder_stopped_renewing_may_be_taken() -> None:
    assert may_take("other", NOW - timedelta(seconds=16), 15, "me", NOW)
