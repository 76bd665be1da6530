"""The recipe format the README documents is a recipe that loads."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from isvc_runtime_recipes import load_recipes

README = Path(__file__).parent.parent / "README.md"


def test_the_documented_recipe_loads_and_replaces_the_shipped_one() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    book = load_recipes([yaml.safe_load(blocks[0])])
    recipe = book.get("vllm-chat")
    assert recipe is not None
    assert recipe.accelerator.products == ["NVIDIA A100*"]
