"""Issue 18: the planner and kube-scheduler agree. Seeded random orders fill the default fleet (consumable
shares) and a dynamic-MIG one until refusals start: every placement is allocated by the scheduler, and where
the planner said no the scheduler finds no room for any shape the order could take.

Issue 40: every third order of the fill grows a further replica, its claim as the operator's template asks it
(the planned devices, else any of their shape): the plans after it still agree with the scheduler.

Issue 26: shares of mixed sizes (9 % and 23 % of an H100, as reported) fill the shareable cards of the
default fleet to full, and orders of those sizes the MIG devices of the dynamic-MIG fleet (issue 41: no
shares in that installation), each claim asking what the operator's template asks; then a claim the planner
cannot see takes back room the ledger saw freed, and the planner learns the scheduler's refusal at once,
logs and counts it once, and answers ResourceClaimExhausted naming the device and the scheduler's words."""

from __future__ import annotations

import pytest
from isvc_testbed.agreement import FLEETS, products, publish, run
from isvc_testbed.fleet import Fleet
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

SEED = 20260818
# What each fleet's fill takes (its products and device class), and sizes (GiB) taking 9 % and 23 % of an
# H100 80GB (shares of the memory the runtime sees, rounded up): 7 GiB and 18 GiB, which are 30 % and 76 %
# of an L4; on the dynamic-MIG fleet they take MIG devices (1g.10gb and 2g.20gb or larger).
FILL = {
    "default": (["NVIDIA H100 80GB HBM3", "NVIDIA L4"], "gpu.nvidia.com"),
    "partitioned": (products("partitioned"), "mig.nvidia.com"),
}
SIZES = [7.0, 7.0, 7.0, 18.0]
NO_ROOM = {"NoCapacity", "NoCompatiblePlacement", "PlanningPreemptionFailed"}


@pytest.mark.parametrize("fleet_name", ["default", "partitioned"])
def test_every_placement_is_allocated_and_every_refusal_is_true(
    admin_api: k8s.ApiClient, fleet: Fleet, fleet_name: str
) -> None:
    publish(admin_api, fleet_name)
    try:
        report = run(admin_api, fleet_name, SEED, refusals=6, confine=products(fleet_name))
        print(report.line())
        assert report.placed > 10 and report.refusals == 6
        assert report.disagreements == []
        assert report.false_refusals == []
        filled = run(
            admin_api,
            fleet_name,
            SEED,
            refusals=3,
            confine=FILL[fleet_name][0],
            fill_class=FILL[fleet_name][1],
            sizes=SIZES,
            plant=True,
            growth=True,
            ns=f"fill-{fleet_name}",
        )
    finally:
        if fleet_name != "default":  # the other tests of the session see the default fleet only
            Fleet.load(FLEETS[fleet_name]).unpublish(admin_api)
    print(filled.line())
    assert filled.placed > 10 and filled.refusals == 3
    assert filled.grown > 0  # further replicas' claims (issue 40) in the fill, counted as their orders'
    assert filled.disagreements == []  # 0 orders stuck on a planned device
    assert filled.false_refusals == []
    assert set(filled.reasons) <= NO_ROOM
    assert filled.planted == []
    assert filled.learned.startswith(
        "ResourceClaimExhausted: The scheduler could not allocate the claim planned"
    )
