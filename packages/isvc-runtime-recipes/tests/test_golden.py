"""Golden files: what each model compiles to on each card. UPDATE_GOLDEN=1 rewrites them and fails."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from isvc_api import Estimates, ModelFacts, Placement, serving_load
from isvc_runtime_recipes import AcceleratorFacts, RecipeBook, effective_endpoint_type

GOLDEN = Path(__file__).parent / "golden"
HARDWARE_KEYS = [
    "a100-80gb-whole",
    "a100-80gb-share-50",
    "a100-80gb-mig-3g.40gb",
    "h100-80gb-x2",
    "l4-24gb-whole",
    "t4-16gb-whole",
]


def test_compiled_matrix_matches_golden_file(
    book: RecipeBook,
    matrix_model: str,
    facts: Callable[[str], ModelFacts],
    hardware: Callable[[str], tuple[Placement, AcceleratorFacts]],
    estimates: Callable[..., Estimates],
) -> None:
    model = facts(matrix_model)
    plan = estimates(model)
    load = serving_load(
        None, effective_endpoint_type(model, None)
    )  # as the controller asks: the type's default
    actual: dict[str, Any] = {
        "requirements": book.requirements(model, None).to_wire(),
        "compiled": {},
    }
    for key in HARDWARE_KEYS:
        placement, card = hardware(key)
        result = book.compile(model, None, placement, plan, model.name, card, serving=load)
        actual["compiled"][key] = result.to_wire()
    path = GOLDEN / f"{matrix_model}.json"
    rendered = json.dumps(actual, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(rendered, encoding="utf-8")
        # A run that writes its own expectations proves nothing: it fails, and a second run checks.
        pytest.fail(
            f"golden files rewritten ({path.name}); review the diff and run again without UPDATE_GOLDEN"
        )
    assert path.exists(), f"{path.name} is missing: run with UPDATE_GOLDEN=1 and review it"
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(rendered)
