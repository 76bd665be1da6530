"""The header of a GGUF file, read from its first bytes with the `gguf` package (ggml-org's own reader).

GGUF (ggml-org/ggml docs/gguf.md): magic, version, tensor and key/value counts, the key/values
(`general.architecture`, `[arch].block_count`, `[arch].attention.head_count`, `tokenizer.chat_template`
…), then one record per tensor (name, shape, ggml type, offset), then the tensor data. Everything a
planner needs is before the data, so a Range request of the file's first megabytes is enough.

`gguf.GGUFReader` maps a whole file and builds numpy views of every tensor and every vocabulary entry;
`HeaderReader` keeps its parsing of the header and the tensor records but steps over arrays (the
vocabulary and merges, megabytes the planner does not need) by their size, and records each tensor's
element count and bytes (`gguf.GGML_QUANT_SIZES`) instead of viewing its data.

A header is a user's input (issue 29): it is read from a file on disk, never held in memory whole; the
counts of keys and tensor records it declares are capped before any is parsed (each record costs the
reader a few hundred bytes of Python objects), keys and tensor names longer than the format allows are
refused, and of its string values only those up to `KEPT_STRING` bytes are decoded.
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

__all__ = [
    "KEPT_STRING",
    "MAX_KEYS",
    "MAX_TENSORS",
    "GgufHeader",
    "GgufHeaderError",
    "TruncatedHeader",
    "read_gguf_header",
    "read_gguf_header_file",
]

_MAGIC = b"GGUF"
# Caps on what one header may declare. Real files: a few dozen keys; a model's tensors in one file number
# about a thousand (a 61-layer mixture of experts with fused expert tensors), a split file fewer.
MAX_KEYS = 4096
MAX_TENSORS = 16384
_MAX_NAME = 65535  # bytes of a key or tensor name (ggml docs/gguf.md: at most 2^16-1)
_MAX_NESTED = 1024  # elements of an array of arrays (the reader walks those one by one)
_MAX_DIMS = 8  # dimensions of a tensor (ggml's GGML_MAX_DIMS is 4)
KEPT_STRING = 1 << 20  # string values longer than this (bytes) are stepped over, not decoded


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

    def _get_str(self, offset: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint8]]:
        """A key or a tensor name: refused past the format's length (it would be decoded whole)."""
        length = self._get(offset, np.uint64)
        if len(length) < 1:
            raise TruncatedHeader
        if int(length[0]) > _MAX_NAME:
            raise GgufHeaderError(f"a name of {int(length[0])} bytes, more than the format's {_MAX_NAME}")
        return super()._get_str(offset)

    def _get_field_parts(
        self,
        orig_offs: int,
        raw_type: int,
    ) -> tuple[int, list[npt.NDArray[Any]], list[int], list[GGUFValueType]]:
        if GGUFValueType(raw_type) == GGUFValueType.STRING:  # a value: any length, viewed, never copied here
            length = self._get(orig_offs, np.uint64)
            if len(length) < 1 or orig_offs + 8 + int(length[0]) > len(self.data):
                raise TruncatedHeader
            data = self.data[orig_offs + 8 : orig_offs + 8 + int(length[0])]
            return 8 + int(length[0]), [length, data], [1], [GGUFValueType.STRING]
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
            if count > _MAX_NESTED:
                raise GgufHeaderError(f"an array of {count} arrays, more than {_MAX_NESTED}")
            return super()._get_field_parts(orig_offs, raw_type)
        if offs > len(self.data):
            raise TruncatedHeader
        return offs - orig_offs, [raw_itype, length], [], [GGUFValueType.ARRAY, item]

    def _push_field(self, field: ReaderField, skip_sum: bool = False) -> int:
        if field.types[:1] == [GGUFValueType.ARRAY] and not field.data:
            self.array_lengths[field.name] = int(field.parts[4][0])
        return super()._push_field(field, skip_sum)

    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[ReaderField]]:
        """Each tensor record read straight into (type, elements, bytes): the reader's own keeps a field of
        six arrays per record, kilobytes each, for names and offsets nothing here reads."""
        order = ">" if self.byte_order == "S" else "<"
        raw = memoryview(self.data.data)
        u32, u64 = struct.Struct(f"{order}I"), struct.Struct(f"{order}Q")
        try:
            for _ in range(count):
                (name,) = u64.unpack_from(raw, offs)
                if name > _MAX_NAME:
                    raise GgufHeaderError(
                        f"a tensor name of {name} bytes, more than the format's {_MAX_NAME}"
                    )
                offs += 8 + name
                (n_dims,) = u32.unpack_from(raw, offs)
                if n_dims > _MAX_DIMS:
                    raise GgufHeaderError(f"a tensor of {n_dims} dimensions, more than {_MAX_DIMS}")
                dims = struct.unpack_from(f"{order}{n_dims}Q", raw, offs + 4)
                (raw_type,) = u32.unpack_from(raw, offs + 4 + 8 * n_dims)
                offs += 4 + 8 * n_dims + 4 + 8
                try:
                    kind = GGMLQuantizationType(raw_type)
                except ValueError:
                    raise GgufHeaderError(f"unknown tensor type {raw_type}") from None
                elements = math.prod(dims)
                block, size = GGML_QUANT_SIZES[kind]
                self.tensor_sizes.append((kind.name, elements, elements * size // block))
        except struct.error:
            raise TruncatedHeader from None
        if offs > len(self.data):
            raise TruncatedHeader
        return offs, []

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        if start_offs > len(self.data) + self.alignment:
            raise TruncatedHeader


def _counts(path: str) -> tuple[int, int]:
    """The tensor and key counts the first 24 bytes of a GGUF file declare (in its own byte order)."""
    with open(path, "rb") as f:
        fixed = f.read(24)
    if fixed[:4] != _MAGIC:
        raise GgufHeaderError("the file does not start with the GGUF magic")
    if len(fixed) < 24:
        raise TruncatedHeader
    order = "<" if struct.unpack("<I", fixed[4:8])[0] & 0xFFFF else ">"
    tensors, keys = struct.unpack(f"{order}QQ", fixed[8:24])
    return int(tensors), int(keys)


def read_gguf_header_file(path: str, values: bool = True) -> GgufHeader:
    """The header in the file at `path`, the first bytes of a GGUF file (mapped, not read into memory);
    `values=False` keeps none of its key/values (the tensors are counted all the same).

    Raises TruncatedHeader when the header goes on past the file, GgufHeaderError when it is not GGUF or
    declares more keys or tensor records than the caps.
    """
    tensors, keys = _counts(path)
    if tensors > MAX_TENSORS:
        raise GgufHeaderError(f"it declares {tensors} tensors, more than {MAX_TENSORS}")
    if keys > MAX_KEYS:
        raise GgufHeaderError(f"it declares {keys} key/values, more than {MAX_KEYS}")
    try:
        reader = HeaderReader(path)
    except (TruncatedHeader, GgufHeaderError):
        raise
    except KeyError as exc:  # a key twice
        raise GgufHeaderError(f"duplicate key {str(exc)[:80]}") from None
    except ValueError as exc:
        if "version" in str(exc) or "alignment" in str(exc):
            raise GgufHeaderError(str(exc)[:200]) from None
        raise TruncatedHeader from exc  # a value cut short by the end of the file
    except (IndexError, struct.error) as exc:
        raise TruncatedHeader from exc
    header = GgufHeader(array_lengths=dict(reader.array_lengths) if values else {})
    for name, record in reader.fields.items() if values else ():
        if not record.types or record.types[0] == GGUFValueType.ARRAY or name.startswith("GGUF."):
            continue
        if record.types[0] == GGUFValueType.STRING and len(record.parts[-1]) > KEPT_STRING:
            continue  # no key the platform reads holds a megabyte of text
        try:
            header.values[name] = record.contents()
        except UnicodeDecodeError:
            continue  # a string that is not UTF-8 says nothing the platform reads
    for kind, elements, size in reader.tensor_sizes:
        header.parameters += elements
        header.tensor_bytes += size
        header.tensor_types[kind] += 1
    del reader  # release the map before the file goes
    return header


def read_gguf_header(head: bytes) -> GgufHeader:
    """The header in `head`, the first bytes of a GGUF file (written to a scratch file, then mapped).

    Raises TruncatedHeader when the header goes on past `head`, GgufHeaderError when it is not GGUF.
    """
    if head[:4] != _MAGIC:
        raise GgufHeaderError("the file does not start with the GGUF magic")
    with tempfile.NamedTemporaryFile(prefix="isvc-gguf-", suffix=".gguf") as scratch:
        scratch.write(head)
        scratch.flush()
        return read_gguf_header_file(scratch.name)
