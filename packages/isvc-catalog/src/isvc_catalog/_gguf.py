"""The header of a GGUF file, read from its first bytes with the `gguf` package (ggml-org's own reader).

GGUF (ggml-org/ggml docs/gguf.md): magic, version, tensor and key/value counts, the key/values
(`general.architecture`, `[arch].block_count`, `[arch].attention.head_count`, `tokenizer.chat_template`
…), then one record per tensor (name, shape, ggml type, offset), then the tensor data. Everything a
planner needs is before the data, so a Range request of the file's first megabytes is enough.

`gguf.GGUFReader` maps a whole file and builds numpy views of every tensor and every vocabulary entry;
`HeaderReader` keeps its parsing of the header and the tensor records but steps over arrays (the
vocabulary and merges, megabytes the planner does not need) by their size, and records each tensor's
element count and bytes (`gguf.GGML_QUANT_SIZES`) instead of viewing its data.
"""

from __future__ import annotations

import math
import struct
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType, ReaderField

__all__ = ["GgufHeader", "GgufHeaderError", "TruncatedHeader", "read_gguf_header"]

_MAGIC = b"GGUF"


class GgufHeaderError(ValueError):
    """The bytes are not the start of a GGUF file."""


class TruncatedHeader(Exception):
    """The header goes on past the bytes given: read more of the file."""


@dataclass
class GgufHeader:
    """What the header of one GGUF file says."""

    values: dict[str, Any] = field(default_factory=dict)  # scalar and string key/values
    array_lengths: dict[str, int] = field(default_factory=dict)  # key -> element count of an array value
    parameters: int = 0  # elements of the tensors in this file
    tensor_bytes: int = 0  # bytes of the tensors in this file, as stored
    tensor_types: Counter[str] = field(default_factory=Counter)  # ggml type -> tensors

    @property
    def architecture(self) -> str | None:
        arch = self.values.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_int(self, key: str) -> int | None:
        """An integer value of `[arch].key` (e.g. block_count); None when absent or not an integer."""
        value = self.values.get(f"{self.architecture}.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class HeaderReader(GGUFReader):
    """GGUFReader over a file's first bytes: arrays stepped over, tensors sized but not viewed."""

    def __init__(self, path: str) -> None:
        self.array_lengths: dict[str, int] = {}
        self.tensor_sizes: list[tuple[str, int, int]] = []  # ggml type, elements, bytes
        super().__init__(path)

    def _get_field_parts(
        self,
        orig_offs: int,
        raw_type: int,
    ) -> tuple[int, list[npt.NDArray[Any]], list[int], list[GGUFValueType]]:
        if GGUFValueType(raw_type) != GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        raw_itype = self._get(orig_offs, np.uint32)
        length = self._get(orig_offs + 4, np.uint64)
        if len(raw_itype) < 1 or len(length) < 1:
            raise TruncatedHeader
        item, count, offs = GGUFValueType(int(raw_itype[0])), int(length[0]), orig_offs + 12
        scalar = self.gguf_scalar_to_np.get(item)
        if scalar is not None:
            offs += count * np.dtype(scalar).itemsize
        elif item == GGUFValueType.STRING:
            length_of = struct.Struct(">Q" if self.byte_order == "S" else "<Q").unpack_from
            raw = memoryview(self.data.data)
            try:
                for _ in range(count):
                    offs += 8 + length_of(raw, offs)[0]
            except struct.error:
                raise TruncatedHeader from None
        else:  # arrays of arrays: rare, and small; the reader's own walk
            return super()._get_field_parts(orig_offs, raw_type)
        if offs > len(self.data):
            raise TruncatedHeader
        return offs - orig_offs, [raw_itype, length], [], [GGUFValueType.ARRAY, item]

    def _push_field(self, field: ReaderField, skip_sum: bool = False) -> int:
        if field.types[:1] == [GGUFValueType.ARRAY] and not field.data:
            self.array_lengths[field.name] = int(field.parts[4][0])
        return super()._push_field(field, skip_sum)

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        if start_offs > len(self.data) + self.alignment:
            raise TruncatedHeader
        for record in fields:
            _len, _name, _n_dims, dims, raw_dtype, _offset = record.parts
            kind = GGMLQuantizationType(int(raw_dtype[0]))
            elements = math.prod(int(d) for d in dims)
            block, size = GGML_QUANT_SIZES[kind]
            self.tensor_sizes.append((kind.name, elements, elements * size // block))


def read_gguf_header(head: bytes) -> GgufHeader:
    """The header in `head`, the first bytes of a GGUF file.

    Raises TruncatedHeader when the header goes on past `head`, GgufHeaderError when it is not GGUF.
    """
    if head[:4] != _MAGIC:
        raise GgufHeaderError("the file does not start with the GGUF magic")
    with tempfile.NamedTemporaryFile(prefix="isvc-gguf-", suffix=".gguf") as scratch:
        scratch.write(head)
        scratch.flush()
        try:
            reader = HeaderReader(scratch.name)
        except TruncatedHeader:
            raise
        except KeyError as exc:  # a key twice
            raise GgufHeaderError(f"duplicate key {exc}") from None
        except ValueError as exc:
            if len(head) >= 24 and ("version" in str(exc) or "alignment" in str(exc)):
                raise GgufHeaderError(str(exc)) from None
            raise TruncatedHeader from exc  # a value cut short by the end of `head`
        except (IndexError, struct.error) as exc:
            raise TruncatedHeader from exc
        header = GgufHeader(array_lengths=dict(reader.array_lengths))
        for name, record in reader.fields.items():
            if record.types and record.types[0] != GGUFValueType.ARRAY and not name.startswith("GGUF."):
                header.values[name] = record.contents()
        for kind, elements, size in reader.tensor_sizes:
            header.parameters += elements
            header.tensor_bytes += size
            header.tensor_types[kind] += 1
        del reader  # release the map before the file goes
    return header
