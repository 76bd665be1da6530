"""Bytes of a model's weights as the runtime holds them: the first term of the memory model (`_memory`).

Sources as in `_memory`: V33 is vllm-project/vllm v0.33.0 (quantized layers)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from isvc_api._facts import ModelFacts
from isvc_api._quantity import gib
from isvc_api._vocabulary import Quantization

__all__ = ["Weights", "checkpoint_weights"]

_GROUP = 128  # AWQ/GPTQ group size when the checkpoint does not say


@dataclass(frozen=True)
class Weights:
    """Bytes of the weights as the runtime holds them, and the arithmetic."""

    total: int
    words: str


# Bytes per element of safetensors dtypes as loaded; 32-bit floats are loaded 16-bit by vLLM and TEI
# (dtype auto), except beside quantized layers, where scales stay as stored.
_ELEMENT = {
    "F64": 8.0,
    "F16": 2.0,
    "BF16": 2.0,
    "I64": 8.0,
    "I32": 4.0,
    "I16": 2.0,
    "I8": 1.0,
    "U64": 8.0,
    "U32": 4.0,
    "U16": 2.0,
    "U8": 1.0,
    "BOOL": 1.0,
    "F8_E4M3": 1.0,
    "F8_E5M2": 1.0,
    "F8_E8M0": 1.0,
    "F4": 0.5,
}


def _linear_bytes(facts: ModelFacts) -> tuple[float, str]:
    quant, bits = facts.quantization, facts.quantization_bits
    if quant in (Quantization.AWQ, Quantization.GPTQ):
        b = bits or 4
        # packed weights, a 16-bit scale and a packed zero point per group (V33 auto_awq.py)
        per = (b + (16 + b) / _GROUP) / 8
        return per, f"{per:.4f} B ({quant.value} {b}-bit, group {_GROUP})"
    if quant == Quantization.BITSANDBYTES:
        b = bits or 4
        per = b / 8 + (4 / 64 if b == 4 else 4 / 4096)  # absmax per block of 64 (nf4) or per row
        return per, f"{per:.4f} B (bitsandbytes {b}-bit)"
    if quant == Quantization.FP8:
        return 1.0, "1 B (FP8)"
    if quant == Quantization.GGUF:
        per = ((bits or 4) + 0.5) / 8
        return per, f"{per:.4f} B (GGUF {bits or 4}-bit with block scales)"
    dtype = (facts.dtype or "bfloat16").lower().removeprefix("torch.")
    per = 1.0 if dtype in ("float8", "fp8", "float8_e4m3fn", "int8") else 2.0
    return per, f"{per:g} B ({dtype} as loaded)"


def _files_as_loaded(facts: ModelFacts) -> tuple[int, str] | None:
    """The weight files' size as the runtime holds them: whole, except float32 files of an unquantized
    model, which vLLM (dtype auto) and TEI (--dtype float16) load at 16 bits."""
    if not facts.weight_bytes:
        return None
    dtype = (facts.dtype or "").lower().removeprefix("torch.")
    if facts.quantization == Quantization.NONE and dtype in ("float32", "fp32", "float"):
        return facts.weight_bytes // 2, f"{gib(facts.weight_bytes)} GiB of float32 files, loaded 16-bit"
    return facts.weight_bytes, f"{gib(facts.weight_bytes)} GiB of weight files"


def checkpoint_weights(facts: ModelFacts) -> Weights | None:
    """Bytes of the weights the runtime holds (all GPUs together), or None when nothing tells.

    GGUF: the file, as llama.cpp maps it. Safetensors with element counts per dtype: their bytes. Else
    parameters: quantized checkpoints keep embeddings and lm_head 16-bit (V33 auto_awq.py:245-300,
    auto_gptq.py:110-207, compressed_tensors.py:160-215), the rest at the scheme's bytes per weight —
    and never less than the weight files (a catalog object's size, the Hub listing's), since a count
    without the config's vocabulary cannot see which tensors stay 16-bit, nor a rounded count the rest.
    """
    if facts.quantization == Quantization.GGUF and facts.weight_bytes:
        return Weights(facts.weight_bytes, f"weights {gib(facts.weight_bytes)} GiB (GGUF file)")
    if facts.dtype_counts:
        quantized = facts.quantization != Quantization.NONE
        total = 0.0
        for code, count in facts.dtype_counts.items():
            size = 4.0 if code == "F32" and quantized else _ELEMENT.get(code, 2.0)
            total += count * size
        amount = math.ceil(total)
        listed = ", ".join(f"{c} {n:,}" for c, n in sorted(facts.dtype_counts.items()))
        return Weights(amount, f"weights {gib(amount)} GiB (safetensors elements: {listed})")
    files = _files_as_loaded(facts)
    params = facts.parameter_count
    if not params:
        if files:
            return Weights(files[0], f"weights {gib(files[0])} GiB ({files[1]})")
        return None
    per, per_words = _linear_bytes(facts)
    sixteen = 0
    if facts.quantization != Quantization.NONE and facts.vocab_size and facts.hidden_size:
        embed = facts.vocab_size * facts.hidden_size
        sixteen = min(params, embed if facts.tie_word_embeddings else 2 * embed)
    amount = math.ceil((params - sixteen) * per + sixteen * 2)
    words = f"weights {params:,} parameters × {per_words}"
    if sixteen:
        words = (
            f"weights {params - sixteen:,} parameters × {per_words} + {sixteen:,} embedding/lm_head "
            "parameters × 2 B (kept 16-bit)"
        )
    if files and files[0] > amount:
        return Weights(
            files[0], f"{words} = {gib(amount)} GiB, less than the {files[1]}: {gib(files[0])} GiB"
        )
    return Weights(amount, f"{words} = {gib(amount)} GiB")
