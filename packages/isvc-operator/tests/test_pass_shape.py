"""The shape of a pass: the status is written whatever a step does, nothing is remembered between passes,
and no pass touches another order's objects."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest
from isvc_api import (
    GROUP,
    LABEL_ORDER,
    VERSION,
    ConditionType,
    PlacementMode,
    Reason,
    Refusal,
    SharingMode,
    StartupFailure,
    Verdict,
)
from isvc_operator import Judgement, PlanOutcome, TemporaryError, WorkloadUnbuildable, phase
from isvc_operator._steps.plan import REFUSED_AFTER

from .fakes import ESTIMATES, PLACEMENT, World, klass, order

GV = f"{GROUP}/{VERSION}"


@pytest.fixture
def world() -> World:
    return World()


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_a_step_that_raises_still_gets_a_status_that_says_where_to_look(world: World) -> None:
    ready = world.run()
    world.cluster.fail_kind = "StatefulSet"
    world.cluster.delete("apps/v1", "StatefulSet", "team-a", "support-llm")  # so that it is applied again
    world.cluster.put({**order(), "metadata": {**order()["metadata"], "generation": 2}, "status": ready})
    status = world.run()
    workload = condition(status, "WorkloadReady")
    assert (workload["status"], workload["reason"]) == ("Unknown", "NotJudged")
    assert "something no one foresaw" in workload["message"] and "log" in workload["message"]
    assert condition(status, "Ready")["reason"] == "WaitingForPreviousStep"
    # What still holds stays; the generation is not claimed as observed; the pass backs off.
    assert status["endpoint"] == ready["endpoint"] and status["authSecretName"] == "support-llm-auth"
    assert status["resolved"] == ready["resolved"] and status["launchPlanName"] == "support-llm"
    assert status["observedGeneration"] == 1
    assert world.last is not None and world.last.failed


def test_manifests_that_cannot_be_built_say_workload_error(world: World) -> None:
    def unbuildable(*_: Any) -> list[Any]:
        raise WorkloadUnbuildable("External exposure needs publicDomainTemplate")

    world.workload.manifests = unbuildable  # type: ignore[method-assign]
    status = world.run()
    workload = condition(status, "WorkloadReady")
    assert (workload["status"], workload["reason"]) == ("False", "WorkloadError")
    assert "publicDomainTemplate" in workload["message"]
    assert world.last is not None and not world.last.failed  # a refusal, not a failed pass


def test_a_pass_that_changes_nothing_writes_nothing(world: World) -> None:
    world.run()
    world.run()
    world.restart()
    world.run()
    assert [s["kind"] for s in world.cluster.statuses] == ["InferenceService", "LaunchPlan"]


def test_the_launch_plan_says_in_force_as_the_orders_planned_says(world: World) -> None:
    world.run()
    plan = world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]
    condition = plan["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("InForce", "True", "Planned")
    plan["spec"]["placement"] = {"deviceCount": "many"}  # a hand edit that is not a placement
    world.run()
    condition = world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "LaunchPlanNotAPlacement")


def test_the_startup_failure_read_once_is_handed_back_from_status_after_a_restart(world: World) -> None:
    failure = StartupFailure(
        pod="p1", container="server", restart_count=3, output=["CUDA out of memory"], output_read=True
    )
    world.workload.verdict = Verdict(status="False", reason="WorkloadStartupFailed", message="fails")
    world.workload.failure = failure
    world.run()
    world.restart()
    world.run()
    assert world.workload.judged_with == [None, failure]


def test_the_health_window_survives_a_restart(world: World) -> None:
    world.run()
    world.health.ok = False
    world.run()
    world.restart()
    world.run()
    assert [r.consecutive_failures for r in world.health.records] == [0, 0, 1]
    assert world.health.records[-1].ever_ready


def test_the_phase_is_computed_from_the_verdicts_in_one_place() -> None:
    ok = Verdict(status="True", reason="Serving", message="")
    blocked = Verdict(status="False", reason="ScaleUpBlocked", message="")
    unhealthy = Verdict(status="False", reason="ServiceUnhealthy", message="")
    ready, scaling = ConditionType.READY, ConditionType.SCALING_HEALTHY
    assert phase({ready: ok, scaling: blocked}).value == "Degraded"
    assert phase({ready: unhealthy}).value == "Failed"
    assert phase({ready: ok}).value == "Ready"
    assert phase({}).value == "Pending"


def _plan(world: World, name: str, share: int, priority_class: str | None, minutes: int) -> None:
    """An order on the default class (or a class with a priority) holding `share` % of the one device."""
    class_name = f"prio-{priority_class}" if priority_class else "default-llm"
    if priority_class:
        world.cluster.put(klass(class_name, priorityClassName=priority_class))
    obj = order(name=name, klass=class_name)
    world.cluster.put(obj)
    placement = PLACEMENT.model_copy(
        update={
            "placement_mode": PlacementMode.SHARED,
            "sharing_mode": SharingMode.SHARES,
            "share_percent": share,
        }
    )
    world.planner.outcome = PlanOutcome(placement=placement, estimates=ESTIMATES, refusal=None, preempt=[])
    world.clock_offset = timedelta(minutes=minutes)
    world.run(obj)


def test_a_displaced_order_takes_its_own_plan_and_workload_down_in_its_own_pass(world: World) -> None:
    world.cluster.priority_classes = {"gold": 1000}
    _plan(world, "low", 60, None, minutes=0)
    assert world.cluster.owned("StatefulSet", "team-a", "low")
    before = copy.deepcopy(world.cluster.objects)
    _plan(world, "vip", 60, "gold", minutes=1)  # the planner gave the device to the higher priority

    # The preemptor's pass touched nothing of the other order.
    def of_low(objects: dict[Any, Any]) -> dict[Any, Any]:
        return {k: v for k, v in objects.items() if k[2] == "low" and k[0] != "InferenceService"}

    assert of_low(world.cluster.objects) == of_low(before)
    world.planner.lost["low"] = ("gpu.nvidia.com/n1/gpu-0: holders of higher priority leave no room",)
    world.planner.outranked["low"] = ("gpu.nvidia.com/n1/gpu-0: team-a/vip at priority 1000",)
    world.planner.outcome = PlanOutcome(None, None, Refusal(reason=Reason.NO_CAPACITY, message="no room"), [])
    world.restart()  # the victim finds out from the planner's ledger, whatever the controller remembers
    status = world.run(order(name="low"))
    assert world.cluster.launch_plan("team-a", "low") is None
    assert world.cluster.owned("StatefulSet", "team-a", "low") == []
    assert world.cluster.launch_plan("team-a", "vip") is not None
    assert condition(status, "Planned")["reason"] == "NoCapacity"
    assert ("low", "Warning", "Preempted") in [e[:3] for e in world.cluster.events]
    assert "vip" not in next(e for e in world.cluster.events if e[0] == "low")[3]  # no other tenant named


def test_a_displaced_order_with_room_elsewhere_moves_in_the_same_pass_issue_26(world: World) -> None:
    """Its plan is replaced at once (never taken down and recreated), asked with what it holds."""
    _plan(world, "low", 60, None, minutes=0)
    world.planner.lost["low"] = ("gpu.nvidia.com/n1/gpu-0: holders of higher priority leave no room",)
    world.planner.outranked["low"] = ("gpu.nvidia.com/n1/gpu-0: team-a/vip at priority 1000",)
    elsewhere = PLACEMENT.model_copy(update={"devices": ["gpu-1"], "device_uuids": ["GPU-1"]})
    world.planner.outcome = PlanOutcome(placement=elsewhere, estimates=ESTIMATES, refusal=None, preempt=[])
    world.run(order(name="low"))
    stored = world.cluster.launch_plan("team-a", "low")
    assert stored is not None and stored["spec"]["placement"]["devices"] == ["gpu-1"]
    assert world.planner.holdings[-1] is not None and world.planner.holdings[-1].share_percent == 60
    assert world.cluster.owned("StatefulSet", "team-a", "low")


def test_an_order_standing_on_its_devices_is_not_displaced(world: World) -> None:
    world.cluster.priority_classes = {"gold": 1000}
    _plan(world, "low", 40, None, minutes=0)
    _plan(world, "vip", 60, "gold", minutes=1)
    world.run(order(name="low"))
    assert world.cluster.launch_plan("team-a", "low") is not None


def test_the_preemptor_names_its_victims_to_be_passed_at_once(world: World) -> None:
    placement = PLACEMENT
    world.planner.outcome = PlanOutcome(
        placement=placement, estimates=ESTIMATES, refusal=None, preempt=[("team-b", "victim")]
    )
    world.run()
    assert world.last is not None and world.last.wake == (("team-b", "victim"),)


def test_every_change_of_reason_is_an_event_and_a_quiet_pass_says_nothing(world: World) -> None:
    """Issue 16: `kubectl describe` showed `Events: <none>` through creation, refusals and recovery."""
    world.run()
    first = [e[1:3] for e in world.cluster.events]
    assert first == [
        ("Normal", "Resolved"),
        ("Normal", "Resolved"),
        ("Normal", "Planned"),
        ("Normal", "WorkloadAvailable"),
        ("Normal", "Serving"),
        ("Normal", "ScalingOK"),
    ]
    world.run()
    assert len(world.cluster.events) == len(first)
    world.planner.down = True
    world.cluster.delete(GV, "LaunchPlan", "team-a", "support-llm")
    world.run()
    new = world.cluster.events[len(first) :]
    assert ("Warning", "PlannerRequestFailed") in [e[1:3] for e in new]
    assert all(e[3].startswith(("Planned: ", "WorkloadReady: ", "Ready: ", "ScalingHealthy: ")) for e in new)


def test_the_probe_asks_for_the_name_the_plan_in_force_serves(world: World) -> None:
    """Issue 19: the probe never checked the served name; after an edit the old model still serves."""
    world.run()
    world.planner.down = True  # the edit cannot be planned: the old plan stays in force
    edited = order(model="Qwen/Qwen2.5-14B-Instruct@main")
    world.cluster.put({**edited, "status": world.cluster.status_of("team-a", "support-llm")})
    world.run(edited)
    assert world.health.models == ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"]


def test_a_ready_order_whose_replicas_are_all_gone_fails_once_that_is_sustained(world: World) -> None:
    """Issue 12: a Ready order whose pods all died read Pending, not Failed."""
    assert world.run()["phase"] == "Ready"
    world.workload.verdict = Verdict(
        status="False", reason="WorkloadNotReady", message="0 of 1 replicas ready"
    )
    world.cluster.replicas_gone("team-a", "support-llm")
    blip = world.run()
    # a rollout, maybe, but nothing serves meanwhile: not Degraded ("serves"), issue 45
    assert (blip["phase"], condition(blip, "Ready")["reason"]) == ("Pending", "HealthCheckFailed")
    assert "no replica is ready" in condition(blip, "Ready")["message"]
    world.clock_offset += timedelta(seconds=30)  # the next check
    gone = world.run()
    assert (gone["phase"], condition(gone, "Ready")["reason"]) == ("Failed", "ServiceUnhealthy")
    assert "WorkloadNotReady" in gone["health"]["lastFailure"]
    world.workload.verdict = Verdict(status="True", reason="WorkloadAvailable", message="1 of 1")
    assert world.run()["phase"] == "Ready"


def test_a_serving_order_keeps_serving_while_its_model_source_does_not_answer(world: World) -> None:
    """Issue 12: a Hub outage flipped every serving order to Pending and dropped its endpoint. Issue 31: the
    phase says it serves and that something is wrong (Degraded), the conditions say what."""
    ready = world.run()
    world.models.answer = TemporaryError("the Hub did not answer")
    status = world.run()
    assert status["phase"] == "Degraded" and status["endpoint"] == ready["endpoint"]
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "Planned")["reason"] == "LaunchPlanInForce"
    assert status["reason"] == "ModelNotReady"  # the conditions still say what is wrong


def test_the_status_names_the_devices_and_what_the_plan_in_force_serves(world: World) -> None:
    """Issue 16: co-placement could not be confirmed without reading claims, and under a plan in force
    status.model described the new model while the old one ran."""
    world.run()
    world.planner.down = True
    edited = order(model="Qwen/Qwen2.5-14B-Instruct")
    world.cluster.put({**edited, "status": world.cluster.status_of("team-a", "support-llm")})
    status = world.run(edited)
    assert status["resolved"]["devices"] == ["gpu-h100-0/gpu-0"]
    assert status["resolved"]["servedModel"] == "Qwen/Qwen2.5-7B-Instruct"


def test_a_plan_that_cannot_be_stored_releases_what_the_planner_reserved(world: World) -> None:
    """Issue 14: the LaunchPlan write failed after the planner reserved, and each retry renewed the hold."""
    world.cluster.fail_kind = "LaunchPlan"
    status = world.run()
    assert condition(status, "Planned")["reason"] == "NotJudged"
    assert world.planner.released == [("team-a", "support-llm")]


WORDS = "0/5 nodes are available: 1 cannot allocate all claims."
REFUSED_SINCE = "2026-12-01T09:59:30Z"
EXHAUSTED = (
    f"The search for a device happened and found no room on device class mig.nvidia.com (pod p1): {WORDS} "
    "This is capacity."
)


def _refused_pod(world: World, name: str = "support-llm") -> None:
    """The order's pod as kube-scheduler leaves it when it cannot allocate its claim."""
    world.cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-0", "namespace": "team-a", "labels": {LABEL_ORDER: name}},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": WORDS,
                        "lastTransitionTime": REFUSED_SINCE,
                    }
                ],
            },
        }
    )


