"""Rendering the module chart with the pinned helm, for the checks that read the rendered objects.

Needs a `helm` binary: $ISVC_HELM, else where the `chart` session builds it ($ISVC_BIN_DIR, else
$ISVC_CACHE_DIR/bin, else ~/.cache/isvc-testbed/bin), else `helm` on PATH. Without one the tests skip on a
developer's machine and fail under CI=true, so a moved cache cannot turn them into silent passes. The alert
rules' check needs `isvc-rulecheck` (tools/rulecheck) the same way: $ISVC_RULECHECK, else beside helm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

MODULE = Path(__file__).resolve().parents[2] / "module"
# A plain Helm install names its images; Deckhouse renders with these values instead.
PLAIN = MODULE / "tests" / "values" / "plain.yaml"
DECKHOUSE = MODULE / "tests" / "values" / "deckhouse.yaml"

Render = Callable[..., list[dict[str, Any]]]


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


def _rulecheck() -> str | None:
    candidates = [os.environ.get("ISVC_RULECHECK"), str(_bin_dir() / "isvc-rulecheck")]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _rulecheck_or_skip() -> str:
    rulecheck = _rulecheck()
    if rulecheck is not None:
        return rulecheck
    why = (
        f"no isvc-rulecheck binary: set ISVC_RULECHECK, or run `nox -s chart`, which builds it into "
        f"{_bin_dir()}"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def rulecheck() -> str:
    """The alert-rule checker built from tools/rulecheck; skips, or fails under CI=true, without one."""
    return _rulecheck_or_skip()


@pytest.fixture
def render() -> Render:
    """render(*set_json, values=PLAIN, api_versions=()) → the rendered objects."""

    def _render(*sets: str, values: Path = PLAIN, api_versions: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        args = [_helm_or_skip(), "template", "isvc", str(MODULE), "--values", str(values)]
        for s in sets:
            args += ["--set-json", s]
        for api in api_versions:
            args += ["--api-versions", api]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    return _render


@pytest.fixture
def find_helm() -> Callable[[], str | None]:
    """The helm lookup itself, for the tests of where it looks."""
    return _helm


@pytest.fixture
def helm_or_skip() -> Callable[[], str]:
    """The helm lookup that skips, or fails under CI=true."""
    return _helm_or_skip
