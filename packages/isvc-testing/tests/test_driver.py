"""The renderer of the NVIDIA DRA driver's shapes against what the driver's own code published for one node per
mode (`data/driver/*.yaml`): a drift in any name, attribute, capacity, counter, policy or slice fails here
(issue 41)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_testing import (
    MIG_PROFILES,
    Gpu,
    Installation,
    MigInstance,
    driver_device_classes,
    driver_slices,
    quantity_binary,
    quantity_decimal,
)

DATA = Path(__file__).parent / "data" / "driver"
MIB = 1 << 20
# NVML memory.total of an H100 80GB HBM3: 81559 MiB (the driver's docs,
# site/content/docs/guides/allocating-gpus.md:510, and nvidia-smi on one).
H100 = Gpu(
    minor=0,
    uuid="GPU-b2b2b2b2-0000-0000-0000-000000000000",
    product="NVIDIA H100 80GB HBM3",
    memory=81559 * MIB,
    architecture="Hopper",
    compute_capability="9.0",
    pci_bus_id="00000000:1B:00.0",  # as NVML gives it; published 0000:1b:00.0
)
# NVML memory.total of an A100-SXM4-40GB: 40960 MiB as assumed by the fixtures (UNCONFIRMED; one public R450
# nvidia-smi shows 40537 MiB: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ examples).
A100 = Gpu(
    minor=0,
    uuid="GPU-a1a1a1a1-0000-0000-0000-000000000000",
    product="NVIDIA A100-SXM4-40GB",
    memory=40960 * MIB,
    architecture="Ampere",
    compute_capability="8.0",
    pci_bus_id="0000:07:00.0",
)
A100_STATIC = replace(
    A100,
    mig_mode=True,
    mig=(
        MigInstance("3g.20gb", 0, "MIG-c3c3c3c3-0000-0000-0000-000000000000"),
        MigInstance("3g.20gb", 4, "MIG-d4d4d4d4-0000-0000-0000-000000000000"),
    ),
)
MAIN = Installation(release="main")
V041 = Installation(release="v0.4.1")
DYNAMIC = Installation(dynamic_mig=True)

# fixture -> (GPUs, installation, whether the driver orders the devices: DynamicMIG sorts them by name)
CASES: dict[str, tuple[list[Gpu], Installation, bool]] = {
    "whole-v0.4.1": ([H100], V041, False),
    "static-mig": ([A100_STATIC], MAIN, False),
    "dynamic-mig-a100": ([replace(A100, mig_mode=True)], DYNAMIC, True),
    "shares-100": ([H100], Installation(consumable_shares="100"), False),
    "shares-10": ([H100], Installation(consumable_shares="10"), False),
    "shares-memory": ([H100], Installation(consumable_shares="memory"), False),
    "shares-unlimited": ([H100], Installation(consumable_shares="unlimited"), False),
    "shares-10-static-mig": ([A100_STATIC], Installation(consumable_shares="10"), False),
}


def fixture(name: str) -> list[dict[str, Any]]:
    """A fixture's slices, named as the fake names them: the driver's generateName without its dash."""
    docs = list(yaml.safe_load_all((DATA / f"{name}.yaml").read_text()))
    for doc in docs:
        doc["metadata"]["name"] = doc["metadata"].pop("generateName").rstrip("-")
    return docs


def without_numa(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same slices as v0.4.1 publishes them: no numaNode (it came after the release)."""
    out = copy.deepcopy(slices)
    for s in out:
        for d in s["spec"].get("devices", []):
            d["attributes"].pop("resource.kubernetes.io/numaNode", None)
    return out


def comparable(slices: list[dict[str, Any]], ordered: bool) -> list[dict[str, Any]]:
    """Slices as they compare: devices in the driver's order where it keeps one, by name where it does not
    (a Go map's order)."""
    out = copy.deepcopy(slices)
    if not ordered:
        for s in out:
            if "devices" in s["spec"]:
                s["spec"]["devices"].sort(key=lambda d: d["name"])
    return out


def render(gpus: list[Gpu], installation: Installation) -> list[dict[str, Any]]:
    return driver_slices("node-1", gpus, installation, node_uid="<node uid>")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_renderer_publishes_what_the_driver_published(name: str) -> None:
    gpus, installation, ordered = CASES[name]
    assert comparable(fixture(name), ordered) == comparable(render(gpus, installation), ordered)


