"""Generate docs/CR.md and docs/CR.ru.md, the custom resources reference, from crds/*.yaml.

The Russian page takes its descriptions from the CRDs' doc-ru twins (crds/doc-ru-*.yaml)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {
    "en": (
        "# Custom resources\n\nGenerated from `crds/` by `nox -s crds`; every field with its type and "
        "description. Validation rules the API server enforces at write time are listed under the object "
        "that carries them."
    ),
    "ru": (
        "# Пользовательские ресурсы\n\nСправочник создан из `crds/` командой `nox -s crds`: каждое поле с "
        "типом и описанием (описания — из `crds/doc-ru-*.yaml`). Правила проверки, которые сервер API "
        "применяет при записи, перечислены у объекта, к которому относятся (их сообщения — на английском, "
        "как их возвращает сервер API)."
    ),
}
WORDS = {
    "en": {
        "scope": "Scope",
        "short": "Short names",
        "field": "Field",
        "type": "Type",
        "desc": "Description",
        "rules": "Write-time rules",
        "required": "required",
    },
    "ru": {
        "scope": "Область",
        "short": "Короткие имена",
        "field": "Поле",
        "type": "Тип",
        "desc": "Описание",
        "rules": "Правила при записи",
        "required": "обязательное",
    },
}


def _type(node: dict[str, Any]) -> str:
    kind = str(node.get("type", "object"))
    if "enum" in node:
        values = " \\| ".join(str(v) for v in node["enum"])
        return f"{kind} ({values})"
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    return kind


def _walk(
    node: dict[str, Any], path: str, required: bool, lang: str, rows: list[str], rules: list[str]
) -> None:
    words = WORDS[lang]
    desc = str(node.get("description", "")).replace("\n", " ").replace("|", "\\|")
    mark = f" *({words['required']})*" if required else ""
    if path:
        rows.append(f"| `{path}`{mark} | {_type(node)} | {desc} |")
    for rule in node.get("x-kubernetes-validations", []):
        rules.append(f"- `{path or '.'}`: {rule['message']} — `{rule['rule']}`")
    req = set(node.get("required", []))
    for name, child in (node.get("properties") or {}).items():
        _walk(child, f"{path}.{name}" if path else name, name in req, lang, rows, rules)
    items = node.get("items")
    if isinstance(items, dict) and items.get("properties"):
        for name, child in items["properties"].items():
            _walk(child, f"{path}[].{name}", name in set(items.get("required", [])), lang, rows, rules)


def _translate(node: dict[str, Any], twin: dict[str, Any]) -> None:
    """Put the twin's descriptions into the schema, in place."""
    if "description" in twin:
        node["description"] = twin["description"]
    for name, child in (twin.get("properties") or {}).items():
        if name in (node.get("properties") or {}):
            _translate(node["properties"][name], child)
    if "items" in twin and isinstance(node.get("items"), dict):
        _translate(node["items"], twin["items"])


def render(lang: str) -> str:
    out = [HEADERS[lang]]
    words = WORDS[lang]
    crds = ROOT / "module" / "crds"
    for path in sorted(p for p in crds.glob("*.yaml") if not p.name.startswith("doc-ru-")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        version = spec["versions"][0]
        if lang == "ru":
            twin = yaml.safe_load((crds / f"doc-ru-{path.name}").read_text())
            _translate(
                version["schema"]["openAPIV3Schema"], twin["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            )
        out.append(f"\n## {spec['names']['kind']} ({spec['group']}/{version['name']})\n")
        out.append(
            f"{words['scope']}: {spec['scope']}. {words['short']}: "
            f"{', '.join(spec['names'].get('shortNames', []))}.\n"
        )
        schema = version["schema"]["openAPIV3Schema"]
        out.append(f"{schema.get('description', '')}\n")
        rows: list[str] = []
        rules = [
            f"- `metadata.name`: {rule['message']} — `{rule['rule']}`"
            for rule in schema.get("x-kubernetes-validations", [])
        ]
        for part in ("spec", "status"):
            if part in schema["properties"]:
                _walk(schema["properties"][part], part, part == "spec", lang, rows, rules)
        out.append(f"| {words['field']} | {words['type']} | {words['desc']} |\n|---|---|---|")
        out.extend(rows)
        if rules:
            out.append(f"\n{words['rules']}:\n")
            out.extend(rules)
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the committed pages drifted")
    args = parser.parse_args()
    stale = []
    for lang, name in (("en", "CR.md"), ("ru", "CR.ru.md")):
        target = ROOT / "module" / "docs" / name
        text = render(lang)
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target))
        else:
            target.write_text(text)
    if stale:
        print("stale, run `nox -s crds`:", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
