"""RecipesPort over isvc-runtime-recipes: the recipe book the controller compiles launches from."""

from __future__ import annotations

import isvc_runtime_recipes
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    Estimates,
    Load,
    ModelFacts,
    Placement,
    Refusal,
    RuntimeRequirements,
)

__all__ = ["Recipes"]


class Recipes:
    """RecipesPort over isvc-runtime-recipes."""

    def __init__(self, book: isvc_runtime_recipes.RecipeBook, version: str) -> None:
        self.book = book
        self._version = version

    @property
    def version(self) -> str:
        return self._version

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal:
        return self.book.requirements(facts, endpoint_type)

    def compile(
        self,
        facts: ModelFacts,
        endpoint_type: EndpointType | None,
        placement: Placement,
        estimates: Estimates,
        served_name: str,
        serving: Load | None = None,
    ) -> CompiledRuntime | Refusal:
        return self.book.compile(facts, endpoint_type, placement, estimates, served_name, serving=serving)
