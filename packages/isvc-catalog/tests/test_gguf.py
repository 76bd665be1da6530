"""Issue 29: what a GGUF header may declare before it is parsed, and what of it is kept.

The reader parses the header of a user's file: the counts of key/values and tensor records are checked
before any is read (each record cost the gguf package's reader kilobytes of Python objects), names longer
than the format allows are refused, and string values past a megabyte are stepped over, never decoded.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter
from isvc_catalog._gguf import (
    KEPT_STRING,
    MAX_KEYS,
    MAX_TENSORS,
    GgufHeaderError,
    TruncatedHeader,
    read_gguf_header,
)

Q4_K = GGMLQuantizationType.Q4_K


def _header(tmp_path: Path, keys: dict[str, object] | None = None, tensors: int = 1) -> bytes:
    path = tmp_path / "h.gguf"
    writer = GGUFWriter(path, "llama")
    writer.add_uint32("llama.block_count", 16)
    for key, value in (keys or {}).items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        else:
            writer.add_uint32(key, int(value))  # type: ignore[call-overload]
    for i in range(tensors):
        writer.add_tensor_info(f"t{i}", (144,), np.dtype(np.uint8), 144, raw_dtype=Q4_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path.read_bytes()


def _declaring(head: bytes, tensors: int | None = None, keys: int | None = None) -> bytes:
    """The header with other counts in its fixed part (magic, version, tensors, key/values)."""
    t, k = struct.unpack_from("<QQ", head, 8)
    return (
        head[:8]
        + struct.pack("<QQ", t if tensors is None else tensors, k if keys is None else keys)
        + head[24:]
    )


def test_a_header_is_read_with_its_tensors_counted(tmp_path: Path) -> None:
    header = read_gguf_header(_header(tmp_path, {"general.name": "m"}, tensors=3))

    assert (header.arch_int("block_count"), header.values["general.name"], header.parameters) == (
        16,
        "m",
        3 * 256,
    )


def test_the_declared_counts_are_capped_before_anything_is_parsed(tmp_path: Path) -> None:
    head = _header(tmp_path)

    with pytest.raises(GgufHeaderError, match=f"declares {MAX_TENSORS + 1} tensors, more than {MAX_TENSORS}"):
        read_gguf_header(_declaring(head, tensors=MAX_TENSORS + 1))
    with pytest.raises(GgufHeaderError, match=f"declares {MAX_KEYS + 1} key/values, more than {MAX_KEYS}"):
        read_gguf_header(_declaring(head, keys=MAX_KEYS + 1))
    with pytest.raises(TruncatedHeader):  # as many as the cap: read, and the bytes run out
        read_gguf_header(_declaring(head, tensors=MAX_TENSORS))


def test_a_name_longer_than_the_format_allows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GgufHeaderError, match="a name of 65536 bytes"):
        read_gguf_header(_header(tmp_path, {"k" * 65536: 1}))


def test_a_string_value_past_a_megabyte_is_stepped_over(tmp_path: Path) -> None:
    head = _header(tmp_path, {"general.huge": "x" * (KEPT_STRING + 1), "general.small": "y" * KEPT_STRING})

    values = read_gguf_header(head).values

    assert ("general.huge" in values, len(values["general.small"])) == (False, KEPT_STRING)


def test_an_array_of_many_arrays_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GgufHeaderError, match="an array of 1025 arrays"):
        read_gguf_header(_header(tmp_path, {"general.nested": [[1]] * 1025}))


def test_a_string_that_is_not_utf8_says_nothing(tmp_path: Path) -> None:
    head = _header(tmp_path, {"general.name": "zz"})
    broken = head.replace(b"zz", b"\xff\xfe")

    assert "general.name" not in read_gguf_header(broken).values
