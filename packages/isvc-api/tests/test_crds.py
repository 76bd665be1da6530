"""The generated CRDs are structural, described field by field, and match the committed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from isvc_api import Reason, all_crds, crd_documents

CRDS = all_crds()


def _walk(node: dict[str, Any], path: str, item: bool = False) -> list[str]:
    problems = []
    implicit = path.endswith(".metadata")  # the API server allows nothing but the type there
    if "description" not in node and not implicit and not (item and node.get("type") != "object"):
        problems.append(f"{path}: no description")
    if "anyOf" in node or "oneOf" in node or "$ref" in node:
        problems.append(f"{path}: not structural")
    if "type" not in node:
        problems.append(f"{path}: no type")
    for name, child in (node.get("properties") or {}).items():
        problems += _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += _walk(node["items"], f"{path}[]", item=True)
    return problems


@pytest.mark.parametrize("name", sorted(CRDS))
def test_every_field_is_typed_and_described(name: str) -> None:
    schema = CRDS[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _walk(schema, name) == []


def test_conditions_are_a_map_list_keyed_by_type() -> None:
    status = CRDS["inferenceservices.yaml"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    conditions = status["properties"]["status"]["properties"]["conditions"]
    keys = (conditions["x-kubernetes-list-type"], conditions["x-kubernetes-list-map-keys"])
    assert keys == ("map", ["type"])


def test_the_short_name_does_not_collide_with_kserve() -> None:
    names = CRDS["inferenceservices.yaml"]["spec"]["names"]["shortNames"]
    assert "isvc" not in names and names


def test_committed_crds_are_what_the_models_generate() -> None:
    root = Path(__file__).resolve().parents[3] / "module" / "crds"  # the tests run from the repository only
    for name, text in crd_documents().items():
        assert (root / name).read_text() == text, f"{name} drifted: run nox -s crds"


def test_the_reason_set_is_closed_and_unique() -> None:
    values = [r.value for r in Reason]
    assert len(values) == len(set(values)) == 32
