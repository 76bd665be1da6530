"""Every mode the NVIDIA DRA driver runs in, on a fleet of its own (issue 41), and replicas across the fleet
(issue 40): an order goes Ready on each, its claims allocated by kube-scheduler; a further replica takes a
device of the plan's shape elsewhere (another whole card, another partition of the profile, two other cards
of one node for tensor parallel, another card for a share whose card is full), and nothing is replanned.

Each fleet file is one installation of the driver (e2e/fleets); it is published beside the default fleet,
and a class confines orders to it by its host driver version (`Fleet.selector`), as one cluster runs one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.orders import Orders, hf
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

E2E = Path(__file__).resolve().parents[1]
GPU, MIG = "gpu.nvidia.com", "mig.nvidia.com"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
QWEN_32B = "Qwen/Qwen2.5-32B-Instruct-AWQ"
H100 = f"device.attributes['{GPU}'].productName == 'NVIDIA H100 80GB HBM3'"
L4 = f"device.attributes['{GPU}'].productName == 'NVIDIA L4'"


class Bed(Orders):
    def klass(
        self,
        name: str,
        fleet: Fleet,
        *,
        replicas: int = 1,
        also: str | None = None,
        shares: list[int] | None = None,
        classes: tuple[str, ...] = (GPU, MIG),
    ) -> str:
        selector = fleet.selector() + (f" && {also}" if also else "")
        accel: dict[str, Any] = {"deviceClassNames": list(classes), "selector": selector}
        if shares:
            accel["allowedSharePercents"] = shares
        spec = {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "scalingPolicy": {"minReplicas": replicas, "maxReplicas": max(replicas, 3)},
            "acceleratorPolicy": accel,
        }
        self.create_class(name, spec)
        return name

    def set_replicas(self, name: str, replicas: int) -> None:
        body = {"spec": {"scalingPolicy": {"minReplicas": replicas, "maxReplicas": max(replicas, 3)}}}
        k8s.CustomObjectsApi(self.admin_api).patch_cluster_custom_object(
            "ai.deckhouse.io", "v1alpha1", "inferenceserviceclasses", name, body
        )

    def allocated(self, name: str) -> list[list[tuple[str, str]]]:
        """Each allocated claim of the order: its (pool, device) pairs."""
        return [
            [(r.pool, r.device) for r in c.status.allocation.devices.results]
            for c in self.claims(name)
            if c.status and c.status.allocation
        ]


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


@pytest.fixture(scope="module")
def fleets(admin_api: k8s.ApiClient, fleet: Fleet) -> Iterator[dict[str, Fleet]]:
    """The fleet of each mode, published beside the default one for the file, withdrawn after."""
    loaded = {
        name: Fleet.load(E2E / "fleets" / f"{name}.yaml")
        for name in ("whole", "static-mig", "partitioned", "shares-10")
    }
    for f in loaded.values():
        f.publish(admin_api)
    loaded["default"] = fleet
    try:
        yield loaded
    finally:
        for name, f in loaded.items():
            if name != "default":
                f.unpublish(admin_api)


def _ready(bed: Bed, name: str, replicas: int, timeout: float = 120) -> list[list[tuple[str, str]]]:
    """Once the order is Ready with every replica's claim allocated: those allocations."""
    bed.wait_ready(name, timeout)
    wait_for(
        lambda: len(bed.allocated(name)) == replicas, timeout, what=f"{name}: {replicas} claims allocated"
    )
    return bed.allocated(name)


def _device(fleet: Fleet, pool: str, name: str) -> Any:
    return fleet.device(pool, name)


