"""The estimate webhook answers a dry-run create with what the order would get, and writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from isvc_api import Reason, Refusal
from isvc_operator import Estimator, PlanOutcome

from .fakes import World, order

PREFIX = "isvc-estimate: "


def review(obj: dict[str, Any], dry_run: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "CREATE",
            "dryRun": dry_run,
            "namespace": "team-a",
            "object": obj,
            "userInfo": {"username": "alice"},
        },
    }


def facts(answer: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in answer["response"]["warnings"]:
        assert line.startswith(PREFIX)
        key, _, value = line[len(PREFIX) :].partition("=")
        out.setdefault(key, []).append(value)
    return out


@pytest.fixture
def world() -> World:
    return World()


def test_a_model_that_fits_is_told_its_placement_and_runtime_and_nothing_is_written(world: World) -> None:
    obj = order(name="")
    obj["metadata"] = {"generateName": "isvc-estimate-"}
    answer = Estimator(world.reconciler().d).review(review(obj))
    assert answer["response"]["uid"] == "u-1" and answer["response"]["allowed"] is True
    told = facts(answer)
    assert told["version"] == ["1"] and told["verdict"] == ["Planned"] and told["class"] == ["default-llm"]
    assert told["endpointType"] == ["Chat"] and told["deviceClassName"] == ["gpu.nvidia.com"]
    assert told["runtime"] == ["vllm"] and told["arg"] == ["serve", "Qwen/Qwen2.5-7B-Instruct"]
    assert world.planner.dry_runs == [True]  # nothing reserved
    assert world.cluster.applied == [] and world.cluster.statuses == [] and world.cluster.events == []


def test_values_are_told_as_json_never_as_python_text_issue_45(world: World) -> None:
    """`kubectl isvc estimate` printed a catalog model's capacityRequests as Python dict text."""
    held = world.planner.outcome
    assert held.placement is not None
    world.planner.outcome = PlanOutcome(
        held.placement.model_copy(update={"capacity_requests": {"shares": "12", "memory": "9830Mi"}}),
        held.estimates,
        None,
        [],
    )
    told = facts(Estimator(world.reconciler().d).review(review(order(name="x"))))
    assert json.loads(told["capacityRequests"][0]) == {"shares": "12", "memory": "9830Mi"}
    assert all("'" not in v and v not in ("True", "False") for vs in told.values() for v in vs), told


def test_a_refusal_names_the_condition_the_reason_and_the_words(world: World) -> None:
    world.planner.outcome = PlanOutcome(
        None,
        None,
        Refusal(reason=Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY, message="needs 761 GiB; the largest has 80"),
        [],
    )
    told = facts(Estimator(world.reconciler().d).review(review(order())))
    assert (told["verdict"], told["condition"], told["reason"]) == (
        ["Refused"],
        ["Planned"],
        ["NoAcceleratorWithEnoughMemory"],
    )
    assert told["message"] == ["needs 761 GiB; the largest has 80"]


def test_a_class_that_does_not_exist_is_refused_before_the_planner_is_asked(world: World) -> None:
    told = facts(Estimator(world.reconciler().d).review(review(order(klass="no-such-class"))))
    assert (told["verdict"], told["condition"], told["reason"]) == (
        ["Refused"],
        ["ClassResolved"],
        ["ClassNotFound"],
    )
    assert world.planner.dry_runs == []


def test_a_real_create_gets_no_estimate(world: World) -> None:
    answer = Estimator(world.reconciler().d).review(review(order(), dry_run=False))
    assert answer["response"] == {"uid": "u-1", "allowed": True, "warnings": []}


def test_long_texts_are_split_and_the_whole_stays_within_the_api_servers_limit(world: World) -> None:
    world.planner.outcome = PlanOutcome(None, None, Refusal(reason=Reason.NO_CAPACITY, message="x" * 450), [])
    lines = Estimator(world.reconciler().d).review(review(order()))["response"]["warnings"]
    assert [len(line) for line in lines if "message=" in line] == [len(PREFIX) + 8 + 200] * 2 + [
        len(PREFIX) + 8 + 50
    ]
    assert sum(len(line) for line in lines) <= 4096


# ---- issue 29: what a review is believed, and whose rights read the token Secret


def _with_token_secret(world: World) -> dict[str, Any]:
    world.cluster.secret("team-b", "hf", {"token": "hf_team_b_secret"})
    return order(namespace="team-b", authSecretRef={"name": "hf", "key": "token"})


def _forged(obj: dict[str, Any], namespace: str = "team-b", user: str = "alice") -> dict[str, Any]:
    answer = review(obj)
    answer["request"].update(namespace=namespace, userInfo={"username": user, "groups": ["team-a"]})
    return answer


def test_an_unvouched_review_gets_no_secret_read_issue_29(world: World) -> None:
    obj = _with_token_secret(world)

    told = facts(Estimator(world.reconciler().d).review(_forged(obj)))

    assert (told["verdict"], told["condition"], told["reason"]) == (
        ["Unknown"],
        ["ModelResolved"],
        ["AuthSecretNotFound"],
    )
    assert "only for a review the API server vouches for" in told["message"][0]
    assert world.models.tokens == [] and world.cluster.access_reviews == [] and world.planner.dry_runs == []


def test_a_vouched_review_reads_the_secret_only_when_its_user_may_issue_29(world: World) -> None:
    obj = _with_token_secret(world)
    estimator = Estimator(world.reconciler().d)

    refused = facts(estimator.review(_forged(obj, user="alice"), vouched=True))
    world.cluster.allowed.add(("bob", "get", "secrets", "team-b", "hf"))
    allowed = facts(estimator.review(_forged(obj, user="bob"), vouched=True))

    assert (refused["verdict"], refused["reason"]) == (["Unknown"], ["AuthSecretNotFound"])
    assert "alice may not read Secret 'hf' in namespace 'team-b'" in refused["message"][0]
    assert allowed["verdict"] == ["Planned"]
    assert world.models.tokens == ["hf_team_b_secret"]  # read once: for bob, who may
    assert world.cluster.access_reviews == [
        ("alice", "get", "secrets", "team-b", "hf"),
        ("bob", "get", "secrets", "team-b", "hf"),
    ]


def test_an_unvouched_review_reads_no_namespace_catalog_model_issue_29(world: World) -> None:
    obj = order()
    obj["spec"]["model"] = {"src": "AIModels", "ref": {"name": "m", "kind": "Model", "namespace": "team-b"}}

    told = facts(Estimator(world.reconciler().d).review(_forged(obj)))

    assert (told["verdict"], told["reason"]) == (["Unknown"], ["CatalogLookupFailed"])
    assert world.models.tokens == []


def test_an_unvouched_review_of_a_public_model_is_still_estimated(world: World) -> None:
    told = facts(Estimator(world.reconciler().d).review(review(order())))

    assert told["verdict"] == ["Planned"]
