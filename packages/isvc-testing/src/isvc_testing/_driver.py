"""What kubernetes-sigs/dra-driver-nvidia-gpu publishes for one node, in each of its modes: the one renderer
of the driver's shapes for the test bed's fake driver and the unit tests' fleets.

`driver_slices(node, gpus, installation)` is the node's pool on the driver's first publish, given its GPUs as
NVML reports them and one installation of the driver (release, the DynamicMIG gate, the consumableShares
value, the API server's version). Read from the driver's code at main 95932046 (v0.5.0-dev) and the release
v0.4.1 (764900e7); the paths cited are under `cmd/gpu-kubelet-plugin/` of that repository, line numbers
main's. `packages/isvc-testing/tests/data/driver/` holds what the driver's own functions produced for one
node per mode; `tests/test_driver.py` holds this renderer to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from isvc_api import quantity_bytes

__all__ = [
    "DRIVER",
    "MIG_PROFILES",
    "RELEASES",
    "Gpu",
    "Installation",
    "MigInstance",
    "MigProfile",
    "driver_device_classes",
    "driver_devices",
    "driver_slices",
    "quantity_binary",
    "quantity_decimal",
    "shared_device",
]

DRIVER = "gpu.nvidia.com"  # main.go:45 DriverName
RELEASES = ("v0.4.1", "main")
_PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
# supportsMIGModeToggle (nvlib.go:1506-1515): Hopper and newer toggle MIG mode without a GPU reset.
_TOGGLES_MIG = frozenset({"Hopper", "Blackwell"})
_ENGINES = ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines")


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile as NVML describes it (C == G: the driver keeps only those, nvlib.go:1254)."""

    id: int  # GpuInstanceProfileInfo.Id, the `nvidia-smi mig -lgip` ID (not the enum index)
    name: str  # go-nvlib MigProfileInfo.String(), e.g. "3g.20gb", "1g.5gb+me"
    memory_mib: int  # MemorySizeMB: MiB (nvml.h; mig.go:128-134)
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    starts: tuple[int, ...]  # GetGpuInstancePossiblePlacements: each start
    size: int  # memory slices each placement takes

    def capacities(self) -> dict[str, int]:
        """CommonCapacitiesMig (mig.go:118-135): engines, SMs, memory in bytes."""
        return {
            "multiprocessors": self.multiprocessors,
            "copyEngines": self.copy_engines,
            "decoders": self.decoders,
            "encoders": self.encoders,
            "jpegEngines": self.jpeg_engines,
            "ofaEngines": self.ofa_engines,
            "memory": self.memory_mib << 20,
        }


def _profile(line: str) -> MigProfile:
    """A row `id name memMiB SM CE DEC ENC JPEG OFA starts size` (starts comma separated)."""
    i, name, mem, sm, ce, dec, enc, jpg, ofa, starts, size = line.split()
    return MigProfile(
        int(i),
        name,
        int(mem),
        int(sm),
        int(ce),
        int(dec),
        int(enc),
        int(jpg),
        int(ofa),
        tuple(int(s) for s in starts.split(",")),
        int(size),
    )


