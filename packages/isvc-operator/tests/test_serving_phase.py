"""Issue 31: the phase tells whether the endpoint serves, status.resolved what serves, the blame who wrote a
plan.

A serving order whose class goes, or whose new plan's workload is refused, read Pending while its old
replica answered, and status.resolved described the refused plan; an edited module plan was blamed on the
module.
"""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import MANAGER, ConditionType, Phase, Reason, StatusReason, Verdict
from isvc_operator import phase

from tests.fakes import PLACEMENT, World, order


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


@pytest.fixture
def world() -> World:
    return World()


def _verdicts(refused: ConditionType | None, ready: Verdict | None) -> dict[ConditionType, Verdict]:
    """A pass's verdicts: every condition True up to `refused` (False), the later ones waiting, then Ready."""
    out: dict[ConditionType, Verdict] = {}
    for type_ in (
        ConditionType.CLASS_RESOLVED,
        ConditionType.MODEL_RESOLVED,
        ConditionType.PLANNED,
        ConditionType.WORKLOAD_READY,
    ):
        if refused is not None and type_ == refused:
            out[type_] = Verdict.refuse(Reason.CLASS_NOT_FOUND, "m")
        elif refused is not None and list(out).count(refused):
            out[type_] = Verdict.waiting(refused, "m")
        else:
            out[type_] = Verdict.ok(StatusReason.RESOLVED, "m")
    if ready is not None:
        out[ConditionType.READY] = ready
    out[ConditionType.SCALING_HEALTHY] = Verdict.ok(StatusReason.SCALING_OK, "m")
    return out


SERVING = Verdict.ok(StatusReason.SERVING, "The inference API answers.")


@pytest.mark.parametrize(
    ("refused", "ready", "expected"),
    [
        (None, SERVING, Phase.READY),
        (ConditionType.CLASS_RESOLVED, SERVING, Phase.DEGRADED),
        (ConditionType.WORKLOAD_READY, SERVING, Phase.DEGRADED),
        (ConditionType.CLASS_RESOLVED, Verdict.waiting(ConditionType.WORKLOAD_READY, "m"), Phase.PENDING),
        (None, Verdict.refuse(Reason.HEALTH_CHECK_FAILED, "m"), Phase.PENDING),
        (ConditionType.CLASS_RESOLVED, Verdict.refuse(Reason.SERVICE_UNHEALTHY, "m"), Phase.FAILED),
    ],
)
def test_the_phase_follows_whether_the_endpoint_serves_and_whether_anything_is_wrong(
    refused: ConditionType | None, ready: Verdict, expected: Phase
) -> None:
    assert phase(_verdicts(refused, ready)) == expected


def test_a_serving_order_whose_class_is_deleted_keeps_serving_and_says_degraded(world: World) -> None:
    ready = world.run()
    assert ready["phase"] == "Ready"
    world.cluster.delete("", "InferenceServiceClass", "", "default-llm")
    world.health.tokens.clear()
    world.health.models.clear()
    status = world.run()
    assert (status["phase"], status["reason"]) == ("Degraded", "ClassNotFound")
    assert (condition(status, "ClassResolved")["status"], condition(status, "Ready")["status"]) == (
        "False",
        "True",
    )
    assert status["endpoint"] == ready["endpoint"] and status["resolved"] == ready["resolved"]
    # the endpoint itself was asked, with the order's token and the name its workload serves
    assert world.health.tokens == ["sekret"] and world.health.models == ["Qwen/Qwen2.5-7B-Instruct"]
    world.health.ok = False  # and then it stops answering: the order no longer serves
    assert world.run()["phase"] == "Failed"


def test_a_standing_workload_with_no_replica_ready_does_not_serve_whatever_the_probe_says(
    world: World,
) -> None:
    """Issue 45: the phase read Degraded ("serves") with no replica ready during a drain, a move and a model
    switch, because the probe (the test bed's stand-in always answers) said the API answered."""
    assert world.run()["phase"] == "Ready"
    world.cluster.delete("", "InferenceServiceClass", "", "default-llm")
    pod = world.cluster.objects[("Pod", "team-a", "support-llm-0")]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    status = world.run()
    assert (status["phase"], status["reason"]) == ("Pending", "ClassNotFound")
    ready = condition(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "HealthCheckFailed")
    assert (
        "does not serve" in ready["message"]
        and "none of the pods of its workload is ready" in ready["message"]
    )
    assert world.health.ok  # the probe would have answered
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert world.run()["phase"] == "Degraded"  # a replica back: it serves, and the class is still missing


