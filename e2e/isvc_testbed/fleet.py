"""A fake GPU DRA driver: KWOK nodes plus the ResourceSlices kubernetes-sigs/dra-driver-nvidia-gpu would
publish for them, from a fleet file.

A fleet file names one installation of the driver (its release, DynamicMIG gate and consumableShares value,
as a cluster runs one) and each node's GPUs as NVML would report them; every node's pool is rendered by
`isvc_testing.driver_slices`, the one renderer of the driver's shapes, which `packages/isvc-testing` holds
against what the driver's own code published. Rendering is pure (unit-testable); `publish`/`withdraw` talk to
the API server.

Run `python -m isvc_testbed.fleet --kubeconfig K --fleet F` to publish a fleet file.
"""

from __future__ import annotations

import argparse
import copy
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from isvc_api import GROUP, VERSION, quantity_bytes
from isvc_testing import (
    MIG_PROFILES,
    Gpu,
    Installation,
    MigInstance,
    driver_device_classes,
    driver_slices,
)
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed._errors import FleetError
from isvc_testbed._kube import api_client
from isvc_testbed.helpers import ignore_404

__all__ = [
    "DRIVER",
    "FLEET_NODE_LABEL",
    "POOL_LABEL",
    "Device",
    "Fleet",
    "GpuGroup",
    "Installation",
    "NodeSpec",
    "main",
]

DRIVER = "gpu.nvidia.com"
FLEET_NODE_LABEL = "isvc.deckhouse.io/fleet-node"
FLEET_ROLE_LABEL = "isvc.deckhouse.io/fleet-role"
POOL_LABEL = "isvc.deckhouse.io/fleet-pool"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
_GROUP, _VERSION = "resource.k8s.io", "v1"
_UUID_NS = uuid.UUID("6f1c3f5e-2b1a-4d9e-9a51-0c7e2f1d8a11")
_GROUP_KEYS = {
    "product",
    "count",
    "memory",
    "architecture",
    "cudaComputeCapability",
    "brand",
    "mig",
    "migMode",
}
_DRIVER_KEYS = {"release", "dynamicMIG", "consumableShares"}
_MAX_COUNTER_SETS = 8  # ResourceSliceMaxCounterSets (k8s.io/api resource/v1): DynamicMIG's slice 0 holds all


@dataclass(frozen=True)
class GpuGroup:
    """`count` identical GPUs on one node; `mig`: the static MIG devices made on each (MIG mode on)."""

    product: str
    count: int
    memory: str | None  # NVML's memory total as a quantity; None: NVML reports none
    architecture: str
    compute_capability: str
    brand: str = "Nvidia"
    mig: tuple[str, ...] = ()  # profiles, placed first fit as `nvidia-smi mig -cgi` places them
    mig_mode: bool = False  # MIG mode on (implied by `mig`); an A100 under DynamicMIG publishes MIG only then


@dataclass(frozen=True)
class NodeSpec:
    """A KWOK node and the GPUs it carries."""

    name: str
    role: str
    cpu: str
    memory: str
    pods: str
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    gpus: tuple[GpuGroup, ...]


@dataclass(frozen=True)
class Device:
    """One published device, for tests that pin claims to it."""

    node: str
    name: str
    uuid: str | None  # None for a DynamicMIG placement: the driver gives it none
    type: str
    product: str
    memory: str | None
    profile: str | None = None
    parent: str | None = None  # a MIG device's parentUUID


def _str(d: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if value is None:
        raise FleetError(f"{where}: `{key}` is required")
    return str(value)


def _gpu_group(raw: dict[str, Any], where: str) -> GpuGroup:
    if "shares" in raw:
        raise FleetError(f"{where}: `shares` is the driver installation's: set `driver.consumableShares`")
    if "partitions" in raw:
        raise FleetError(
            f"{where}: dynamic MIG is the driver installation's (`driver.dynamicMIG: true`); a GPU group gives "
            "its static MIG devices as `mig: [profile, ...]`, or `migMode: true`"
        )
    unknown = set(raw) - _GROUP_KEYS
    if unknown:
        raise FleetError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_GROUP_KEYS)})")
    mig = raw.get("mig") or []
    if not all(isinstance(p, str) for p in mig):
        raise FleetError(f"{where}: `mig` lists MIG profiles, e.g. [3g.20gb, 3g.20gb]")
    return GpuGroup(
        product=_str(raw, "product", where),
        count=int(raw.get("count", 1)),
        memory=None if raw.get("memory") is None else str(raw["memory"]),
        architecture=_str(raw, "architecture", where),
        compute_capability=_str(raw, "cudaComputeCapability", where),
        brand=str(raw.get("brand", "Nvidia")),
        mig=tuple(mig),
        mig_mode=bool(raw.get("migMode", bool(mig))),
    )