def test_v041_publishes_static_and_dynamic_mig_as_main_does_but_for_numa_node() -> None:
    assert comparable(without_numa(fixture("static-mig")), False) == comparable(
        render([A100_STATIC], V041), False
    )
    dynamic = Installation(release="v0.4.1", dynamic_mig=True)
    assert without_numa(fixture("dynamic-mig-a100")) == render([replace(A100, mig_mode=True)], dynamic)


def test_main_publishes_the_whole_card_with_its_numa_node() -> None:
    [published] = render([H100], MAIN)
    assert published["spec"]["devices"][0]["attributes"]["resource.kubernetes.io/numaNode"] == {"int": 0}
    assert without_numa([published]) == fixture("whole-v0.4.1")


def test_dynamic_mig_with_shares_on_an_h100_publishes_the_whole_card_and_a_stray_shares_counter() -> None:
    """The fixture shows two of the 26 devices: those must match, the rest follow the A100's pattern."""
    want = fixture("dynamic-mig-h100-shares-10-partial")
    got = render([H100], Installation(dynamic_mig=True, consumable_shares="10"))
    assert got[0] == want[0]
    assert got[1]["spec"]["pool"] == want[1]["spec"]["pool"]
    shown = {d["name"] for d in want[1]["spec"]["devices"]}
    assert [d for d in got[1]["spec"]["devices"] if d["name"] in shown] == want[1]["spec"]["devices"]
    assert len(got[1]["spec"]["devices"]) == 1 + sum(len(p.starts) for p in MIG_PROFILES[H100.product])


DRIFTS: dict[str, tuple[str, Callable[[dict[str, Any]], object]]] = {
    "an attribute the driver never publishes": (
        "dynamic-mig-a100",
        lambda d: d["attributes"].update(partitionable={"bool": True}),
    ),
    "a MIG name without profile id and start": (
        "dynamic-mig-a100",
        lambda d: d.update(name=d["name"].rsplit("-", 2)[0]),
    ),
    "a uuid on a dynamic placement": (
        "dynamic-mig-a100",
        lambda d: d["attributes"].update(uuid={"string": "x"}),
    ),
    "memory in GiB": ("shares-100", lambda d: d["capacity"]["memory"].update(value="79Gi")),
    "memory's validRange without max": (
        "shares-100",
        lambda d: d["capacity"]["memory"]["requestPolicy"]["validRange"].pop("max"),
    ),
    "a static MIG device without its memory slices": (
        "static-mig",
        lambda d: d["capacity"].pop(next(k for k in d["capacity"] if k.startswith("memorySlice"))),
    ),
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_a_drift_from_the_driver_fails_the_comparison(drift: str) -> None:
    """The comparison is not blind: each drift the fake once had, made on the rendered slices, is seen."""
    name, change = DRIFTS[drift]
    gpus, installation, ordered = CASES[name]
    drifted = render(gpus, installation)
    change(drifted[-1]["spec"]["devices"][-1])
    assert comparable(fixture(name), ordered) != comparable(drifted, ordered)


def test_dynamic_mig_order_is_the_drivers() -> None:
    """DynamicMIG sorts each GPU's devices by name (byte order: 1g10gb before 1g5gb); an order differing
    from it is a drift."""
    got = render([replace(A100, mig_mode=True)], DYNAMIC)
    names = [d["name"] for d in got[1]["spec"]["devices"]]
    assert names[:2] == ["gpu-0-mig-1g10gb-15-0", "gpu-0-mig-1g10gb-15-2"]
    assert names == sorted(names)
    got[1]["spec"]["devices"].reverse()
    assert got != fixture("dynamic-mig-a100")


def test_a_hopper_in_mig_mode_still_publishes_its_whole_card_under_dynamic_mig() -> None:
    """An Ampere with MIG on cannot leave MIG mode without a reset, a Hopper can (nvlib.go:280)."""
    names = {
        d["name"]
        for s in render([replace(H100, mig_mode=True)], DYNAMIC)
        for d in s["spec"].get("devices", [])
    }
    assert "gpu-0" in names and "gpu-0-mig-7g80gb-0-0" in names


def test_an_ampere_with_mig_off_under_dynamic_mig_is_a_whole_card_of_its_memory_alone() -> None:
    """Not DynamicMIG-capable (nvlib.go:1517-1551): no placements, no counters; the node still takes the
    split path, its counters slice empty (whether the API server takes that is unconfirmed)."""
    slices = render([A100], DYNAMIC)
    assert [s["spec"].get("sharedCounters") for s in slices] == [None, None]
    [device] = slices[1]["spec"]["devices"]
    assert device["capacity"] == {"memory": {"value": "40Gi"}} and "consumesCounters" not in device


def test_a_node_without_mig_capable_cards_publishes_one_slice_per_card_under_dynamic_mig() -> None:
    l4 = Gpu(1, "GPU-l4", "NVIDIA L4", 23034 * MIB, "Ada Lovelace", "8.9", "0000:3b:00.0")
    slices = render([replace(l4, minor=0, pci_bus_id="0000:3a:00.0", uuid="GPU-l4-0"), l4], DYNAMIC)
    assert [[d["name"] for d in s["spec"]["devices"]] for s in slices] == [["gpu-0"], ["gpu-1"]]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}


