"""Reading recipes and accepted-flag lists: shipped package data, then the administrator's overrides."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import yaml
from pydantic import ValidationError

from isvc_runtime_recipes._errors import InvalidRecipe, UnknownFlag
from isvc_runtime_recipes._model import Recipe, RuntimeFlags

__all__ = ["check_flags", "flag_of", "load_flags", "load_shipped", "validate_recipe"]

_FLAG = re.compile(r"^--?[A-Za-z]")


def flag_of(token: str) -> str | None:
    """The flag a command-line token names ('--port=80' names '--port'), or None for a value."""
    if not _FLAG.match(token):
        return None
    return token.split("=", 1)[0]


def check_flags(tokens: list[str], accepted: RuntimeFlags) -> list[str]:
    """Flags among tokens that the runtime does not accept, in order of appearance."""
    allowed = set(accepted.flags)
    return [flag for token in tokens if (flag := flag_of(token)) is not None and flag not in allowed]


def _yaml_documents(package: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for entry in sorted(resources.files(package).iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            try:
                found.append((entry.name, yaml.safe_load(entry.read_text(encoding="utf-8"))))
            except yaml.YAMLError as exc:
                raise InvalidRecipe(f"{package}/{entry.name} is not YAML: {exc}") from exc
    return found


def load_flags() -> dict[str, RuntimeFlags]:
    """The accepted-flag list of every runtime, by runtime name."""
    lists: dict[str, RuntimeFlags] = {}
    for file_name, data in _yaml_documents("isvc_runtime_recipes.flags"):
        try:
            flags = RuntimeFlags.model_validate(data)
        except ValidationError as exc:
            raise InvalidRecipe(f"flag list {file_name} does not hold: {exc}") from exc
        lists[flags.runtime] = flags
    return lists


def validate_recipe(data: Any, origin: str, flags: dict[str, RuntimeFlags]) -> Recipe:
    """A recipe from raw data, its schema and its flags checked; InvalidRecipe says what is wrong."""
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise InvalidRecipe(f"recipe from {origin} does not hold: {exc}") from exc
    accepted = flags.get(recipe.runtime)
    if accepted is None:
        raise InvalidRecipe(
            f"recipe {recipe.name} names runtime {recipe.runtime!r}, which has no accepted-flag list "
            f"(known: {', '.join(sorted(flags))})"
        )
    groups = list(recipe.args)
    for section in (recipe.tool_calling, recipe.reasoning):
        if section is not None:
            groups += section.args + [group for rule in section.parsers for group in rule.args]
    for group in groups:
        positional = accepted.positional_model and group == ["{modelPath}"]
        if not positional and flag_of(group[0]) is None:
            raise InvalidRecipe(f"recipe {recipe.name}: argument group {group} does not start with a flag")
        unknown = check_flags(group, accepted)
        if unknown:
            raise UnknownFlag(
                f"recipe {recipe.name}: {', '.join(unknown)} is not among the flags {recipe.runtime} "
                f"{accepted.version} accepts"
            )
    return recipe


def load_shipped(flags: dict[str, RuntimeFlags]) -> list[Recipe]:
    """The recipes shipped in the package, validated."""
    return [
        validate_recipe(data, f"package file {file_name}", flags)
        for file_name, data in _yaml_documents("isvc_runtime_recipes.recipes")
    ]
