"""Sized to serve (issue 42): the controller asks the planner and the recipes for the class's serving target,
filled with its endpoint type's defaults, replans when it changes, and the status says what the launch serves."""

from __future__ import annotations

import pytest
from isvc_api import Load, ModelFacts

from .fakes import World, klass, order


@pytest.fixture
def world() -> World:
    return World()


def test_the_plan_is_asked_and_compiled_for_the_class_target_with_the_defaults_it_leaves_out(
    world: World,
) -> None:
    world.cluster.put(klass(serving={"concurrentRequests": 40}))
    status = world.run()
    wanted = Load(requests=40, typical=2048, longest=8192)  # the chat defaults for what the class leaves out
    assert world.planner.serving == [wanted]
    assert world.recipes.serving == [wanted]
    resolved = status["resolved"]
    assert (resolved["concurrentRequests"], resolved["requestTokens"]) == (40, 2048)
    assert resolved["kvCacheTokens"] == 40 * 2048


def test_an_order_without_a_class_gets_the_default_of_what_the_model_is(world: World) -> None:
    """A class-less order for an embedding model: the embeddings default (32 inputs of 512 tokens)."""
    world.models.answer = ModelFacts(
        source="HuggingFace", name="BAAI/bge-m3", architecture="XLMRobertaModel", parameter_count=568_000_000
    )
    world.run(order(klass=None, model="BAAI/bge-m3"))
    assert world.planner.serving == [Load(requests=32, typical=512, longest=8192)]


def test_a_changed_serving_target_replans_the_order(world: World) -> None:
    world.cluster.put(klass())
    world.run()
    world.run()
    assert len(world.planner.serving) == 1  # a steady order asks nothing
    world.cluster.put(klass(serving={"concurrentRequests": 64, "typicalRequestTokens": 1024}))
    status = world.run()
    assert world.planner.serving[-1] == Load(requests=64, typical=1024, longest=8192)
    assert status["resolved"]["replanCount"] == 1
    assert status["resolved"]["concurrentRequests"] == 64


def test_a_sustained_rate_of_the_runtimes_own_5xx_is_an_event_and_the_order_stays_ready(world: World) -> None:
    """Issue 42: the health judgement's news of the runtime's own 5xx (the request meter's counts) is a
    RuntimeErrors event on the order, once; the order serves, so it stays Ready."""
    world.run()
    world.health.errors = "The runtime answered 9 of 80 requests with HTTP 5xx in the last 5 minutes (...)."
    status = world.run()
    assert status["phase"] == "Ready"
    said = [e for e in world.cluster.events if e[2] == "RuntimeErrors"]
    assert len(said) == 1 and said[0][1] == "Warning" and "9 of 80 requests with HTTP 5xx" in said[0][3], said
    world.run()
    assert len([e for e in world.cluster.events if e[2] == "RuntimeErrors"]) == 1
