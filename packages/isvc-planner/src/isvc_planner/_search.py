"""One order's search over a class's devices: its filters, best fit on one device, tensor parallel on one
node, and preemption of lower priorities. Pure functions of the books' `View` and the order's `Ask`.

Policy (least fragmentation): a model that fits one device never spans several. Free memory is seen as
pieces (a shareable device's free shares, an untaken whole device); the placement chosen is the one that
lowers the sum of squared free pieces least. On shareable devices that is best fit (the device with the
least free memory that still holds the order), so partially used devices fill first and large empty ones
stay whole; a whole device (or MIG partition) is taken only when that costs less than a share, as for an
order that nearly fills it. Ties go to partially used devices, then to the smaller device, then to
node/pool/device name. Devices the order already holds win over all others, so a replan does not move a
running order. Tensor parallel (2, 4, 8 devices of one node) is tried only when no device of the class is
large enough; it takes the smallest device size and count that hold the model, on the node with the fewest
free devices that suffice.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from isvc_api import DeviceKey, OrderKey, PlacementMode, Reason, Refusal, SharingMode
from isvc_ledger import UNITS, Device, Group, GroupKey, View
from isvc_planner_client import SelectorError

from isvc_planner._order import Ask, Candidate

__all__ = ["MIG", "fit", "largest", "passes", "preempt", "refused_for", "search", "single", "undecidable"]

_POLICY = "accelerator policy"
# The type a MIG partition publishes. NVIDIA's MIG user guide ("CUDA Device Enumeration"): a CUDA process
# sees one MIG device, so vLLM's tensor parallel (one process per device, NCCL between them) cannot span
# partitions; vLLM's docs list MIG as unsupported for multi-GPU serving.
MIG = "mig"


def _semver(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in str(text).split(".")[:3])


def fit(device: Device, ask: Ask) -> tuple[int, PlacementMode, SharingMode] | None:
    """Units, mode and sharing one device would give the order, ignoring who holds it."""
    return ask.fit(device.memory or 0, device.shareable, device.type)


def passes(view: View, device: Device, ask: Ask, *, refusals: bool = True) -> bool:
    """Whether the order may be placed on the device: not kept for an older waiting order, its filters, and
    (unless told not to) no refusal by the scheduler standing there for what it would ask."""
    if device.key in ask.kept or (refusals and device.key in ask.distrust and refused_for(device, ask)):
        return False
    if ask.min_cc and (
        device.compute_capability is None or _semver(device.compute_capability) < _semver(ask.min_cc)
    ):
        return False
    if ask.selector is None:
        return True
    return view.classes.selects(ask.selector, device) is True


def refused_for(device: Device, ask: Ask) -> bool:
    """Whether a refusal by the scheduler on the device covers what the order would ask of it."""
    refused = ask.distrust[device.key]
    if refused is None or not device.shareable or device.memory is None:
        return True
    units = ask.share_for(ask.need.required, device.memory) or UNITS
    return units >= refused


def undecidable(view: View, cls: str, ask: Ask) -> Refusal | None:
    """PlacementUndecidable when the class's selectors or the order's cannot be judged on its devices."""
    faults = view.classes.faults.get(cls) or {}
    if faults:
        fault = faults[min(faults)]
        return Refusal(
            reason=Reason.PLACEMENT_UNDECIDABLE,
            message=(
                f"The selector of device class {cls} cannot be judged: {fault.message()}. "
                "The search never started; an administrator must fix the class, waiting will not help."
            ),
        )
    if ask.selector is None:
        return None
    for device in view.fleet.class_devices(cls):
        result = view.classes.selects(ask.selector, device)
        if isinstance(result, SelectorError):
            return Refusal(
                reason=Reason.PLACEMENT_UNDECIDABLE,
                message=(
                    f"The accelerator policy's selector cannot be judged on device class {cls}: "
                    f"{_POLICY}: selector #0 on device {device.ident}: {result}. The search never "
                    "started; an administrator must fix the selector, waiting will not help."
                ),
            )
    return None


def search(view: View, cls: str, ask: Ask, *, own_adjusted: bool) -> Candidate | None:
    """The best placement of the order on one class's devices, or None."""
    groups = view.index.groups(cls)
    devices = view.fleet.devices
    own = ask.own if own_adjusted else set()
    best: Candidate | None = None
    biggest = largest(view, groups, ask)
    own_devices = [
        devices[k]
        for k in sorted(own)
        if k in devices and cls in devices[k].classes and not devices[k].tainted
    ]

    def consider(c: Candidate | None) -> None:
        nonlocal best
        if c is not None and (best is None or c.rank < best.rank):
            best = c

    for gkey in sorted(groups):
        consider(_in_group(view, cls, gkey, groups[gkey], ask, own, own_devices))
    if best is not None or (biggest > 0 and ask.holds(biggest)):
        return best  # a model one device of the class holds never spans several
    if not ask.allows(PlacementMode.MULTI_DEVICE, SharingMode.NONE) and not ask.allows(
        PlacementMode.MULTI_DEVICE, SharingMode.SHARES
    ):
        return None
    for gkey in sorted(groups):
        consider(_multi(view, cls, gkey, groups[gkey], ask, own, own_devices))
    return best