def _installation(raw: Any, where: str) -> Installation:
    """The fleet's one installation of the driver (`driver:` at its top)."""
    if not isinstance(raw, dict):
        raise FleetError(
            f"{where}: `driver: {{release, dynamicMIG, consumableShares}}` is required: a cluster runs one "
            "installation of the driver"
        )
    unknown = set(raw) - _DRIVER_KEYS
    if unknown:
        raise FleetError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_DRIVER_KEYS)})")
    try:
        return Installation(
            release=str(raw.get("release", "main")),
            dynamic_mig=bool(raw.get("dynamicMIG", False)),
            consumable_shares=str(raw.get("consumableShares", "disabled")),
        )
    except ValueError as e:
        raise FleetError(f"{where}: {e}") from e


def _cuda(text: str) -> int:
    """NVML's CUDA driver version (13000) from "13.0"."""
    major, _, minor = text.partition(".")
    return int(major) * 1000 + int(minor.split(".")[0] or 0) * 10


def _placed(product: str, profiles: tuple[str, ...], where: str) -> list[tuple[str, int]]:
    """Static MIG devices at placement starts the card allows, in the order given, each at the lowest start
    that leaves room for the rest (as one would make them with `nvidia-smi mig -cgi <id>:<start>`)."""
    table = {p.name: p for p in MIG_PROFILES.get(product, ())}
    for name in profiles:
        if name not in table:
            raise FleetError(f"{where}: {product!r} has no MIG profile {name!r} known ({sorted(table)})")

    def place(rest: tuple[str, ...], taken: frozenset[int]) -> list[tuple[str, int]] | None:
        if not rest:
            return []
        profile = table[rest[0]]
        for start in profile.starts:
            slices = frozenset(range(start, start + profile.size))
            if not slices & taken and (tail := place(rest[1:], taken | slices)) is not None:
                return [(profile.name, start), *tail]
        return None

    placed = place(profiles, frozenset())
    if placed is None:
        raise FleetError(f"{where}: {list(profiles)} do not fit one {product}'s memory slices together")
    return placed


