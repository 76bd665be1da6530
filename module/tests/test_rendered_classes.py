"""The classes the chart renders are valid InferenceServiceClass objects under the generated CRD.

Needs a `helm` binary: $ISVC_HELM, else `helm` on PATH, else the test bed's cache; skipped without one.
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


def _helm() -> str | None:
    candidates = [
        os.environ.get("ISVC_HELM"),
        shutil.which("helm"),
        str(Path.home() / ".cache" / "isvc-testbed" / "bin" / "helm"),
    ]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _render(*sets: str) -> list[dict[str, Any]]:
    helm = _helm()
    if helm is None:
        pytest.skip("no helm binary")
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
