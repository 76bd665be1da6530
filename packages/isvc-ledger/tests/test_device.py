"""Devices read from their slices: what devices alike publish is kept once, and reads the same (issue 43)."""

from __future__ import annotations

import copy
import json
from typing import Any

from isvc_ledger import Books


def _device(index: int, memory: str = "80Gi", product: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{index:08d}"},
            "productName": {"string": product},
            "cudaComputeCapability": {"version": "9.0.0"},
        },
        "capacity": {
            "memory": {
                "value": memory,
                "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "1Mi"}},
            },
            "shares": {
                "value": "100",
                "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "100"}},
            },
        },
        "allowMultipleAllocations": True,
    }


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


CLASS = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
}


def test_devices_alike_keep_what_they_publish_once_and_read_the_same() -> None:
    listed = [
        _slice("n0", [_device(0), _device(1)]),
        _slice(
            "n1", [_device(2, "40Gi", "NVIDIA A100-SXM4-40GB"), _device(3, "40Gi", "NVIDIA A100-SXM4-40GB")]
        ),
    ]
    # parsed from one JSON text, as the watches parse a page: equal values are separate objects
    slices = json.loads(json.dumps(listed))
    before = copy.deepcopy(slices)
    books = Books.from_objects([CLASS], slices, [])
    assert slices == before  # what is kept is what was listed
    d = [books.fleet.devices[("gpu.nvidia.com", f"n{i // 2}", f"gpu-{i}")].raw for i in range(4)]
    assert d[0]["capacity"] is d[1]["capacity"] and d[2]["capacity"] is d[3]["capacity"]
    assert d[0]["capacity"] is not d[2]["capacity"]  # a different model publishes other capacities
    assert d[0]["attributes"]["type"] is d[3]["attributes"]["type"]  # equal to the last read: kept once
    assert d[0]["attributes"]["uuid"] is not d[1]["attributes"]["uuid"]
    fresh = Books.from_objects([CLASS], before, [])
    for key, device in books.fleet.devices.items():
        other = fresh.fleet.devices[key]
        assert (device.memory, device.product, device.uuid, device.classes, device.shareable) == (
            other.memory,
            other.product,
            other.uuid,
            other.classes,
            other.shareable,
        )
