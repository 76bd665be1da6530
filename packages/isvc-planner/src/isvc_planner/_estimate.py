"""How much accelerator memory, CPU, host memory and disk a model needs, from the shared memory model.

The accelerator memory is `isvc_api.need_per_device`: per GPU, the weights as the checkpoint holds them
(divided by the tensor-parallel size), the runtime's non-KV memory at the batch the planner sizes for,
the KV cache of the order's serving target (issue 42: its requests at once at their typical length, and its
longest request; without one, of the minimum useful context, 4,096 tokens or the model's own maximum if
smaller), and what the runtime keeps beside its own accounting (CUDA context, CUDA graphs). Shares are of
the memory the runtime sees on the card (`isvc_api.visible_bytes`), not of the published capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from isvc_api import (
    GIB,
    MIN_CONTEXT,
    Estimates,
    Fit,
    Load,
    MemoryRuntime,
    ModelFacts,
    checkpoint_weights,
    fit_launch,
    format_gib,
    gib,
    kv_layout,
    need_per_device,
    runtime_for,
    unknown_kv_bytes,
)

__all__ = [
    "DEFAULT_CONTEXT",
    "MemoryNeed",
    "estimate",
    "memory_need",
]

DEFAULT_CONTEXT = MIN_CONTEXT  # tokens of KV cache a share is sized for (the model's own maximum if fewer)


@dataclass(frozen=True)
class MemoryNeed:
    """The memory a model needs per GPU at each tensor-parallel size, with the arithmetic for messages."""

    facts: ModelFacts
    runtime: MemoryRuntime
    weights: int
    kv_per_token: int
    context: int
    one: tuple[int, str]  # the need on one device and its arithmetic
    kv_unknown: int = (
        0  # KV bytes taken for a model whose KV geometry is unknown (its per-token figure is not)
    )
    load: Load | None = None  # the serving target the KV cache is sized for
    kv_tokens: int = 0  # tokens of KV cache the need counts (0: the context's)
    # Other tensor-parallel sizes, worked out when first asked (most orders fit one device; None: not told).
    _more: dict[int, tuple[int, str] | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def required(self) -> int:
        """Bytes of accelerator memory on one device."""
        return self.one[0]

    @property
    def explanation(self) -> str:
        """The arithmetic on one device."""
        return self.one[1]

    @property
    def kv_cache(self) -> int:
        """KV bytes of the serving target (or the minimum context) on one device (the bytes taken when the
        geometry is unknown)."""
        return self.kv_unknown or self.kv_per_token * (self.kv_tokens or self.context)

    @property
    def target(self) -> str:
        """The serving target in words, as a refusal names it ("" without one)."""
        return f"to serve {self.load.words()}" if self.load is not None else ""

    @property
    def overhead(self) -> int:
        """Runtime memory beside weights and KV on one device."""
        return max(0, self.required - self.weights - self.kv_cache)

    def _on(self, count: int) -> tuple[int, str] | None:
        if count == 1:
            return self.one
        if count not in self._more:
            self._more[count] = need_per_device(
                self.facts, self.runtime, count, context=self.context, load=self.load
            )
        return self._more[count]

    def per_device(self, count: int) -> int:
        """Bytes each of `count` tensor-parallel devices must hold."""
        known = self._on(count)
        return known[0] if known else self.required

    def explain(self, count: int) -> str:
        """The arithmetic on each of `count` devices."""
        known = self._on(count)
        return known[1] if known else self.explanation

    def launch(self, published: int, share: int, count: int) -> Fit | str:
        """The launch a recipe compiles on this placement, by the same model: on the card's memory as the
        placement states it (GiB to two decimals), so the KV budget is the one the recipe compiles."""
        stated = round(gib(published) * GIB)
        return fit_launch(
            self.facts, self.runtime, stated, share, count, min_context=self.context, load=self.load
        )


def memory_need(
    facts: ModelFacts,
    context: int | None = None,
    runtime: MemoryRuntime | None = None,
    load: Load | None = None,
) -> MemoryNeed | None:
    """Accelerator memory a model needs to carry `load` (without one, a context of `context` tokens), or None
    when neither parameters, element counts nor file size tell its weights."""
    weights = checkpoint_weights(facts)
    if weights is None:
        return None
    chosen = runtime or runtime_for(facts)
    ctx = min(context or DEFAULT_CONTEXT, facts.context_length or context or DEFAULT_CONTEXT)
    wanted = load.within(facts.context_length) if load is not None else None
    if wanted is not None:
        ctx = wanted.longest
    one = need_per_device(facts, chosen, 1, context=ctx, load=load)
    assert one is not None  # None only where the weights are unknown, as checked above
    layout = kv_layout(facts)
    return MemoryNeed(
        facts=facts,
        runtime=chosen,
        weights=weights.total,
        kv_per_token=layout.per_token if layout else 0,
        context=ctx,
        one=one,
        kv_unknown=0 if layout else unknown_kv_bytes(weights.total),
        load=load,
        kv_tokens=wanted.tokens if wanted is not None else 0,
    )


def _cpu_rule(share_percent: int | None) -> str:
    return "2 per device" if share_percent is None else f"2 × a {share_percent} % share, at least 1"


def estimate(
    facts: ModelFacts,
    need: MemoryNeed,
    device_count: int = 1,
    launch: Fit | None = None,
    share_percent: int | None = None,
) -> Estimates:
    """The estimates that come with a plan: accelerator memory, CPU, host memory, model volume, and the
    launch the recipes will compile on the placement (context, KV per token and KV budget, runtime
    overhead, margin)."""
    # 2 CPUs a device; a share of one card drives that share of it (at least one CPU)
    cpu = max(2, 2 * device_count) if share_percent is None else max(1, math.ceil(2 * share_percent / 100))
    host = 4 * GIB + need.weights // 4
    on_disk = facts.weight_bytes or need.weights
    volume = math.ceil(on_disk * 1.1) + GIB
    per_device = need.per_device(device_count)
    text = (
        f"{need.explain(device_count)}; cpu {cpu} ({_cpu_rule(share_percent)}); memory 4 GiB + weights/4 = "
        f"{format_gib(host)}; model volume files × 1.1 + 1 GiB = {format_gib(volume)}"
    )
    context, overhead, kv_per_token = need.context, need.overhead, need.kv_per_token
    kv_bytes: int | None = None
    margin: float | None = None
    served: tuple[int | None, int | None, int | None] = (None, None, None)
    if launch is not None:
        context, overhead, kv_per_token = launch.context, launch.overhead, launch.kv.per_token
        kv_bytes, margin = launch.kv_bytes or None, gib(launch.margin)
        served = (launch.kv_tokens or None, launch.sequences or None, launch.typical or None)
        text += f"; on this placement: {launch.words()}"
    return Estimates(
        required_memory_gi_b=gib(per_device),
        weights_gi_b=gib(need.weights),
        # a geometry unknown has no per-token figure (it was shown as 0 B/token beside a KV cache of 0)
        kv_cache_gi_b=gib(kv_bytes if kv_bytes is not None else need.kv_unknown or kv_per_token * context),
        overhead_gi_b=gib(overhead),
        context_length=context,
        kv_bytes_per_token=None if need.kv_unknown else kv_per_token,
        kv_cache_bytes=kv_bytes,
        margin_gi_b=margin,
        kv_cache_tokens=served[0],
        concurrent_requests=served[1],
        request_tokens=served[2],
        cpu=str(cpu),
        memory=format_gib(host),
        model_volume=format_gib(volume),
        explanation=text,
    )
