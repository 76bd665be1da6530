"""The recipe book: which recipes could serve a model, and a recipe compiled against a plan."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from isvc_api import (
    GIB,
    CompiledRuntime,
    EndpointType,
    Estimates,
    Load,
    MemoryRuntime,
    ModelFacts,
    ModelFormat,
    Placement,
    PlacementMode,
    Port,
    Quantization,
    Reason,
    Refusal,
    RuntimeRequirements,
    SharingMode,
    checkpoint_weights,
    fit_launch,
    share_in_range,
)

from isvc_runtime_recipes._derive import (
    device_memory_gib,
    effective_endpoint_type,
    max_context_length,
    memory_utilization,
    model_dir,
    reasoning_parser,
    tool_call_parser,
)
from isvc_runtime_recipes._errors import InvalidRecipe
from isvc_runtime_recipes._load import load_flags, load_shipped, validate_recipe
from isvc_runtime_recipes._model import (
    AcceleratorFacts,
    Recipe,
    RuntimeFlags,
    parse_compute_capability,
    placeholders,
)
from isvc_runtime_recipes._values import Sized, launch_values, render, served_figures

__all__ = ["RecipeBook", "content_hash", "load_recipes"]

QUANTIZATION_CHECK = "quantization"


@dataclass(frozen=True)
class _Hardware:
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


def _model_format(facts: ModelFacts) -> ModelFormat:
    # A source that did not say is taken as Hugging Face's default.
    return facts.format or ModelFormat.SAFETENSORS


def _check_format(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> str | None:
    if _model_format(facts) in recipe.serves.formats:
        return None
    return f"it loads {_listed(recipe.serves.formats)}, not {_model_format(facts)}"


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


def _check_placement_mode(recipe: Recipe, hw: _Hardware) -> str | None:
    mode = hw.placement.placement_mode
    if mode in recipe.placement.modes:
        return None
    return f"it runs {_listed(recipe.placement.modes)}, not {mode}"


def _check_sharing_mode(recipe: Recipe, hw: _Hardware) -> str | None:
    mode = hw.placement.sharing_mode
    if mode in recipe.placement.sharing_modes:
        return None
    return f"it runs {_listed(recipe.placement.sharing_modes)}, not {mode}"


def _check_devices(recipe: Recipe, hw: _Hardware) -> str | None:
    count = hw.placement.device_count
    if count <= recipe.placement.max_devices:
        return None
    return f"it uses at most {recipe.placement.max_devices}, the plan has {count}"


def _check_product(recipe: Recipe, hw: _Hardware) -> str | None:
    patterns = recipe.accelerator.products
    product = hw.accelerator.product_name
    if patterns is None or product is None or any(fnmatchcase(product, p) for p in patterns):
        return None
    return f"{product} matches none of {_listed(patterns)}"


def _check_memory(recipe: Recipe, hw: _Hardware) -> str | None:
    least = recipe.accelerator.min_memory_gi_b
    memory = hw.accelerator.memory_gi_b
    if least is None or memory is None or memory >= least:
        return None
    return f"it needs {least:g} GiB, the device has {memory:g} GiB"


def _check_compute_capability(recipe: Recipe, hw: _Hardware) -> str | None:
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
HardwareCheck = Callable[[Recipe, _Hardware], "str | None"]

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
class _Failure:
    recipe: str
    check: str
    detail: str
    quantizations: tuple[Quantization, ...] = ()  # what the recipe loads, told on a mismatch

    def __str__(self) -> str:
        return f"{self.recipe} fails {self.check}: {self.detail}"


def _model_failure(recipe: Recipe, facts: ModelFacts, endpoint: EndpointType) -> _Failure | None:
    for name, check in MODEL_CHECKS:
        detail = check(recipe, facts, endpoint)
        if detail is not None:
            return _Failure(recipe.name, name, detail, tuple(recipe.serves.quantizations))
    return None


def _hardware_failure(recipe: Recipe, hw: _Hardware) -> _Failure | None:
    for name, check in HARDWARE_CHECKS:
        detail = check(recipe, hw)
        if detail is not None:
            return _Failure(recipe.name, name, detail)
    return None


def _describe_model(facts: ModelFacts, endpoint: EndpointType) -> str:
    parts = [str(_model_format(facts)), f"quantization {facts.quantization}"]
    if facts.architecture:
        parts.append(facts.architecture)
    return f"{facts.name} ({', '.join(parts)}) as {endpoint}"


def _refusal(
    facts: ModelFacts,
    endpoint: EndpointType,
    failures: list[_Failure],
    where: str = "",
    serves_as: dict[EndpointType, list[str]] | None = None,
) -> Refusal:
    """QuantizationMismatch when the quantization is as far as any recipe got, else no runtime; when
    recipes would serve the model under another contract, the fix is a class that asks for that one."""
    furthest = max((_STAGES.index(f.check) for f in failures), default=-1)
    candidates = "; ".join(str(f) for f in failures) or "none"
    model = _describe_model(facts, endpoint)
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


# ---------------------------------------------------------------- compiling


def content_hash(compiled: CompiledRuntime) -> str:
    """sha256 of the canonical JSON of everything in the compiled runtime but the hash itself."""
    # The parsers are named in args already, and the load metrics are read from outside the container: left
    # out, so that echoing them rolls no workload.
    payload = compiled.model_dump(
        mode="json",
        by_alias=True,
        exclude={"content_hash", "tool_call_parser", "reasoning_parser", "load_metrics"},
    )
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _uses(recipe: Recipe, name: str) -> bool:
    groups = recipe.args + (recipe.tool_calling.args if recipe.tool_calling else [])
    groups = groups + (recipe.reasoning.args if recipe.reasoning else [])
    return any(name in placeholders(group) for group in groups)


def _placement_problem(placement: Placement) -> Refusal | None:
    share = placement.share_percent
    if share is not None and not share_in_range(share):
        field, value = "sharePercent", str(share)
    elif placement.device_count < 1:
        field, value = "deviceCount", str(placement.device_count)
    elif placement.sharing_mode == SharingMode.SHARES and share is None:
        field, value = "sharePercent", "absent with sharingMode Shares"
    else:
        return None
    return Refusal(
        reason=Reason.LAUNCH_PLAN_NOT_A_PLACEMENT,
        message=f"The launch plan's placement.{field} is {value}, which is not a placement. "
        "Delete the LaunchPlan so that the module computes a new one.",
    )


class RecipeBook:
    """The recipes in force, tried in priority order."""

    def __init__(self, recipes: list[Recipe], flags: dict[str, RuntimeFlags]) -> None:
        self.recipes = sorted((r for r in recipes if not r.disabled), key=lambda r: (r.priority, r.name))
        self.flags = flags

    def __iter__(self) -> Iterator[Recipe]:
        return iter(self.recipes)

    def __len__(self) -> int:
        return len(self.recipes)

    def get(self, name: str) -> Recipe | None:
        """The recipe of that name, if in force."""
        return next((r for r in self.recipes if r.name == name), None)

    def _serves_as(self, facts: ModelFacts, asked: EndpointType) -> dict[EndpointType, list[str]]:
        """The other contracts some recipe would serve the model under, with those recipes."""
        found: dict[EndpointType, list[str]] = {}
        for other in EndpointType:
            if other != asked:
                names = [r.name for r in self.recipes if _model_failure(r, facts, other) is None]
                if names:
                    found[other] = names
        return found

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal:
        """Which recipes could serve the model, and what together they ask of the hardware."""
        endpoint = effective_endpoint_type(facts, endpoint_type)
        candidates: list[Recipe] = []
        failures: list[_Failure] = []
        for recipe in self.recipes:
            failure = _model_failure(recipe, facts, endpoint)
            if failure is None:
                candidates.append(recipe)
            else:
                failures.append(failure)
        if not candidates:
            return _refusal(facts, endpoint, failures, serves_as=self._serves_as(facts, endpoint))
        lowest: list[str] = []
        for recipe in candidates:
            accel = recipe.accelerator
            options = [accel.min_compute_capability] if accel.min_compute_capability else []
            options += accel.compute_capabilities or []
            if not options:
                lowest = []  # one candidate runs on any card: no minimum
                break
            lowest.append(min(options, key=parse_compute_capability))
        return RuntimeRequirements(
            recipes=[r.name for r in candidates],
            placement_modes=[m for m in PlacementMode if any(m in r.placement.modes for r in candidates)],
            sharing_modes=[m for m in SharingMode if any(m in r.placement.sharing_modes for r in candidates)],
            min_compute_capability=min(lowest, key=parse_compute_capability) if lowest else None,
            max_devices=max(r.placement.max_devices for r in candidates),
            runtimes=list(dict.fromkeys(r.runtime for r in candidates)),
            memory_margin_percent=math.ceil(max(r.memory.margin for r in candidates) * 100),
        )

    def compile(
        self,
        facts: ModelFacts,
        endpoint_type: EndpointType | None,
        placement: Placement,
        estimates: Estimates,
        served_name: str,
        accelerator: AcceleratorFacts | None = None,
        serving: Load | None = None,
    ) -> CompiledRuntime | Refusal:
        """The first recipe that serves the model on this placement, compiled to a container; its launch holds
        `serving`, the order's serving target (issue 42), when given."""
        problem = _placement_problem(placement)
        if problem is not None:
            return problem
        endpoint = effective_endpoint_type(facts, endpoint_type)
        known = accelerator or AcceleratorFacts()
        hw = _Hardware(
            placement=placement,
            accelerator=AcceleratorFacts(
                product_name=known.product_name or placement.accelerator_product_name,
                memory_gi_b=known.memory_gi_b or placement.accelerator_memory_gi_b,
                compute_capability=known.compute_capability or placement.accelerator_compute_capability,
            ),
        )
        failures: list[_Failure] = []
        for recipe in self.recipes:
            failure = _model_failure(recipe, facts, endpoint) or _hardware_failure(recipe, hw)
            if failure is None:
                compiled = self._compile(recipe, facts, endpoint, hw, estimates, served_name, serving)
                if isinstance(compiled, CompiledRuntime):
                    return compiled
                failure = compiled
            failures.append(failure)
        where = f" on {hw.accelerator.product_name or 'an unnamed accelerator'}"
        where += f" ({placement.placement_mode}, {placement.sharing_mode}, "
        where += f"{placement.device_count} device(s))"
        return _refusal(facts, endpoint, failures, where)

    def _compile(
        self,
        recipe: Recipe,
        facts: ModelFacts,
        endpoint: EndpointType,
        hw: _Hardware,
        estimates: Estimates,
        served_name: str,
        serving: Load | None = None,
    ) -> CompiledRuntime | _Failure:
        directory = model_dir(facts.name)
        path = _model_path(recipe, facts, directory)
        sized = _sized(recipe, facts, hw, estimates, serving)
        if isinstance(sized, _Failure):
            return sized
        chat = endpoint == EndpointType.CHAT
        tool_rule = tool_call_parser(recipe, facts) if chat else None
        reasoning_rule = reasoning_parser(recipe, facts) if chat else None
        parser = tool_rule.parser if tool_rule else None
        thinking = reasoning_rule.parser if reasoning_rule else None
        values = launch_values(recipe, facts, hw.placement, sized, path, served_name, parser, thinking)
        launch = sized.launch
        args = render(recipe.args, values)
        tool_args: list[str] = []
        if tool_rule is not None and recipe.tool_calling is not None:
            tool_args = render(recipe.tool_calling.args + tool_rule.args, values)
        reasoning_args: list[str] = []
        if reasoning_rule is not None and recipe.reasoning is not None:
            reasoning_args = render(recipe.reasoning.args + reasoning_rule.args, values)
        compiled = CompiledRuntime(
            recipe=recipe.name,
            image=_image(recipe, hw.compute_capability),
            command=list(recipe.command),
            args=args + tool_args + reasoning_args,
            env=dict(sorted(recipe.env.items())),
            ports=[
                Port(name="http", container_port=recipe.ports.http),
                Port(name="metrics", container_port=recipe.ports.metrics),
            ],
            health_path=recipe.health_path,
            served_name=served_name,
            tool_calling_supported=bool(tool_args),
            # named only where the runtime's flag names it (llama.cpp's --jinja names no parser)
            tool_call_parser=parser if tool_args and _uses(recipe, "toolCallParser") else None,
            reasoning_parser=thinking if reasoning_args else None,
            api_key_env=recipe.api_key_env,
            model_path=path,
            model_dir=directory,
            metrics_path=recipe.metrics_path,
            endpoint_type=str(endpoint),
            runtime=recipe.runtime,
            memory=launch.words() if launch else None,
            kv_cache_bytes=(launch.kv_bytes or None) if launch else None,
            margin_gi_b=round(launch.margin / GIB, 2) if launch else None,
            **served_figures(launch),
            load_metrics=recipe.load_metrics.to_wire() if recipe.load_metrics else None,
        )
        compiled.content_hash = content_hash(compiled)
        return compiled