def _exhausted(world: World) -> None:
    status = world.cluster.status_of("team-a", "support-llm")
    for c in status["conditions"]:
        if c["type"] == "WorkloadReady":
            c.update(status="False", reason="ResourceClaimExhausted", message=EXHAUSTED)
    world.cluster.put({**order(), "status": status})
    _refused_pod(world)


def test_a_claim_the_scheduler_refuses_is_planned_again_elsewhere(world: World) -> None:
    """Issue 18: a planned claim the scheduler could not allocate stayed ResourceClaimExhausted forever."""
    world.run()
    _exhausted(world)
    world.clock_offset = timedelta(minutes=2)
    moved = PLACEMENT.model_copy(update={"node_name": "gpu-h100-1", "pool": "gpu-h100-1"})
    world.planner.outcome = PlanOutcome(placement=moved, estimates=ESTIMATES, refusal=None, preempt=[])
    status = world.run()
    # the scheduler's own words, as the pod says them now, and since when
    assert world.planner.refused[-1] == WORDS and world.planner.holdings[-1] == PLACEMENT
    assert world.planner.refused_since[-1] == datetime.fromisoformat(REFUSED_SINCE)
    assert world.cluster.launch_plan("team-a", "support-llm")["spec"]["placement"]["nodeName"] == "gpu-h100-1"
    assert status["resolved"]["replanCount"] == 1
    world.run()
    assert world.planner.refused == [None, WORDS]  # asked again once, not on every pass


