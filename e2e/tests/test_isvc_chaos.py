"""Issue 15: nothing is lost, duplicated, orphaned or leaked when the controller, the planner and the API
server die while orders come and go, no planner reservation outlives its order, and a standby controller
takes over when the leader dies.

A small slice of `nox -s chaos` (20 orders, about a minute of churn, every kind of fault at least once) on
a bed of its own, since it restarts the API server: the session's cluster is left alone. One run, three
verdicts, so that a miss says which goal it is.
"""

from __future__ import annotations

from typing import Any

import pytest
from isvc_testbed.chaos import run

pytestmark = pytest.mark.e2e

SEED = 15


@pytest.fixture(scope="module")
def chaos() -> dict[str, Any]:
    figures = run(orders=20, seed=SEED, gap=1.0, faults=5, settle=180)
    print(figures)
    return figures


def test_churn_with_crashes_and_restarts_leaves_exactly_the_expected_objects(chaos: dict[str, Any]) -> None:
    kinds = {f["fault"] for f in chaos["faults"]}
    assert {"kill-leader", "kill-planner", "restart-apiserver", "expire-watches"} == kinds
    assert {k: v for k, v in chaos["verdict"].items() if v and k != "leaked_reservations"} == {}


def test_no_planner_reservation_outlives_its_order(chaos: dict[str, Any]) -> None:
    """Asked of the planner (GET /v1/reservations) once the object set is as expected; the planner ran
    with reservations lasting an hour, so one left behind cannot have lapsed before it was counted."""
    assert chaos["verdict"]["unanswered"] == []
    assert chaos["verdict"]["leaked_reservations"] == []


def test_a_standby_controller_takes_over_when_the_leader_dies(chaos: dict[str, Any]) -> None:
    """How soon (the 15 s goal) is a figure of `nox -s chaos`, not asserted here: no timed tests."""
    killed = next(f for f in chaos["faults"] if "takeover" in f)
    # Either process may lead first (whichever took the Lease); the other one must take over.
    assert killed["takeover"]["by"] == {"controller": "standby", "standby": "controller"}[killed["killed"]], (
        chaos["faults"]
    )