def test_a_replica_of_a_plan_being_replaced_still_serves_while_the_new_one_comes_up(world: World) -> None:
    """The pods of the plan in force are not up, but one of the order's pods is ready behind its Service: the
    endpoint is probed and serves (Degraded), as before issue 45."""
    assert world.run()["phase"] == "Ready"
    world.workload.verdict = Verdict.refuse(Reason.WORKLOAD_NOT_READY, "0 of 1 replicas ready")
    world.health.tokens.clear()
    status = world.run()
    assert (status["phase"], condition(status, "Ready")["status"]) == ("Degraded", "True")
    assert world.health.tokens == ["sekret"]


def test_an_order_that_never_served_is_pending_whatever_refuses_it(world: World) -> None:
    status = world.run(order(klass="no-such-class"))
    assert (status["phase"], status["reason"]) == ("Pending", "ClassNotFound")
    assert condition(status, "Ready")["status"] == "Unknown"


def test_an_order_whose_workload_is_gone_does_not_serve_and_is_pending(world: World) -> None:
    world.run()
    world.cluster.delete("", "InferenceServiceClass", "", "default-llm")
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")
    status = world.run()
    assert (status["phase"], condition(status, "Ready")["status"]) == ("Pending", "Unknown")
    assert ("team-a", "support-llm") in world.health.forgotten


def test_a_new_plan_whose_workload_is_refused_leaves_status_resolved_on_what_serves(world: World) -> None:
    before = world.run()
    assert before["resolved"]["acceleratorProductName"] == "NVIDIA H100 80GB HBM3"
    world.planner.outcome = world.planner.outcome.__class__(
        placement=PLACEMENT.model_copy(
            update={"pool": "gpu-l4-0", "node_name": "gpu-l4-0", "accelerator_product_name": "NVIDIA L4"}
        ),
        estimates=world.planner.outcome.estimates,
        refusal=None,
        preempt=[],
    )
    world.workload.outgrown = "the model volume (20Gi) is smaller than the order now needs (40Gi)"
    edited = order(model="Qwen/Qwen2.5-3B-Instruct")
    world.cluster.put({**edited, "status": world.cluster.status_of("team-a", "support-llm")})
    for _ in range(2):  # the pass that planned, and one that kept the stored plan
        status = world.run(edited)
        assert (status["phase"], status["reason"]) == ("Degraded", "WorkloadError")
        resolved = status["resolved"]
        assert (resolved["acceleratorProductName"], resolved["servedModel"]) == (
            "NVIDIA H100 80GB HBM3",
            "Qwen/Qwen2.5-7B-Instruct",
        )
        assert resolved["replanCount"] == before["resolved"]["replanCount"] + 1
        assert "NVIDIA L4" in condition(status, "Planned")["message"]  # what was asked for: the new plan
        assert world.health.models[-1] == "Qwen/Qwen2.5-7B-Instruct"  # what the probe asks of the old set
    world.workload.outgrown = None  # the Release notes procedure: the set is made anew
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")
    status = world.run(edited)
    assert status["phase"] == "Ready"
    assert (status["resolved"]["acceleratorProductName"], status["resolved"]["servedModel"]) == (
        "NVIDIA L4",
        "Qwen/Qwen2.5-3B-Instruct",
    )
    assert status["resolved"]["replanCount"] == before["resolved"]["replanCount"] + 1


