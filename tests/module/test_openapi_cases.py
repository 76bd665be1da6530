"""The settings schema: its case tests, its Russian twin, and the chart defaults that mirror it.

Validation follows Deckhouse's addon-operator: an object that declares neither
`additionalProperties` nor `x-kubernetes-preserve-unknown-fields` admits no unknown keys, and
`values.yaml` extends `config-values.yaml` through `x-extend`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

MODULE = Path(__file__).resolve().parents[2] / "module"
OPENAPI = MODULE / "openapi"


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def _closed(schema: Any) -> Any:
    """Copy of a schema where objects reject unknown keys unless they say otherwise."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if (
        out.get("type") == "object"
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _extended(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve `x-extend`: the parent's properties under the child's own."""
    parent_name = schema.get("x-extend", {}).get("schema")
    if not parent_name:
        return schema
    parent = _extended(_load(OPENAPI / parent_name))
    merged = copy.deepcopy(parent)
    merged["properties"] = {**parent.get("properties", {}), **schema.get("properties", {})}
    return merged


def _schema(kind: str) -> dict[str, Any]:
    name = {"configValues": "config-values.yaml", "values": "values.yaml"}[kind]
    return _closed(_extended(_load(OPENAPI / name)))  # type: ignore[no-any-return]


def _cases(polarity: str) -> list[Any]:
    cases = _load(OPENAPI / "openapi-case-tests.yaml")[polarity]
    return [
        pytest.param(kind, value, id=f"{kind}-{i}") for kind in cases for i, value in enumerate(cases[kind])
    ]


def _defaults(schema: dict[str, Any]) -> Any:
    """The value tree the schema's defaults produce from an empty object, as addon-operator fills it."""
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if "default" not in prop:
            continue
        value = copy.deepcopy(prop["default"])
        if prop.get("type") == "object" and isinstance(value, dict):
            value = {**_defaults(prop), **value}
        out[name] = value
    return out


def _description_paths(schema: Any, prefix: str = "") -> set[str]:
    """Paths of every `description` in a schema tree (properties and items only)."""
    paths: set[str] = set()
    if not isinstance(schema, dict):
        return paths
    if "description" in schema:
        paths.add(prefix or "/")
    for name, prop in schema.get("properties", {}).items():
        paths |= _description_paths(prop, f"{prefix}/{name}")
    if "items" in schema:
        paths |= _description_paths(schema["items"], f"{prefix}/[]")
    return paths


@pytest.mark.parametrize(("kind", "value"), _cases("positive"))
def test_positive_case_is_accepted(kind: str, value: Any) -> None:
    jsonschema.validate(value, _schema(kind))


@pytest.mark.parametrize(("kind", "value"), _cases("negative"))
def test_negative_case_is_rejected(kind: str, value: Any) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, _schema(kind))


def test_catalog_mode_defaults_to_aimodels() -> None:
    assert _defaults(_schema("configValues"))["catalog"]["mode"] == "AIModels"


def test_chart_values_equal_schema_defaults() -> None:
    """module/values.yaml feeds plain helm; Deckhouse fills the same tree from the schema."""
    chart = _load(MODULE / "values.yaml")["isvc"]

    assert _defaults(_schema("values")) == chart


def test_schema_defaults_are_valid_values() -> None:
    schema = _schema("values")

    jsonschema.validate(_defaults(schema), schema)


def test_russian_twin_describes_exactly_the_english_properties() -> None:
    english = _description_paths(_load(OPENAPI / "config-values.yaml"))
    russian = _description_paths(_load(OPENAPI / "doc-ru-config-values.yaml"))

    assert english == russian
