"""The fleet file renders to Nodes, the driver chart's DeviceClasses and the ResourceSlices the NVIDIA DRA
driver publishes (no cluster)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_planner_client import CelJudge, device_activation
from isvc_testbed import FleetError
from isvc_testbed.fleet import DRIVER, FLEET_NODE_LABEL, POOL_LABEL, Fleet
from isvc_testbed.realnode import REAL_NODE_GPU, REAL_NODE_NAME, gpu_pool

DEFAULT = Path(__file__).resolve().parents[2] / "fleets" / "default.yaml"
PARTITIONED = DEFAULT.parent / "partitioned.yaml"
DRIVER_FIXTURES = (
    Path(__file__).resolve().parents[3] / "packages" / "isvc-testing" / "tests" / "data" / "driver"
)


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


# The fake's node for each of the driver's modes, from the inputs the fixtures of
# packages/isvc-testing/tests/data/driver were published for (issue 41).
H100 = {
    "product": "NVIDIA H100 80GB HBM3",
    "memory": "81559Mi",
    "architecture": "Hopper",
    "cudaComputeCapability": "9.0",
}
A100 = {
    "product": "NVIDIA A100-SXM4-40GB",
    "memory": "40Gi",
    "architecture": "Ampere",
    "cudaComputeCapability": "8.0",
}
TWO_3G = {**A100, "mig": ["3g.20gb", "3g.20gb"]}
MODES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "whole-v0.4.1": ({"release": "v0.4.1"}, H100),
    "static-mig": ({"release": "main"}, TWO_3G),
    "dynamic-mig-a100": ({"release": "main", "dynamicMIG": True}, {**A100, "migMode": True}),
    "shares-100": ({"release": "main", "consumableShares": "100"}, H100),
    "shares-10": ({"release": "main", "consumableShares": "10"}, H100),
    "shares-memory": ({"release": "main", "consumableShares": "memory"}, H100),
    "shares-unlimited": ({"release": "main", "consumableShares": "unlimited"}, H100),
    "shares-10-static-mig": ({"release": "main", "consumableShares": "10"}, TWO_3G),
}
IDENTITIES = ("uuid", "parentUUID", "resource.kubernetes.io/pciBusID")


def anonymous(slices: list[dict[str, Any]], ordered: bool) -> list[dict[str, Any]]:
    """Slices without what names one card (uuids, bus IDs, the pool's label), devices by name unless the
    driver orders them (DynamicMIG)."""
    out = copy.deepcopy(slices)
    for s in out:
        s["metadata"].pop("labels", None)
        if "generateName" in s["metadata"]:
            s["metadata"]["name"] = s["metadata"].pop("generateName").rstrip("-")
        for d in s["spec"].get("devices", []):
            for name in IDENTITIES:
                if name in d["attributes"]:
                    d["attributes"][name] = "<identity>"
        if not ordered and "devices" in s["spec"]:
            s["spec"]["devices"].sort(key=lambda d: d["name"])
    return out


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_fakes_node_is_what_the_driver_published_for_it(mode: str) -> None:
    """A node of the fake in each mode against what the driver's own code published for the same card: a
    drift of the fake from the driver's shapes fails here."""
    driver, gpus = MODES[mode]
    one = Fleet.from_dict({"driver": driver, "nodes": [{"name": "node-1", "gpus": [gpus]}]}, mode)
    got = one.render_slices(one.node("node-1"), 1, node_uid="<node uid>")
    want = list(yaml.safe_load_all((DRIVER_FIXTURES / f"{mode}.yaml").read_text()))
    ordered = bool(driver.get("dynamicMIG"))
    assert anonymous(want, ordered) == anonymous(got, ordered)


def test_the_fakes_dynamic_mig_h100_under_shares_is_what_the_driver_published() -> None:
    """The fixture shows the counters slice, the whole card and the first placement of an H100."""
    driver = {"release": "main", "dynamicMIG": True, "consumableShares": "10"}
    one = Fleet.from_dict({"driver": driver, "nodes": [{"name": "node-1", "gpus": [H100]}]})
    got = anonymous(one.render_slices(one.node("node-1"), 1, node_uid="<node uid>"), True)
    fixture = DRIVER_FIXTURES / "dynamic-mig-h100-shares-10-partial.yaml"
    want = anonymous(list(yaml.safe_load_all(fixture.read_text())), True)
    assert got[0] == want[0]
    assert got[1]["spec"]["devices"][:2] == want[1]["spec"]["devices"]


def test_the_default_fleet_is_one_installation_of_shares_100(fleet: Fleet) -> None:
    slices = fleet.render_slices(fleet.node("gpu-h100-0"), generation=3, node_uid="uid-1")
    devs = devices_of(slices)
    assert sorted(devs) == [f"gpu-{i}" for i in range(8)]
    gpu = devs["gpu-5"]
    assert gpu["allowMultipleAllocations"] is True
    assert gpu["capacity"] == {
        "memory": {
            "value": "81559Mi",
            "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "81559Mi", "step": "1Mi"}},
        },
        "shares": {
            "value": "100",
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}},
        },
    }
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu["attributes"]["driverVersion"] == {"version": "580.95.5"}
    assert "partitionable" not in gpu["attributes"]
    [only] = slices
    assert only["metadata"]["name"] == "00000-gpu.nvidia.com-gpu-h100-0"
    assert only["metadata"]["labels"] == {POOL_LABEL: "gpu-h100-0"}
    assert only["spec"]["pool"] == {"name": "gpu-h100-0", "generation": 3, "resourceSliceCount": 1}
    assert only["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert only["spec"]["driver"] == DRIVER


def test_a_device_without_memory_is_multi_allocatable_with_no_capacity(fleet: Fleet) -> None:
    """NVML reports no memory: the driver publishes no capacity, and consumable shares add the flag alone."""
    [device] = devices_of(fleet.render_slices(fleet.node("gpu-nomem-0"), 1)).values()
    assert "capacity" not in device and device["allowMultipleAllocations"] is True


def test_the_default_a100s_are_two_whole_cards_and_four_static_mig_devices(fleet: Fleet) -> None:
    """Under shares a MIG device is multi-allocatable too, its engines and memory slices without a request
    policy: a claim takes them whole."""
    devs = devices_of(fleet.render_slices(fleet.node("gpu-a100-0"), 1))
    assert sorted(devs) == [
        "gpu-0",
        "gpu-1",
        "gpu-2-mig-3g20gb-9-0",
        "gpu-2-mig-3g20gb-9-4",
        "gpu-3-mig-3g20gb-9-0",
        "gpu-3-mig-3g20gb-9-4",
    ]
    mig = devs["gpu-3-mig-3g20gb-9-4"]
    assert mig["attributes"]["profile"] == {"string": "3g.20gb"}
    parent, own = mig["attributes"]["parentUUID"]["string"], mig["attributes"]["uuid"]["string"]
    assert parent.startswith("GPU-") and own.startswith("MIG-")
    assert parent not in {d["attributes"]["uuid"]["string"] for d in (devs["gpu-0"], devs["gpu-1"])}
    assert mig["allowMultipleAllocations"] is True
    assert [k for k, c in mig["capacity"].items() if "requestPolicy" in c] == ["memory", "shares"]
    assert {f"memorySlice{i}" for i in range(4, 8)} <= set(mig["capacity"])
    assert "consumesCounters" not in mig


def test_the_partitioned_fleet_publishes_counters_apart_and_placements_without_uuid() -> None:
    part = Fleet.load(PARTITIONED)
    slices = part.render_slices(part.node("part-h100-0"), 1)
    assert [("sharedCounters" in s["spec"], len(s["spec"].get("devices", []))) for s in slices] == [
        (True, 0),
        (False, 26),
        (False, 26),
    ]
    assert [c["name"] for c in slices[0]["spec"]["sharedCounters"]] == [
        "gpu-0-counter-set",
        "gpu-1-counter-set",
    ]
    whole = slices[1]["spec"]["devices"][0]
    assert whole["name"] == "gpu-0" and whole["capacity"]["memory"] == {"value": "81152Mi"}
    assert len(whole["consumesCounters"][0]["counters"]) == 15
    a100 = devices_of(part.render_slices(part.node("part-a100-0"), 1))
    assert "gpu-0" not in a100 and len(a100) == 50
    placement = a100["gpu-1-mig-3g20gb-9-4"]
    assert "uuid" not in placement["attributes"]
    assert placement["consumesCounters"][0]["counterSet"] == "gpu-1-counter-set"
    [l4] = part.render_slices(part.node("part-l4-0"), 1)
    assert [d["name"] for d in l4["spec"]["devices"]] == ["gpu-0"] and "sharedCounters" not in l4["spec"]
    assert part.device("part-a100-0", "gpu-0-mig-1g5gb-19-6").uuid is None


def test_device_classes_are_the_charts() -> None:
    classes = {c["metadata"]["name"]: c["spec"] for c in Fleet.render_device_classes()}
    sel = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"
    assert {n: c["selectors"][0]["cel"]["expression"] for n, c in classes.items()} == {
        "gpu.nvidia.com": sel.format("gpu"),
        "mig.nvidia.com": sel.format("mig"),
        "vfio.gpu.nvidia.com": sel.format("vfio"),
    }
    assert classes["gpu.nvidia.com"]["extendedResourceName"] == "nvidia.com/gpu"


def test_uuids_are_stable_and_distinct(fleet: Fleet) -> None:
    again = Fleet.load(DEFAULT)
    uuids = [d.uuid for d in fleet.devices()]
    assert uuids == [d.uuid for d in again.devices()]
    assert len(set(uuids)) == len(uuids) and None not in uuids


def test_system_node_has_no_slices(fleet: Fleet) -> None:
    assert fleet.render_slices(fleet.node("system-0"), 1) == []


def test_unknown_device_cannot_be_withdrawn(fleet: Fleet) -> None:
    with pytest.raises(FleetError, match="gpu-9"):
        fleet.device("gpu-l4-0", "gpu-9")


@pytest.mark.parametrize(
    ("driver", "group", "words"),
    [
        (None, H100, "`driver: {release, dynamicMIG, consumableShares}` is required"),
        ({"release": "v0.4.1", "consumableShares": "100"}, H100, "needs the driver's main"),
        ({"release": "main"}, {**H100, "shares": 100}, "set `driver.consumableShares`"),
        ({"release": "main"}, {**A100, "partitions": []}, "`driver.dynamicMIG: true`"),
        ({"release": "main", "dynamicMIG": True}, TWO_3G, "DynamicMIG destroys MIG devices"),
        ({"release": "main"}, {**A100, "mig": [{"profile": "1g.5gb"}]}, "`mig` lists MIG profiles"),
        ({"release": "main"}, {**A100, "mig": ["4g.20gb", "4g.20gb"]}, "do not fit one"),
        ({"release": "main"}, {**A100, "mig": ["3g.40gb"]}, "no MIG profile '3g.40gb'"),
        ({"release": "main"}, {**H100, "product": "NVIDIA L4", "migMode": True}, "no MIG profiles known"),
    ],
)
def test_a_fleet_the_driver_cannot_publish_is_refused(
    driver: dict[str, Any] | None, group: dict[str, Any], words: str
) -> None:
    raw: dict[str, Any] = {"nodes": [{"name": "n", "gpus": [group]}]}
    if driver is not None:
        raw["driver"] = driver
    with pytest.raises(FleetError, match=re.escape(words)):
        Fleet.from_dict(raw)


def test_each_fleet_file_keeps_to_its_own_devices_by_its_selector() -> None:
    """Fleets of one product are published side by side (the agreement, the per-mode orders): each file's
    host driver version is its own, and its selector admits its devices and no other fleet's."""
    fleets = {p.stem: Fleet.load(p) for p in sorted(DEFAULT.parent.glob("*.yaml"))}
    assert len({f.driver_version for f in fleets.values()}) == len(fleets)
    judge = CelJudge()
    for name, fleet in fleets.items():
        for other, devices in ((o, f) for o, f in fleets.items()):
            for spec in devices.nodes:
                for device in devices.render_devices(spec):
                    admitted = judge.matches(fleet.selector(), device_activation(DRIVER, device))
                    assert admitted == (other == name), (name, other, device["name"])


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
    policy = {"default": "0", "validRange": {"min": "0", "max": "16Gi", "step": "1Mi"}}
    assert card["capacity"]["memory"] == {"value": "16Gi", "requestPolicy": policy}
    assert card["attributes"]["productName"] == {"string": "NVIDIA T4"}
    assert card["attributes"]["uuid"]["string"] not in {d.uuid for d in fleet.devices()}
