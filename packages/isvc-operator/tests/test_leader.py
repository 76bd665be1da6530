"""Who may hold the controller's lease."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from isvc_operator._leader import LeaderElector, keep_leading, may_take
from kubernetes import client as k8s

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_free_lease_may_be_taken() -> None:
    assert may_take(None, None, 15, "me", NOW)


def test_our_own_lease_may_be_renewed() -> None:
    assert may_take("me", NOW - timedelta(seconds=1), 15, "me", NOW)


def test_a_lease_renewed_by_another_within_its_duration_may_not_be_taken() -> None:
    assert not may_take("other", NOW - timedelta(seconds=10), 15, "me", NOW)


def test_a_lease_its_holder_stopped_renewing_may_be_taken() -> None:
    assert may_take("other", NOW - timedelta(seconds=16), 15, "me", NOW)


def test_a_leader_that_cannot_renew_stops_before_a_standby_may_take_the_lease() -> None:
    """Issue 14: a transport error killed the renew thread without calling on-lost, and the loss was
    noticed only after the whole lease duration."""
    assert keep_leading(last_ok=100.0, now=109.0, renew_deadline=10.0)
    assert not keep_leading(last_ok=100.0, now=110.0, renew_deadline=10.0)
    with pytest.raises(ValueError):
        LeaderElector(cast(k8s.ApiClient, None), "ns", duration=15, renew=2, renew_deadline=15)


def test_any_failure_to_renew_counts_and_ends_leadership() -> None:
    elector = LeaderElector(cast(k8s.ApiClient, None), "ns", renew=0.01, renew_deadline=0.05, duration=1)

    def broken() -> bool:
        raise ConnectionResetError("the API server went away")

    elector._try = broken  # type: ignore[method-assign]
    lost = threading.Event()
    elector.keep(lost.set)
    assert lost.wait(2.0)
