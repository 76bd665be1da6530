"""Partitionable devices (KEP-4815): a GPU and its MIG-like partitions draw on one counter set.

Issue 18: the ledger counted every partition as a device of its own, so orders were planned on
partitions of a GPU already given whole (and on more partitions than the GPU has room for); the
scheduler refused every such claim ("cannot allocate all claims").
"""

from __future__ import annotations

from typing import Any

from isvc_api import GIB, AcceleratorPolicy, ModelFacts
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest, PlanResponse
from isvc_testing import fleet_claim, fleet_device_classes

DRIVER = "gpu.nvidia.com"
MIG = AcceleratorPolicy(device_class_names=["mig.nvidia.com"])
# One A100-40GB as the fake driver publishes it: 40 GiB and 98 SMs; 2 × 3g.20gb (20 GiB, 42 SMs)
# or 7 × 1g.5gb (5 GiB, 14 SMs) or mixes, or the whole GPU.
PROFILES = [("3g.20gb", 20, 42, 2), ("1g.5gb", 5, 14, 7)]


def sized(facts: ModelFacts, gib: float) -> ModelFacts:
    weights = (gib - 1.25) / 1.2  # less vLLM's margin, so a "3 GiB" model still fits a 1g.5gb partition
    return facts.model_copy(
        update={
            "parameter_count": int(weights * GIB / 2),
            "dtype": "bfloat16",
            "num_layers": None,
            "quantization": "None",
        }
    )


def _device(
    name: str, dtype: str, memory: int, sms: int, minor: int, profile: str | None = None
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "type": {"string": dtype},
        "uuid": {"string": f"UUID-{name}"},
        "productName": {"string": "NVIDIA A100-SXM4-40GB"},
        "cudaComputeCapability": {"version": "8.0.0"},
    }
    if profile:
        attrs["profile"] = {"string": profile}
    used = {"memory": {"value": f"{memory}Gi"}, "multiprocessors": {"value": str(sms)}}
    return {
        "name": name,
        "attributes": attrs,
        "capacity": dict(used),
        "consumesCounters": [{"counterSet": f"gpu-{minor}-counter-set", "counters": used}],
    }


def partitioned_pool(node: str, gpus: int = 1, generation: int = 0) -> list[dict[str, Any]]:
    """The two slices of a pool: counter sets, and per GPU the whole device plus its partitions."""
    sets, devices = [], []
    for minor in range(gpus):
        sets.append(
            {
                "name": f"gpu-{minor}-counter-set",
                "counters": {"memory": {"value": "40Gi"}, "multiprocessors": {"value": "98"}},
            }
        )
        devices.append(_device(f"gpu-{minor}", "gpu", 40, 98, minor))
        for profile, memory, sms, count in PROFILES:
            for i in range(count):
                name = f"gpu-{minor}-mig-{profile.replace('.', '')}-{i}"
                devices.append(_device(name, "mig", memory, sms, minor, profile))

    def sl(i: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{generation}-{i}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 2},
                **body,
            },
        }

    return [sl(0, {"sharedCounters": sets}), sl(1, {"devices": devices})]


def plan(planner: Planner, facts: ModelFacts, name: str, **kw: Any) -> PlanResponse:
    return planner.plan(PlanRequest(order=OrderRef(namespace="ns", name=name), facts=facts, **kw))


def consumption(devices: list[str]) -> tuple[int, int]:
    """(GiB, SMs) the named devices of GPU 0 draw on its counter set."""
    table = {"gpu-0": (40, 98)} | {
        f"gpu-0-mig-{p.replace('.', '')}-{i}": (m, s) for p, m, s, n in PROFILES for i in range(n)
    }
    return sum(table[d][0] for d in devices), sum(table[d][1] for d in devices)


def test_a_gpu_given_whole_leaves_its_partitions_no_room_issue_18(models: dict[str, ModelFacts]) -> None:
    claims = [fleet_claim("x", "whole", "other", [("n1", "gpu-0", None)])]
    inv = Inventory.from_objects(fleet_device_classes(), partitioned_pool("n1"), claims)
    r = plan(Planner(inv), sized(models["qwen7b"], 3), "small", accelerator_policy=MIG)
    assert r.placement is None and r.refusal is not None
    assert inv.view.ledger.blocked(("gpu.nvidia.com", "n1", "gpu-0-mig-1g5gb-0"))


def test_a_partition_taken_leaves_the_whole_gpu_no_room_issue_18(models: dict[str, ModelFacts]) -> None:
    claims = [fleet_claim("x", "part", "other", [("n1", "gpu-0-mig-1g5gb-3", None)])]
    inv = Inventory.from_objects(fleet_device_classes(), partitioned_pool("n1"), claims)
    r = plan(
        Planner(inv),
        sized(models["qwen7b"], 30),
        "big",
        accelerator_policy=AcceleratorPolicy(device_class_names=["gpu.nvidia.com"]),
    )
    assert r.placement is None and r.refusal is not None
    assert inv.view.ledger.used(("gpu.nvidia.com", "n1", "gpu-0")) == 100


def test_orders_one_by_one_take_no_more_partitions_than_the_counters_hold_issue_18(
    models: dict[str, ModelFacts],
) -> None:
    planner = Planner(Inventory.from_objects(fleet_device_classes(), partitioned_pool("n1"), []))
    placed = []
    for i in range(12):
        p = plan(planner, sized(models["qwen7b"], 3), f"o{i}", accelerator_policy=MIG).placement
        if p is not None:
            placed += p.devices
    memory, sms = consumption(placed)
    assert memory <= 40 and sms <= 98
    assert len(placed) == 7  # 7 × 1g.5gb is what the counters hold


def test_orders_waiting_together_respect_the_counters_too_issue_18(models: dict[str, ModelFacts]) -> None:
    planner = Planner(Inventory.from_objects(fleet_device_classes(), partitioned_pool("n1"), []))
    requests = [
        PlanRequest(
            order=OrderRef(namespace="ns", name=f"o{i}"),
            facts=sized(models["qwen7b"], 3 if i % 3 else 15),
            accelerator_policy=MIG,
        )
        for i in range(10)
    ]
    placed = [d for a in planner.plan_many(requests) if a.placement for d in a.placement.devices]
    memory, sms = consumption(placed)
    assert placed and memory <= 40 and sms <= 98


def test_releasing_the_whole_gpu_frees_its_partitions(models: dict[str, ModelFacts]) -> None:
    claim = fleet_claim("x", "whole", "other", [("n1", "gpu-0", None)])
    inv = Inventory.from_objects(fleet_device_classes(), partitioned_pool("n1"), [claim])
    inv.delete_claim(claim)
    p = plan(Planner(inv), sized(models["qwen7b"], 3), "small", accelerator_policy=MIG).placement
    assert p is not None and p.devices[0].startswith("gpu-0-mig-1g5gb")


def test_counters_come_from_the_latest_generation_of_the_pool(models: dict[str, ModelFacts]) -> None:
    old = partitioned_pool("n1", generation=0)
    new = partitioned_pool("n1", generation=1)
    claims = [fleet_claim("x", "whole", "other", [("n1", "gpu-0", None)])]
    inv = Inventory.from_objects(fleet_device_classes(), old + new, claims)
    assert inv.view.ledger.blocked(("gpu.nvidia.com", "n1", "gpu-0-mig-3g20gb-1"))
    for sl in old:
        inv.delete_slice(sl["metadata"]["name"])
    assert inv.view.ledger.blocked(("gpu.nvidia.com", "n1", "gpu-0-mig-3g20gb-1"))