@dataclass
class Fleet:
    """A declarative set of fake GPU nodes; publishes them as Nodes, DeviceClasses and ResourceSlices."""

    nodes: list[NodeSpec]
    installation: Installation = field(default_factory=Installation)
    driver_version: str = "580.95.05"  # NVML's, as the host's driver reports it
    cuda_driver_version: str = "13.0"
    withdrawn: set[tuple[str, str]] = field(default_factory=set)

    # ---- loading --------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Fleet:
        """Read a fleet file (see e2e/fleets/default.yaml)."""
        return cls.from_dict(yaml.safe_load(Path(path).read_text()), str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "fleet") -> Fleet:
        """Build a fleet from the parsed YAML document."""
        if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
            raise FleetError(f"{where}: expected a mapping with a `nodes` list")
        nodes = []
        for i, n in enumerate(raw["nodes"]):
            w = f"{where}.nodes[{i}]"
            gpus = tuple(_gpu_group(g, f"{w}.gpus[{j}]") for j, g in enumerate(n.get("gpus") or []))
            nodes.append(
                NodeSpec(
                    name=_str(n, "name", w),
                    role=str(n.get("role", "gpu" if gpus else "system")),
                    cpu=str(n.get("cpu", "32")),
                    memory=str(n.get("memory", "256Gi")),
                    pods=str(n.get("pods", "110")),
                    labels={str(k): str(v) for k, v in (n.get("labels") or {}).items()},
                    taints=tuple(n.get("taints") or ()),
                    gpus=gpus,
                )
            )
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise FleetError(f"{where}: node names must be unique")
        fleet = cls(
            nodes,
            _installation(raw.get("driver"), f"{where}.driver"),
            str(raw.get("driverVersion", "580.95.05")),
            str(raw.get("cudaDriverVersion", "13.0")),
        )
        for i, spec in enumerate(fleet.nodes):
            fleet._check(spec, f"{where}.nodes[{i}]")
        return fleet

    def _check(self, spec: NodeSpec, where: str) -> None:
        """What the driver would refuse or the API server reject, said at load time."""
        for j, g in enumerate(spec.gpus):
            if g.mig and self.installation.dynamic_mig:
                raise FleetError(
                    f"{where}.gpus[{j}]: DynamicMIG destroys MIG devices made before the driver starts "
                    "(DestroyUnknownMIGDevices); give `migMode: true` to have an A100 publish its placements"
                )
        try:
            gpus = self._gpus(spec)
        except ValueError as e:
            raise FleetError(f"{where}: {e}") from e
        if self.installation.dynamic_mig and sum(bool(g.profiles) for g in gpus) > _MAX_COUNTER_SETS:
            raise FleetError(
                f"{where}: more than {_MAX_COUNTER_SETS} MIG-capable GPUs under DynamicMIG: the driver puts "
                "every counter set in one slice and the API server takes 8"
            )

    def node(self, name: str) -> NodeSpec:
        """The node spec called `name`."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise FleetError(f"no node {name!r} in the fleet")

    def selector(self) -> str:
        """A CEL clause admitting this fleet's devices alone, when fleets of one product are published side by
        side: each fleet file's host driver version is its own."""
        version = ".".join(str(int(p)) for p in self.driver_version.split("."))
        return (
            f"device.driver == '{DRIVER}' && "
            f"device.attributes['{DRIVER}'].driverVersion.compareTo(semver('{version}')) == 0"
        )

    # ---- pure rendering -------------------------------------------------------------------------------

    def render_node(self, spec: NodeSpec) -> dict[str, Any]:
        """The Node object KWOK will manage."""
        labels = {
            "kubernetes.io/hostname": spec.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            FLEET_NODE_LABEL: "true",
            FLEET_ROLE_LABEL: spec.role,
        }
        if spec.gpus:
            # As NVIDIA GPU Feature Discovery labels a GPU node (the chart keeps the module's pods off them).
            labels["nvidia.com/gpu.present"] = "true"
            labels["nvidia.com/gpu.product"] = spec.gpus[0].product.replace(" ", "-")
        labels.update(spec.labels)
        # Real nodes report ephemeral-storage; the module's pods request it (Deckhouse convention).
        resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods, "ephemeral-storage": "100Gi"}
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": spec.name,
                "labels": labels,
                "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"providerID": f"kwok://{spec.name}"},
            "status": {"allocatable": dict(resources), "capacity": dict(resources)},
        }
        if spec.taints:
            node["spec"]["taints"] = [dict(t) for t in spec.taints]
        return node

    @staticmethod
    def render_device_classes() -> list[dict[str, Any]]:
        """DeviceClasses as the NVIDIA driver's chart ships them, labelled as the fleet's."""
        return [
            {**dc, "metadata": {**dc["metadata"], "labels": {FLEET_NODE_LABEL: "true"}}}
            for dc in driver_device_classes()
        ]

    def _uuid(self, prefix: str, *parts: object) -> str:
        return f"{prefix}-{uuid.uuid5(_UUID_NS, '/'.join(map(str, parts)))}"

    def _gpus(self, spec: NodeSpec) -> list[Gpu]:
        """The node's GPUs as NVML would report them: minors counting up across groups, bus IDs from 0x10,
        the first half of the cards on PCIe root 0 (NUMA node 0), the rest on root 0x80 (node 1)."""
        gpus, minor = [], 0
        total = sum(g.count for g in spec.gpus)
        for g in spec.gpus:
            for _ in range(g.count):
                far = minor >= (total + 1) // 2 and total > 1
                mig = _placed(g.product, g.mig, f"gpu-{minor}")
                gpus.append(
                    Gpu(
                        minor=minor,
                        uuid=self._uuid("GPU", spec.name, minor),
                        product=g.product,
                        memory=None if g.memory is None else quantity_bytes(g.memory),
                        architecture=g.architecture,
                        compute_capability=g.compute_capability,
                        pci_bus_id=f"0000:{0x10 + minor + (0x80 if far else 0):02x}:00.0",
                        brand=g.brand,
                        pcie_root="pci0000:80" if far else "pci0000:00",
                        numa_node=1 if far else 0,
                        mig_mode=g.mig_mode,
                        mig=tuple(
                            MigInstance(p, start, self._uuid("MIG", spec.name, minor, p, start))
                            for p, start in mig
                        ),
                    )
                )
                minor += 1
        return gpus

    def render_slices(
        self, spec: NodeSpec, generation: int, node_uid: str | None = None
    ) -> list[dict[str, Any]]:
        """The ResourceSlices of one node's pool at `generation` (none for a node without GPUs), as the driver
        publishes them, withdrawn devices left out."""
        if not spec.gpus:
            return []
        slices = driver_slices(
            spec.name,
            self._gpus(spec),
            self.installation,
            driver_version=self.driver_version,
            cuda_driver_version=_cuda(self.cuda_driver_version),
            generation=generation,
            node_uid=node_uid,
        )
        for s in slices:
            s["metadata"]["labels"] = {POOL_LABEL: spec.name}
            if "devices" in s["spec"]:
                s["spec"]["devices"] = [
                    d for d in s["spec"]["devices"] if (spec.name, d["name"]) not in self.withdrawn
                ]
        return slices

    def render_devices(self, spec: NodeSpec) -> list[dict[str, Any]]:
        """The published devices of one node as resource.k8s.io/v1 Device objects (no counter sets): what a
        kubelet plugin publishing the same cards itself puts in its pool (realnode.py)."""
        return [d for s in self.render_slices(spec, 1) for d in s["spec"].get("devices", [])]

    def devices(self, node: str | None = None) -> list[Device]:
        """Every currently published device (of one node, or of the whole fleet)."""
        out: list[Device] = []
        for spec in self.nodes:
            if node is None or spec.name == node:
                out += [_device(spec.name, d) for d in self.render_devices(spec)]
        return out

    def device(self, node: str, name: str) -> Device:
        """One published device by node and device name."""
        for d in self.devices(node):
            if d.name == name:
                return d
        raise FleetError(f"no published device {name!r} on node {node!r}")

    def idle(self, api: k8s.ApiClient, node: str, type: str = "gpu") -> Device:
        """A published device of `node` (of that type) that no allocated claim and no LaunchPlan holds: for a
        test that pins orders to one card, whatever the files run before it on this control plane left."""
        claims: list[Any] = k8s.ResourceV1Api(api).list_resource_claim_for_all_namespaces().items
        held = {
            (r.pool, r.device)
            for c in claims
            if c.status is not None and c.status.allocation is not None
            for r in c.status.allocation.devices.results or []
        }
        try:
            plans: Any = k8s.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, "launchplans")
        except ApiException as e:
            if e.status != 404:
                raise
            plans = {"items": []}  # the module's kinds not installed: no plans
        for plan in plans["items"]:
            placement = plan.get("spec", {}).get("placement") or {}
            held |= {(placement.get("pool"), d) for d in placement.get("devices") or []}
        for d in self.devices(node):
            if d.type == type and (node, d.name) not in held:
                return d
        raise FleetError(f"every {type} of {node} is held: {sorted(held)}")

    # ---- talking to the API server ------------------------------------------------------------------

    def publish(self, api: k8s.ApiClient, nodes: Iterable[str] | None = None) -> None:
        """Create/update Nodes, DeviceClasses and each node's pool (generation bumped only on change)."""
        custom = k8s.CustomObjectsApi(api)
        for dc in self.render_device_classes():
            _apply_cluster(custom, "deviceclasses", dc)
        wanted = set(nodes) if nodes is not None else None
        for spec in self.nodes:
            if wanted is None or spec.name in wanted:
                uid = _ensure_node(k8s.CoreV1Api(api), self.render_node(spec))
                self._publish_pool(custom, spec, uid)

    def withdraw(self, api: k8s.ApiClient, node: str, device: str) -> None:
        """Republish `node`'s pool without `device` (a new pool generation), like a driver losing a GPU."""
        self.device(node, device)
        self.withdrawn.add((node, device))
        self.publish(api, [node])

    def restore(self, api: k8s.ApiClient, node: str, device: str) -> None:
        """Undo `withdraw`: publish the device again under a new pool generation."""
        self.withdrawn.discard((node, device))
        self.publish(api, [node])

    def unpublish(self, api: k8s.ApiClient) -> None:
        """Delete the fleet's Nodes (their slices go with them by ownerReference) and the slices directly."""
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        for spec in self.nodes:
            for s in _list_pool(custom, spec.name):
                ignore_404(
                    lambda s=s: custom.delete_cluster_custom_object(
                        _GROUP, _VERSION, "resourceslices", s["metadata"]["name"]
                    )
                )
            ignore_404(lambda spec=spec: core.delete_node(spec.name))

    def _publish_pool(self, custom: k8s.CustomObjectsApi, spec: NodeSpec, node_uid: str) -> None:
        existing = {s["metadata"]["name"]: s for s in _list_pool(custom, spec.name)}
        current = max((int(s["spec"]["pool"]["generation"]) for s in existing.values()), default=0)
        desired = self.render_slices(spec, current, node_uid)
        if desired and _same_pool(desired, existing):
            return
        desired = self.render_slices(spec, current + 1, node_uid)
        for s in desired:
            _apply_cluster(custom, "resourceslices", s, existing.get(s["metadata"]["name"]))
        names = {s["metadata"]["name"] for s in desired}
        for name in existing.keys() - names:
            ignore_404(
                lambda name=name: custom.delete_cluster_custom_object(
                    _GROUP, _VERSION, "resourceslices", name
                )
            )