def test_a_refusal_is_heard_after_the_schedulers_retry_not_after_a_guess(world: World) -> None:
    """REFUSED_AFTER: the scheduler's longest backoff and a margin, no longer a preemption victim's grace."""
    world.run()
    _exhausted(world)
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_EXHAUSTED, EXHAUSTED)
    world.clock_offset = timedelta(seconds=REFUSED_AFTER - 1)
    world.run()
    assert world.planner.refused == [None] and world.last is not None  # the plan stands, nobody asked
    assert world.last.requeue_after is not None and world.last.requeue_after <= 1.0 + 1e-6
    world.clock_offset = timedelta(seconds=REFUSED_AFTER)
    world.run()
    assert world.planner.refused[-1] == WORDS
    assert REFUSED_AFTER <= 15.0


def test_a_refusal_the_scheduler_no_longer_makes_is_not_reported(world: World) -> None:
    """The last status said ResourceClaimExhausted, but the pod has been placed since: nothing to report."""
    world.run()
    _exhausted(world)
    world.cluster.objects.pop(("Pod", "team-a", "support-llm-0"))
    world.clock_offset = timedelta(minutes=2)
    world.run()
    assert world.planner.refused == [None]


def test_a_refused_claim_with_nowhere_else_to_go_keeps_its_plan_and_waits(world: World) -> None:
    world.run()
    _exhausted(world)
    world.clock_offset = timedelta(minutes=2)
    world.planner.outcome = PlanOutcome(
        None,
        None,
        Refusal(reason=Reason.RESOURCE_CLAIM_EXHAUSTED, message="every allowed class was tried"),
        [],
    )
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_EXHAUSTED, EXHAUSTED)
    status = world.run()
    planned = condition(status, "Planned")
    assert (planned["status"], planned["reason"]) == ("True", "Planned")
    assert "every allowed class was tried" in planned["message"]
    assert world.cluster.launch_plan("team-a", "support-llm") is not None
    # the order's reason says it in the planner's words (the device, the scheduler's, the classes tried)
    workload = condition(status, "WorkloadReady")
    assert workload["reason"] == "ResourceClaimExhausted" and status["reason"] == "ResourceClaimExhausted"
    assert workload["message"].startswith("every allowed class was tried")


