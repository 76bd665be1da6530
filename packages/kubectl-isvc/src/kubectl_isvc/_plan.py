"""What a launch plan says, in the terms a person asks about: accelerator and share, memory, runtime flags."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kubectl_isvc._common import Out

__all__ = ["KEY_FLAGS", "PlanSummary", "key_flags", "summarize_plan"]

# The flags that decide what a launch can hold and serve (vLLM, llama.cpp, TEI), in the order shown.
KEY_FLAGS = (
    "--served-model-name",
    "--alias",
    "--tensor-parallel-size",
    "--gpu-memory-utilization",
    "--max-model-len",
    "-c",
    "--ctx-size",
    "--max-num-seqs",
    "-np",
    "--parallel",
    "--enforce-eager",
    "--quantization",
    "--dtype",
    "--kv-cache-dtype",
    "--n-gpu-layers",
    "-ngl",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "--reasoning-parser",
    "--max-batch-tokens",
    "--max-client-batch-size",
)


def key_flags(args: list[str]) -> list[str]:
    """The key flags of a runtime's arguments, each with its value (`--max-model-len 4096`)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if flag in KEY_FLAGS:
            if eq:
                out.append(f"{flag} {value}")
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                out.append(f"{flag} {args[i + 1]}")
                i += 1
            else:
                out.append(flag)
        i += 1
    order = {f: n for n, f in enumerate(KEY_FLAGS)}
    return sorted(out, key=lambda s: order[s.split(" ")[0]])


class PlanSummary(Out):
    """A launch plan (or an estimate) as one record."""

    name: str | None = None
    device_class: str | None = None
    accelerator: str | None = None
    accelerator_memory_gi_b: float | None = None
    placement_mode: str | None = None
    sharing_mode: str | None = None
    share_percent: int | None = None
    device_count: int | None = None
    node: str | None = None
    devices: list[str] = Field(default_factory=list)
    required_memory_gi_b: float | None = None
    weights_gi_b: float | None = None
    kv_cache_gi_b: float | None = None
    overhead_gi_b: float | None = None
    kv_bytes_per_token: int | None = None
    context_length: int | None = None
    kv_cache_tokens: int | None = None
    concurrent_requests: int | None = None
    request_tokens: int | None = None
    cpu: str | None = None
    memory: str | None = None
    model_volume: str | None = None
    explanation: str | None = None
    runtime: str | None = None
    image: str | None = None
    served_name: str | None = None
    flags: list[str] = Field(default_factory=list)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def summarize_plan(plan: dict[str, Any]) -> PlanSummary:
    """A LaunchPlan object as a PlanSummary (fields it lacks stay empty)."""
    spec = plan.get("spec") or {}
    placement = spec.get("placement") or {}
    estimates = spec.get("estimates") or {}
    runtime = spec.get("runtime") or {}
    context = estimates.get("contextLength")
    kv_bytes = estimates.get("kvBytesPerToken")
    share = placement.get("sharePercent")
    count = placement.get("deviceCount")
    return PlanSummary(
        name=(plan.get("metadata") or {}).get("name"),
        device_class=placement.get("deviceClassName"),
        accelerator=placement.get("acceleratorProductName"),
        accelerator_memory_gi_b=_num(placement.get("acceleratorMemoryGiB")),
        placement_mode=placement.get("placementMode"),
        sharing_mode=placement.get("sharingMode"),
        share_percent=share if isinstance(share, int) else None,
        device_count=count if isinstance(count, int) else None,
        node=placement.get("nodeName"),
        devices=[f"{placement.get('pool')}/{d}" for d in placement.get("devices") or []],
        required_memory_gi_b=_num(estimates.get("requiredMemoryGiB")),
        weights_gi_b=_num(estimates.get("weightsGiB")),
        kv_cache_gi_b=_num(estimates.get("kvCacheGiB")),
        overhead_gi_b=_num(estimates.get("overheadGiB")),
        kv_bytes_per_token=kv_bytes if isinstance(kv_bytes, int) else None,
        context_length=context if isinstance(context, int) else None,
        kv_cache_tokens=_served(runtime, estimates, "kvCacheTokens"),
        concurrent_requests=_served(runtime, estimates, "concurrentRequests"),
        request_tokens=_served(runtime, estimates, "requestTokens"),
        cpu=estimates.get("cpu"),
        memory=estimates.get("memory"),
        model_volume=estimates.get("modelVolume"),
        explanation=estimates.get("explanation") or None,
        runtime=runtime.get("recipe"),
        image=runtime.get("image"),
        served_name=runtime.get("servedName"),
        flags=key_flags([str(a) for a in runtime.get("args") or []]),
    )


def _served(runtime: dict[str, Any], estimates: dict[str, Any], key: str) -> int | None:
    """What the launch serves (issue 42): as the compiled runtime states it, else as the plan estimated it."""
    for source in (runtime, estimates):
        value = source.get(key)
        if isinstance(value, int):
            return value
    return None
