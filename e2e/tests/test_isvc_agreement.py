"""Issue 18: the planner and kube-scheduler agree. Seeded random orders fill the default fleet and a
partition-heavy one until refusals start: every placement is allocated by the scheduler, and where the
planner said no the scheduler finds no room for any shape the order could take."""

from __future__ import annotations

import pytest
from isvc_testbed.agreement import FLEETS, products, publish, run
from isvc_testbed.fleet import Fleet
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

SEED = 20260818


@pytest.mark.parametrize("fleet_name", ["default", "partitioned"])
def test_every_placement_is_allocated_and_every_refusal_is_true(
    admin_api: k8s.ApiClient, fleet: Fleet, fleet_name: str
) -> None:
    publish(admin_api, fleet_name)
    try:
        report = run(admin_api, fleet_name, SEED, refusals=6, confine=products(fleet_name))
    finally:
        if fleet_name != "default":  # the other tests of the session see the default fleet only
            Fleet.load(FLEETS[fleet_name]).unpublish(admin_api)
    print(report.line())
    assert report.placed > 10 and report.refusals == 6
    assert report.disagreements == []
    assert report.false_refusals == []
