"""A plan in force: which orders keep it when a recomputation fails, how it is counted, how it is re-read."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import Reason, Refusal
from isvc_operator import PlanOutcome, order_of_plan

from .fakes import World, order

TOO_LARGE = PlanOutcome(
    None,
    None,
    Refusal(
        reason=Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY, message="needs 836 GiB, the largest found is 80 GiB"
    ),
    [],
)


class Bed(World):
    """The README order, with helpers to edit it and to make its workload serve."""

    def __init__(self) -> None:
        super().__init__()
        self.obj = order()
        self.cluster.put(self.obj)

    def run(self, obj: dict[str, Any] | None = None) -> dict[str, Any]:
        return super().run(obj or self.obj)

    def edit(self, **model: Any) -> None:
        self.obj["spec"]["model"].update(model)
        self.obj["metadata"]["generation"] += 1
        self.cluster.put({**self.obj, "status": self.cluster.status_of("team-a", "support-llm")})

    def serving(self) -> None:
        deployment = self.cluster.owned("StatefulSet", "team-a", "support-llm")[0]
        self.cluster.put({**deployment, "status": {"readyReplicas": 1}})


@pytest.fixture
def bed() -> Bed:
    return Bed()


def planned(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Planned")


def test_a_failed_recomputation_is_counted_once_however_many_passes_follow(bed: Bed) -> None:
    assert bed.run()["resolved"]["replanCount"] == 0
    bed.planner.outcome = TOO_LARGE
    bed.edit(ref={"name": "meta-llama/Llama-3.1-405B-Instruct"})
    counts = [bed.run()["resolved"]["replanCount"] for _ in range(4)]
    assert counts == [1, 1, 1, 1]
    assert planned(bed.cluster.status_of("team-a", "support-llm"))["reason"] == "LaunchPlanInForce"


def test_a_restarted_controller_does_not_count_the_same_failure_again(bed: Bed) -> None:
    bed.run()
    bed.planner.outcome = TOO_LARGE
    bed.edit(ref={"name": "meta-llama/Llama-3.1-405B-Instruct"})
    assert bed.run()["resolved"]["replanCount"] == 1
    bed.restart()
    assert bed.run()["resolved"]["replanCount"] == 1


def test_a_serving_order_whose_edit_first_stalls_on_its_secret_keeps_its_plan_in_force(bed: Bed) -> None:
    assert bed.run()["phase"] == "Ready"
    bed.serving()
    bed.planner.outcome = TOO_LARGE
    bed.edit(ref={"name": "meta-llama/Llama-3.1-405B-Instruct"}, authSecretRef={"name": "hf"})
    stalled = bed.run()
    assert stalled["reason"] == "AuthSecretNotFound"
    bed.cluster.secret("team-a", "hf", {"token": "hf_test_token"})
    status = bed.run()
    assert (planned(status)["status"], planned(status)["reason"]) == ("True", "LaunchPlanInForce")
    assert "NoAcceleratorWithEnoughMemory" in planned(status)["message"]
    assert status["phase"] == "Ready"


def test_an_order_never_ready_and_not_serving_is_refused_plainly(bed: Bed) -> None:
    bed.run()
    status = bed.cluster.status_of("team-a", "support-llm")
    status["conditions"] = [c for c in status["conditions"] if c["type"] != "Ready"]
    bed.planner.outcome = TOO_LARGE
    bed.obj["spec"]["model"]["ref"]["name"] = "meta-llama/Llama-3.1-405B-Instruct"
    bed.cluster.put({**bed.obj, "status": status})
    assert planned(bed.run())["reason"] == "NoAcceleratorWithEnoughMemory"


def test_a_hand_written_plan_without_labels_maps_to_the_order_it_is_named_after() -> None:
    plan = {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "LaunchPlan",
        "metadata": {"name": "support-llm", "namespace": "team-a"},
    }
    assert order_of_plan(plan) == ("team-a", "support-llm")