def test_a_device_taken_first_by_a_claim_of_no_order_is_a_refusal_not_a_preemption_issue_26(
    world: World,
) -> None:
    """The ledger lost the order's device to a claim the scheduler allocated before the order's (no order
    outranks it): nothing is taken down; once the scheduler refuses the claim the planner hears it in that
    pass, and with nowhere else to go the order says ResourceClaimExhausted in the planner's words."""
    world.run()
    world.planner.lost["support-llm"] = ("gpu.nvidia.com/n1/gpu-0: holders ... (a claim of no order) ...",)
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_PENDING, "waits for its claim")
    world.run()  # the scheduler has not spoken yet: the plan stands, the planner is not asked
    assert world.planner.refused == [None] and world.cluster.launch_plan("team-a", "support-llm") is not None
    _refused_pod(world)
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_EXHAUSTED, EXHAUSTED)
    said = "The scheduler could not allocate the claim planned on n1/gpu-0 (gpu.nvidia.com): ..."
    world.planner.outcome = PlanOutcome(
        None, None, Refusal(reason=Reason.RESOURCE_CLAIM_EXHAUSTED, message=said), []
    )
    status = world.run()
    assert world.planner.refused[-1] == WORDS  # at once: no REFUSED_AFTER, the ledger explains it
    assert world.cluster.launch_plan("team-a", "support-llm") is not None
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")
    assert condition(status, "WorkloadReady")["message"].startswith(said)
    assert "Preempted" not in [e[2] for e in world.cluster.events]


