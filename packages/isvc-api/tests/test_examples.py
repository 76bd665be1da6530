"""The pydantic models accept and reject the documents of the shared table as the API server does."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import example_cases, parse
from pydantic import ValidationError

CASES = example_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_models_judge_each_example_like_the_api_server(case: dict[str, Any]) -> None:
    try:
        parse(case["object"])
        accepted = True
    except ValidationError:
        accepted = False
    assert case["valid"] == accepted


def test_the_table_holds_both_kinds_of_case_for_every_kind() -> None:
    seen = {(c["object"]["kind"], c["valid"]) for c in CASES}
    for kind in ("InferenceService", "InferenceServiceClass", "LaunchPlan"):
        assert (kind, True) in seen and (kind, False) in seen
