"""Generate the CustomResourceDefinitions from the pydantic models: one schema, never two copies.

Beside each CRD goes its Deckhouse twin `doc-ru-<file>`: the same schema tree holding only Russian
descriptions, taken from `crd_descriptions.ru.yaml` (English description → Russian). A description without
a translation, or a translation no description uses, fails generation and the drift check.
"""

from __future__ import annotations

import argparse
import copy
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from isvc_api._class import (
    InferenceServiceClassSpec,
    InferenceServiceClassStatus,
)
from isvc_api._plan import (
    LaunchPlanSpec,
    LaunchPlanStatus,
)
from isvc_api._types import (
    InferenceServiceSpec,
    InferenceServiceStatus,
)
from isvc_api._vocabulary import (
    GROUP,
    VERSION,
)

__all__ = ["MissingTranslations", "all_crds", "crd_documents", "doc_ru", "main", "structural_schema"]
RU_TABLE = "crd_descriptions.ru.yaml"

_DROP = {"title", "additionalProperties_false"}


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    """Inline $refs, fold Optional unions, drop what a structural schema may not carry."""
    if isinstance(node, list):
        return [_resolve(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        target = copy.deepcopy(defs[node.pop("$ref").split("/")[-1]])
        target.pop("description", None) if "description" in node else None
        target.update(node)
        node = target
    if "anyOf" in node:
        variants = [v for v in node.pop("anyOf") if v.get("type") != "null"]
        if len(variants) != 1:
            raise ValueError(f"cannot express union {variants} structurally")
        inner = _resolve(variants[0], defs)
        inner.update({k: v for k, v in node.items() if k != "default"})
        node = inner
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or (key == "default" and value is None):
            continue
        if key == "additionalProperties" and value is False:
            continue
        if key == "additionalProperties" and value is True:
            # extra="allow": unknown fields are kept, which a structural schema says this way.
            out["x-kubernetes-preserve-unknown-fields"] = True
            continue
        if key == "properties":
            out[key] = {k: _resolve(v, defs) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _resolve(value, defs)
        elif key == "format" and value == "date-time":
            out[key] = value
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's validation schema, by alias, as a structural OpenAPI v3 schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return dict(_resolve(raw, defs))


def _status_lenient(schema: dict[str, Any]) -> dict[str, Any]:
    """Status is written only by the controller; required lists there would only get in its way."""
    return schema


def _crd(
    kind: str,
    plural: str,
    scope: str,
    short_names: list[str],
    spec: type[BaseModel],
    status: type[BaseModel] | None,
    columns: list[dict[str, Any]],
    description: str,
    rules: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": "API version of the object."},
        "kind": {"type": "string", "description": "Kind of the object."},
        "metadata": {"type": "object"},  # the API server forbids anything else here
        "spec": structural_schema(spec),
    }
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "additionalPrinterColumns": columns,
    }
    if status is not None:
        properties["status"] = _status_lenient(structural_schema(status))
        version["subresources"] = {"status": {}}
    root: dict[str, Any] = {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": properties,
    }
    if rules:
        root["x-kubernetes-validations"] = rules
    version["schema"] = {"openAPIV3Schema": root}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"heritage": "deckhouse", "module": "isvc", **(labels or {})},
        },
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["isvc-ai"],
            },
            "versions": [version],
        },
    }


def _column(name: str, kind: str, path: str, description: str) -> dict[str, str]:
    """One additionalPrinterColumn of `kubectl get`."""
    return {"name": name, "type": kind, "jsonPath": path, "description": description}


def _condition(kind: str) -> str:
    """The JSONPath of one condition in status.conditions."""
    return f'.status.conditions[?(@.type=="{kind}")]'


_AGE = _column("Age", "date", ".metadata.creationTimestamp", "When the object was created.")
# Deckhouse backs up the cluster's configuration objects labelled so (its own CRDs of cluster-wide policy).
BACKUP_LABEL = {"backup.deckhouse.io/cluster-config": "true"}
# Every object of an order is named after it, and its name is a label value and part of a host name:
# `{order}-auth`, `{order}-{hash}` claim templates and pods stay within their limits, and the published
# host `{order}--{namespace}` splits at its first `--` only.
ORDER_NAME_MAX = 52
ORDER_NAME_RULES = [
    {
        "rule": f"size(self.metadata.name) <= {ORDER_NAME_MAX}",
        "message": f"an order's name is at most {ORDER_NAME_MAX} characters: the objects made for it "
        "carry it in their names and labels",
    },
    {
        "rule": "!self.metadata.name.contains('--')",
        "message": "an order's name may not contain '--': it separates the order from its namespace in "
        "the published host name",
    },
]


