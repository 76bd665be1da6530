"""The values a recipe's argument templates name, from the launch the memory model fits on a placement."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from isvc_api import Fit, ModelFacts, Placement

from isvc_runtime_recipes._model import Recipe, placeholders

__all__ = ["Sized", "launch_values", "render", "served_figures"]


@dataclass(frozen=True)
class Sized:
    """What the memory of the placement allows a recipe: its utilization, context and launch."""

    utilization: Decimal
    context: int | None = None
    launch: Fit | None = None


def render(groups: list[list[str]], values: Mapping[str, str | None]) -> list[str]:
    """Argument groups with placeholders filled; a group naming a value that is None is left out."""
    args: list[str] = []
    for group in groups:
        if any(values.get(name) is None for name in placeholders(group)):
            continue
        rendered = (string.Formatter().vformat(token, (), dict(values)) for token in group)
        args.extend(token for token in rendered if token != "")  # an empty value: the flag alone
    return args


def launch_values(
    recipe: Recipe,
    facts: ModelFacts,
    placement: Placement,
    sized: Sized,
    path: str,
    served_name: str,
    parser: str | None,
    thinking: str | None,
) -> dict[str, str | None]:
    """The values a recipe's argument templates name."""
    launch, context = sized.launch, sized.context
    batch = launch.batch if launch else None
    return {
        "modelPath": path,
        "servedName": served_name,
        "httpPort": str(recipe.ports.http),
        "metricsPort": str(recipe.ports.metrics),
        "tensorParallelSize": str(placement.device_count),
        "gpuMemoryUtilization": f"{sized.utilization:.2f}",
        "maxContextLength": _text(context),
        "quantization": recipe.quantization_values.get(facts.quantization),
        "toolCallParser": parser,
        "reasoningParser": thinking,
        # requests run at once: vLLM's --max-num-seqs, llama.cpp's slots (-np); never more than the KV budget
        # holds at the serving target's typical length (issue 42)
        "maxNumSeqs": str(launch.sequences) if launch and launch.sequences else None,
        "maxNumBatchedTokens": str(batch.max_num_batched_tokens) if batch else None,
        "enforceEager": "" if batch and not batch.cuda_graphs else None,
        # vLLM's KV cache in bytes (0: a model without one, which takes no flag)
        "kvCacheMemoryBytes": str(launch.kv_bytes) if launch and launch.kv_bytes else None,
        # llama.cpp's -c: the cells of its KV cache, every slot's context together
        "kvCacheTokens": str(launch.kv_tokens) if launch and launch.slots else _text(context),
    }


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)


def served_figures(launch: Fit | None) -> dict[str, int | None]:
    """What the compiled launch serves (issue 42): its KV cache in tokens, the requests it runs at once and their
    typical length; nothing for a launch the memory model did not fit."""
    if launch is None:
        return {}
    return {
        "kv_cache_tokens": launch.kv_tokens or None,
        "concurrent_requests": launch.sequences or None,
        "request_tokens": launch.typical or None,
    }
