"""Sized to serve (issue 42): no recipe launches its runtime with more sequences at once than the KV budget it
compiles holds at the serving target's typical length, and llama.cpp gets a slot for each request."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from isvc_api import CompiledRuntime, Estimates, Load, ModelFacts, Placement, serving_load
from isvc_runtime_recipes import AcceleratorFacts, RecipeBook, effective_endpoint_type

KEYS = ["a100-80gb-whole", "a100-80gb-share-50", "a100-80gb-mig-3g.40gb", "h100-80gb-x2", "l4-24gb-whole"]
SMALL = Load(requests=4, typical=512, longest=1024)


def flag(args: list[str], name: str) -> int | None:
    return int(args[args.index(name) + 1]) if name in args else None


def check(compiled: CompiledRuntime, load: Load, context: int | None) -> None:
    """What the compiled launch states agrees with its flags and holds the load."""
    wanted = load.within(context)
    args = compiled.args
    at_once = compiled.concurrent_requests
    if compiled.runtime == "vllm" and compiled.kv_cache_tokens:
        assert at_once == flag(args, "--max-num-seqs") and at_once is not None
        assert wanted.requests <= at_once <= compiled.kv_cache_tokens // wanted.typical, compiled.args
        assert (flag(args, "--max-model-len") or 0) >= wanted.longest
    if compiled.runtime == "llamacpp":
        slots, cells = flag(args, "-np"), flag(args, "-c")
        assert slots == at_once == wanted.requests and cells == compiled.kv_cache_tokens, compiled.args
        assert cells is not None and cells % slots == 0 and cells // slots >= wanted.longest
    if (
        at_once is not None
    ):  # a launch the memory model fitted (not one of a model whose weights nothing tells)
        assert compiled.request_tokens == wanted.typical


@pytest.mark.parametrize("load", [None, SMALL], ids=["default", "small"])
def test_every_compiled_launch_holds_its_target(
    book: RecipeBook,
    matrix_model: str,
    facts: Callable[[str], ModelFacts],
    estimates: Callable[..., Estimates],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
    load: Load | None,
) -> None:
    model = facts(matrix_model)
    target = load or serving_load(None, effective_endpoint_type(model, None))
    for key in KEYS:
        placement, card = hardware(key)
        compiled = book.compile(model, None, placement, estimates(model), model.name, card, serving=target)
        if isinstance(compiled, CompiledRuntime):
            check(compiled, target, model.context_length)


def test_a_share_that_cannot_hold_the_target_refuses_with_the_figures(
    book: RecipeBook,
    facts: Callable[[str], ModelFacts],
    estimates: Callable[..., Estimates],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
) -> None:
    """The memory check of a recipe names the requests its budget holds, fewer than the target's."""
    model = facts("llama-3.1-8b-instruct")
    placement, card = hardware("a100-80gb-share-50")
    huge = Load(requests=256, typical=4096, longest=8192)
    refused = book.compile(model, None, placement, estimates(model), model.name, card, serving=huge)
    assert not isinstance(refused, CompiledRuntime)
    assert "requests of 4,096 tokens at once, fewer than 256" in refused.message
