"""The classes the chart renders are valid InferenceServiceClass objects under the generated CRD.

Rendering needs helm (conftest.py). CEL rules (`x-kubernetes-validations`) are the API server's job
and are not evaluated here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

MODULE = Path(__file__).resolve().parents[2] / "module"
CRD = MODULE / "crds" / "inferenceserviceclasses.yaml"


def _class_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _classes(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "InferenceServiceClass"}


def test_default_llm_conforms_to_the_class_crd(render: Any) -> None:
    default_llm = _classes(render())["default-llm"]

    jsonschema.validate(default_llm, _class_schema())


def test_additional_class_from_settings_conforms_to_the_class_crd(render: Any) -> None:
    embeddings = {
        "name": "embeddings",
        "spec": {
            "modelPolicy": {"allowedEndpointTypes": ["Embeddings"]},
            "exposure": {"type": "ClusterLocal", "authentication": "None"},
        },
    }
    rendered = _classes(render(f"isvc.additionalClasses=[{json.dumps(embeddings)}]"))

    jsonschema.validate(rendered["embeddings"], _class_schema())


def test_a_class_with_a_wrong_exposure_does_not_conform(render: Any) -> None:
    """Guards the check above against a schema that accepts anything."""
    broken = {
        "name": "broken",
        "spec": {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "Public"},
        },
    }
    rendered = _classes(render(f"isvc.additionalClasses=[{json.dumps(broken)}]"))

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rendered["broken"], _class_schema())


def test_helm_is_found_where_the_chart_session_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, find_helm: Callable[[], str | None]
) -> None:
    """Issue 19: a cache moved by ISVC_CACHE_DIR or ISVC_BIN_DIR used to make three tests skip."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "helm").write_text("")
    monkeypatch.delenv("ISVC_HELM", raising=False)
    monkeypatch.delenv("ISVC_BIN_DIR", raising=False)
    monkeypatch.setenv("ISVC_CACHE_DIR", str(tmp_path))
    assert find_helm() == str(tmp_path / "bin" / "helm")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "helm").write_text("")
    monkeypatch.setenv("ISVC_BIN_DIR", str(tmp_path / "other"))
    assert find_helm() == str(tmp_path / "other" / "helm")


def test_a_missing_helm_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helm_or_skip: Callable[[], str]
) -> None:
    monkeypatch.delenv("ISVC_HELM", raising=False)
    monkeypatch.setenv("ISVC_BIN_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no helm binary"):
        helm_or_skip()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no helm binary"):
        helm_or_skip()
