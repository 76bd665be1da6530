"""Installed alone, the plugin pulls none of the planner service's dependencies (issue 43): `capacity` counts
with the planner's books (`isvc-ledger`), a library without FastAPI, uvicorn, HiGHS or numpy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[2]
# The plugin and the packages of this tree it depends on (an index holds none of them).
LOCAL = ["isvc-api", "isvc-planner-client", "isvc-ledger", "kubectl-isvc"]
SERVICE_ONLY = {"fastapi", "uvicorn", "highspy", "numpy", "isvc-planner"}


def _installer(venv: Path) -> list[str]:
    """uv's pip when uv is at hand (it reuses its cache), else the fresh environment's own pip."""
    uv = shutil.which("uv")
    if uv is not None:
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        return [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python")]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]


def test_the_plugin_installs_without_the_planner_services_dependencies(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    install = _installer(venv)
    subprocess.run([*install, *(str(PACKAGES / p) for p in LOCAL)], check=True, timeout=600)
    python = str(venv / "bin" / "python")
    listed = subprocess.run(
        [
            python,
            "-c",
            "import importlib.metadata as m, json; print(json.dumps([d.name for d in m.distributions()]))",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    installed = {name.lower().replace("_", "-") for name in json.loads(listed.stdout)}
    assert "kubectl-isvc" in installed and "isvc-ledger" in installed
    assert installed & SERVICE_ONLY == set()
    # and the command that counts with the planner's books runs there
    counted = subprocess.run(
        [python, "-c", "from kubectl_isvc._capacity import compute; print(len(compute({}).devices))"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert counted.stdout.strip() == "0"