_ORDER_COLUMNS = [
    _column("Phase", "string", ".status.phase", "Pending, Ready, Degraded or Failed."),
    _column(
        "Type",
        "string",
        ".status.model.endpointType",
        "The API contract the endpoint serves: Chat, Embeddings or Rerank.",
    ),
    _column("URL", "string", ".status.endpoint.url", "Where to call the model."),
    _column(
        "Reason",
        "string",
        ".status.reason",
        "Why the order is not Ready: the reason of its first condition that does "
        "not hold (kubectl isvc why explains it).",
    ),
    _AGE,
]
_CLASS_COLUMNS = [
    _column(
        "Ready",
        "string",
        _condition("Ready") + ".status",
        "Whether orders may use the class: True, False or Unknown.",
    ),
    _column("Reason", "string", _condition("Ready") + ".reason", "Why the class holds or does not."),
    _AGE,
]
_PLAN_COLUMNS = [
    _column(
        "Class",
        "string",
        ".spec.placement.deviceClassName",
        "The DRA DeviceClass of the devices the order runs on.",
    ),
    _column(
        "Mode",
        "string",
        ".spec.placement.placementMode",
        "How the order holds its devices: a whole device, a share, a partition.",
    ),
    _column(
        "Share",
        "integer",
        ".spec.placement.sharePercent",
        "Percent of the device held, when it is shared.",
    ),
    _column("Runtime", "string", ".spec.runtime.recipe", "The runtime recipe compiled for the placement."),
    _column(
        "InForce",
        "string",
        _condition("InForce") + ".status",
        "Whether the order runs on this plan: True, False or Unknown.",
    ),
    _AGE,
]


def all_crds() -> dict[str, dict[str, Any]]:
    """File name → CRD, for every kind the module owns."""
    return {
        "inferenceservices.yaml": _crd(
            "InferenceService",
            "inferenceservices",
            "Namespaced",
            ["infsvc"],
            InferenceServiceSpec,
            InferenceServiceStatus,
            _ORDER_COLUMNS,
            "An order for LLM inference: a model and, optionally, a class.",
            ORDER_NAME_RULES,
        ),
        "inferenceserviceclasses.yaml": _crd(
            "InferenceServiceClass",
            "inferenceserviceclasses",
            "Cluster",
            ["infsvcclass"],
            InferenceServiceClassSpec,
            InferenceServiceClassStatus,
            _CLASS_COLUMNS,
            "Policy for orders, published by a cluster administrator.",
            labels=BACKUP_LABEL,
        ),
        "launchplans.yaml": _crd(
            "LaunchPlan",
            "launchplans",
            "Namespaced",
            ["lplan"],
            LaunchPlanSpec,
            LaunchPlanStatus,
            _PLAN_COLUMNS,
            "The launch configuration of one order: placement and compiled runtime.",
        ),
    }


class MissingTranslations(ValueError):
    """Descriptions without a Russian twin in crd_descriptions.ru.yaml, or twins nothing uses."""

    def __init__(self, missing: list[str], unused: list[str]) -> None:
        self.missing, self.unused = missing, unused
        lines = [f"add to {RU_TABLE}: {m!r}" for m in missing]
        lines += [f"remove from {RU_TABLE} (no description uses it): {u!r}" for u in unused]
        super().__init__("\n".join(lines))


def _ru_table() -> dict[str, str]:
    text = resources.files("isvc_api").joinpath(RU_TABLE).read_text(encoding="utf-8")
    return {str(k): str(v) for k, v in (yaml.safe_load(text) or {}).items()}


def _descriptions(node: Any, table: dict[str, str], used: set[str], missing: list[str]) -> dict[str, Any]:
    """The schema tree reduced to its descriptions (translated) and the branches that hold some."""
    out: dict[str, Any] = {}
    if not isinstance(node, dict):
        return out
    if "description" in node:
        english = node["description"]
        if english in table:
            used.add(english)
            out["description"] = table[english]
        elif english not in missing:
            missing.append(english)
    children = {
        name: _descriptions(child, table, used, missing)
        for name, child in (node.get("properties") or {}).items()
    }
    children = {name: tree for name, tree in children.items() if tree}
    if children:
        out["properties"] = children
    items = _descriptions(node.get("items"), table, used, missing)
    if items:
        out["items"] = items
    return out


def doc_ru(crds: dict[str, dict[str, Any]], table: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """`doc-ru-<file>` → the Russian twin of each CRD (Deckhouse's shape); raises MissingTranslations."""
    table = _ru_table() if table is None else table
    used: set[str] = set()
    missing: list[str] = []
    twins: dict[str, dict[str, Any]] = {}
    for name, crd in crds.items():
        versions = [
            {
                "name": v["name"],
                "schema": {
                    "openAPIV3Schema": _descriptions(v["schema"]["openAPIV3Schema"], table, used, missing)
                },
            }
            for v in crd["spec"]["versions"]
        ]
        twins[f"doc-ru-{name}"] = {"spec": {"versions": versions}}
    unused = sorted(set(table) - used)
    if missing or unused:
        raise MissingTranslations(missing, unused)
    return twins


def crd_documents() -> dict[str, str]:
    """File name → YAML text, as committed under crds/: each CRD and its doc-ru twin."""
    header = "# Generated from isvc-api by `isvc-crdgen`; do not edit by hand.\n"
    crds = all_crds()
    documents = {**crds, **doc_ru(crds)}
    return {
        name: header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
        for name, doc in sorted(documents.items())
    }


def main(argv: list[str] | None = None) -> int:
    """Write the CRDs to a directory, or with --check fail when the directory has drifted."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    drift = []
    try:
        documents = crd_documents()
    except MissingTranslations as exc:
        print(
            f"CRD descriptions without their Russian twin (packages/isvc-api/src/isvc_api/{RU_TABLE}):",
            exc,
            sep="\n",
            file=sys.stderr,
        )
        return 1
    for name, text in documents.items():
        path = args.directory / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                drift.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if drift:
        print("CRDs drifted from isvc-api; run isvc-crdgen:", *drift, sep="\n  ", file=sys.stderr)
        return 1
    return 0