# Per-product NVML profile tables: the driver's repository has none (its docs give A100 1g.5gb only:
# site/content/docs/reference/resourceslice-attributes.md). UNCONFIRMED against real NVML. Sources:
# A100-SXM4-40GB: NVIDIA/k8s-test-infra pkg/gpu/mocknvml/configs/mock-nvml-config-a100.yaml, which cites
# NVIDIA's MIG user guide, Table 12 (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/).
# H100 80GB HBM3: a public `nvidia-smi mig -lgip` listing (https://jbarrow.ai/field_notes/nvidia-mig), its
# GiB turned into MiB by ×1024 (19.62 GiB taken as 20096 MiB). Placements: the standard `-lgipp` geometry of
# 8 memory slices; A100 3g.20gb at 0 and 4 is also seen in public `nvidia-smi mig -lgi` output.
MIG_PROFILES: Mapping[str, tuple[MigProfile, ...]] = {
    "NVIDIA A100-SXM4-40GB": tuple(
        _profile(row)
        for row in (
            "19 1g.5gb     4864  14 1 0 0 0 0 0,1,2,3,4,5,6 1",
            "20 1g.5gb+me  4864  14 1 1 0 1 1 0,1,2,3,4,5,6 1",
            "15 1g.10gb    9856  14 1 1 0 0 0 0,2,4,6       2",
            "14 2g.10gb    9856  28 2 1 0 0 0 0,2,4         2",
            "9  3g.20gb    19968 42 3 2 0 0 0 0,4           4",
            "5  4g.20gb    19968 56 4 2 0 0 0 0             4",
            "0  7g.40gb    40192 98 7 5 0 1 1 0             8",
        )
    ),
    "NVIDIA H100 80GB HBM3": tuple(
        _profile(row)
        for row in (
            "19 1g.10gb    9984  16  1 1 0 1 0 0,1,2,3,4,5,6 1",
            "20 1g.10gb+me 9984  16  1 1 0 1 1 0,1,2,3,4,5,6 1",
            "15 1g.20gb    20096 26  1 1 0 1 0 0,2,4,6       2",
            "14 2g.20gb    20096 32  2 2 0 2 0 0,2,4         2",
            "9  3g.40gb    40448 60  3 3 0 3 0 0,4           4",
            "5  4g.40gb    40448 64  4 4 0 4 0 0             4",
            "0  7g.80gb    81152 132 8 7 0 7 1 0             8",
        )
    ),
}


@dataclass(frozen=True)
class MigInstance:
    """A MIG device made before the driver started (static MIG): its profile, placement start and UUID."""

    profile: str
    start: int
    uuid: str


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as NVML reports it to the driver (getGpuInfo, nvlib.go:466-642)."""

    minor: int  # GetMinorNumber: the device is gpu-<minor> (deviceinfo.go:124-126)
    uuid: str
    product: str  # GetName
    memory: int | None  # GetMemoryInfo().Total in bytes; None: NOT_SUPPORTED (no memory capacity)
    architecture: str  # go-nvlib GetArchitectureAsString: "Ampere", "Hopper", "Ada Lovelace", ...
    compute_capability: str  # "9.0"
    pci_bus_id: str  # NVML's busId ("00000000:1B:00.0") or as the driver prints it ("0000:1b:00.0")
    brand: str = "Nvidia"
    pcie_root: str | None = "pci0000:00"  # None: the sysfs lookup failed, not published (nvlib.go:554-558)
    numa_node: int | None = 0  # None or -1: not published (deviceinfo.go:333-337)
    addressing_mode: str | None = None  # "HMM", "ATS", "None"; None: not published (nvlib.go:539-544)
    mig_mode: bool = False  # MIG mode enabled
    mig: tuple[MigInstance, ...] = ()  # static MIG devices (MIG mode on)

    def __post_init__(self) -> None:
        if self.mig and not self.mig_mode:
            raise ValueError(f"gpu-{self.minor}: MIG devices exist only with MIG mode on")
        if self.mig_mode and not self.profiles:
            tabled = ", ".join(MIG_PROFILES)
            raise ValueError(
                f"gpu-{self.minor}: no MIG profiles known for {self.product!r} (known: {tabled})"
            )

    @property
    def profiles(self) -> tuple[MigProfile, ...]:
        """The GPU's MIG profiles; none for a GPU without MIG (L4, T4) or of a product not tabled here."""
        return MIG_PROFILES.get(self.product, ())