def _device(node: str, raw: dict[str, Any]) -> Device:
    """The index entry of one rendered device."""
    attrs = raw.get("attributes") or {}

    def attr(name: str) -> str | None:
        value = attrs.get(name)
        return None if value is None else str(next(iter(value.values())))

    memory = (raw.get("capacity") or {}).get("memory")
    return Device(
        node,
        raw["name"],
        attr("uuid"),
        attr("type") or "",
        attr("productName") or "",
        None if memory is None else str(memory["value"]),
        attr("profile"),
        attr("parentUUID"),
    )


def _strip(spec: dict[str, Any]) -> dict[str, Any]:
    s = copy.deepcopy(spec)
    s.get("pool", {}).pop("generation", None)
    return s


def _same_pool(desired: Sequence[dict[str, Any]], existing: dict[str, dict[str, Any]]) -> bool:
    if {s["metadata"]["name"] for s in desired} != set(existing):
        return False
    return all(_strip(s["spec"]) == _strip(existing[s["metadata"]["name"]]["spec"]) for s in desired)


def _list_pool(custom: k8s.CustomObjectsApi, node: str) -> list[dict[str, Any]]:
    resp = custom.list_cluster_custom_object(
        _GROUP, _VERSION, "resourceslices", label_selector=f"{POOL_LABEL}={node}"
    )
    items: list[dict[str, Any]] = cast(dict[str, Any], resp).get("items", [])
    return items


