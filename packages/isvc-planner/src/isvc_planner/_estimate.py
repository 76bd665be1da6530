"""How much accelerator memory, CPU, host memory and disk a model needs: the documented formula.

    weights   = parameter count × bytes per parameter (dtype or quantization)
    KV cache  = 2 (K and V) × layers × KV heads × head dim × context tokens × 2 bytes (16-bit cache)
    overhead  = 1 GiB (CUDA context, runtime) + 10 % of the weights (activations, CUDA graphs)
    required  = weights + KV cache + overhead
    on k devices (tensor parallel), each device holds (weights + KV + 10 % of weights) / k + 1 GiB
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from isvc_api import Estimates, ModelFacts, Quantization
from isvc_planner_client import GIB, format_gib, gib

__all__ = [
    "DEFAULT_CONTEXT", "MemoryNeed", "bytes_per_parameter", "estimate", "kv_cache_bytes", "memory_need",
]

DEFAULT_CONTEXT = 8192  # tokens the KV cache is sized for when the model allows that many
FIXED_OVERHEAD = 1 * GIB
OVERHEAD_SHARE = 0.10
KV_BYTES = 2
GROUP_SIZE = 128  # AWQ/GPTQ: a 16-bit scale and a zero point per group of weights

_DTYPE_BYTES = {
    "float32": 4.0, "fp32": 4.0, "float": 4.0,
    "bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "fp16": 2.0, "half": 2.0,
    "float8": 1.0, "fp8": 1.0, "float8_e4m3fn": 1.0, "int8": 1.0,
}
_ENCODER_MARKS = ("bert", "roberta", "electra", "mpnet", "deberta", "t5encoder")


@dataclass(frozen=True)
class MemoryNeed:
    """The memory a model needs, with the arithmetic kept for messages."""

    weights: int
    kv_cache: int
    overhead: int
    context: int
    explanation: str

    @property
    def required(self) -> int:
        """Bytes of accelerator memory on one device."""
        return self.weights + self.kv_cache + self.overhead

    def per_device(self, count: int) -> int:
        """Bytes each of `count` tensor-parallel devices must hold."""
        if count <= 1:
            return self.required
        shared = self.weights + self.kv_cache + (self.overhead - FIXED_OVERHEAD)
        return math.ceil(shared / count) + FIXED_OVERHEAD


def bytes_per_parameter(facts: ModelFacts) -> tuple[float, str]:
    """Bytes one parameter takes and the words that say why."""
    quant = facts.quantization
    if quant in (Quantization.AWQ, Quantization.GPTQ, Quantization.BITSANDBYTES):
        bits = facts.quantization_bits or 4
        per = (bits + (16 + bits) / GROUP_SIZE) / 8
        return per, f"{per:.4f} B ({quant.value} {bits}-bit, scales per {GROUP_SIZE} weights)"
    if quant == Quantization.GGUF:
        bits = facts.quantization_bits or 4
        per = (bits + 0.5) / 8
        return per, f"{per:.4f} B (GGUF {bits}-bit with block scales)"
    if quant == Quantization.FP8:
        return 1.0, "1 B (FP8)"
    dtype = (facts.dtype or "bfloat16").lower().removeprefix("torch.")
    per = _DTYPE_BYTES.get(dtype, 2.0)
    return per, f"{per:g} B ({dtype})"


def _is_encoder(facts: ModelFacts) -> bool:
    names = f"{facts.architecture or ''} {facts.family or ''}".lower().replace("-", "").replace("_", "")
    return any(mark in names for mark in _ENCODER_MARKS)


def kv_cache_bytes(facts: ModelFacts, context: int) -> tuple[int, str]:
    """KV cache for `context` tokens and its arithmetic; zero for encoder-only models."""
    if _is_encoder(facts):
        return 0, "KV cache 0 (encoder-only model keeps no KV cache)"
    layers = facts.num_layers
    heads = facts.num_attention_heads
    kv_heads = facts.num_kv_heads or heads
    head_dim = facts.head_dim
    if head_dim is None and facts.hidden_size and heads:
        head_dim = facts.hidden_size // heads
    if not (layers and kv_heads and head_dim):
        return 0, "KV cache unknown (layers, KV heads or head dim missing)"
    amount = 2 * layers * kv_heads * head_dim * context * KV_BYTES
    words = (f"KV cache 2 × {layers} layers × {kv_heads} KV heads × {head_dim} head dim × "
             f"{context} tokens × {KV_BYTES} B = {gib(amount)} GiB")
    return amount, words


def memory_need(facts: ModelFacts, context: int | None = None) -> MemoryNeed | None:
    """Accelerator memory a model needs, or None when neither parameter count nor weight size is known."""
    ctx = min(facts.context_length or DEFAULT_CONTEXT, context or DEFAULT_CONTEXT)
    if facts.parameter_count:
        per, per_words = bytes_per_parameter(facts)
        weights = math.ceil(facts.parameter_count * per)
        weight_words = (f"weights {facts.parameter_count:,} parameters × {per_words} = "
                        f"{gib(weights)} GiB")
    elif facts.weight_bytes:
        weights = facts.weight_bytes
        weight_words = f"weights {gib(weights)} GiB (size of the weight files)"
    else:
        return None
    kv, kv_words = kv_cache_bytes(facts, ctx)
    if kv == 0 and "unknown" in kv_words:
        kv = math.ceil(weights * 0.10)
        kv_words += f", taken as 10 % of the weights = {gib(kv)} GiB"
    overhead = FIXED_OVERHEAD + math.ceil(weights * OVERHEAD_SHARE)
    overhead_words = f"overhead 1 GiB + 10 % of weights = {gib(overhead)} GiB"
    total = weights + kv + overhead
    text = f"{weight_words}; {kv_words}; {overhead_words}; required {gib(total)} GiB"
    return MemoryNeed(weights=weights, kv_cache=kv, overhead=overhead, context=ctx, explanation=text)


def estimate(facts: ModelFacts, need: MemoryNeed, device_count: int = 1) -> Estimates:
    """The estimates that come with a plan: accelerator memory, CPU, host memory, model volume."""
    cpu = max(2, 2 * device_count)
    host = 4 * GIB + need.weights // 4
    on_disk = facts.weight_bytes or need.weights
    volume = math.ceil(on_disk * 1.1) + GIB
    text = (f"{need.explanation}; cpu {cpu} (2 per device); memory 4 GiB + weights/4 = {format_gib(host)};"
            f" model volume files × 1.1 + 1 GiB = {format_gib(volume)}")
    if device_count > 1:
        text += f"; on {device_count} devices {gib(need.per_device(device_count))} GiB each"
    return Estimates(
        required_memory_gi_b=gib(need.required),
        weights_gi_b=gib(need.weights),
        kv_cache_gi_b=gib(need.kv_cache),
        overhead_gi_b=gib(need.overhead),
        context_length=need.context,
        cpu=str(cpu),
        memory=format_gib(host),
        model_volume=format_gib(volume),
        explanation=text,
    )
