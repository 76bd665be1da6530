"""Errors of the recipe book.

    RecipeError                   base of every error this package raises
    └── InvalidRecipe             permanent: a recipe or flag file does not hold; fix the data
        └── UnknownFlag           permanent: a recipe uses a flag its runtime does not accept

Nothing here is temporary: recipes are data read once, so a retry with delay would read the same
data again. A refusal to serve a model is not an error: `compile` returns an `isvc_api.Refusal`.
"""

from __future__ import annotations

__all__ = ["InvalidRecipe", "RecipeError", "UnknownFlag"]


class RecipeError(Exception):
    """Base of the errors of isvc_runtime_recipes."""


class InvalidRecipe(RecipeError):
    """A recipe, a recipe override or a flag file does not hold. Permanent."""


class UnknownFlag(InvalidRecipe):
    """A recipe uses a flag missing from its runtime's accepted list. Permanent."""
