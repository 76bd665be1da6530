"""The unit tests' device builders publish the NVIDIA DRA driver's shapes (issue 41): the fixtures of
`data/driver` hold them as they hold the renderer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_testing import fleet_consumable, fleet_device_classes, fleet_gpu, fleet_mig

DATA = Path(__file__).parent / "data" / "driver"


def published(name: str) -> dict[str, dict[str, Any]]:
    return {
        d["name"]: d
        for s in yaml.safe_load_all((DATA / f"{name}.yaml").read_text())
        for d in s["spec"].get("devices", [])
    }


def test_a_shareable_gpu_is_the_drivers_under_shares_100() -> None:
    want = published("shares-100")["gpu-0"]
    got = fleet_gpu("node-1", 0, memory_gi="81559Mi", shares=True)
    assert got["capacity"] == want["capacity"]
    assert got["allowMultipleAllocations"] is True
    assert set(got["attributes"]) == set(want["attributes"])


@pytest.mark.parametrize(
    ("shares", "fixture"), [(10, "shares-10"), ("memory", "shares-memory"), ("unlimited", "shares-unlimited")]
)
def test_a_gpu_under_each_shares_setting(shares: int | str, fixture: str) -> None:
    assert (
        fleet_gpu("node-1", 0, memory_gi="81559Mi", shares=shares)["capacity"]
        == published(fixture)["gpu-0"]["capacity"]
    )
    assert fleet_consumable("81559Mi", shares) == published(fixture)["gpu-0"]["capacity"]


def test_a_whole_gpu_without_shares_publishes_its_memory_alone() -> None:
    got = fleet_gpu("node-1", 0, memory_gi="81559Mi", shares=False, release="v0.4.1")
    want = published("whole-v0.4.1")["gpu-0"]
    assert (got["capacity"], set(got["attributes"])) == (want["capacity"], set(want["attributes"]))
    assert "allowMultipleAllocations" not in got


def test_a_static_mig_device_is_named_and_sized_as_the_driver_does() -> None:
    want = published("static-mig")["gpu-0-mig-3g20gb-9-4"]
    got = fleet_mig("node-1", 0, "3g.20gb", 4, 20, product="NVIDIA A100-SXM4-40GB")
    assert (got["name"], got["capacity"], set(got["attributes"])) == (
        want["name"],
        want["capacity"],
        set(want["attributes"]),
    )
    shared = fleet_mig("node-1", 0, "3g.20gb", 4, product="NVIDIA A100-SXM4-40GB", shares=10)
    assert shared["capacity"] == published("shares-10-static-mig")["gpu-0-mig-3g20gb-9-4"]["capacity"]


def test_a_mig_slot_is_its_start_or_the_slot_th_start() -> None:
    assert fleet_mig("n", 0, "3g.40gb", 4)["name"] == "gpu-0-mig-3g40gb-9-4"
    assert fleet_mig("n", 0, "3g.40gb", 1)["name"] == "gpu-0-mig-3g40gb-9-4"  # callers that count instances
    with pytest.raises(ValueError, match="40448Mi, not 30 GiB"):
        fleet_mig("n", 0, "3g.40gb", 0, 30)
    with pytest.raises(ValueError, match="no MIG profile"):
        fleet_mig("n", 0, "3g.47gb", 0)


def test_the_device_classes_are_the_charts() -> None:
    assert [c["metadata"]["name"] for c in fleet_device_classes()] == [
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
    ]
