"""The shared table of example documents that the models and the API server must judge alike."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

__all__ = ["example_cases"]


def example_cases() -> list[dict[str, Any]]:
    """Each case: name, valid (bool) and object (a wire document)."""
    text = resources.files("isvc_api").joinpath("examples/cases.yaml").read_text(encoding="utf-8")
    cases: list[dict[str, Any]] = yaml.safe_load(text)
    return cases