def _in_group(
    view: View,
    cls: str,
    gkey: GroupKey,
    group: Group,
    ask: Ask,
    own: set[DeviceKey],
    own_devices: list[Device],
) -> Candidate | None:
    """The best single device of one group: the first with room enough by free units, or one it holds."""
    found = ask.fit(gkey[0], gkey[1], gkey[2]) if gkey[0] >= 0 and group.devices else None
    if found is None:
        return None
    units, mode, sharing = found
    best: Candidate | None = None
    entries = group.entries
    for i in range(bisect.bisect_left(entries, (units,)), len(entries)):
        free, sk = entries[i]
        device = group.devices[sk]
        if device.key in own or not passes(view, device, ask):
            continue
        best = single(cls, device, free, units, mode, sharing, ask)
        break
    for device in own_devices:
        if device.group == gkey and passes(view, device, ask):
            free = view.ledger.room(device.key, (ask.order,))
            if free >= units:
                c = single(cls, device, free, units, mode, sharing, ask)
                if best is None or c.rank < best.rank:
                    best = c
    return best


def largest(view: View, groups: dict[GroupKey, Group], ask: Ask) -> int:
    """The memory of the largest device of the class the order may use at all, free or not.

    Only devices the order's filters admit count: a larger card its selector excludes must not stop it
    from spanning the devices it may use (issue 18: refused while the scheduler could allocate).
    """
    filtered = ask.selector is not None or ask.min_cc is not None or bool(ask.distrust)
    return max(
        (
            g[0]
            for g, grp in groups.items()
            if grp.devices and (not filtered or any(passes(view, d, ask) for d in grp.devices.values()))
        ),
        default=-1,
    )


def single(
    cls: str, device: Device, free: int, units: int, mode: PlacementMode, sharing: SharingMode, ask: Ask
) -> Candidate:
    """The candidate of one device, ranked by the loss in the sum of squared free pieces."""
    memory = device.memory or 0
    if device.shareable:
        before, after = free * memory // UNITS, (free - units) * memory // UNITS
    else:  # a whole device is a free piece of its full memory, gone once taken
        before, after = memory, 0
    # The loss in the sum of squared free pieces: best fit on a shared device (the one with the
    # least free memory loses least), and a whole device only when that costs less than a share.
    loss = before * before - after * after
    rank = (0 if device.key in ask.prefer else 1, loss, 0 if free < UNITS else 1, memory, device.sort_key())
    return Candidate(cls, (device,), units, mode, sharing, rank)


def _multi(
    view: View,
    cls: str,
    gkey: GroupKey,
    group: Group,
    ask: Ask,
    own: set[DeviceKey],
    own_devices: list[Device],
) -> Candidate | None:
    """Tensor parallel on one node: the fewest devices of this group that hold the order together."""
    memory, shareable = gkey[0], gkey[1]
    if gkey[2] == MIG:  # a CUDA process sees one MIG device: tensor parallel never spans partitions
        return None
    sharing = SharingMode.SHARES if shareable else SharingMode.NONE
    count = ask.spans(memory) if memory > 0 and ask.allows(PlacementMode.MULTI_DEVICE, sharing) else None
    if count is None:
        return None
    ledger = view.ledger
    extra: dict[str, list[Device]] = {}
    for device in own_devices:
        if (
            device.group == gkey
            and ledger.room(device.key, (ask.order,)) >= UNITS
            and passes(view, device, ask)
        ):
            extra.setdefault(device.pool, []).append(device)
    best: Candidate | None = None
    for pool in sorted(set(group.full_free) | set(extra)):
        mine = extra.get(pool, [])
        avail = [
            group.devices[sk]
            for sk in sorted(group.full_free.get(pool, ()))
            if group.devices[sk].key not in own and passes(view, group.devices[sk], ask)
        ]
        if len(mine) + len(avail) < count:
            continue
        picked: list[Device] = []
        for device in mine + avail:  # partitions of one GPU must fit its counters together
            if len(picked) < count and ledger.counters_fit([d.key for d in picked] + [device.key]):
                picked.append(device)
        if len(picked) < count or len({d.node for d in picked}) != 1:
            continue
        rank = (
            0 if any(d.key in ask.prefer for d in picked) else 1,
            count * memory,
            len(mine) + len(avail),
            0,
            (pool,),
        )
        c = Candidate(cls, tuple(picked), UNITS, PlacementMode.MULTI_DEVICE, sharing, rank)
        if best is None or c.rank < best.rank:
            best = c
    return best


def preempt(
    view: View, cls: str, ask: Ask, priority: int, order: OrderKey, devices: Iterable[Device]
) -> tuple[tuple[object, ...], Candidate, list[OrderKey]] | None:
    """Of `devices`, the single-device placement that needs the fewest, lowest lower-priority orders
    released: (its cost, the candidate, the orders to release)."""
    ledger, prio = view.ledger, view.priorities
    best: tuple[tuple[object, ...], Candidate, list[OrderKey]] | None = None
    for device in devices:
        if device.tainted or device.memory is None or not passes(view, device, ask):
            continue
        found = fit(device, ask)
        if found is None:
            continue
        units, mode, sharing = found
        released = {order}
        if ledger.room(device.key, released) >= units:
            continue  # room without anyone released: the plain search would have found it
        by_order: dict[OrderKey, int] = {}
        for h in ledger.holdings_on(device.key):
            held_at = prio.of_holding(h)
            if h.order is not None and h.order != order and held_at < priority:
                by_order[h.order] = max(by_order.get(h.order, held_at), held_at)
        gain = {v: ledger.room(device.key, (order, v)) for v in by_order}
        chosen: list[OrderKey] = []
        for victim in sorted(by_order, key=lambda v: (by_order[v], -gain[v], v)):
            chosen.append(victim)
            released.add(victim)
            if ledger.room(device.key, released) >= units:
                break
        if not chosen or ledger.room(device.key, released) < units:
            continue
        cand = single(cls, device, units, units, mode, sharing, ask)
        cost = (len(chosen), max(by_order[v] for v in chosen), cand.rank)
        if best is None or cost < best[0]:
            best = (cost, cand, sorted(chosen))
    return best
