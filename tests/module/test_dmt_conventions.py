"""The Deckhouse module linter's (dmt) template rules the module relies on, checked on the rendered chart.

dmt itself cannot be built from the Go module proxy here (one of its dependencies is not served), so the rules
are read from deckhouse/dmt at 3599840 (`pkg/linters/templates/rules/vpa.go`, `webhook_configuration.go`,
`pkg/linters/module/rules/oss_library.go`) and kept as tests: CI fails where dmt would.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity

from .conftest import DECKHOUSE, MODULE, PLAIN, Render

VPA = "autoscaling.k8s.io/v1/VerticalPodAutoscaler"
WEIGHT, DEPENDENCY = "werf.io/weight", "werf.io/deploy-dependency-"


def _containers(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]["template"]["spec"]
    return [c["name"] for c in spec.get("containers") or []]


@pytest.mark.parametrize("values", [DECKHOUSE, PLAIN], ids=["deckhouse", "plain"])
def test_every_container_of_every_deployment_has_a_vpa_policy_with_bounds(
    render: Render, values: Path
) -> None:
    """dmt vpa: each container of a pod controller has a resourcePolicy entry with minAllowed ≤ maxAllowed for
    cpu and memory (and none for a container it does not run), and the VPA's updateMode is not Auto."""
    objects = render(values=values, api_versions=(VPA,))
    vpas = {o["spec"]["targetRef"]["name"]: o for o in objects if o["kind"] == "VerticalPodAutoscaler"}
    deployments = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]
    assert deployments
    for deployment in deployments:
        name = deployment["metadata"]["name"]
        vpa = vpas[name]
        assert vpa["spec"]["updatePolicy"]["updateMode"] in (
            "Off",
            "Initial",
            "Recreate",
            "InPlaceOrRecreate",
        )
        policies = {p["containerName"]: p for p in vpa["spec"]["resourcePolicy"]["containerPolicies"]}
        assert set(policies) == set(_containers(deployment)), name
        for container, policy in policies.items():
            for resource in ("cpu", "memory"):
                low = parse_quantity(str(policy["minAllowed"][resource]))
                high = parse_quantity(str(policy["maxAllowed"][resource]))
                assert 0 < low <= high, (name, container, resource)


def test_every_admission_webhook_configuration_says_when_it_is_deployed(render: Render) -> None:
    """dmt webhook-configuration-annotations: a webhook configuration carries werf.io/weight or a
    werf.io/deploy-dependency-* annotation, so it is not registered before what serves it."""
    kinds = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    hooks = [o for o in render(values=DECKHOUSE) if o["kind"] in kinds]
    assert hooks
    for hook in hooks:
        annotations = hook["metadata"].get("annotations") or {}
        assert WEIGHT in annotations or any(k.startswith(DEPENDENCY) for k in annotations), hook["metadata"]


def test_oss_yaml_describes_every_project_the_images_ship() -> None:
    """dmt oss: a module with images/ has oss.yaml, each project with id (unique), name, description, link,
    license and version."""
    projects = yaml.safe_load((MODULE / "oss.yaml").read_text())
    assert isinstance(projects, list) and projects
    ids = [p["id"] for p in projects]
    assert len(ids) == len(set(ids))
    for project in projects:
        for field in ("id", "name", "description", "link", "license", "version"):
            assert str(project.get(field) or "").strip(), (project.get("id"), field)
        assert str(project["link"]).startswith("https://")


# oss.yaml ids of the Python packages the images install, and their names on PyPI (dmt reads oss.yaml strictly:
# it has no field of its own for this).
PYPI = {
    "kubernetes-client/python": "kubernetes",
    "pydantic/pydantic": "pydantic",
    "fastapi/fastapi": "fastapi",
    "Kludex/uvicorn": "uvicorn",
    "Kludex/starlette": "starlette",
    "encode/httpx": "httpx",
    "python-attrs/attrs": "attrs",
    "tkem/cachetools": "cachetools",
    "prometheus/client_python": "prometheus-client",
    "yaml/pyyaml": "pyyaml",
    "numpy/numpy": "numpy",
    "urllib3/urllib3": "urllib3",
    "ggml-org/llama.cpp": "gguf",
    "cel-expr/cel-python": "cel-expr-python",
    "huggingface/huggingface_hub": "huggingface-hub",
    "ERGO-Code/HiGHS": "highspy",
}


def test_oss_yaml_names_the_versions_the_images_are_built_with() -> None:
    """Each Python project oss.yaml lists is pinned at that version in module/images/constraints.txt (what the
    image builds install), and every direct dependency of the packages the images carry is in oss.yaml."""
    pins = {}
    for line in (MODULE / "images" / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip()] = version.strip()
    listed = {p["id"]: str(p["version"]) for p in yaml.safe_load((MODULE / "oss.yaml").read_text())}
    for project, version in listed.items():
        if project in PYPI:
            assert pins.get(PYPI[project]) == version, project
    direct = {"huggingface-hub"}  # the model fetcher's CLI
    for pyproject in (MODULE.parent / "packages").glob("*/pyproject.toml"):
        if pyproject.parent.name in ("isvc-testing", "kubectl-isvc"):
            continue  # in no image
        for requirement in tomllib.loads(pyproject.read_text())["project"].get("dependencies", []):
            name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            if not name.startswith("isvc-"):
                direct.add(name)
    assert direct <= {PYPI[p] for p in listed if p in PYPI}, direct - set(PYPI.values())
