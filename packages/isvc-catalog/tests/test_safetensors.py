from __future__ import annotations

import json
import struct

import pytest
from isvc_api import Quantization
from isvc_catalog._safetensors import (
    SafetensorsHeaderError,
    build_header,
    count_elements,
    header_length,
    logical_parameters,
)


def test_a_built_header_reads_back_with_its_element_counts() -> None:
    prefix, data = build_header([("a", "BF16", [4096, 128]), ("b", "F32", [7]), ("c", "BF16", [3])])
    length = header_length(prefix[:8])
    assert 8 + length == len(prefix)
    assert length % 8 == 0
    assert dict(count_elements(prefix[8:])) == {"BF16": 4096 * 128 + 3, "F32": 7}
    assert data == 4096 * 128 * 2 + 7 * 4 + 3 * 2
    assert json.loads(prefix[8:])["b"]["data_offsets"] == [4096 * 128 * 2, 4096 * 128 * 2 + 28]


@pytest.mark.parametrize(
    "prefix",
    [b"\x01\x00", struct.pack("<Q", 0), struct.pack("<Q", 1 << 40)],
)
def test_an_impossible_header_length_is_rejected(prefix: bytes) -> None:
    with pytest.raises(SafetensorsHeaderError):
        header_length(prefix)


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"[1,2]",
        b'{"t": 3}',
        b'{"t": {"dtype": "F16"}}',
        b'{"t": {"dtype": "F16", "shape": [-1]}}',
    ],
)
def test_a_header_that_is_not_a_tensor_table_is_rejected(header: bytes) -> None:
    with pytest.raises(SafetensorsHeaderError):
        count_elements(header)


@pytest.mark.parametrize(
    ("counts", "quantization", "bits", "group", "expected"),
    [
        # Qwen2.5-32B-Instruct-AWQ: stored I32/F16 counts -> its published 32.76B parameters
        ({"I32": 3_931_176_960, "F16": 1_802_048_512}, Quantization.AWQ, 4, 128, 32_763_876_352),
        ({"I32": 100, "F16": 50}, Quantization.GPTQ, 4, None, 850),
        ({"I32": 100, "F16": 50}, Quantization.GPTQ, 8, None, 450),
        ({"U8": 100, "F32": 10}, Quantization.BITSANDBYTES, 4, None, 210),
        ({"I8": 100, "F32": 10}, Quantization.BITSANDBYTES, 8, None, 110),
        ({"F8_E4M3": 100, "BF16": 10}, Quantization.FP8, 8, None, 110),
        ({"BF16": 7_615_616_512}, Quantization.NONE, None, None, 7_615_616_512),
    ],
)
def test_logical_parameters_undo_the_packing_of_the_quantization(
    counts: dict[str, int], quantization: Quantization, bits: int | None, group: int | None, expected: int
) -> None:
    assert expected == logical_parameters(counts, quantization, bits, group)
