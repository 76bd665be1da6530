"""Issue 15: nothing is lost, duplicated, orphaned or leaked when the controller, the planner and the API
server die while orders come and go, and a standby controller leads within 15 s of the leader's death.

A small slice of `nox -s chaos` (20 orders, about a minute of churn) on a bed of its own, since it restarts
the API server: the session's cluster is left alone.
"""

from __future__ import annotations

import pytest
from isvc_testbed.chaos import run

pytestmark = pytest.mark.e2e

SEED = 15


def test_churn_with_crashes_and_restarts_leaves_the_expected_objects_and_a_standby_takes_over() -> None:
    figures = run(orders=20, seed=SEED, gap=1.0, faults=5, settle=180)
    print(figures)
    assert figures["takeover"] is not None and figures["takeover"]["by"] is not None, figures["faults"]
    assert figures["takeover"]["seconds"] <= 15
    assert {k: v for k, v in figures["verdict"].items() if v} == {}