def _sized(
    recipe: Recipe, facts: ModelFacts, hw: _Hardware, estimates: Estimates, serving: Load | None = None
) -> Sized | _Failure:
    """The launch that starts under the runtime's own accounting and holds `serving`, or the recipe's memory
    failure."""
    placement = hw.placement
    utilization = memory_utilization(placement, recipe.memory)
    if utilization <= 0:
        return _Failure(
            recipe.name,
            "memory",
            f"a share of {placement.share_percent}% leaves nothing after the {recipe.memory.margin:g} margin",
        )
    device_gib = device_memory_gib(placement, hw.accelerator)
    known = checkpoint_weights(facts) is not None
    if recipe.runtime in set(MemoryRuntime) and device_gib is not None and known:
        share = placement.share_percent if placement.sharing_mode == SharingMode.SHARES else 100
        fitted = fit_launch(
            facts,
            MemoryRuntime(recipe.runtime),
            round(device_gib * GIB),
            share or 100,
            max(placement.device_count, 1),
            min_context=recipe.memory.min_context_length,
            granularity=recipe.memory.context_granularity,
            max_context=estimates.context_length,
            load=serving,
        )
        if isinstance(fitted, str):
            return _Failure(recipe.name, "memory", fitted)
        used = utilization if fitted.utilization is None else fitted.utilization
        return Sized(used, fitted.context, fitted)
    if _uses(recipe, "maxContextLength"):
        context, why = max_context_length(facts, placement, estimates, recipe.memory, device_gib, utilization)
        if context is None:
            return _Failure(recipe.name, "memory", why)
        return Sized(utilization, context)
    return Sized(utilization)


