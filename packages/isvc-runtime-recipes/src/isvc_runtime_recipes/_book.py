"""The recipe book: which recipes could serve a model, and a recipe compiled against a plan."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

from isvc_api import (
    GIB,
    CompiledRuntime,
    EndpointType,
    Estimates,
    Load,
    MemoryRuntime,
    ModelFacts,
    Placement,
    PlacementMode,
    Port,
    Reason,
    Refusal,
    RuntimeRequirements,
    SharingMode,
    checkpoint_weights,
    fit_launch,
    kv_layout,
    share_in_range,
)

from isvc_runtime_recipes._checks import (
    Failure,
    Hardware,
    geometry_unknown,
    hardware_failure,
    model_failure,
    no_recipe,
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


def _sizable(
    facts: ModelFacts, endpoint: EndpointType, candidates: list[Recipe]
) -> tuple[list[Recipe], Refusal | None]:
    """The candidates whose launch can be sized for the model: without its KV geometry, none that starts with
    a context its KV cache must hold (the refusal when that is every one)."""
    if kv_layout(facts) is not None:
        return candidates, None
    unsized = [r for r in candidates if _uses(r, "maxContextLength")]
    if unsized and len(unsized) == len(candidates):
        return [], geometry_unknown(facts, endpoint, unsized)
    return [r for r in candidates if r not in unsized], None


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
                names = [r.name for r in self.recipes if model_failure(r, facts, other) is None]
                if names:
                    found[other] = names
        return found

    def requirements(
        self, facts: ModelFacts, endpoint_type: EndpointType | None
    ) -> RuntimeRequirements | Refusal:
        """Which recipes could serve the model, and what together they ask of the hardware."""
        endpoint = effective_endpoint_type(facts, endpoint_type)
        candidates: list[Recipe] = []
        failures: list[Failure] = []
        for recipe in self.recipes:
            failure = model_failure(recipe, facts, endpoint)
            if failure is None:
                candidates.append(recipe)
            else:
                failures.append(failure)
        if not candidates:
            return no_recipe(facts, endpoint, failures, serves_as=self._serves_as(facts, endpoint))
        candidates, unsized = _sizable(facts, endpoint, candidates)
        if unsized is not None:
            return unsized
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
        hw = Hardware(
            placement=placement,
            accelerator=AcceleratorFacts(
                product_name=known.product_name or placement.accelerator_product_name,
                memory_gi_b=known.memory_gi_b or placement.accelerator_memory_gi_b,
                compute_capability=known.compute_capability or placement.accelerator_compute_capability,
            ),
        )
        unsized = _sizable(
            facts, endpoint, [r for r in self.recipes if not model_failure(r, facts, endpoint)]
        )[1]
        if unsized is not None:
            return unsized
        failures: list[Failure] = []
        for recipe in self.recipes:
            failure = model_failure(recipe, facts, endpoint) or hardware_failure(recipe, hw)
            if failure is None:
                compiled = self._compile(recipe, facts, endpoint, hw, estimates, served_name, serving)
                if isinstance(compiled, CompiledRuntime):
                    return compiled
                failure = compiled
            failures.append(failure)
        where = f" on {hw.accelerator.product_name or 'an unnamed accelerator'}"
        where += f" ({placement.placement_mode}, {placement.sharing_mode}, "
        where += f"{placement.device_count} device(s))"
        return no_recipe(facts, endpoint, failures, where)

    def _compile(
        self,
        recipe: Recipe,
        facts: ModelFacts,
        endpoint: EndpointType,
        hw: Hardware,
        estimates: Estimates,
        served_name: str,
        serving: Load | None = None,
    ) -> CompiledRuntime | Failure:
        directory = model_dir(facts.name)
        path = _model_path(recipe, facts, directory)
        sized = _sized(recipe, facts, hw, estimates, serving)
        if isinstance(sized, Failure):
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
    recipe: Recipe, facts: ModelFacts, hw: Hardware, estimates: Estimates, serving: Load | None = None
) -> Sized | Failure:
    """The launch that starts under the runtime's own accounting and holds `serving`, or the recipe's memory
    failure."""
    placement = hw.placement
    utilization = memory_utilization(placement, recipe.memory)
    if utilization <= 0:
        return Failure(
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
            return Failure(recipe.name, "memory", fitted)
        used = utilization if fitted.utilization is None else fitted.utilization
        return Sized(used, fitted.context, fitted)
    if _uses(recipe, "maxContextLength"):
        context, why = max_context_length(facts, placement, estimates, recipe.memory, device_gib, utilization)
        if context is None:
            return Failure(recipe.name, "memory", why)
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