@dataclass(frozen=True)
class Installation:
    """One installation of the driver in a cluster: what its Helm values and the API server select."""

    release: str = "main"  # "v0.4.1" or "main" (v0.5.0-dev)
    dynamic_mig: bool = False  # featureGates.DynamicMIG (pkg/featuregates/featuregates.go:64)
    consumable_shares: str = "disabled"  # Helm `consumableShares` (main only): disabled|memory|unlimited|N
    kubernetes: tuple[int, int] = (1, 36)  # the API server's version: DynamicMIG splits slices from 1.35

    def __post_init__(self) -> None:
        if self.release not in RELEASES:
            raise ValueError(f"driver release {self.release!r}: one of {', '.join(RELEASES)}")
        shares = self.consumable_shares
        if shares != "disabled" and self.release != "main":
            raise ValueError(
                f"consumableShares {shares!r} needs the driver's main (v0.4.1 has no such value)"
            )
        # main.go:306-315: disabled, memory, unlimited or a positive integer (strconv.Atoi), else no start.
        if shares not in ("disabled", "memory", "unlimited") and not (shares.isdigit() and int(shares) > 0):
            raise ValueError(
                f"consumableShares {shares!r}: 'disabled', 'memory', 'unlimited' or a positive integer"
            )

    @property
    def split_slices(self) -> bool:
        """shouldUseSplitResourceSlices (driver.go:581-594): counters in a slice of their own from 1.35."""
        return self.kubernetes >= (1, 35)


def quantity_binary(n: int) -> str:
    """resource.NewQuantity(n, BinarySI) as it prints: the largest binary suffix dividing it exactly, plain
    below 1024 and when 1024 does not divide it (apimachinery quantity.go CanonicalizeBytes)."""
    if -1024 < n < 1024:
        return str(n)
    exponent = 0
    while n % 1024 == 0 and exponent < 6:
        n //= 1024
        exponent += 1
    return f"{n}{('', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei')[exponent]}"


def quantity_decimal(n: int) -> str:
    """resource.NewQuantity(n, DecimalSI) as it prints: 100 -> "100", 1000 -> "1k"."""
    exponent = 0
    while n and n % 1000 == 0 and exponent < 6:
        n //= 1000
        exponent += 1
    return f"{n}{('', 'k', 'M', 'G', 'T', 'P', 'E')[exponent]}"


def _semver(text: str) -> str:
    """semver.MustParse(text).String() with CoerceNewVersion (Masterminds/semver v3 version.go:252-304):
    missing parts are 0, leading zeros dropped ("580.95.05" -> "580.95.5", "9.0" -> "9.0.0")."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version the driver publishes: {text!r}")
    return ".".join(str(int(p)) for p in [*parts, "0", "0"][:3])


def _pci_bus_id(text: str) -> str:
    """go-nvlib GetPCIBusID (device.go:185-205): lower case, the 8-digit domain's leading 0000 trimmed."""
    bus = text.lower()
    if re.match(r"^0000[0-9a-f]{4}:", bus):
        bus = bus[4:]
    if not _PCI.match(bus):  # deviceattribute.GetPCIBusIDAttribute: the plugin does not start
        raise ValueError(f"PCI bus ID {text!r} is not DDDD:BB:DD.F")
    return bus


@dataclass(frozen=True)
class _Host:
    """What every device of the node carries from the host: NVML's system versions and the release."""

    release: str
    driver_version: str
    cuda_driver_version: str


def _attributes(gpu: Gpu, host: _Host) -> dict[str, Any]:
    """GpuInfo.Attributes (deviceinfo.go:170-218; v0.4.1 L152-198), without uuid and type."""
    attrs: dict[str, Any] = {
        "productName": {"string": gpu.product},
        "brand": {"string": gpu.brand},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": _semver(gpu.compute_capability)},
        "driverVersion": {"version": host.driver_version},
        "cudaDriverVersion": {"version": host.cuda_driver_version},
        "resource.kubernetes.io/pciBusID": {"string": _pci_bus_id(gpu.pci_bus_id)},
    }
    if gpu.pcie_root is not None:
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": gpu.pcie_root}
    # numaNode: main only (after v0.4.1), left out for -1 (addNumaNodeAttribute, deviceinfo.go:333-351).
    if host.release == "main" and gpu.numa_node is not None and gpu.numa_node >= 0:
        attrs["resource.kubernetes.io/numaNode"] = {"int": gpu.numa_node}
    if gpu.addressing_mode is not None:
        attrs["addressingMode"] = {"string": gpu.addressing_mode}
    return attrs


