"""isvc runtime recipes: which runtime serves which models on which hardware, compiled against a plan."""

from isvc_runtime_recipes._book import RecipeBook, content_hash, load_recipes
from isvc_runtime_recipes._derive import MODELS_ROOT, effective_endpoint_type, model_dir
from isvc_runtime_recipes._errors import InvalidRecipe, RecipeError, UnknownFlag
from isvc_runtime_recipes._load import check_flags, flag_of
from isvc_runtime_recipes._model import AcceleratorFacts, Recipe, RuntimeFlags

__all__ = [
    "MODELS_ROOT",
    "AcceleratorFacts",
    "InvalidRecipe",
    "Recipe",
    "RecipeBook",
    "RecipeError",
    "RuntimeFlags",
    "UnknownFlag",
    "check_flags",
    "content_hash",
    "effective_endpoint_type",
    "flag_of",
    "load_recipes",
    "model_dir",
]