@pytest.mark.parametrize(
    ("mode", "model", "device_class"),
    [
        ("whole", QWEN, GPU),
        ("static-mig", QWEN, MIG),
        ("partitioned", QWEN, MIG),
        ("shares-10", QWEN, GPU),
        ("default", QWEN, GPU),
    ],
)
def test_an_order_goes_ready_on_each_mode_of_the_driver_issue_41(
    bed: Bed, fleets: dict[str, Fleet], mode: str, model: str, device_class: str
) -> None:
    fleet = fleets[mode]
    mig = mode in ("partitioned", "static-mig")  # classes are tried in the policy's order: partitions first
    klass = bed.klass(
        f"mode-{mode}", fleet, also=H100 if mig else None, classes=(MIG, GPU) if mig else (GPU, MIG)
    )
    name = bed.create(f"mode-{mode}", hf(model), klass)
    [[(pool, device)]] = _ready(bed, name, 1)
    status = bed.status(name)
    resolved = status["resolved"]
    assert resolved["deviceClass"] == device_class and resolved["devices"] == [f"{pool}/{device}"], resolved
    plan = bed.plan(name)
    assert plan is not None
    placement = plan["spec"]["placement"]
    assert placement["deviceSelectors"]["pinned"] and placement["deviceSelectors"]["alike"]
    if mode == "partitioned":  # a placement published without a uuid: pinned by parent and profile
        assert placement.get("deviceUuids") is None and "parentUUID" in placement["deviceSelectors"]["pinned"]
    if mode == "shares-10":  # its part of the card's 10 shares, rounded up
        assert int(placement["capacityRequests"]["shares"]) == -(-placement["sharePercent"] * 10 // 100)


def _grown(bed: Bed, klass: str, name: str, replicas: int) -> tuple[list[list[tuple[str, str]]], float]:
    """Raise the class to `replicas`: (the allocations once every replica's claim is, seconds it took)."""
    plan = bed.plan(name)
    assert plan is not None
    asked = time.monotonic()
    bed.set_replicas(klass, replicas)
    allocated = _ready(bed, name, replicas, 120)
    took = time.monotonic() - asked
    again = bed.plan(name)
    assert again is not None and again["metadata"]["resourceVersion"] == plan["metadata"]["resourceVersion"]
    return allocated, took


def test_a_whole_card_order_grows_onto_idle_cards_of_its_product_on_other_nodes_issue_40(
    bed: Bed, fleets: dict[str, Fleet]
) -> None:
    fleet = fleets["whole"]
    klass = bed.klass("grow-whole", fleet, also=H100)
    name = bed.create("grow-whole", hf(QWEN), klass)
    [first] = _ready(bed, name, 1)
    allocated, took = _grown(bed, klass, name, 3)
    cards = [pair for claim in allocated for pair in claim]
    assert first[0] in cards and len(set(cards)) == 3, allocated  # three H100s, each whole
    assert {pool for pool, _ in cards} == {"whole-h100-0", "whole-h100-1"}, cards  # spread over both nodes
    print(f"whole cards: replicas 2 and 3 allocated {took:.1f} s after the class asked for them, on {cards}")


def test_a_mig_profile_order_grows_onto_other_partitions_of_its_profile_issue_40(
    bed: Bed, fleets: dict[str, Fleet]
) -> None:
    fleet = fleets["static-mig"]
    klass = bed.klass("grow-mig", fleet, also=H100)
    name = bed.create("grow-mig", hf(QWEN_32B), klass)  # a 3g.40gb of an H100
    _ready(bed, name, 1)
    allocated, took = _grown(bed, klass, name, 3)
    parts = [pair for claim in allocated for pair in claim]
    profiles = {_device(fleet, pool, d).profile for pool, d in parts}
    assert len(set(parts)) == 3 and profiles == {"3g.40gb"}, parts
    print(f"MIG 3g.40gb: replicas 2 and 3 allocated {took:.1f} s after the class asked for them, on {parts}")


def test_a_tensor_parallel_order_grows_onto_two_cards_of_another_node_issue_40(
    bed: Bed, fleets: dict[str, Fleet]
) -> None:
    fleet = fleets["whole"]
    klass = bed.klass("grow-tp", fleet, also=L4)
    name = bed.create("grow-tp", hf(QWEN_32B), klass)  # two L4s of one node under tensor parallel
    [first] = _ready(bed, name, 1)
    assert len(first) == 2 and len({pool for pool, _ in first}) == 1, first
    allocated, took = _grown(bed, klass, name, 2)
    second = next(claim for claim in allocated if claim != first)
    assert len(second) == 2 and len({pool for pool, _ in second}) == 1 and not set(second) & set(first), (
        allocated
    )
    print(f"tensor parallel: replica 2 allocated {took:.1f} s after the class asked for it, on {second}")


def test_a_share_whose_card_is_full_grows_onto_another_card_with_the_same_share_issue_40(
    bed: Bed, fleets: dict[str, Fleet]
) -> None:
    fleet = fleets["shares-10"]
    half = bed.klass("grow-share-fill", fleet, also=H100, shares=[70])
    klass = bed.klass("grow-share", fleet, also=H100, shares=[30])
    name = bed.create("grow-share", hf(QWEN), klass)
    [[card]] = _ready(bed, name, 1)
    filler = bed.create("grow-share-fill", hf(QWEN), half)  # 70 % beside it: the card is full
    [[beside]] = _ready(bed, filler, 1)
    assert beside == card  # best fit: the partly held card first
    allocated, took = _grown(bed, klass, name, 2)
    other = next(c for [c] in allocated if c != card)
    claims = [c for c in bed.claims(name) if c.status and c.status.allocation]
    shares = {r.consumed_capacity.get("shares") for c in claims for r in c.status.allocation.devices.results}
    assert other[0] == card[0] and other != card and shares == {"3"}, (allocated, shares)
    print(f"a share: replica 2 allocated {took:.1f} s after the class asked for it, on {other}")