def _gpu_attributes(gpu: Gpu, host: _Host) -> dict[str, Any]:
    return {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}, **_attributes(gpu, host)}


def _mig_attributes(gpu: Gpu, profile: str, host: _Host) -> dict[str, Any]:
    """CommonAttributesMig (mig.go:139-187): the parent's, its uuid as parentUUID (no uuid of its own)."""
    return {
        "type": {"string": "mig"},
        "parentUUID": {"string": gpu.uuid},
        "profile": {"string": profile},
        **_attributes(gpu, host),
    }


def _mig_name(gpu: Gpu, profile: MigProfile, start: int) -> str:
    """MigSpecTuple.ToCanonicalName (mig.go:111-114) with toRFC1123Compliant (mig.go:249-262)."""
    stem = re.sub(r"[^a-z0-9-.]", "-", profile.name.replace(".", "").lower()).strip("-")
    return f"gpu-{gpu.minor}-mig-{stem}-{profile.id}-{start}"


def _caps(values: Mapping[str, int]) -> dict[str, Any]:
    """intcap (partitions.go:256-259): NewQuantity(n, BinarySI) per capacity."""
    return {name: {"value": quantity_binary(n)} for name, n in values.items()}


def _counters(values: Mapping[str, int], start: int, size: int) -> dict[str, Any]:
    """capacitiesToCounters (partitions.go:180-187: names by camelToDNSName, mig.go:264-275) and one
    `memory-slice-<i>` counter of 1 per slice taken (addCountersForMemSlices, partitions.go:239-253)."""
    counters = {
        re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", k).lower(): {"value": quantity_binary(v)}
        for k, v in values.items()
    }
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)})
    return counters


def _profile_named(gpu: Gpu, name: str) -> MigProfile:
    for profile in gpu.profiles:
        if profile.name == name:
            return profile
    known = ", ".join(p.name for p in gpu.profiles) or "none tabled"
    raise ValueError(f"gpu-{gpu.minor} ({gpu.product}): no MIG profile {name!r} (profiles: {known})")


def _static_mig(gpu: Gpu, host: _Host) -> list[dict[str, Any]]:
    """Pre-made MIG devices (MigDeviceInfo.GetDevice, deviceinfo.go:258-281): the parent's attributes and
    the MIG uuid, the profile's capacities and `memorySlice<i>: 1` per slice taken, no counters."""
    devices, taken = [], set[int]()
    for instance in gpu.mig:
        profile = _profile_named(gpu, instance.profile)
        slices = set(range(instance.start, instance.start + profile.size))
        if instance.start not in profile.starts or slices & taken:
            raise ValueError(
                f"gpu-{gpu.minor}: {instance.profile} cannot start at {instance.start} "
                f"(starts {list(profile.starts)}, memory slices taken {sorted(taken)})"
            )
        taken |= slices
        capacity = _caps(profile.capacities())
        capacity.update({f"memorySlice{i}": {"value": "1"} for i in sorted(slices)})
        attrs = {**_mig_attributes(gpu, profile.name, host), "uuid": {"string": instance.uuid}}
        devices.append(
            {"name": _mig_name(gpu, profile, instance.start), "attributes": attrs, "capacity": capacity}
        )
    return devices


def _whole(gpu: Gpu, host: _Host) -> dict[str, Any]:
    """GpuInfo.GetDevice (deviceinfo.go:249-256) with fullGpuCapacity (partitions.go:34-43): memory, the
    NVML total; no capacity at all when NVML does not report it."""
    device: dict[str, Any] = {"name": f"gpu-{gpu.minor}", "attributes": _gpu_attributes(gpu, host)}
    if gpu.memory is not None:
        device["capacity"] = {"memory": {"value": quantity_binary(gpu.memory)}}
    return device