def _apply_cluster(
    custom: k8s.CustomObjectsApi, plural: str, obj: dict[str, Any], existing: dict[str, Any] | None = None
) -> None:
    name = obj["metadata"]["name"]
    if existing is None:
        try:
            custom.create_cluster_custom_object(_GROUP, _VERSION, plural, obj)
            return
        except ApiException as e:
            if e.status != 409:
                raise
            existing = cast(dict[str, Any], custom.get_cluster_custom_object(_GROUP, _VERSION, plural, name))
    body = copy.deepcopy(obj)
    body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    custom.replace_cluster_custom_object(_GROUP, _VERSION, plural, name, body)


def _ensure_node(core: k8s.CoreV1Api, node: dict[str, Any]) -> str:
    """Create the Node unless it exists; keep labels in step; return its uid."""
    name = node["metadata"]["name"]
    try:
        return _uid(core.create_node(cast(Any, node)))
    except ApiException as e:
        if e.status != 409:
            raise
    current = core.patch_node(
        name,
        {"metadata": {"labels": node["metadata"]["labels"], "annotations": node["metadata"]["annotations"]}},
    )
    return _uid(current)


def _uid(node: k8s.V1Node) -> str:
    if node.metadata is None or not node.metadata.uid:
        raise FleetError("the API server returned a Node without a uid")
    return str(node.metadata.uid)


class _NoAliasDumper(yaml.SafeDumper):
    """Prints shared sub-objects in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: publish a fleet file to a cluster, or print what would be published."""
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.fleet", description=__doc__.splitlines()[0])
    p.add_argument("--fleet", required=True, help="fleet file, e.g. e2e/fleets/default.yaml")
    p.add_argument("--kubeconfig", help="admin kubeconfig of the cluster")
    p.add_argument(
        "--print", dest="print_only", action="store_true", help="print the objects, do not publish"
    )
    p.add_argument(
        "--withdraw",
        metavar="NODE/DEVICE",
        action="append",
        default=[],
        help="publish without this device (repeatable)",
    )
    p.add_argument("--delete", action="store_true", help="delete the fleet's nodes and slices")
    args = p.parse_args(argv)
    fleet = Fleet.load(args.fleet)
    for item in args.withdraw:
        node, _, device = item.partition("/")
        fleet.device(node, device)
        fleet.withdrawn.add((node, device))
    if args.print_only:
        objs: list[dict[str, Any]] = [*fleet.render_device_classes()]
        for spec in fleet.nodes:
            objs += [fleet.render_node(spec), *fleet.render_slices(spec, 1)]
        yaml.dump_all(objs, sys.stdout, Dumper=_NoAliasDumper, sort_keys=False)
        return 0
    if not args.kubeconfig:
        p.error("--kubeconfig is required unless --print")
    with api_client(args.kubeconfig) as api:
        if args.delete:
            fleet.unpublish(api)
        else:
            fleet.publish(api)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