def _forged(world: World, **placement: Any) -> None:
    """The order's LaunchPlan rewritten by hand: the module's inputs hash copied in, another container."""
    plan = world.cluster.launch_plan("team-a", "support-llm")
    plan["spec"]["runtime"] = {"recipe": "vllm", "image": "evil/miner:latest", "args": ["--mine"]}
    plan["spec"]["placement"].update(placement)
    del plan["metadata"]["annotations"]
    world.cluster.put(plan)


def test_a_hand_written_plan_never_brings_its_own_container(world: World) -> None:
    """Issue 14: a plan with the current inputsHash copied in was adopted and its runtime applied."""
    world.run()
    _forged(world)
    world.run()
    assert world.workload.plans[-1].runtime is not None
    assert world.workload.plans[-1].runtime.image == "vllm/vllm-openai:v0.11.0"  # compiled from the recipes


def test_a_hand_written_plan_outside_the_class_policy_is_not_a_placement(world: World) -> None:
    world.cluster.put(klass(acceleratorPolicy={"deviceClassNames": ["gpu.nvidia.com"]}))
    world.run()
    _forged(world, deviceClassName="mig.nvidia.com")
    status = world.run()
    planned = condition(status, "Planned")
    assert (planned["reason"], "deviceClassName='mig.nvidia.com'" in planned["message"]) == (
        "LaunchPlanNotAPlacement",
        True,
    )


def test_a_claim_unallocated_for_a_moment_is_not_reported_as_refused(world: World) -> None:
    """A plan that preempted waits a few seconds for the displaced claim to go: the scheduler says
    "cannot allocate all claims" meanwhile, and that is no disagreement to report."""
    world.run()
    _exhausted(world)
    world.clock_offset = timedelta(seconds=10)
    world.run()
    assert world.planner.refused == [None]  # the planner was not asked again


def test_a_served_order_probed_between_passes_asks_for_no_timed_pass(world: World) -> None:
    """Issue 15: every Ready order came back for a whole pass each health period; now the probe schedule
    wakes it only when a result changes, so a Ready order asks for no pass at all."""
    world.health.watched = True
    assert world.run()["phase"] == "Ready"
    assert world.last is not None and world.last.requeue_after is None
    assert world.health.forgotten == []


def test_without_probes_between_passes_a_served_order_comes_back_each_period(world: World) -> None:
    assert world.run()["phase"] == "Ready"
    assert world.last is not None and world.last.requeue_after == world.health.period


def test_an_order_with_no_replica_to_probe_or_gone_is_no_longer_probed(world: World) -> None:
    world.health.watched = True
    world.run()
    world.workload.verdict = Verdict(status="False", reason="WorkloadNotReady", message="0 of 1 ready")
    world.cluster.replicas_gone("team-a", "support-llm")
    world.run()
    assert world.health.forgotten == [("team-a", "support-llm")]
    assert world.last is not None and world.last.requeue_after is not None  # the blip's timeline is timed
    del world.cluster.objects[("InferenceService", "team-a", "support-llm")]
    world.reconciler().reconcile("team-a", "support-llm")
    assert world.health.forgotten == [("team-a", "support-llm")] * 2


