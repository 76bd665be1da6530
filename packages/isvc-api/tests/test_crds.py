"""The generated CRDs are structural, described field by field, and match the committed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from isvc_api import (
    LaunchPlan,
    LaunchPlanConditionType,
    LaunchPlanStatus,
    MissingTranslations,
    Reason,
    all_crds,
    crd_documents,
    doc_ru,
)

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


# ---- issue 11, item 7: kubectl polish, Deckhouse labels and twins, the LaunchPlan's status


@pytest.mark.parametrize("name", sorted(CRDS))
def test_every_printer_column_says_what_it_shows(name: str) -> None:
    columns = CRDS[name]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("description")] == []


def test_only_the_class_crd_is_backed_up_as_cluster_configuration() -> None:
    labelled = {
        name
        for name, crd in CRDS.items()
        if crd["metadata"]["labels"].get("backup.deckhouse.io/cluster-config") == "true"
    }
    assert labelled == {"inferenceserviceclasses.yaml"}


def test_a_launch_plan_has_a_status_subresource_with_in_force_conditions() -> None:
    version = CRDS["launchplans.yaml"]["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    conditions = status["properties"]["conditions"]
    assert version["subresources"] == {"status": {}}
    keys = (conditions["x-kubernetes-list-type"], conditions["x-kubernetes-list-map-keys"])
    assert keys == ("map", ["type"])
    assert set(conditions["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert "observedGeneration" in status["properties"]
    in_force = next(c for c in version["additionalPrinterColumns"] if c["name"] == "InForce")
    assert in_force["jsonPath"] == '.status.conditions[?(@.type=="InForce")].status'


def test_the_launch_plan_status_round_trips_on_the_wire() -> None:
    wire = {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "LaunchPlan",
        "metadata": {"name": "a", "namespace": "n", "generation": 3},
        "spec": {"placement": {"deviceClassName": "gpu.nvidia.com", "placementMode": "WholeDevice"}},
        "status": {
            "observedGeneration": 3,
            "conditions": [
                {
                    "type": LaunchPlanConditionType.IN_FORCE.value,
                    "status": "True",
                    "reason": "Planned",
                    "message": "WholeDevice of 1× H100 on gpu-0, runtime vllm.",
                    "observedGeneration": 3,
                    "lastTransitionTime": "2026-11-30T08:00:00Z",
                }
            ],
        },
    }
    plan = LaunchPlan.model_validate(wire)
    assert isinstance(plan.status, LaunchPlanStatus)
    assert plan.to_wire()["status"] == wire["status"]


def test_every_crd_has_a_russian_twin_with_the_same_described_fields() -> None:
    def described(node: dict[str, Any], path: str = "") -> set[str]:
        found = {path} if "description" in node else set()
        for name, child in (node.get("properties") or {}).items():
            found |= described(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            found |= described(node["items"], f"{path}[]")
        return found

    twins = doc_ru(CRDS)
    for name, crd in CRDS.items():
        english = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        russian = twins[f"doc-ru-{name}"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert described(english) == described(russian), name


def test_a_description_without_a_russian_twin_fails_generation_and_so_does_a_stale_twin() -> None:
    with pytest.raises(MissingTranslations) as caught:
        doc_ru(CRDS, {"A sentence no model says.": "Фраза, которой нет в моделях."})
    assert "Kind of the object." in caught.value.missing
    assert caught.value.unused == ["A sentence no model says."]