def test_a_refused_edit_leaves_planned_and_the_launch_plan_on_what_serves_and_holds_one_share(
    world: World,
) -> None:
    """Issue 45, point 3: a model edited 3B -> 7B that the settled volume refuses left Planned and the
    LaunchPlan (InForce=True) describing the refused plan while the old one served, and the planner counted
    both shares (the LaunchPlan's and the running claim's)."""
    world.run()
    served = world.cluster.launch_plan("team-a", "support-llm")
    assert served is not None
    world.planner.outcome = world.planner.outcome.__class__(
        placement=PLACEMENT.model_copy(update={"share_percent": 23}),
        estimates=world.planner.outcome.estimates,
        refusal=None,
        preempt=[],
    )
    world.workload.outgrown = "the model volume (8Gi) is smaller than the order now needs (17Gi)"
    edited = order(model="Qwen/Qwen2.5-7B-Instruct-1M")
    world.cluster.put({**edited, "status": world.cluster.status_of("team-a", "support-llm")})
    status = world.run(edited)
    planned = condition(status, "Planned")
    assert (planned["status"], planned["reason"]) == ("True", "LaunchPlanInForce")
    assert "is not taken" in planned["message"] and "23%" in planned["message"]
    assert (status["phase"], condition(status, "WorkloadReady")["message"]) == (
        "Degraded",
        world.workload.outgrown,
    )
    kept = world.cluster.launch_plan("team-a", "support-llm")
    assert kept is not None and kept["spec"] == served["spec"]  # the ledger counts the plan serving alone
    in_force = kept["status"]["conditions"][0]
    assert (in_force["type"], in_force["status"], in_force["reason"]) == (
        "InForce",
        "True",
        "LaunchPlanInForce",
    )
    assert world.planner.released[-1] == ("team-a", "support-llm")  # the refused plan's room, released
    assert status["resolved"]["servedModel"] == "Qwen/Qwen2.5-7B-Instruct"


def test_status_names_the_model_volume_the_set_kept_from_a_larger_plan(world: World) -> None:
    """Issue 45, point 3: edited 7B -> 3B, the order kept its 17Gi volume claim (a set's volume never changes)
    while status.resolved said the 3B's estimate."""
    assert world.run()["resolved"]["modelVolume"] == "20Gi"  # the estimate, and the set made with it
    smaller = world.planner.outcome.estimates.model_copy(update={"model_volume": "8Gi"})  # type: ignore[union-attr]
    world.planner.outcome = world.planner.outcome.__class__(
        placement=PLACEMENT, estimates=smaller, refusal=None, preempt=[]
    )
    edited = order(model="Qwen/Qwen2.5-3B-Instruct")
    world.cluster.put({**edited, "status": world.cluster.status_of("team-a", "support-llm")})
    status = world.run(edited)
    assert (status["phase"], status["resolved"]["modelVolume"]) == ("Ready", "20Gi")
    plan = world.cluster.launch_plan("team-a", "support-llm")
    assert plan is not None and plan["spec"]["estimates"]["modelVolume"] == "8Gi"
    held = world.cluster.objects[("StatefulSet", "team-a", "support-llm")]
    assert held["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "20Gi"


def _edit_share(world: World, managed: list[dict[str, Any]]) -> dict[str, Any]:
    world.run()
    plan = world.cluster.launch_plan("team-a", "support-llm")
    assert plan is not None and plan["metadata"]["annotations"]
    plan["spec"]["placement"]["sharePercent"] = 150
    plan["metadata"]["managedFields"] = managed
    world.cluster.put(plan)
    return condition(world.run(), "Planned")


OURS = {"manager": MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {"f:placement": {}}}}
STATUS = {
    "manager": "kubectl-edit",
    "operation": "Update",
    "subresource": "status",
    "fieldsV1": {"f:spec": {}},
}


def test_a_module_plan_edited_by_hand_is_blamed_on_the_edit_not_the_module(world: World) -> None:
    edit = {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:placement": {}}}}
    planned = _edit_share(world, [OURS, edit])
    assert (planned["status"], planned["reason"]) == ("False", "LaunchPlanNotAPlacement")
    assert "delete the LaunchPlan and the module computes a new one" in planned["message"]
    assert "edited by kubectl-edit" in planned["message"] and "defect" not in planned["message"]


def test_a_module_plan_no_one_else_wrote_is_the_modules_defect_to_report(world: World) -> None:
    planned = _edit_share(world, [OURS, STATUS])  # a status write is not an edit of the plan
    assert planned["reason"] == "LaunchPlanNotAPlacement"
    assert "report this as a defect" in planned["message"]
