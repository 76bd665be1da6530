"""The DRA read-model: ResourceSlices → pools → published devices and counters, and the nodes they are on.

Devices come from the latest generation of complete pools only, as kube-scheduler has them: while some slice
of a pool's newest generation is missing, the pool publishes nothing. A device on a node that takes no new
pods (cordoned, or a NoSchedule/NoExecute taint our pods do not tolerate) is tainted: the scheduler would
never place a claim's pod there. Nodes deleted lately are remembered with what they published (and what they
stopped publishing just before: their slices may be seen gone first), so a refusal can say that the devices
which would hold an order went with their node.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from isvc_api import DeviceKey

from isvc_ledger._classes import DeviceClasses
from isvc_ledger._device import BLOCKING, Device, DeviceReader, counter_amount

__all__ = ["DEPARTED_TTL", "Fleet", "PoolChange", "PoolKey", "node_state"]

DEPARTED_TTL = 3600.0  # seconds a deleted node's devices are remembered, to say where they went
# seconds a node's withdrawn devices are kept for its deletion: the slices of a deleted node are collected
# after it, but their watch can be seen before the node's (two informers)
WITHDRAWN_TTL = 300.0

PoolKey = tuple[str, str]  # (driver, pool)


class PoolChange(NamedTuple):
    """A pool published again: the devices it published before, those it publishes now (judged, not yet
    counted), and whether it publishes counters or devices that draw on them."""

    gone: list[Device]
    published: dict[DeviceKey, Device]
    counters: bool


class Fleet:
    """Slices, pools, their devices and counters, the classes admitting each device, and the nodes."""

    def __init__(self, classes: DeviceClasses) -> None:
        self.classes = classes
        self.reader = DeviceReader()
        self.devices: dict[DeviceKey, Device] = {}
        self.counters: dict[PoolKey, dict[tuple[str, str], int]] = {}  # (set, counter) -> published value
        self.closed_nodes: set[str] = set()
        self.node_states: dict[str, str] = {}  # a closed node -> why (cordoned, not ready, a taint)
        self.departed: dict[str, tuple[float, list[Device]]] = {}  # deleted node -> (when, its devices)
        # a node -> (when, what it stopped publishing lately)
        self._withdrawn: dict[str, tuple[float, list[Device]]] = {}
        self._slices: dict[str, Mapping[str, Any]] = {}
        self._pool_slices: dict[PoolKey, set[str]] = {}
        self._pool_devices: dict[PoolKey, set[DeviceKey]] = {}
        self._node_pools: dict[str, set[PoolKey]] = {}  # node -> pools publishing its devices
        self._by_class: dict[str, list[Device]] = {}  # class -> its devices in order, once asked for

    # ------------------------------------------------------------------ slices and pools

    def keep_slice(self, sl: Mapping[str, Any]) -> None:
        """Keep a slice of a first listing; its pool is published once `republish` is called for it."""
        self._slices[sl["metadata"]["name"]] = sl
        self._pool_slices.setdefault(pool_of(sl), set()).add(sl["metadata"]["name"])

    def put_slice(self, sl: Mapping[str, Any]) -> list[PoolKey]:
        """Add or change a ResourceSlice: the pools to publish again (none for a relist or metadata)."""
        name = sl["metadata"]["name"]
        old = self._slices.get(name)
        self._slices[name] = sl
        if old is not None and old.get("spec") == sl.get("spec"):
            return []
        pool = pool_of(sl)
        self._pool_slices.setdefault(pool, set()).add(name)
        if old is not None and pool_of(old) != pool:
            self._pool_slices.get(pool_of(old), set()).discard(name)
            return [pool_of(old), pool]
        return [pool]

    def drop_slice(self, name: str) -> list[PoolKey]:
        """Forget a ResourceSlice: the pools to publish again."""
        old = self._slices.pop(name, None)
        if old is None:
            return []
        self._pool_slices.get(pool_of(old), set()).discard(name)
        return [pool_of(old)]

    def republish(self, pool: PoolKey) -> PoolChange:
        """Read what a pool publishes now in place of what it published."""
        published, counters = self._published(pool)
        gone: list[Device] = []
        for key in self._pool_devices.pop(pool, ()):
            old = self.devices.pop(key, None)
            if old is not None:
                gone.append(old)
                self._list(old, False)
                self.classes.forget(key)
        for node in {d.node for d in gone}:
            self._on_node(node, pool, False)
        self._withdraw([d for d in gone if d.key not in published])
        self.counters.pop(pool, None)
        if counters:
            self.counters[pool] = counters
        consumes = bool(counters)
        for key, device in published.items():
            self.classes.admit(device)
            self.devices[key] = device
            self._list(device, True)
            consumes = consumes or bool(device.consumes)
        for node in {d.node for d in published.values()}:
            self._on_node(node, pool, True)
        if published:
            self._pool_devices[pool] = set(published)
        return PoolChange(gone, published, consumes)

    def pools(self) -> list[PoolKey]:
        """Every pool some slice names, sorted."""
        return sorted(self._pool_slices)

    def _published(self, pool: PoolKey) -> tuple[dict[DeviceKey, Device], dict[tuple[str, str], int]]:
        """The devices and counters a pool publishes: those of its newest generation's slices, once every
        one of them is in (none while some are missing, as the scheduler has it)."""
        members = [self._slices[n] for n in sorted(self._pool_slices.get(pool, ())) if n in self._slices]
        published: dict[DeviceKey, Device] = {}
        counters: dict[tuple[str, str], int] = {}
        if not members:
            return published, counters
        if len(members) > 1:
            top = max(int(s["spec"]["pool"].get("generation", 0)) for s in members)
            members = [s for s in members if int(s["spec"]["pool"].get("generation", 0)) == top]
        if len(members) != max(int(s["spec"]["pool"].get("resourceSliceCount", 1)) for s in members):
            return published, counters
        for sl in members:
            spec = sl["spec"]
            for cs in spec.get("sharedCounters") or ():
                for counter, value in (cs.get("counters") or {}).items():
                    counters[(cs["name"], counter)] = counter_amount(value)
            driver, name, node = spec["driver"], spec["pool"]["name"], spec.get("nodeName")
            for raw in spec.get("devices") or ():
                device = self.reader.device(driver, name, node, raw, self.closed_nodes)
                published[device.key] = device
        return published, counters

    def pool_devices(self, pool: PoolKey) -> set[DeviceKey]:
        """The keys of the devices a pool publishes (not to be changed by the caller)."""
        return self._pool_devices.get(pool, set())

    def near(self, key: DeviceKey) -> list[DeviceKey]:
        """A device and the partitions it shares counters with."""
        device = self.devices.get(key)
        if device is None or not device.consumes:
            return [key]
        return [k for k in self._pool_devices.get((key[0], key[1]), ()) if self.devices[k].consumes]

    def generation(self, key: DeviceKey) -> int:
        """The generation of the pool a device is published in (-1: not published)."""
        if key not in self.devices:
            return -1
        names = self._pool_slices.get((key[0], key[1]), ())
        members = [self._slices[n] for n in names if n in self._slices]
        return max((int(s["spec"]["pool"].get("generation", 0)) for s in members), default=-1)

    # ------------------------------------------------------------------ class listings

    def class_devices(self, device_class: str) -> list[Device]:
        """Published devices a class admits, in a stable order (kept as devices come and go; not to be
        changed by the caller)."""
        listed = self._by_class.get(device_class)
        if listed is None:
            listed = self._by_class[device_class] = sorted(
                (d for d in self.devices.values() if device_class in d.classes), key=Device.sort_key
            )
        return listed

    def unlist_classes(self) -> None:
        """Forget the class listings made so far (the classes changed: they are made again when asked)."""
        self._by_class.clear()

    def _list(self, device: Device, present: bool) -> None:
        """Add a device to (or take it from) the class listings made so far."""
        if not self._by_class:  # none made yet (a first listing): nothing to keep
            return
        for name in device.classes:
            listed = self._by_class.get(name)
            if listed is None:
                continue
            at = bisect.bisect_left(listed, device.sort_key(), key=Device.sort_key)
            if present:
                listed.insert(at, device)
                continue
            while (
                at < len(listed) and listed[at] is not device and listed[at].sort_key() == device.sort_key()
            ):
                at += 1
            if at < len(listed) and listed[at] is device:
                del listed[at]

    # ------------------------------------------------------------------ nodes

    def _on_node(self, node: str | None, pool: PoolKey, present: bool) -> None:
        """Keep which pools publish devices of each node (a node opened or closed refreshes only those)."""
        if node is None:
            return
        pools = self._node_pools.setdefault(node, set())
        if present:
            pools.add(pool)
            return
        pools.discard(pool)  # a pool's devices all go at once, and those it still publishes come back
        if not pools:
            del self._node_pools[node]

    def set_node(self, name: str, state: str | None) -> tuple[bool, list[PoolKey]]:
        """A node's state now (None: it takes new pods): (whether what is said of it changed, the pools to
        publish again because it opened or closed)."""
        said = self.node_states.get(name) != state
        if state is not None:
            self.node_states[name] = state
        else:
            self.node_states.pop(name, None)
        closed = state is not None
        if closed == (name in self.closed_nodes):
            return said, []
        if closed:
            self.closed_nodes.add(name)
        else:
            self.closed_nodes.discard(name)
        return said, sorted(self._node_pools.get(name, ()))

    def node_back(self, name: str) -> None:
        """A node seen (again): it is no longer remembered as deleted."""
        self.departed.pop(name, None)

    def node_deleted(self, name: str, now: float | None = None) -> None:
        """A node gone: what it published is remembered for a while (`departed`), with what it stopped
        publishing lately (its slices, collected with it, may be seen gone first)."""
        now = time.time() if now is None else now
        when, withdrawn = self._withdrawn.pop(name, (now, []))
        devices = [d for d in self.devices.values() if d.node == name]
        devices += [d for d in withdrawn if now - when < WITHDRAWN_TTL and d.key not in self.devices]
        self.departed = {n: v for n, v in self.departed.items() if now - v[0] < DEPARTED_TTL}
        self.departed[name] = (now, devices)

    def _withdraw(self, devices: list[Device]) -> None:
        """Keep what nodes stopped publishing for `WITHDRAWN_TTL`, in case the node itself is deleted."""
        if not devices:
            return
        now = time.time()
        self._withdrawn = {n: v for n, v in self._withdrawn.items() if now - v[0] < WITHDRAWN_TTL}
        for device in devices:
            if device.node:
                kept = self._withdrawn.get(device.node, (now, []))[1]
                self._withdrawn[device.node] = (now, [*(d for d in kept if d.key != device.key), device])

    def out_of_service(self, key: DeviceKey, node: str | None = None) -> str | None:
        """Why a device takes no new claim (its node deleted or closed, or the device withdrawn or tainted),
        in words; None while it is in service. `node`: where a device no longer published was."""
        device = self.devices.get(key)
        if device is None:
            where = node or next(
                (n for n, (_, ds) in self.departed.items() if any(d.key == key for d in ds)), None
            )
            if where is not None and where in self.departed:
                return f"{key[1]}/{key[2]}: node {where} was deleted"
            return f"{key[1]}/{key[2]} is no longer published (its driver withdrew it, or its node is gone)"
        state = self.node_states.get(device.node or "")
        if state is not None:
            return f"{key[1]}/{key[2]}: node {device.node} is {state}, so no new pod starts there"
        if device.tainted:
            return f"{key[1]}/{key[2]} is tainted by its driver (NoSchedule or NoExecute)"
        return None


# The taints the node lifecycle controller and cordon put on a node (k8s.io/api v0.36.3 core/v1
# well_known_taints.go), said in words.
_NODE_TAINTS = {
    "node.kubernetes.io/not-ready": "not ready",
    "node.kubernetes.io/unreachable": "unreachable",
    "node.kubernetes.io/unschedulable": "cordoned",
    "node.kubernetes.io/memory-pressure": "under memory pressure",
    "node.kubernetes.io/disk-pressure": "under disk pressure",
    "node.kubernetes.io/pid-pressure": "under PID pressure",
    "node.kubernetes.io/network-unavailable": "without network",
    "node.cloudprovider.kubernetes.io/shutdown": "shut down",
}


def node_state(node: Mapping[str, Any]) -> str | None:
    """Why a node takes no new pods, in words (cordoned, not ready, unreachable, a NoSchedule/NoExecute
    taint); None when it takes them."""
    spec = node.get("spec") or {}
    said: list[str] = ["cordoned"] if spec.get("unschedulable") else []
    for taint in spec.get("taints") or []:
        if taint.get("effect") not in BLOCKING:
            continue
        key = str(taint.get("key") or "")
        value = f"={taint['value']}" if taint.get("value") else ""
        words = _NODE_TAINTS.get(key, f"tainted {key}{value}:{taint.get('effect')}")
        if words not in said:
            said.append(words)
    return ", ".join(said) or None


def pool_of(sl: Mapping[str, Any]) -> PoolKey:
    """(driver, pool) of a ResourceSlice."""
    return (sl["spec"]["driver"], sl["spec"]["pool"]["name"])
