"""The classes the chart renders are valid InferenceServiceClass objects under the generated CRD.

Needs a `helm` binary: $ISVC_HELM, else where the `chart` session builds it ($ISVC_BIN_DIR, else
$ISVC_CACHE_DIR/bin, else ~/.cache/isvc-testbed/bin), else `helm` on PATH. Without one the tests skip on a
developer's machine and fail under CI=true, so a moved cache cannot turn them into silent passes.
CEL rules (`x-kubernetes-validations`) are the API server's job and are not evaluated here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

MODULE = Path(__file__).resolve().parents[1]
CRD = MODULE / "crds" / "inferenceserviceclasses.yaml"


def _bin_dir() -> Path:
    """Where e2e/tools/build-bins.sh (run by the `chart` session) puts helm."""
    explicit = os.environ.get("ISVC_BIN_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("ISVC_CACHE_DIR") or Path.home() / ".cache" / "isvc-testbed") / "bin"


def _helm() -> str | None:
    candidates = [os.environ.get("ISVC_HELM"), str(_bin_dir() / "helm"), shutil.which("helm")]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _helm_or_skip() -> str:
    """The helm binary; without one, a skip on a developer's machine and a failure under CI=true."""
    helm = _helm()
    if helm is not None:
        return helm
    why = f"no helm binary: set ISVC_HELM, or run `nox -s chart`, which builds it into {_bin_dir()}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


def _render(*sets: str) -> list[dict[str, Any]]:
    helm = _helm_or_skip()
    args = [helm, "template", "isvc", str(MODULE)]
    for s in sets:
        args += ["--set-json", s]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _class_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _classes(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "InferenceServiceClass"}


def test_default_llm_conforms_to_the_class_crd() -> None:
    default_llm = _classes(_render())["default-llm"]

    jsonschema.validate(default_llm, _class_schema())


def test_additional_class_from_settings_conforms_to_the_class_crd() -> None:
    embeddings = {"name": "embeddings", "spec": {
        "modelPolicy": {"allowedEndpointTypes": ["Embeddings"]},
        "exposure": {"type": "ClusterLocal", "authentication": "None"},
    }}
    rendered = _classes(_render(f"isvc.additionalClasses=[{json.dumps(embeddings)}]"))

    jsonschema.validate(rendered["embeddings"], _class_schema())


def test_a_class_with_a_wrong_exposure_does_not_conform() -> None:
    """Guards the check above against a schema that accepts anything."""
    broken = {"name": "broken", "spec": {
        "modelPolicy": {"allowedEndpointTypes": ["Chat"]}, "exposure": {"type": "Public"},
    }}
    rendered = _classes(_render(f"isvc.additionalClasses=[{json.dumps(broken)}]"))

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rendered["broken"], _class_schema())


def test_helm_is_found_where_the_chart_session_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: a cache moved by ISVC_CACHE_DIR or ISVC_BIN_DIR used to make three tests skip."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "helm").write_text("")
    monkeypatch.delenv("ISVC_HELM", raising=False)
    monkeypatch.delenv("ISVC_BIN_DIR", raising=False)
    monkeypatch.setenv("ISVC_CACHE_DIR", str(tmp_path))
    assert _helm() == str(tmp_path / "bin" / "helm")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "helm").write_text("")
    monkeypatch.setenv("ISVC_BIN_DIR", str(tmp_path / "other"))
    assert _helm() == str(tmp_path / "other" / "helm")


def test_a_missing_helm_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ISVC_HELM", raising=False)
    monkeypatch.setenv("ISVC_BIN_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no helm binary"):
        _helm_or_skip()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no helm binary"):
        _helm_or_skip()
