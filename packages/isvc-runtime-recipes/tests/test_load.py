"""Loading: shipped recipes, the administrator's overrides, and recipes that do not hold."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_runtime_recipes import InvalidRecipe, RecipeBook, UnknownFlag, check_flags, load_recipes


def shipped(book: RecipeBook, name: str) -> dict[str, Any]:
    recipe = book.get(name)
    assert recipe is not None
    return recipe.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_the_shipped_recipes_cover_the_three_runtimes(book: RecipeBook) -> None:
    assert {r.runtime for r in book} == {"vllm", "tei", "llamacpp"}
    assert [r.name for r in book][:2] == ["vllm-chat", "vllm-chat-turing"]


def test_every_shipped_recipe_uses_only_its_runtimes_accepted_flags(book: RecipeBook) -> None:
    for recipe in book:
        groups = recipe.args + (recipe.tool_calling.args if recipe.tool_calling else [])
        tokens = [token for group in groups for token in group]
        assert check_flags(tokens, book.flags[recipe.runtime]) == [], recipe.name


@pytest.mark.parametrize(
    ("runtime", "flags"),
    [
        (
            "vllm",
            [
                "--served-model-name",
                "--tensor-parallel-size",
                "--gpu-memory-utilization",
                "--max-model-len",
                "--quantization",
                "--api-key",
                "--port",
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "--runner",
                "--convert",
            ],
        ),
        (
            "tei",
            ["--model-id", "--port", "--api-key", "--hostname", "--prometheus-port", "--served-model-name"],
        ),
        (
            "llamacpp",
            ["-m", "--port", "--api-key", "-c", "-ngl", "--jinja", "--alias", "--metrics", "--embeddings"],
        ),
    ],
)
def test_the_accepted_lists_hold_the_runtimes_real_flags(
    book: RecipeBook, runtime: str, flags: list[str]
) -> None:
    assert [f for f in flags if f not in book.flags[runtime].flags] == []


def test_flags_removed_from_vllm_are_not_accepted(book: RecipeBook) -> None:
    # --task gave way to --runner/--convert; --engine-use-ray and --worker-use-ray are long gone.
    assert check_flags(["--task", "embed", "--engine-use-ray"], book.flags["vllm"]) == [
        "--task",
        "--engine-use-ray",
    ]


def test_an_extra_recipe_with_a_shipped_name_replaces_it(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat") | {"image": "registry.example/vllm:pinned"}
    overridden = load_recipes([data])
    recipe = overridden.get("vllm-chat")
    assert recipe is not None and recipe.image == "registry.example/vllm:pinned"
    assert len(overridden) == len(book)


def test_an_extra_recipe_can_switch_a_shipped_one_off(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat-turing") | {"disabled": True}
    assert load_recipes([data]).get("vllm-chat-turing") is None


def test_an_extra_recipe_with_a_new_name_joins_the_book(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat") | {"name": "vllm-chat-bnb", "priority": 15}
    data["serves"] = data["serves"] | {"quantizations": ["BitsAndBytes"]}
    data["quantizationValues"] = {"BitsAndBytes": "bitsandbytes"}
    extended = load_recipes([data])
    assert [r.name for r in extended][:3] == ["vllm-chat", "vllm-chat-bnb", "vllm-chat-turing"]


def test_a_misspelt_flag_fails_loading(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat")
    data["args"] = [*data["args"], ["--gpu-memory-utilisation", "0.5"]]
    with pytest.raises(UnknownFlag, match="--gpu-memory-utilisation"):
        load_recipes([data])


def test_a_misspelt_tool_calling_flag_fails_loading(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat")
    data["toolCalling"]["args"] = [["--enable-auto-tool-choise"]]
    with pytest.raises(UnknownFlag, match="--enable-auto-tool-choise"):
        load_recipes([data])


def test_an_unknown_placeholder_fails_loading(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat")
    data["args"] = [*data["args"], ["--max-num-seqs", "{maxSequences}"]]
    with pytest.raises(InvalidRecipe, match="maxSequences"):
        load_recipes([data])


def test_the_api_key_never_sits_in_plain_env(book: RecipeBook) -> None:
    data = shipped(book, "tei-embed")
    data["env"] = {"API_KEY": "secret"}
    with pytest.raises(InvalidRecipe, match="auth Secret"):
        load_recipes([data])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"runtime": "sglang"}, "no accepted-flag list"),
        ({"serves": {"endpointTypes": ["Chat"], "formats": ["ONNX"], "quantizations": ["None"]}}, "formats"),
        ({"accelerator": {"minComputeCapability": "eight"}}, "minComputeCapability"),
        ({"memory": {"margin": 0.7}}, "margin"),
        ({"name": "Not A DNS Label"}, "name"),
        ({"shortcut": True}, "shortcut"),
    ],
)
def test_a_recipe_that_does_not_hold_fails_loading(
    book: RecipeBook, change: dict[str, Any], match: str
) -> None:
    with pytest.raises(InvalidRecipe, match=match):
        load_recipes([shipped(book, "vllm-chat") | change])


def test_a_group_not_starting_with_a_flag_fails_loading(book: RecipeBook) -> None:
    data = shipped(book, "tei-embed")
    data["args"] = [["{modelPath}"], *data["args"]]  # TEI takes the model only via --model-id
    with pytest.raises(InvalidRecipe, match="does not start with a flag"):
        load_recipes([data])


def test_the_same_name_twice_in_the_settings_fails_loading(book: RecipeBook) -> None:
    data = shipped(book, "vllm-chat")
    with pytest.raises(InvalidRecipe, match="twice"):
        load_recipes([data, data])