@dataclass
class _Dynamic:
    """One DynamicMIG-capable GPU's devices and its counter set (inspectMigProfilesAndPlacements,
    nvlib.go:1247-1322; the whole GPU by PartGetDevice, partitions.go:102-117)."""

    devices: list[dict[str, Any]] = field(default_factory=list)
    counter_set: dict[str, Any] | None = None


def _dynamic(gpu: Gpu, host: _Host, shares: str) -> _Dynamic:
    """Every placement of every profile (no uuid, no memorySlice capacities, consuming counters), and the
    whole GPU when MIG mode is off or toggles without a reset (Hopper+; nvlib.go:280): the largest of each
    capacity over the profiles (setMax, nvlib.go:1413-1417), consuming every counter."""
    maxima = {k: max(p.capacities()[k] for p in gpu.profiles) for k in (*_ENGINES, "memory")}
    slices = max(p.size for p in gpu.profiles)  # memSliceCount: the largest placement (nvlib.go:1293-1320)
    set_name = f"gpu-{gpu.minor}-counter-set"  # GetSharedCounterSetName (partitions.go:62-64)
    out = _Dynamic()
    whole = not gpu.mig_mode or gpu.architecture in _TOGGLES_MIG
    if whole:
        device = {
            "name": f"gpu-{gpu.minor}",
            "attributes": _gpu_attributes(gpu, host),
            "capacity": _caps(maxima),
            "consumesCounters": [{"counterSet": set_name, "counters": _counters(maxima, 0, slices)}],
        }
        out.devices.append(shared_device(device, shares))
    for profile in gpu.profiles:
        for start in profile.starts:
            device = {
                "name": _mig_name(gpu, profile, start),
                "attributes": _mig_attributes(gpu, profile.name, host),
                "capacity": _caps(profile.capacities()),
                "consumesCounters": [
                    {"counterSet": set_name, "counters": _counters(profile.capacities(), start, profile.size)}
                ],
            }
            out.devices.append(shared_device(device, shares))
    counters = _counters(maxima, 0, slices)
    if whole and shares.isdigit():
        # PartCapacities returns maxCapacities itself, which applyConsumableShares then writes `shares` into
        # before the counter set is built from it (partitions.go:53-56, consumable_shares.go:78-116,
        # driver.go:234-236): a counter no device consumes.
        counters["shares"] = {"value": quantity_decimal(int(shares))}
    out.counter_set = {"name": set_name, "counters": counters}
    out.devices.sort(key=lambda d: str(d["name"]))  # slices.Sorted(maps.Keys(...)) (driver.go:211)
    return out


def shared_device(device: dict[str, Any], shares: str) -> dict[str, Any]:
    """applyConsumableShares (consumable_shares.go:40-119): several claims per device; memory rounded down
    to 1Mi with a request policy, and `shares` of N; nothing but the flag on a device without memory."""
    if shares == "disabled":
        return device
    device["allowMultipleAllocations"] = True
    capacity = device.get("capacity") or {}
    if "memory" not in capacity:
        return device
    memory = quantity_bytes(capacity["memory"]["value"]) >> 20 << 20
    top = quantity_binary(memory)
    low, default = ("1Mi", top) if shares == "memory" else ("0", "0")
    capacity["memory"] = {
        "value": top,
        "requestPolicy": {"default": default, "validRange": {"min": low, "max": top, "step": "1Mi"}},
    }
    if shares.isdigit():
        n = quantity_decimal(int(shares))
        capacity["shares"] = {
            "value": n,
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": n, "step": "1"}},
        }
    return device


def _cuda(version: int) -> str:
    """SystemGetCudaDriverVersion as the driver prints it, "%v.%v" of v/1000, (v%1000)/10 (nvlib.go:624)."""
    return _semver(f"{version // 1000}.{version % 1000 // 10}")


