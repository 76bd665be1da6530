"""The fleet file renders to NVIDIA-shaped Nodes, DeviceClasses and ResourceSlices (no cluster)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from isvc_testbed import FleetError
from isvc_testbed.fleet import DRIVER, FLEET_NODE_LABEL, Fleet
from isvc_testbed.realnode import REAL_NODE_GPU, REAL_NODE_NAME, gpu_pool

DEFAULT = Path(__file__).resolve().parents[2] / "fleets" / "default.yaml"


@pytest.fixture
def fleet() -> Fleet:
    return Fleet.load(DEFAULT)


def devices_of(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for s in slices for d in s["spec"].get("devices", [])}


def test_gpu_node_is_a_kwok_node_with_the_fleet_label_and_allocatable(fleet: Fleet) -> None:
    node = fleet.render_node(fleet.node("gpu-h100-0"))
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"][FLEET_NODE_LABEL] == "true"
    assert (
        node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    )  # as GPU Feature Discovery labels it
    assert "nvidia.com/gpu.present" not in fleet.render_node(fleet.node("system-0"))["metadata"]["labels"]
    assert node["status"]["allocatable"] == {
        "cpu": "192",
        "memory": "2Ti",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }


def test_shareable_h100_devices_carry_the_consumable_shares_shape(fleet: Fleet) -> None:
    slices = fleet.render_slices(fleet.node("gpu-h100-0"), generation=3, node_uid="uid-1")
    devs = devices_of(slices)
    assert sorted(devs) == [f"gpu-{i}" for i in range(8)]
    gpu = devs["gpu-5"]
    assert gpu["allowMultipleAllocations"] is True
    assert gpu["capacity"]["shares"] == {
        "value": "100",
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}},
    }
    assert gpu["capacity"]["memory"]["value"] == "80Gi"
    assert gpu["capacity"]["memory"]["requestPolicy"]["default"] == "0"
    assert gpu["attributes"]["type"] == {"string": "gpu"}
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    [only] = slices
    assert only["spec"]["pool"] == {"name": "gpu-h100-0", "generation": 3, "resourceSliceCount": 1}
    assert only["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert only["spec"]["driver"] == DRIVER


def test_device_without_memory_profile_has_no_memory_capacity(fleet: Fleet) -> None:
    devs = devices_of(fleet.render_slices(fleet.node("gpu-nomem-0"), 1))
    assert "memory" not in devs["gpu-0"]["capacity"]
    assert "shares" in devs["gpu-0"]["capacity"]


def test_partitionable_a100s_publish_counters_in_their_own_slice(fleet: Fleet) -> None:
    slices = fleet.render_slices(fleet.node("gpu-a100-0"), 1)
    assert [("sharedCounters" in s["spec"], "devices" in s["spec"]) for s in slices] == [
        (True, False),
        (False, True),
    ]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    sets = {c["name"] for c in slices[0]["spec"]["sharedCounters"]}
    assert sets == {"gpu-0-counter-set", "gpu-1-counter-set"}
    devs = devices_of(slices)
    full = devs["gpu-0"]
    assert full["consumesCounters"][0]["counters"]["memory"] == {"value": "40Gi"}
    part = devs["gpu-0-mig-3g20gb-1"]
    assert part["attributes"]["type"] == {"string": "mig"}
    assert part["attributes"]["parentUUID"] == full["attributes"]["uuid"]
    assert part["consumesCounters"][0]["counterSet"] == "gpu-0-counter-set"


def test_static_mig_gpus_publish_only_their_mig_devices(fleet: Fleet) -> None:
    devs = devices_of(fleet.render_slices(fleet.node("gpu-a100-0"), 1))
    assert "gpu-2" not in devs
    mig = devs["gpu-2-mig-3g20gb-0"]
    assert mig["attributes"]["profile"] == {"string": "3g.20gb"}
    assert mig["capacity"]["memory"] == {"value": "20Gi"}
    assert "consumesCounters" not in mig


def test_device_classes_select_by_driver_and_type() -> None:
    exprs = {
        c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
        for c in Fleet.render_device_classes()
    }
    sel = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"
    assert exprs == {"gpu.nvidia.com": sel.format("gpu"), "mig.nvidia.com": sel.format("mig")}


def test_uuids_are_stable_and_distinct(fleet: Fleet) -> None:
    again = Fleet.load(DEFAULT)
    uuids = [d.uuid for d in fleet.devices()]
    assert uuids == [d.uuid for d in again.devices()]
    assert len(set(uuids)) == len(uuids)


def test_system_node_has_no_slices(fleet: Fleet) -> None:
    assert fleet.render_slices(fleet.node("system-0"), 1) == []


def test_unknown_device_cannot_be_withdrawn(fleet: Fleet) -> None:
    with pytest.raises(FleetError, match="gpu-9"):
        fleet.device("gpu-l4-0", "gpu-9")


def test_group_with_both_partition_styles_is_refused() -> None:
    raw = {
        "nodes": [
            {
                "name": "n",
                "gpus": [
                    {
                        "product": "X",
                        "memory": "40Gi",
                        "architecture": "Ampere",
                        "cudaComputeCapability": "8.0.0",
                        "partitions": [{"profile": "1g.5gb", "memory": "5Gi"}],
                        "mig": [{"profile": "1g.5gb", "memory": "5Gi"}],
                    }
                ],
            }
        ]
    }
    with pytest.raises(FleetError, match="not both"):
        Fleet.from_dict(raw)


class FakeCustom:
    """Just enough of CustomObjectsApi for ResourceSlice pools."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 0

    def list_cluster_custom_object(self, g: str, v: str, plural: str, label_selector: str) -> dict[str, Any]:
        key, _, value = label_selector.partition("=")
        return {
            "items": [
                copy.deepcopy(o) for o in self.objects.values() if o["metadata"]["labels"].get(key) == value
            ]
        }

    def create_cluster_custom_object(self, g: str, v: str, plural: str, body: dict[str, Any]) -> None:
        self.rv += 1
        self.objects[body["metadata"]["name"]] = {
            **copy.deepcopy(body),
            "metadata": {**body["metadata"], "resourceVersion": str(self.rv)},
        }

    def replace_cluster_custom_object(
        self, g: str, v: str, plural: str, name: str, body: dict[str, Any]
    ) -> None:
        self.create_cluster_custom_object(g, v, plural, body)

    def delete_cluster_custom_object(self, g: str, v: str, plural: str, name: str) -> None:
        del self.objects[name]


