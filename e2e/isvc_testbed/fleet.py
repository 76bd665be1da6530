"""A fake GPU DRA driver: KWOK nodes plus NVIDIA-shaped resource.k8s.io/v1 ResourceSlices from a fleet file.

The shapes follow the NVIDIA DRA driver (driver `gpu.nvidia.com`): full GPUs with type/uuid/productName/...
attributes and a `memory` capacity; shareable GPUs in the ConsumableShares N=100 shape; MIG-like
partitions either as partitionable devices (a counters-only slice plus a device slice) or as static MIG
devices. Rendering is pure (unit-testable); `publish`/`withdraw` talk to the API server.

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
from isvc_api import GROUP, VERSION
from isvc_testing import fleet_consumable, fleet_device_classes
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
    "NodeSpec",
    "Partition",
    "main",
]

DRIVER = "gpu.nvidia.com"
FLEET_NODE_LABEL = "isvc.deckhouse.io/fleet-node"
FLEET_ROLE_LABEL = "isvc.deckhouse.io/fleet-role"
POOL_LABEL = "isvc.deckhouse.io/fleet-pool"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
_GROUP, _VERSION = "resource.k8s.io", "v1"
_UUID_NS = uuid.UUID("6f1c3f5e-2b1a-4d9e-9a51-0c7e2f1d8a11")
_MAX_DEVICES = 128
_MAX_DEVICES_WITH_COUNTERS = 64


@dataclass(frozen=True)
class Partition:
    """A MIG-like profile: `count` instances of `profile` per GPU."""

    profile: str
    memory: str
    multiprocessors: int
    count: int


@dataclass(frozen=True)
class GpuGroup:
    """`count` identical GPUs on one node."""

    product: str
    count: int
    memory: str | None
    architecture: str
    compute_capability: str
    brand: str = "Nvidia"
    multiprocessors: int = 0
    shares: int | None = None
    partitions: tuple[Partition, ...] = ()
    mig: tuple[Partition, ...] = ()


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
    uuid: str
    type: str
    product: str
    memory: str | None
    profile: str | None = None


def _str(d: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if value is None:
        raise FleetError(f"{where}: `{key}` is required")
    return str(value)


def _partitions(raw: Any, where: str) -> tuple[Partition, ...]:
    out = []
    for i, p in enumerate(raw or []):
        w = f"{where}[{i}]"
        out.append(
            Partition(
                _str(p, "profile", w),
                _str(p, "memory", w),
                int(p.get("multiprocessors", 0)),
                int(p.get("count", 1)),
            )
        )
    return tuple(out)


def _gpu_group(raw: dict[str, Any], where: str) -> GpuGroup:
    group = GpuGroup(
        product=_str(raw, "product", where),
        count=int(raw.get("count", 1)),
        memory=None if raw.get("memory") is None else str(raw["memory"]),
        architecture=_str(raw, "architecture", where),
        compute_capability=_str(raw, "cudaComputeCapability", where),
        brand=str(raw.get("brand", "Nvidia")),
        multiprocessors=int(raw.get("multiprocessors", 0)),
        shares=None if raw.get("shares") is None else int(raw["shares"]),
        partitions=_partitions(raw.get("partitions"), f"{where}.partitions"),
        mig=_partitions(raw.get("mig"), f"{where}.mig"),
    )
    if group.partitions and group.mig:
        raise FleetError(
            f"{where}: a GPU group has either `partitions` (dynamic) or `mig` (static), not both"
        )
    if group.partitions and (group.memory is None or group.shares is not None):
        raise FleetError(f"{where}: partitionable GPUs need `memory` and cannot be `shares`-shareable")
    if group.shares is not None and not 1 <= group.shares <= 1000:
        raise FleetError(f"{where}: `shares` must be 1..1000")
    return group


@dataclass
class Fleet:
    """A declarative set of fake GPU nodes; publishes them as Nodes, DeviceClasses and ResourceSlices."""

    nodes: list[NodeSpec]
    driver_version: str = "580.65.6"
    cuda_driver_version: str = "13.0.0"
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
        return cls(
            nodes, str(raw.get("driverVersion", "580.65.6")), str(raw.get("cudaDriverVersion", "13.0.0"))
        )

    def node(self, name: str) -> NodeSpec:
        """The node spec called `name`."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise FleetError(f"no node {name!r} in the fleet")

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
        """DeviceClasses as the NVIDIA driver's chart ships them (whole GPUs and MIG devices), labelled as the
        fleet's."""
        return [
            {**dc, "metadata": {**dc["metadata"], "labels": {FLEET_NODE_LABEL: "true"}}}
            for dc in fleet_device_classes()
        ]

    def _uuid(self, prefix: str, *parts: object) -> str:
        return f"{prefix}-{uuid.uuid5(_UUID_NS, '/'.join(map(str, parts)))}"

    def _base_attrs(self, g: GpuGroup, minor: int) -> dict[str, Any]:
        return {
            "productName": {"string": g.product},
            "brand": {"string": g.brand},
            "architecture": {"string": g.architecture},
            "cudaComputeCapability": {"version": g.compute_capability},
            "driverVersion": {"version": self.driver_version},
            "cudaDriverVersion": {"version": self.cuda_driver_version},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x10 + minor:02x}:00.0"},
        }

    def _node_devices(
        self, spec: NodeSpec
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Device]]:
        """(devices, counter sets, device index) of one node, withdrawn devices left out."""
        devices: list[dict[str, Any]] = []
        counter_sets: list[dict[str, Any]] = []
        index: list[Device] = []
        minor = 0

        def add(dev: dict[str, Any], info: Device) -> None:
            if (spec.name, info.name) not in self.withdrawn:
                devices.append(dev)
                index.append(info)

        for g in spec.gpus:
            for _ in range(g.count):
                gpu_uuid = self._uuid("GPU", spec.name, minor)
                gpu_name = f"gpu-{minor}"
                attrs = {
                    "type": {"string": "gpu"},
                    "uuid": {"string": gpu_uuid},
                    **self._base_attrs(g, minor),
                }
                if g.mig:
                    for p in g.mig:
                        for i in range(p.count):
                            name = f"gpu-{minor}-mig-{p.profile.replace('.', '')}-{i}"
                            mig_uuid = self._uuid("MIG", spec.name, minor, p.profile, i)
                            mig_attrs = {
                                **attrs,
                                "type": {"string": "mig"},
                                "uuid": {"string": mig_uuid},
                                "parentUUID": {"string": gpu_uuid},
                                "profile": {"string": p.profile},
                            }
                            cap = {
                                "memory": {"value": p.memory},
                                "multiprocessors": {"value": str(p.multiprocessors)},
                            }
                            add(
                                {"name": name, "attributes": mig_attrs, "capacity": cap},
                                Device(spec.name, name, mig_uuid, "mig", g.product, p.memory, p.profile),
                            )
                    minor += 1
                    continue
                capacity: dict[str, Any] = {} if g.memory is None else {"memory": {"value": g.memory}}
                if g.shares is not None:
                    capacity = fleet_consumable(g.memory, g.shares)
                dev: dict[str, Any] = {"name": gpu_name, "attributes": attrs, "capacity": capacity}
                if g.shares is not None:
                    dev["allowMultipleAllocations"] = True
                if g.partitions:
                    set_name = f"gpu-{minor}-counter-set"
                    sms = g.multiprocessors or max(p.multiprocessors * p.count for p in g.partitions)
                    assert g.memory is not None
                    counter_sets.append(
                        {
                            "name": set_name,
                            "counters": {
                                "memory": {"value": g.memory},
                                "multiprocessors": {"value": str(sms)},
                            },
                        }
                    )
                    dev["consumesCounters"] = [
                        {
                            "counterSet": set_name,
                            "counters": {
                                "memory": {"value": g.memory},
                                "multiprocessors": {"value": str(sms)},
                            },
                        }
                    ]
                    dev["attributes"] = {**attrs, "partitionable": {"bool": True}}
                add(dev, Device(spec.name, gpu_name, gpu_uuid, "gpu", g.product, g.memory))
                for p in g.partitions:
                    for i in range(p.count):
                        name = f"gpu-{minor}-mig-{p.profile.replace('.', '')}-{i}"
                        mig_uuid = self._uuid("MIG", spec.name, minor, p.profile, i)
                        used = {
                            "memory": {"value": p.memory},
                            "multiprocessors": {"value": str(p.multiprocessors)},
                        }
                        add(
                            {
                                "name": name,
                                "attributes": {
                                    **attrs,
                                    "type": {"string": "mig"},
                                    "uuid": {"string": mig_uuid},
                                    "parentUUID": {"string": gpu_uuid},
                                    "profile": {"string": p.profile},
                                },
                                "capacity": copy.deepcopy(used),
                                "consumesCounters": [{"counterSet": set_name, "counters": used}],
                            },
                            Device(spec.name, name, mig_uuid, "mig", g.product, p.memory, p.profile),
                        )
                minor += 1
        return devices, counter_sets, index

    def render_devices(self, spec: NodeSpec) -> list[dict[str, Any]]:
        """The published devices of one node as resource.k8s.io/v1 Device objects (no counter sets): what a
        kubelet plugin publishing the same cards itself puts in its pool (realnode.py)."""
        return self._node_devices(spec)[0]

    def devices(self, node: str | None = None) -> list[Device]:
        """Every currently published device (of one node, or of the whole fleet)."""
        out: list[Device] = []
        for spec in self.nodes:
            if node is None or spec.name == node:
                out += self._node_devices(spec)[2]
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

    def render_slices(
        self, spec: NodeSpec, generation: int, node_uid: str | None = None
    ) -> list[dict[str, Any]]:
        """The ResourceSlices of one node's pool at `generation` (none for a node without GPUs)."""
        if not spec.gpus:
            return []
        devices, counter_sets, _ = self._node_devices(spec)
        limit = _MAX_DEVICES_WITH_COUNTERS if counter_sets else _MAX_DEVICES
        chunks: list[dict[str, Any]] = []
        if counter_sets:
            chunks.append({"sharedCounters": counter_sets})
        for i in range(0, len(devices), limit):
            chunks.append({"devices": devices[i : i + limit]})
        if not any("devices" in c for c in chunks):
            chunks.append({"devices": []})
        slices = []
        for i, body in enumerate(chunks):
            meta: dict[str, Any] = {"name": f"{spec.name}-{DRIVER}-{i}", "labels": {POOL_LABEL: spec.name}}
            if node_uid:
                meta["ownerReferences"] = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": spec.name,
                        "uid": node_uid,
                        "controller": True,
                    }
                ]
            slices.append(
                {
                    "apiVersion": f"{_GROUP}/{_VERSION}",
                    "kind": "ResourceSlice",
                    "metadata": meta,
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": spec.name,
                        "pool": {
                            "name": spec.name,
                            "generation": generation,
                            "resourceSliceCount": len(chunks),
                        },
                        **body,
                    },
                }
            )
        return slices

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