def _node_slices(gpus: Sequence[Gpu], installation: Installation, host: _Host) -> list[dict[str, Any]]:
    """The bodies (spec fields past driver, node and pool) of the node's slices, in the driver's order."""
    shares = installation.consumable_shares
    if not installation.dynamic_mig:
        # publishResources (driver.go:462-501): one slice, every device; the whole GPU only with MIG off
        # (nvlib.go:311-322), else its pre-made MIG devices. Device order: Go map order (random).
        devices: list[dict[str, Any]] = []
        for gpu in sorted(gpus, key=lambda g: _pci_bus_id(g.pci_bus_id)):
            devices += _static_mig(gpu, host) if gpu.mig_mode else [_whole(gpu, host)]
        return [{"devices": [shared_device(d, shares) for d in devices]} if devices else {}]
    # GenerateDriverResources (driver.go:189-307): one device slice per GPU by PCI bus ID; a GPU not
    # DynamicMIG-capable (no MIG; an Ampere with MIG off, nvlib.go:1517-1551) publishes its memory alone.
    per_gpu: list[_Dynamic] = []
    for gpu in sorted(gpus, key=lambda g: _pci_bus_id(g.pci_bus_id)):
        capable = bool(gpu.profiles) and (gpu.mig_mode or gpu.architecture in _TOGGLES_MIG)
        per_gpu.append(
            _dynamic(gpu, host, shares) if capable else _Dynamic([shared_device(_whole(gpu, host), shares)])
        )
    sets = [g.counter_set for g in per_gpu if g.counter_set is not None]
    if installation.split_slices and any(g.profiles for g in gpus):  # IsMigCapable (device_state.go:1811)
        counters: dict[str, Any] = {"sharedCounters": sets} if sets else {}
        return [counters, *({"devices": g.devices} for g in per_gpu)]
    return [
        {**({"sharedCounters": [g.counter_set]} if g.counter_set else {}), "devices": g.devices}
        for g in per_gpu
    ]


def driver_slices(
    node: str,
    gpus: Sequence[Gpu],
    installation: Installation,
    *,
    driver_version: str = "580.95.05",
    cuda_driver_version: int = 13000,
    generation: int = 1,
    node_uid: str | None = None,
) -> list[dict[str, Any]]:
    """The ResourceSlices of `node`'s pool as the driver publishes them (`generation` 1 on a first publish).

    Named by the driver's generateName `<index, %05x>-gpu.nvidia.com-<node>-` (the resourceslice
    controller, vendor/k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go:76,
    868-871, 1130), to which the API server appends 5 random characters; here the prefix without its
    trailing dash, a stable name a fake can create. Owned by the Node when `node_uid` is given
    (kubeletplugin/draplugin.go:900-913).
    """
    host = _Host(installation.release, _semver(driver_version), _cuda(cuda_driver_version))
    bodies = _node_slices(gpus, installation, host)
    out = []
    for index, body in enumerate(bodies):
        meta: dict[str, Any] = {"name": f"{index:05x}-{DRIVER}-{node}"}
        if node_uid is not None:
            meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
            ]
        spec = {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": len(bodies)},
            **body,
        }
        out.append(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}
        )
    return out


def driver_devices(
    gpus: Sequence[Gpu], installation: Installation, *, driver_version: str = "580.95.05"
) -> list[dict[str, Any]]:
    """Every device the driver publishes for these GPUs, whatever slice holds it."""
    return [
        d
        for s in driver_slices("node", gpus, installation, driver_version=driver_version)
        for d in s["spec"].get("devices", [])
    ]


def driver_device_classes(names: Iterable[str] = ("gpu", "mig", "vfio")) -> list[dict[str, Any]]:
    """The DeviceClasses of the driver's Helm chart (templates/deviceclass-{gpu,mig,vfio-gpu}.yaml, alike in
    v0.4.1 and main): `gpu.nvidia.com` (with extendedResourceName nvidia.com/gpu on resource.k8s.io/v1),
    `mig.nvidia.com`, `vfio.gpu.nvidia.com`."""
    classes = []
    for kind in names:
        expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expr}}]}
        if kind == "gpu":
            spec["extendedResourceName"] = "nvidia.com/gpu"
        name = {"gpu": "gpu.nvidia.com", "mig": "mig.nvidia.com", "vfio": "vfio.gpu.nvidia.com"}[kind]
        classes.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return classes
