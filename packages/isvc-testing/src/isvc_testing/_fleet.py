"""NVIDIA-shaped resource.k8s.io/v1 objects for tests, the benchmark and fake drivers.

Devices and DeviceClasses are the NVIDIA DRA driver's, rendered by `isvc_testing._driver` (one card per
call, in the installation `shares` names); slices, claims and the module's kinds are shaped around them.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any

from isvc_api import GIB, LABEL_ORDER, quantity_bytes

from isvc_testing._driver import (
    DRIVER,
    MIG_PROFILES,
    Gpu,
    Installation,
    MigInstance,
    driver_device_classes,
    driver_devices,
    shared_device,
)

__all__ = [
    "fleet_claim",
    "fleet_consumable",
    "fleet_device_classes",
    "fleet_gpu",
    "fleet_mig",
    "fleet_priority_class",
    "fleet_slice",
]

# NVIDIA's architecture of each compute capability (https://developer.nvidia.com/cuda-gpus).
_ARCHITECTURES = {"7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.9": "Ada Lovelace", "9.0": "Hopper"}


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _setting(shares: bool | int | str) -> str:
    """The driver's consumableShares value a builder's `shares` names (True: 100, False: disabled)."""
    if shares is True:
        return "100"
    if shares is False:
        return "disabled"
    return str(shares)


def fleet_device_classes() -> list[dict[str, Any]]:
    """The driver's DeviceClasses: gpu.nvidia.com, mig.nvidia.com and vfio.gpu.nvidia.com."""
    return driver_device_classes()


def fleet_gpu(
    node: str,
    index: int,
    *,
    memory_gi: int | str | None = 80,
    product: str = "NVIDIA H100 80GB HBM3",
    shares: bool | int | str = True,
    compute_capability: str = "9.0.0",
    taint: bool = False,
    release: str = "main",
) -> dict[str, Any]:
    """A whole GPU `gpu-<index>` as the driver publishes it; `shares` is the installation's consumableShares
    (True: 100, False: disabled, an int N, "memory" or "unlimited").

    `memory_gi` is GiB, or a quantity as NVML reports it (e.g. "81559Mi" for an H100 80GB HBM3, "23034Mi"
    for an L4); None: NVML reports none (the device publishes no memory).
    """
    memory = (
        None
        if memory_gi is None
        else quantity_bytes(memory_gi if isinstance(memory_gi, str) else f"{memory_gi}Gi")
    )
    capability = ".".join(compute_capability.split(".")[:2])
    device: dict[str, Any] = _copy(_card(product, memory, _setting(shares), capability, release))
    device["name"] = f"gpu-{index}"
    device["attributes"]["uuid"] = {"string": _uuid(node, str(index))}
    device["attributes"]["resource.kubernetes.io/pciBusID"] = {"string": f"0000:{index % 256:02x}:00.0"}
    if taint:  # NVMLDeviceHealthCheck's taint of an XID event (device_health.go:36-38, 68-97)
        device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}]
    return device


def _copy(value: Any) -> Any:
    """A copy of plain JSON-like data, several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@functools.lru_cache(maxsize=256)
def _card(product: str, memory: int | None, shares: str, capability: str, release: str) -> dict[str, Any]:
    """gpu-0 of this kind as the driver publishes it (fleets of 80,000 cards render a handful of kinds)."""
    gpu = Gpu(
        minor=0,
        uuid="",
        product=product,
        memory=memory,
        architecture=_ARCHITECTURES.get(capability, "Hopper"),
        compute_capability=capability,
        pci_bus_id="0000:00:00.0",
    )
    [device] = driver_devices([gpu], Installation(release, consumable_shares=shares))
    return device


def fleet_consumable(memory: str | None, shares: int | str) -> dict[str, Any]:
    """The capacity of a GPU of `memory` as the driver publishes it with consumableShares `shares` (N,
    "memory" or "unlimited"): memory rounded down to 1Mi with its request policy, and N `shares`."""
    device: dict[str, Any] = {"capacity": {} if memory is None else {"memory": {"value": memory}}}
    return dict(shared_device(device, str(shares)).get("capacity") or {})


def fleet_mig(
    node: str,
    parent: int,
    profile: str,
    slot: int,
    memory_gi: int | None = None,
    *,
    product: str = "NVIDIA H100 80GB HBM3",
    shares: bool | int | str = False,
    release: str = "main",
) -> dict[str, Any]:
    """A static MIG device of `product`'s `profile` (e.g. 3g.40gb) on GPU `parent`, as the driver publishes
    it: `gpu-<parent>-mig-<profile>-<profile id>-<start>`, with its own uuid, the profile's engines, memory
    and memory slices; `shares` is the installation's consumableShares.

    `slot` is where it starts (its placement start); a slot the profile cannot start at is read as the
    slot-th of its starts (callers once numbered instances 0, 1, ...). `memory_gi`, when given, must be the
    profile's memory in whole GiB rounded up (3g.40gb: 40448Mi, 40).
    """
    known = next((p for p in MIG_PROFILES.get(product, ()) if p.name == profile), None)
    if known is None:
        raise ValueError(f"{product} has no MIG profile {profile!r} known")
    start = slot if slot in known.starts else known.starts[slot]
    if memory_gi is not None and memory_gi != math.ceil((known.memory_mib << 20) / GIB):
        raise ValueError(f"{profile} on {product} has {known.memory_mib}Mi, not {memory_gi} GiB")
    capability = "8.0" if "A100" in product else "9.0"
    gpu = Gpu(
        minor=parent,
        uuid=_uuid(node, str(parent)),
        product=product,
        memory=None,
        architecture=_ARCHITECTURES[capability],
        compute_capability=capability,
        pci_bus_id=f"0000:{parent % 256:02x}:00.0",
        mig_mode=True,
        mig=(MigInstance(profile, start, "MIG-" + _uuid(node, str(parent), profile, str(start))[4:]),),
    )
    [device] = driver_devices([gpu], Installation(release, consumable_shares=_setting(shares)))
    return device


def fleet_slice(
    node: str,
    devices: list[dict[str, Any]],
    *,
    generation: int = 0,
    count: int = 1,
    part: int = 0,
    pool: str | None = None,
) -> dict[str, Any]:
    """A ResourceSlice publishing `devices` for a node's pool (named `<node>-gpu.nvidia.com-<generation>-<part>`:
    the driver's names end in 5 random characters, so no test can hold one; `driver_slices` renders a node's
    whole pool in the driver's order of slices)."""
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
