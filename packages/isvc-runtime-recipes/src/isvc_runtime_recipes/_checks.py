"""What a recipe must match to serve a model on a placement, checked in the order they are told, and the
refusal that names how far every candidate got."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from isvc_api import (
    KV_GEOMETRY_UNKNOWN,
    EndpointType,
    ModelFacts,
    ModelFormat,
    Placement,
    Quantization,
    Reason,
    Refusal,
)

from isvc_runtime_recipes._model import AcceleratorFacts, Recipe, parse_compute_capability

__all__ = [
    "QUANTIZATION_CHECK",
    "Failure",
    "Hardware",
    "geometry_unknown",
    "hardware_failure",
    "model_failure",
    "no_recipe",
]

QUANTIZATION_CHECK = "quantization"


@dataclass(frozen=True)
class Hardware:
    placement: Placement
    accelerator: AcceleratorFacts

    @property
    def compute_capability(self) -> str | None:
        return self.accelerator.compute_capability


def _listed(values: list[Any]) -> str:
    return ", ".join(str(v) for v in values)


# ---------------------------------------------------------------- checks, in the order they are told


def _check_endpoint(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    if endpoint in recipe.serves.endpoint_types:
        return None
    return f"it serves {_listed(recipe.serves.endpoint_types)}, not {endpoint}"


def model_format(facts: ModelFacts) -> ModelFormat:
    # A source that did not say is taken as Hugging Face's default.
    return facts.format or ModelFormat.SAFETENSORS


def _check_format(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    if model_format(facts) in recipe.serves.formats:
        return None
    return f"it loads {_listed(recipe.serves.formats)}, not {model_format(facts)}"


def _check_architecture(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    patterns = recipe.serves.architectures
    if patterns is None or facts.architecture is None:
        return None
    if any(fnmatchcase(facts.architecture, p) for p in patterns):
        return None
    return f"{facts.architecture} matches none of {_listed(patterns)}"


def _check_family(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    families = recipe.serves.families
    if families is None or facts.family is None:
        return None
    if facts.family.lower() in {f.lower() for f in families}:
        return None
    return f"{facts.family} is not one of {_listed(families)}"


def _check_quantization(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    if facts.quantization in recipe.serves.quantizations:
        return None
    return f"it loads {_listed(recipe.serves.quantizations)}, not {facts.quantization}"


def _check_placement_mode(recipe: Recipe, hw: Hardware) -> str | None:
    mode = hw.placement.placement_mode
    if mode in recipe.placement.modes:
        return None
    return f"it runs {_listed(recipe.placement.modes)}, not {mode}"


def _check_sharing_mode(recipe: Recipe, hw: Hardware) -> str | None:
    mode = hw.placement.sharing_mode
    if mode in recipe.placement.sharing_modes:
        return None
    return f"it runs {_listed(recipe.placement.sharing_modes)}, not {mode}"


def _check_devices(recipe: Recipe, hw: Hardware) -> str | None:
    count = hw.placement.device_count
    if count <= recipe.placement.max_devices:
        return None
    return f"it uses at most {recipe.placement.max_devices}, the plan has {count}"


def _check_product(recipe: Recipe, hw: Hardware) -> str | None:
    patterns = recipe.accelerator.products
    product = hw.accelerator.product_name
    if patterns is None or product is None or any(fnmatchcase(product, p) for p in patterns):
        return None
    return f"{product} matches none of {_listed(patterns)}"


def _check_memory(recipe: Recipe, hw: Hardware) -> str | None:
    least = recipe.accelerator.min_memory_gi_b
    memory = hw.accelerator.memory_gi_b
    if least is None or memory is None or memory >= least:
        return None
    return f"it needs {least:g} GiB, the device has {memory:g} GiB"


def _check_compute_capability(recipe: Recipe, hw: Hardware) -> str | None:
    # Unknown capability passes: the planner was told the minimum through requirements().
    cc = hw.compute_capability
    if cc is None:
        return None
    lowest = recipe.accelerator.min_compute_capability
    if lowest is not None and parse_compute_capability(cc) < parse_compute_capability(lowest):
        return f"it needs {lowest} or higher, the card has {cc}"
    exact = recipe.accelerator.compute_capabilities
    if exact is not None and cc not in exact:
        return f"it is built for {_listed(exact)}, the card has {cc}"
    return None


ModelCheck = Callable[[Recipe, ModelFacts, EndpointType], "str | None"]
HardwareCheck = Callable[[Recipe, Hardware], "str | None"]

MODEL_CHECKS: list[tuple[str, ModelCheck]] = [
    ("endpoint type", _check_endpoint),
    ("format", _check_format),
    ("architecture", _check_architecture),
    ("family", _check_family),
    (QUANTIZATION_CHECK, _check_quantization),
]
HARDWARE_CHECKS: list[tuple[str, HardwareCheck]] = [
    ("placement mode", _check_placement_mode),
    ("sharing mode", _check_sharing_mode),
    ("device count", _check_devices),
    ("accelerator product", _check_product),
    ("accelerator memory", _check_memory),
    ("compute capability", _check_compute_capability),
]
_STAGES = [name for name, _ in MODEL_CHECKS] + [name for name, _ in HARDWARE_CHECKS] + ["memory"]


@dataclass(frozen=True)
class Failure:
    recipe: str
    check: str
    detail: str
    quantizations: tuple[Quantization, ...] = ()  # what the recipe loads, told on a mismatch

    def __str__(self) -> str:
        return f"{self.recipe} fails {self.check}: {self.detail}"


def model_failure(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> Failure | None:
    for name, check in MODEL_CHECKS:
        detail = check(recipe, facts, endpoint)
        if detail is not None:
            return Failure(recipe.name, name, detail, tuple(recipe.serves.quantizations))
    return None


def hardware_failure(recipe: Recipe, hw: Hardware) -> Failure | None:
    for name, check in HARDWARE_CHECKS:
        detail = check(recipe, hw)
        if detail is not None:
            return Failure(recipe.name, name, detail)
    return None


def describe_model(facts: ModelFacts, endpoint: EndpointType) -> str:
    parts = [str(model_format(facts)), f"quantization {facts.quantization}"]
    if facts.architecture:
        parts.append(facts.architecture)
    return f"{facts.name} ({', '.join(parts)}) as {endpoint}"


def geometry_unknown(facts: ModelFacts, endpoint: EndpointType, recipes: list[Recipe]) -> Refusal:
    """NoCompatiblePlacement, the model's memory profile incomplete: every recipe that serves it starts with a
    context its KV cache must hold, which its facts cannot size (issue 45: vLLM was given 32768 tokens on a KV
    budget of about 1 GB, taken as a tenth of the weights, and refuses to start so)."""
    names = ", ".join(r.name for r in recipes)
    return Refusal(
        reason=Reason.NO_COMPATIBLE_PLACEMENT,
        message=(
            f"The memory profile of {describe_model(facts, endpoint)} is incomplete: {KV_GEOMETRY_UNKNOWN}, "
            f"and every recipe that serves it ({names}) starts with such a context: a guessed one does not "
            "start. A catalog object needs numLayers, numKVHeads and headDim (or hiddenSize and "
            "numAttentionHeads) from the model's config.json; ordered from Hugging Face, the module reads them "
            "itself. An administrator's subject."
        ),
    )


def no_recipe(
    facts: ModelFacts,
    endpoint: EndpointType,
    failures: list[Failure],
    where: str = "",
    serves_as: dict[EndpointType, list[str]] | None = None,
) -> Refusal:
    """QuantizationMismatch when the quantization is as far as any recipe got, else no runtime; when
    recipes would serve the model under another contract, the fix is a class that asks for that one."""
    furthest = max((_STAGES.index(f.check) for f in failures), default=-1)
    candidates = "; ".join(str(f) for f in failures) or "none"
    model = describe_model(facts, endpoint)
    if furthest == _STAGES.index(QUANTIZATION_CHECK):
        offered = [f for f in failures if f.check == QUANTIZATION_CHECK]
        others = [str(q) for q in Quantization if any(q in f.quantizations for f in offered)]
        return Refusal(
            reason=Reason.QUANTIZATION_MISMATCH,
            message=(
                f"No recipe serves {model}: recipes for this model exist only with another "
                f"quantization ({', '.join(others)}). Candidates: {candidates}. This needs a recipe "
                "for this quantization, a platform-side decision for an administrator."
            ),
        )
    if serves_as:
        other, names = next(iter(serves_as.items()))
        return Refusal(
            reason=Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE,
            message=(
                f"No recipe serves {model}{where}, but {', '.join(names)} serve(s) it as {other}. The order got "
                f"{endpoint}, the first contract its class allows (a bare Hugging Face reference says nothing "
                f"of what a model serves); order it on a class whose modelPolicy.allowedEndpointTypes names "
                f"{other} alone — ask your administrator (the docs' Examples show a class for embeddings "
                f"only). Candidates: {candidates}."
            ),
        )
    return Refusal(
        reason=Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE,
        message=(
            f"No recipe serves {model}{where}. Candidates: {candidates}. This needs a recipe for this "
            "combination, a platform-side decision for an administrator."
        ),
    )
