"""NVIDIA-shaped resource.k8s.io/v1 objects for tests, the benchmark and fake drivers.

Shapes follow dra-driver-nvidia-gpu (dra.md §2.2, §2.4 b: ConsumableShares N=100).
"""

from __future__ import annotations

import hashlib
from typing import Any

from isvc_api import LABEL_ORDER

__all__ = [
    "fleet_claim",
    "fleet_consumable",
    "fleet_device_classes",
    "fleet_gpu",
    "fleet_mig",
    "fleet_priority_class",
    "fleet_slice",
]

DRIVER = "gpu.nvidia.com"


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def fleet_device_classes() -> list[dict[str, Any]]:
    """The driver's DeviceClasses gpu.nvidia.com and mig.nvidia.com."""

    def dc(name: str, kind: str) -> dict[str, Any]:
        expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }

    return [dc("gpu.nvidia.com", "gpu"), dc("mig.nvidia.com", "mig")]


def fleet_gpu(
    node: str,
    index: int,
    *,
    memory_gi: int | str | None = 80,
    product: str = "NVIDIA H100 80GB HBM3",
    shares: bool = True,
    compute_capability: str = "9.0.0",
    taint: bool = False,
) -> dict[str, Any]:
    """A full GPU; with `shares` it is shareable (100 shares, default 1; memory default 0).

    `memory_gi` is GiB, or a quantity as the DRA driver publishes it (NVML total, e.g. "81559Mi" for an
    H100 80GB HBM3, "23034Mi" for an L4).
    """
    device: dict[str, Any] = {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": _uuid(node, str(index))},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": compute_capability},
            "driverVersion": {"version": "580.65.6"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{index:02x}:00.0"},
        },
        "capacity": {},
    }
    memory = None if memory_gi is None else memory_gi if isinstance(memory_gi, str) else f"{memory_gi}Gi"
    if shares:
        device["allowMultipleAllocations"] = True
        device["capacity"] = fleet_consumable(memory, 100)
    elif memory is not None:
        device["capacity"]["memory"] = {"value": memory}
    if taint:
        device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}]
    return device


def fleet_consumable(memory: str | None, shares: int) -> dict[str, Any]:
    """The capacity of a shareable GPU as the driver publishes it with ConsumableShares: `shares` shares
    (a claim asks 1 by default) and, when published, its memory (a claim asks 0 by default, in 1Mi steps)."""
    capacity: dict[str, Any] = {}
    if memory is not None:
        capacity["memory"] = {
            "value": memory,
            "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "1Mi"}},
        }
    capacity["shares"] = {
        "value": str(shares),
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": str(shares), "step": "1"}},
    }
    return capacity


def fleet_mig(node: str, parent: int, profile: str, slot: int, memory_gi: int) -> dict[str, Any]:
    """A static MIG device such as 3g.40gb."""
    short = profile.replace(".", "")
    return {
        "name": f"gpu-{parent}-mig-{short}-{slot}",
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "uuid": {"string": "MIG-" + _uuid(node, str(parent), profile, str(slot))[4:]},
            "parentUUID": {"string": _uuid(node, str(parent))},
            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            "cudaComputeCapability": {"version": "8.0.0"},
        },
        "capacity": {"memory": {"value": f"{memory_gi * 1024}Mi"}, "multiprocessors": {"value": "42"}},
    }


def fleet_slice(
    node: str,
    devices: list[dict[str, Any]],
    *,
    generation: int = 0,
    count: int = 1,
    part: int = 0,
    pool: str | None = None,
) -> dict[str, Any]:
    """A ResourceSlice publishing `devices` for a node's pool."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-{generation}-{part}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        },
    }


def fleet_claim(
    namespace: str,
    name: str,
    order: str | None,
    allocations: list[tuple[str, str, int | None]],
    *,
    uid: str | None = None,
) -> dict[str, Any]:
    """An allocated ResourceClaim: (pool, device, shares or None for a whole device) per result.

    Its priority is its order's (`fleet_order` in a `fleet_service_class`), never a label.
    """
    labels = {}
    if order is not None:
        labels = {LABEL_ORDER: order}
    results = []
    for pool, device, shares in allocations:
        result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}
        if shares is not None:
            result["shareID"] = hashlib.sha256(f"{name}/{device}".encode()).hexdigest()[:36]
            result["consumedCapacity"] = {"shares": str(shares), "memory": "0"}
        results.append(result)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": uid or f"uid-{namespace}-{name}",
            "labels": labels,
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def fleet_order(namespace: str, name: str, service_class: str | None = None) -> dict[str, Any]:
    """An InferenceService as the planner reads it: its name and class."""
    spec = {"inferenceServiceClassName": service_class} if service_class else {}
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"namespace": namespace, "name": name},
        "spec": spec,
    }


def fleet_service_class(name: str, priority_class: str | None = None) -> dict[str, Any]:
    """An InferenceServiceClass as the planner reads it: its name and priorityClassName."""
    spec = {"priorityClassName": priority_class} if priority_class else {}
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceServiceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def fleet_priority_class(name: str, value: int, *, default: bool = False) -> dict[str, Any]:
    """A scheduling.k8s.io/v1 PriorityClass."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