def _image(recipe: Recipe, compute_capability: str | None) -> str:
    """The recipe's image, or its build for the card's compute capability."""
    by_cc = recipe.image_by_compute_capability
    if by_cc and compute_capability in by_cc:
        return by_cc[compute_capability]
    return recipe.image


def _model_path(recipe: Recipe, facts: ModelFacts, directory: str) -> str:
    """What the runtime loads: the model directory, or for a one-file runtime the file in it the source
    chose (the first shard of a sharded GGUF; llama.cpp finds the others beside it), else the recipe's."""
    if not recipe.model_file:
        return directory
    return f"{directory}/{facts.gguf_files[0] if facts.gguf_files else recipe.model_file}"


def load_recipes(extra: list[dict[str, Any]] | None = None) -> RecipeBook:
    """The shipped recipes, with the administrator's extra ones; an extra recipe replaces a shipped
    one of the same name. Raises InvalidRecipe when any recipe does not hold."""
    flags = load_flags()
    by_name: dict[str, Recipe] = {}
    for recipe in load_shipped(flags):
        if recipe.name in by_name:
            raise InvalidRecipe(f"two shipped recipes are named {recipe.name}")
        by_name[recipe.name] = recipe
    seen: set[str] = set()
    for index, data in enumerate(extra or []):
        recipe = validate_recipe(data, f"module settings, recipe #{index + 1}", flags)
        if recipe.name in seen:
            raise InvalidRecipe(f"the module settings name recipe {recipe.name} twice")
        seen.add(recipe.name)
        by_name[recipe.name] = recipe
    return RecipeBook(list(by_name.values()), flags)