def generations(api: FakeCustom) -> set[int]:
    return {o["spec"]["pool"]["generation"] for o in api.objects.values()}


def test_pool_generation_moves_only_when_the_content_changes(fleet: Fleet) -> None:
    api = FakeCustom()
    spec = fleet.node("gpu-l4-0")
    fleet._publish_pool(api, spec, "uid")  # type: ignore[arg-type]
    fleet._publish_pool(api, spec, "uid")  # type: ignore[arg-type]
    assert generations(api) == {1}
    fleet.withdrawn.add(("gpu-l4-0", "gpu-1"))
    fleet._publish_pool(api, spec, "uid")  # type: ignore[arg-type]
    assert generations(api) == {2}
    assert sorted(devices_of(list(api.objects.values()))) == ["gpu-0"]


def test_render_devices_is_the_device_list_a_node_pool_publishes(fleet: Fleet) -> None:
    spec = fleet.node("gpu-l4-0")
    assert fleet.render_devices(spec) == list(devices_of(fleet.render_slices(spec, generation=1)).values())


def test_the_real_nodes_card_has_the_fleets_shareable_shape_and_a_uuid_of_its_own(fleet: Fleet) -> None:
    """What the DRA plugin of the real node publishes (realnode.py hands it this list)."""
    pool, spec = gpu_pool(REAL_NODE_NAME, (REAL_NODE_GPU,))
    [card] = pool.render_devices(spec)
    l4 = devices_of(fleet.render_slices(fleet.node("gpu-l4-0"), generation=1))["gpu-0"]
    assert set(card) == set(l4)
    assert set(card["attributes"]) == set(l4["attributes"])
    assert card["capacity"]["shares"] == l4["capacity"]["shares"]
    policy = l4["capacity"]["memory"]["requestPolicy"]
    assert card["capacity"]["memory"] == {"value": "16Gi", "requestPolicy": policy}
    assert card["attributes"]["productName"] == {"string": "NVIDIA T4"}
    assert card["attributes"]["uuid"]["string"] not in {d.uuid for d in fleet.devices()}
