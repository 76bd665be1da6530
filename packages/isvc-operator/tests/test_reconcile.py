"""One pass of the reconciler over an order, with every dependency faked as plain data."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from isvc_api import GROUP, VERSION, ModelFacts, Reason, Refusal, Verdict
from isvc_operator import PassResult, PlanOutcome, TemporaryError

from .fakes import PLACEMENT, World, klass, order

GV = f"{GROUP}/{VERSION}"


def reasons(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in status["conditions"]}


@pytest.fixture
def world() -> World:
    return World()


def test_the_readme_order_reaches_ready_in_one_pass(world: World) -> None:
    status = world.run()
    assert status["phase"] == "Ready"
    assert [c["type"] for c in status["conditions"]] == [
        "ClassResolved",
        "ModelResolved",
        "Planned",
        "WorkloadReady",
        "Ready",
        "ScalingHealthy",
    ]
    assert all(c["status"] == "True" for c in status["conditions"])
    assert status["model"]["endpointType"] == "Chat"
    assert status["authSecretName"] == "support-llm-auth"
    assert status["endpoint"] == {
        "url": "https://support-llm.team-a.example.com",
        "type": "External",
        "toolCallingSupported": True,
    }
    assert status["resolved"]["deviceClass"] == "gpu.nvidia.com"
    assert status["resolved"]["replanCount"] == 0
    assert world.health.tokens == ["sekret"]
    assert "reason" not in status


def test_the_endpoint_names_the_parsers_the_runtime_starts_with_issue_10(world: World) -> None:
    world.recipes.parsers = ("hermes", "qwen3")
    status = world.run()
    assert status["endpoint"]["toolCallParser"] == "hermes"
    assert status["endpoint"]["reasoningParser"] == "qwen3"


def test_the_plan_names_the_commit_and_the_gguf_files_the_workload_downloads(world: World) -> None:
    """A GGUF repository holds many variants: the plan carries the files resolution chose, and no list when
    the source named none (the whole repository is downloaded)."""
    world.run()
    plain = world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]["spec"]
    assert "modelFiles" not in plain
    shards = ["m-q4_k_m-00001-of-00002.gguf", "m-q4_k_m-00002-of-00002.gguf"]
    assert isinstance(world.models.answer, ModelFacts)
    world.models.answer = world.models.answer.model_copy(update={"commit": "abc", "gguf_files": shards})
    world.run()
    plan = world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]["spec"]
    assert (plan["modelCommit"], plan["modelFiles"]) == ("abc", shards)


def test_the_plan_names_the_repository_a_catalog_model_is_downloaded_from(world: World) -> None:
    """A catalog order names only the catalog object: the plan carries the Hugging Face repository and
    revision its source names, and no repository when the facts give none."""
    world.run()
    assert "modelRepo" not in world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]["spec"]
    assert isinstance(world.models.answer, ModelFacts)
    world.models.answer = world.models.answer.model_copy(
        update={"download_repo": "BAAI/bge-m3", "commit": "5617a9f"}
    )
    world.run()
    plan = world.cluster.objects[("LaunchPlan", "team-a", "support-llm")]["spec"]
    assert (plan["modelRepo"], plan["modelCommit"]) == ("BAAI/bge-m3", "5617a9f")


def test_the_status_is_written_once_per_pass(world: World) -> None:
    world.run()
    assert [s["kind"] for s in world.cluster.statuses] == ["InferenceService", "LaunchPlan"]


def test_a_missing_class_says_class_not_found_and_echoes_the_name(world: World) -> None:
    status = world.run(order(klass="old-llm"))
    condition = next(c for c in status["conditions"] if c["type"] == "ClassResolved")
    assert (condition["status"], condition["reason"]) == ("False", "ClassNotFound")
    assert "'old-llm'" in condition["message"]
    assert status["reason"] == "ClassNotFound" and status["phase"] == "Pending"
    assert reasons(status)["ModelResolved"] == "WaitingForPreviousStep"


def test_a_class_that_does_not_hold_says_class_not_ready(world: World) -> None:
    world.cluster.put(klass(ready=False, reason="NoEndpointTypes"))
    assert world.run()["reason"] == "ClassNotReady"


def test_a_missing_priority_class_is_left_to_the_planner_not_class_not_ready(world: World) -> None:
    world.cluster.put(klass(ready=False, reason="PriorityClassMissing", priorityClassName="gold"))
    world.planner.outcome = PlanOutcome(
        None, None, Refusal(reason=Reason.PRIORITY_CLASS_NOT_FOUND, message="no PriorityClass gold"), []
    )
    assert world.run()["reason"] == "PriorityClassNotFound"


def test_a_namespace_outside_the_allow_list_is_not_allowed(world: World) -> None:
    world.cluster.put(klass(admissionPolicy={"allowedNamespaces": ["team-b"]}))
    status = world.run()
    assert status["reason"] == "NamespaceNotAllowed"
    assert "'team-a'" in reasons_message(status, "ClassResolved")


def reasons_message(status: dict[str, Any], type_: str) -> str:
    return str(next(c for c in status["conditions"] if c["type"] == type_)["message"])


def test_a_classless_order_keeps_the_builtin_exposure_without_the_default_class(world: World) -> None:
    world.cluster.delete("", "InferenceServiceClass", None, "default-llm")
    status = world.run(order(klass=None))
    assert status["phase"] == "Ready"
    assert "endpointType" not in status.get("model", {})
    assert status["endpoint"]["type"] == "External"
    assert status["authSecretName"] == "support-llm-auth"


def test_a_missing_auth_secret_is_named_and_lifts_once_created(world: World) -> None:
    obj = order(authSecretRef={"name": "hf-token", "key": "token"})
    status = world.run(obj)
    assert status["reason"] == "AuthSecretNotFound"
    assert "'hf-token'" in reasons_message(status, "ModelResolved")
    world.cluster.secret("team-a", "hf-token", {"token": "hf_abc"})
    assert world.run(obj)["phase"] == "Ready"
    assert world.models.tokens[-1] == "hf_abc"


@pytest.mark.parametrize("minutes", [0, 2, 60])
def test_a_missing_auth_secret_or_key_asks_for_no_timed_pass_at_any_age(world: World, minutes: int) -> None:
    """The Secret's watch passes the order when the Secret appears or changes: a refusal a minute old or an
    hour old is not polled (it once was, every 3 s and then every 15 s)."""
    obj = order(authSecretRef={"name": "hf-token", "key": "token"})
    assert world.run(obj)["reason"] == "AuthSecretNotFound"
    world.clock_offset = timedelta(minutes=minutes)
    assert world.run(obj)["reason"] == "AuthSecretNotFound"
    assert world.last is not None and world.last.requeue_after is None
    world.cluster.secret("team-a", "hf-token", {"other": "hf_abc"})  # the key is missing
    status = world.run(obj)
    assert status["reason"] == "AuthSecretNotFound"
    assert "has no key 'token'" in reasons_message(status, "ModelResolved")
    assert world.last is not None and world.last.requeue_after is None
    world.cluster.secret("team-a", "hf-token", {"token": "hf_abc"})
    assert world.run(obj)["phase"] == "Ready"


def test_a_catalog_order_with_the_catalog_off_says_catalog_disabled(world: World) -> None:
    world.catalog_enabled = False
    obj = order()
    obj["spec"]["model"] = {"src": "AIModels", "ref": {"name": "qwen", "kind": "Model"}}
    assert world.run(obj)["reason"] == "CatalogDisabled"


def test_a_catalog_that_does_not_answer_says_catalog_lookup_failed(world: World) -> None:
    world.models.answer = TemporaryError("503")
    obj = order()
    obj["spec"]["model"] = {"src": "AIModels", "ref": {"name": "qwen", "kind": "Model"}}
    assert world.run(obj)["reason"] == "CatalogLookupFailed"


def test_catalog_lookup_failed_carries_the_sources_own_sentence_once(world: World) -> None:
    said = (
        "Reading models.ai-models.deckhouse.io team-a/qwen failed (HTTP 403 Forbidden); "
        "the next pass asks again."
    )
    world.models.answer = TemporaryError(said)
    obj = order()
    obj["spec"]["model"] = {"src": "AIModels", "ref": {"name": "qwen", "kind": "Model"}}
    status = world.run(obj)
    assert (status["reason"], reasons_message(status, "ModelResolved")) == ("CatalogLookupFailed", said)


def test_a_refusal_of_the_model_source_is_passed_on(world: World) -> None:
    world.models.answer = Refusal(reason=Reason.MODEL_NOT_FOUND, message="no repository x/y")
    status = world.run()
    assert (status["reason"], reasons(status)["Planned"]) == ("ModelNotFound", "WaitingForPreviousStep")


def test_a_planner_that_does_not_answer_says_planner_request_failed_and_recovers(world: World) -> None:
    world.planner.down = True
    assert world.run()["reason"] == "PlannerRequestFailed"
    world.planner.down = False
    assert world.run()["phase"] == "Ready"


def test_a_recipe_refusal_lands_on_planned(world: World) -> None:
    world.recipes.refusal = Refusal(reason=Reason.QUANTIZATION_MISMATCH, message="recipes want AWQ")
    status = world.run()
    assert (status["reason"], reasons(status)["Planned"]) == ("QuantizationMismatch", "QuantizationMismatch")


def test_a_placement_no_recipe_compiles_for_is_released_at_the_planner(world: World) -> None:
    """Issue 26: the recipes serve the model (its requirements held) but not on the placement the planner
    chose: that is the placement's reason, one that waits for room, never the permanent
    NoCompatibleRuntimeAvailable on the way to it."""
    world.recipes.compile_refusal = Refusal(
        reason=Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE, message="none fits"
    )
    status = world.run()
    assert reasons(status)["Planned"] == "NoCompatiblePlacement"
    assert "none fits" in reasons_message(status, "Planned")
    assert world.planner.released == [("team-a", "support-llm")]


def test_a_hand_written_plan_with_share_150_is_not_a_placement_and_is_kept(world: World) -> None:
    world.cluster.put(
        {
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "kind": "LaunchPlan",
            "metadata": {"name": "support-llm", "namespace": "team-a"},
            "spec": {"placement": {"placementMode": "Shared", "sharePercent": 150}},
        }
    )
    status = world.run()
    message = reasons_message(status, "Planned")
    assert status["reason"] == "LaunchPlanNotAPlacement"
    assert "sharePercent" in message and "150" in message and "delete the LaunchPlan" in message
    assert world.cluster.launch_plan("team-a", "support-llm")["spec"]["placement"]["sharePercent"] == 150
    world.cluster.delete("", "LaunchPlan", "team-a", "support-llm")
    assert world.run()["phase"] == "Ready"


def test_an_unchanged_order_is_not_replanned(world: World) -> None:
    world.run()
    world.run()
    assert len(world.planner.holdings) == 1


def test_a_changed_model_replans_counting_the_holding_as_its_own(world: World) -> None:
    obj = order()
    world.run(obj)
    obj["spec"]["model"]["ref"]["name"] = "Qwen/Qwen2.5-14B-Instruct"
    obj["metadata"]["generation"] = 2
    world.cluster.put({**obj, "status": world.cluster.status_of("team-a", "support-llm")})
    status = world.run(obj)
    assert world.planner.holdings == [None, PLACEMENT]
    assert status["resolved"]["replanCount"] == 1
    assert status["observedGeneration"] == 2


def test_a_ready_order_whose_replan_fails_stays_ready_with_launch_plan_in_force(world: World) -> None:
    obj = order()
    world.run(obj)
    world.planner.outcome = PlanOutcome(
        None,
        None,
        Refusal(
            reason=Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
            message="needs 90 GiB, the largest found is 80 GiB",
        ),
        [],
    )
    obj["spec"]["model"]["ref"]["name"] = "Qwen/Qwen2.5-72B-Instruct"
    world.cluster.put({**obj, "status": world.cluster.status_of("team-a", "support-llm")})
    status = world.run(obj)
    planned = next(c for c in status["conditions"] if c["type"] == "Planned")
    assert (status["phase"], planned["status"], planned["reason"]) == ("Ready", "True", "LaunchPlanInForce")
    assert "NoAcceleratorWithEnoughMemory" in planned["message"] and "90 GiB" in planned["message"]


def test_a_workload_the_cluster_refuses_says_workload_error(world: World) -> None:
    world.cluster.refuse_kind = "StatefulSet"
    status = world.run()
    assert status["reason"] == "WorkloadError"
    assert "Invalid value" in reasons_message(status, "WorkloadReady")


def test_the_workload_verdict_is_the_condition(world: World) -> None:
    world.workload.verdict = Verdict(
        status="False", reason="ResourceClaimPending", message="the claim awaits allocation."
    )
    status = world.run()
    assert (status["reason"], reasons(status)["Ready"]) == ("ResourceClaimPending", "WaitingForPreviousStep")


def test_a_probe_failure_before_the_first_ready_is_pending_and_after_it_failed(world: World) -> None:
    world.health.ok = False
    status = world.run()
    assert (status["phase"], status["reason"]) == ("Pending", "HealthCheckFailed")
    world.health.ok = True
    world.run()
    world.health.ok = False
    status = world.run()
    assert (status["phase"], status["reason"]) == ("Failed", "ServiceUnhealthy")


def test_a_deleted_order_is_done(world: World) -> None:
    assert world.reconciler().reconcile("team-a", "gone") == PassResult()
    assert world.cluster.statuses == []
    # a reservation may remain with no trace in the API (a plan never stored): released all the same
    assert world.planner.released == [("team-a", "gone")]


def test_a_deleted_order_has_its_room_released_while_its_plan_remains_even_after_a_restart(
    world: World,
) -> None:
    world.run()
    world.cluster.delete(GV, "InferenceService", "team-a", "support-llm")
    world.restart()  # nothing is remembered: the decision comes from what the API still holds
    world.reconciler().reconcile("team-a", "support-llm")
    assert world.planner.released == [("team-a", "support-llm")]
    world.cluster.delete(GV, "LaunchPlan", "team-a", "support-llm")  # garbage collection
    for template in world.cluster.owned("ResourceClaimTemplate", "team-a", "support-llm"):
        world.cluster.delete("", "ResourceClaimTemplate", "team-a", template["metadata"]["name"])
    world.reconciler().reconcile("team-a", "support-llm")  # a child's last event: released again, idempotent
    assert world.planner.released == [("team-a", "support-llm")] * 2


def test_a_workload_whose_plan_was_taken_away_and_finds_no_room_is_taken_down(world: World) -> None:
    assert world.run()["phase"] == "Ready"
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")
    world.cluster.delete(GV, "LaunchPlan", "team-a", "support-llm")  # preempted: plan and room gone
    world.planner.outcome = PlanOutcome(
        placement=None,
        estimates=None,
        refusal=Refusal(reason=Reason.NO_CAPACITY, message="no room"),
        preempt=[],
    )
    status = world.run()
    assert reasons(status)["Planned"] == "NoCapacity"
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm") == []


def test_a_workload_whose_plan_is_gone_stays_while_the_planner_does_not_answer(world: World) -> None:
    world.run()
    world.cluster.delete(GV, "LaunchPlan", "team-a", "support-llm")
    world.planner.down = True
    assert reasons(world.run())["Planned"] == "PlannerRequestFailed"
    assert world.cluster.owned("StatefulSet", "team-a", "support-llm")


def test_blocked_growth_degrades_a_serving_order_and_reports_each_replica_once(world: World) -> None:
    world.workload.growth_verdict = Verdict(
        status="False", reason="ScaleUpBlocked", message="growth is blocked (p-2)."
    )
    world.workload.unplaced = [("p-2", "Replica pod p-2: its claim got no device.")]
    world.planner.outranked["support-llm"] = ("gpu.nvidia.com/n1/gpu-0: team-b/vip at priority 1000",)
    status = world.run()
    assert (status["phase"], reasons(status)["ScalingHealthy"]) == ("Degraded", "ScaleUpBlocked")
    world.restart()
    world.run()
    assert [e[2] for e in world.cluster.events].count("GrowthClaimUnplaced") == 1
    # the ledger was asked afresh, in each pass, where orders of higher priority hold the replica's room
    assert world.workload.outranked_seen == [world.planner.outranked["support-llm"]] * 2
    assert world.planner.forgotten.count(("team-a", "support-llm")) >= 2


def test_a_replica_waiting_for_capacity_keeps_the_order_ready_and_is_reported_once_issue_28(
    world: World,
) -> None:
    world.workload.growth_verdict = Verdict(
        status="True",
        reason="ScalingOK",
        message="1 of 2 replicas ready: 1 replica(s) wait for capacity (p-2).",
    )
    world.workload.unplaced = [("p-2", "Replica pod p-2: its claim got no device.")]
    status = world.run()
    assert (status["phase"], reasons(status)["ScalingHealthy"]) == ("Ready", "ScalingOK")
    world.restart()
    world.run()
    assert [e[2] for e in world.cluster.events].count("GrowthClaimUnplaced") == 1
    assert world.workload.outranked_seen == [(), ()]


def test_a_planner_that_does_not_answer_leaves_blocked_growth_as_the_last_pass_found(world: World) -> None:
    world.workload.unplaced = [("p-2", "Replica pod p-2: its claim got no device.")]
    world.planner.outranked["support-llm"] = ("gpu.nvidia.com/n1/gpu-0: team-b/vip at priority 1000",)
    world.workload.growth_verdict = Verdict(status="False", reason="ScaleUpBlocked", message="blocked (p-2).")
    world.run()
    world.planner.down = True
    world.run()
    assert world.workload.outranked_seen[-1] != ()


def test_a_class_not_judged_yet_is_a_moment_not_class_not_ready(world: World) -> None:
    unjudged = klass()
    del unjudged["status"]
    world.cluster.put(unjudged)
    status = world.run()
    class_resolved = next(c for c in status["conditions"] if c["type"] == "ClassResolved")
    assert (class_resolved["status"], class_resolved["reason"]) == ("Unknown", "WaitingForPreviousStep")
    assert status["phase"] == "Pending"


def _coming_up(message: str, reason: str = "WorkloadNotReady") -> Verdict:
    return Verdict(status="False", reason=reason, message=message)


def test_the_steps_of_a_quick_start_are_not_each_a_status_write(world: World) -> None:
    """Issue 15: claim allocated, volume bound, replicas starting — each was a write before Ready."""
    world.workload.verdict = _coming_up("the claim awaits allocation.", "ResourceClaimPending")
    first = world.run()
    writes = len(world.cluster.statuses)
    assert reasons(first)["WorkloadReady"] == "ResourceClaimPending"
    world.clock_offset = timedelta(seconds=2)
    world.workload.verdict = _coming_up("the replicas are coming up.")
    assert world.run() == first and len(world.cluster.statuses) == writes
    assert world.last is not None and world.last.requeue_after == pytest.approx(3.0)
    world.workload.verdict = Verdict(status="True", reason="WorkloadAvailable", message="1 of 1 ready.")
    ready = world.run()
    assert ready["phase"] == "Ready" and len(world.cluster.statuses) == writes + 1


def test_a_start_that_takes_longer_reports_each_step(world: World) -> None:
    world.workload.verdict = _coming_up("the claim awaits allocation.", "ResourceClaimPending")
    world.run()
    world.clock_offset = timedelta(seconds=6)
    world.workload.verdict = _coming_up("the replicas are coming up.")
    status = world.run()
    assert reasons_message(status, "WorkloadReady") == "the replicas are coming up."


def test_an_edit_while_the_workload_comes_up_is_written_at_once(world: World) -> None:
    world.workload.verdict = _coming_up("the claim awaits allocation.", "ResourceClaimPending")
    world.run()
    world.clock_offset = timedelta(seconds=1)
    edited = order()
    edited["metadata"]["generation"] = 2
    world.cluster.put(edited | {"status": world.cluster.status_of("team-a", "support-llm")})
    world.workload.verdict = _coming_up("the replicas are coming up.")
    status = world.run(edited)
    assert status["observedGeneration"] == 2


def test_a_new_order_says_nothing_until_its_class_is_judged_for_a_few_seconds(world: World) -> None:
    """Issue 15: an order created as the controller starts raced its class's first judgement, and its
    first status said only that the class had not been judged yet."""
    unjudged = klass()
    del unjudged["status"]
    world.cluster.put(unjudged)
    new = order()
    new["metadata"]["creationTimestamp"] = "2026-11-01T00:00:00Z"  # T0
    world.clock_offset = timedelta(seconds=1)
    world.cluster.put(new)
    first = world.reconciler().reconcile("team-a", "support-llm")
    assert world.cluster.statuses == []
    assert first.requeue_after == pytest.approx(4.0)
    world.clock_offset = timedelta(seconds=6)
    status = world.run(new)
    assert reasons(status)["ClassResolved"] == "WaitingForPreviousStep"
