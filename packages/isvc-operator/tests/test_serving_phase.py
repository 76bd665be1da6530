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