def test_an_order_on_hardware_out_of_service_moves_and_says_so_issue_27(world: World) -> None:
    """A cordon or a lost node is an inventory change: the order is planned elsewhere in the pass that hears
    of it, with a Moved event; before, its plan named the cordoned card for 45 s, then LaunchPlanNotAPlacement
    once the node was deleted."""
    _plan(world, "a", 60, None, minutes=0)
    world.planner.gone["a"] = ("n1/gpu-0: node gpu-h100-0 is cordoned, so no new pod starts there",)
    elsewhere = PLACEMENT.model_copy(update={"devices": ["gpu-1"], "device_uuids": ["GPU-1"]})
    world.planner.outcome = PlanOutcome(placement=elsewhere, estimates=ESTIMATES, refusal=None, preempt=[])
    status = world.run(order(name="a"))
    stored = world.cluster.launch_plan("team-a", "a")
    assert stored is not None and stored["spec"]["placement"]["devices"] == ["gpu-1"]
    assert condition(status, "Planned")["status"] == "True"
    [moved] = [e for e in world.cluster.events if e[2] == "Moved"]
    assert (
        moved[1] == "Normal" and "node gpu-h100-0 is cordoned" in moved[3] and "planned elsewhere" in moved[3]
    )


def test_an_order_on_hardware_out_of_service_with_nowhere_to_go_waits_naming_it(world: World) -> None:
    _plan(world, "a", 60, None, minutes=0)
    world.planner.gone["a"] = ("n1/gpu-0: node gpu-h100-0 was deleted",)
    world.planner.outcome = PlanOutcome(
        None,
        None,
        Refusal(reason=Reason.NO_CAPACITY, message="devices that would hold it are ... (deleted)"),
        [],
    )
    status = world.run(order(name="a"))
    assert world.cluster.launch_plan("team-a", "a") is None  # never called a defect: replanned, and it waits
    assert world.cluster.owned("StatefulSet", "team-a", "a") == []
    planned = condition(status, "Planned")
    assert (planned["status"], planned["reason"]) == ("False", "NoCapacity")
    assert planned["message"].startswith(
        "Its devices are out of service (n1/gpu-0: node gpu-h100-0 was deleted)."
    )
    assert ("a", "Warning", "OutOfService") in [e[:3] for e in world.cluster.events]


def test_a_claim_refused_on_hardware_out_of_service_is_not_called_capacity(world: World) -> None:
    """Issue 27: after a cordon and an eviction the order read ResourceClaimExhausted, "This is capacity"."""
    _plan(world, "a", 60, None, minutes=0)
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_EXHAUSTED, "cannot allocate all claims")
    status = world.run(order(name="a"))
    assert (
        condition(status, "WorkloadReady")["reason"] == "ResourceClaimExhausted"
    )  # nothing is out of service
    gone = ("n1/gpu-0: node gpu-h100-0 is cordoned, so no new pod starts there",)
    fresh = world.planner.judge

    def judge(namespace: str, name: str, placement: Any) -> Judgement:
        # What the controller remembers from a moment ago says it stands; asked afresh, the planner says gone.
        if (namespace, name) not in world.planner.forgotten:
            return Judgement()
        world.planner.gone[name] = gone
        return fresh(namespace, name, placement)

    world.planner.judge = judge  # type: ignore[method-assign]
    status = world.run(order(name="a"))
    ready = condition(status, "WorkloadReady")
    assert (ready["reason"], ready["message"]) == (
        "WorkloadNotReady",
        "Its devices are out of service (n1/gpu-0: node gpu-h100-0 is cordoned, so no new pod starts there): "
        "it is planned on devices in service now.",
    )
    assert ("team-a", "a") in world.planner.forgotten
    assert world.last is not None and world.last.requeue_after == 0.5


def test_a_refused_claim_on_a_device_taken_first_is_passed_again_at_once(world: World) -> None:
    """The pass that first reads the refusal judged the plan from a judgement kept from before: asked afresh,
    the ledger says the device was taken first, and the next pass comes at once to tell the planner."""
    world.run()
    world.planner.lost["support-llm"] = ("gpu.nvidia.com/n1/gpu-0: holders ... (a claim of no order) ...",)
    world.workload.verdict = Verdict.refuse(Reason.RESOURCE_CLAIM_EXHAUSTED, EXHAUSTED)
    world.run()
    assert world.last is not None and world.last.requeue_after is not None
    assert world.last.requeue_after <= 0.5