def test_kubernetes_before_1_35_gets_counters_and_devices_in_one_slice_per_card() -> None:
    [one] = render([replace(A100, mig_mode=True)], Installation(dynamic_mig=True, kubernetes=(1, 34)))
    split = fixture("dynamic-mig-a100")
    assert one["spec"]["sharedCounters"] == split[0]["spec"]["sharedCounters"]
    assert one["spec"]["devices"] == split[1]["spec"]["devices"]
    assert one["spec"]["pool"]["resourceSliceCount"] == 1


def test_a_card_without_memory_is_multi_allocatable_without_shares() -> None:
    """consumable_shares.go:52-55: no memory, so no policy and no `shares` either."""
    gpu = replace(H100, memory=None)
    [whole] = render([gpu], V041)[0]["spec"]["devices"]
    assert "capacity" not in whole
    [shared] = render([gpu], Installation(consumable_shares="100"))[0]["spec"]["devices"]
    assert shared["allowMultipleAllocations"] is True and "capacity" not in shared


def test_memory_is_rounded_down_to_a_mebibyte_under_shares_and_shares_print_in_decimal_si() -> None:
    gpu = replace(H100, memory=81559 * MIB + 1000)
    [plain] = render([gpu], MAIN)[0]["spec"]["devices"]
    assert plain["capacity"]["memory"] == {"value": str(81559 * MIB + 1000)}
    [shared] = render([gpu], Installation(consumable_shares="1000"))[0]["spec"]["devices"]
    assert shared["capacity"]["memory"]["value"] == "81559Mi"
    assert shared["capacity"]["shares"]["value"] == "1k"
    assert shared["capacity"]["shares"]["requestPolicy"]["validRange"]["max"] == "1k"


def test_quantities_print_as_apimachinery_prints_them() -> None:
    assert [quantity_binary(n) for n in (0, 42, 1023, 1024, 1500, 40 << 30, 81559 * MIB)] == [
        "0",
        "42",
        "1023",
        "1Ki",
        "1500",
        "40Gi",
        "81559Mi",
    ]
    assert [quantity_decimal(n) for n in (0, 1, 100, 1000, 1500, 2_000_000)] == [
        "0",
        "1",
        "100",
        "1k",
        "1500",
        "2M",
    ]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"release": "v0.5"}, "driver release"),
        ({"release": "v0.4.1", "consumable_shares": "100"}, "needs the driver's main"),
        ({"consumable_shares": "0"}, "positive integer"),
        ({"consumable_shares": "half"}, "positive integer"),
    ],
)
def test_an_installation_the_driver_would_not_start_with_is_refused(
    kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        Installation(**kwargs)


def test_static_mig_devices_must_fit_the_card() -> None:
    overlapping = replace(
        A100_STATIC, mig=(MigInstance("4g.20gb", 0, "MIG-1"), MigInstance("3g.20gb", 0, "MIG-2"))
    )
    with pytest.raises(ValueError, match="cannot start at 0"):
        render([overlapping], MAIN)
    with pytest.raises(ValueError, match=r"no MIG profile '3g\.40gb'"):
        render([replace(A100_STATIC, mig=(MigInstance("3g.40gb", 0, "MIG-1"),))], MAIN)
    with pytest.raises(ValueError, match="no MIG profiles known"):
        Gpu(0, "GPU-l4", "NVIDIA L4", 23034 * MIB, "Ada Lovelace", "8.9", "0000:3b:00.0", mig_mode=True)


def test_the_charts_device_classes() -> None:
    classes = {c["metadata"]["name"]: c["spec"] for c in driver_device_classes()}
    sel = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"
    assert classes == {
        "gpu.nvidia.com": {
            "selectors": [{"cel": {"expression": sel.format("gpu")}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
        "mig.nvidia.com": {"selectors": [{"cel": {"expression": sel.format("mig")}}]},
        "vfio.gpu.nvidia.com": {"selectors": [{"cel": {"expression": sel.format("vfio")}}]},
    }
