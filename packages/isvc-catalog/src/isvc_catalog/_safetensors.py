"""Safetensors headers: read them from the first bytes of a file, write them for stand-in files.

A safetensors file starts with an 8-byte little-endian header length, then a JSON header mapping
each tensor name to its dtype, shape and data offsets. The header alone tells the parameter count
and dtype of a model, so nothing of the weights needs downloading.
"""

from __future__ import annotations

import json
import math
import re
import struct
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from isvc_api import Quantization

__all__ = [
    "DTYPE_BYTES",
    "MAX_HEADER_BYTES",
    "TORCH_DTYPES",
    "SafetensorsHeaderError",
    "build_header",
    "count_elements",
    "header_length",
    "logical_parameters",
]

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the format's own limit

# safetensors dtype code -> bytes per element
DTYPE_BYTES: Mapping[str, float] = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
}

# safetensors dtype code <-> the torch name config.json uses
TORCH_DTYPES: Mapping[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}


class SafetensorsHeaderError(ValueError):
    """The bytes are not a safetensors header."""


def header_length(prefix: bytes | bytearray) -> int:
    """The header length announced by the first 8 bytes of a file."""
    if len(prefix) < 8:
        raise SafetensorsHeaderError(f"a safetensors file starts with 8 bytes, got {len(prefix)}")
    (length,) = struct.unpack("<Q", prefix[:8])
    if not 2 <= length <= MAX_HEADER_BYTES:
        raise SafetensorsHeaderError(f"header length {length} is outside 2..{MAX_HEADER_BYTES}")
    return int(length)


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_ASCII = bytes(range(128)) + b"?" * 128  # non-ASCII bytes (only ever inside JSON strings) read as '?'


def _records(text: str) -> Iterator[tuple[str, Any]]:
    """The (name, record) pairs of the header's top-level object, one at a time: the object itself is never
    built (a header of a million small records would be a million dicts, issue 29)."""

    def space(at: int) -> int:
        match = _SPACE.match(text, at)
        return match.end() if match else at

    at = space(0)
    if text[at : at + 1] != "{":
        raise SafetensorsHeaderError("the header is not a JSON object")
    at = space(at + 1)
    if text[at : at + 1] == "}":
        at = space(at + 1)
    else:
        while True:
            if text[at : at + 1] != '"':
                raise ValueError(f"a name expected at {at}")
            name, at = _DECODER.raw_decode(text, at)
            at = space(at)
            if text[at : at + 1] != ":":
                raise ValueError(f"':' expected at {at}")
            record, at = _DECODER.raw_decode(text, space(at + 1))
            yield name, record
            at = space(at)
            if text[at : at + 1] == ",":
                at = space(at + 1)
                continue
            if text[at : at + 1] != "}":
                raise ValueError(f"',' or '}}' expected at {at}")
            at = space(at + 1)
            break
    if at != len(text):
        raise ValueError(f"extra data at {at}")


def count_elements(header: bytes | bytearray) -> Counter[str]:
    """Element counts per dtype code declared by a JSON header (tensor names are not kept, so a name's
    characters beyond ASCII are read as '?': the text then costs a byte a character)."""
    text = (header if header.isascii() else header.translate(_ASCII)).decode("ascii")
    counts: Counter[str] = Counter()
    try:
        for name, tensor in _records(text):
            if name == "__metadata__":
                continue
            shown = repr(name)[:80]
            if not isinstance(tensor, dict):
                raise SafetensorsHeaderError(f"tensor {shown} is not an object")
            dtype, shape = tensor.get("dtype"), tensor.get("shape")
            if not isinstance(dtype, str) or not isinstance(shape, list):
                raise SafetensorsHeaderError(f"tensor {shown} lacks dtype or shape")
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                raise SafetensorsHeaderError(f"tensor {shown} has a shape that is not a list of sizes")
            counts[sys.intern(dtype)] += math.prod(shape)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, SafetensorsHeaderError):
            raise
        raise SafetensorsHeaderError(f"the header is not JSON: {str(exc)[:120]}") from None
    return counts


def build_header(
    tensors: Iterable[tuple[str, str, list[int]]], metadata: Mapping[str, str] | None = None
) -> tuple[bytes, int]:
    """The leading bytes of a safetensors file (length + padded JSON) and the data size after it."""
    doc: dict[str, Any] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for name, dtype, shape in tensors:
        size = math.ceil(math.prod(shape) * DTYPE_BYTES[dtype])
        doc[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(doc, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offset


def logical_parameters(
    counts: Mapping[str, int],
    quantization: Quantization,
    bits: int | None,
    group_size: int | None,
) -> int:
    """Parameters of the unquantized model, from element counts of the stored tensors.

    AWQ and GPTQ pack 32/bits weights into each I32 element and add one scale (F16) and one packed
    zero point per group; bitsandbytes 4-bit packs two weights into each U8. Other schemes store one
    element per parameter. The result is exact for the usual layouts and a close estimate otherwise.
    """
    total = sum(counts.values())
    if quantization in (Quantization.AWQ, Quantization.GPTQ) and bits and counts.get("I32"):
        packed = counts["I32"]
        other = total - packed
        per_element = 32 // bits
        if group_size and group_size > 0:
            weights = packed * per_element * group_size // (group_size + 1)
            scales = weights // group_size
            return weights + max(other - scales, 0)
        return packed * per_element + other
    if quantization == Quantization.BITSANDBYTES and bits == 4 and counts.get("U8"):
        return total + counts["U8"]
    return total
