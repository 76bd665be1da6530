"""The refusal that tells the truth: what the search saw of each class, and the one reason it makes."""

from __future__ import annotations

from dataclasses import dataclass, field

from isvc_api import GIB, OrderKey, Reason, Refusal, gib, visible_bytes
from isvc_ledger import UNITS, Device

from isvc_planner._estimate import MemoryNeed
from isvc_planner._order import Ask

__all__ = ["PLAUSIBLE_GIB", "Findings", "Survey", "observe_survey", "refusal_for"]

# The most memory one accelerator carries today (AMD MI355X and NVIDIA B300: 288 GB HBM3e per device,
# vendors' data sheets). A device publishing no memory is assumed at most this large.
PLAUSIBLE_GIB = 288


@dataclass
class Findings:
    """What the search saw, to choose the refusal that tells the truth."""

    admitted: int = 0
    unprofiled: list[str] = field(default_factory=list)
    unprofiled_per_pool: dict[str, int] = field(default_factory=dict)  # devices of one node: a TP group
    fits_by_size: bool = False
    any_free: bool = False
    largest: tuple[int, str] = (0, "")
    largest_free: int = 0
    lower: set[OrderKey] = field(default_factory=set)
    # Nodes out of service whose devices would hold the order (what they would free): "gpu-h100-0 (cordoned)".
    out_of_service: set[str] = field(default_factory=set)
    # Devices of the classes in service with room for the order that the accelerator policy leaves out
    # (its selector, its minimum compute capability): product -> how many.
    excluded: dict[str, int] = field(default_factory=dict)
    constraint: str = ""  # the policy's words for what it admits, when it restricts anything
    partitions: bool = False  # MIG partitions were among the devices seen (never combined for one order)


@dataclass
class Survey:
    """What a refusal reads of one class's devices that an order's filters admit: the same for every order
    holding nothing and refused nowhere there, for as long as the ledger does not change (`Inventory.version`).
    Surveyed once per ledger, a batch of orders left out of a packing is refused at the cost of one
    walk over the fleet, not one each."""

    version: int
    admitted: int = 0
    unprofiled: list[str] = field(default_factory=list)
    unprofiled_per_pool: dict[str, int] = field(default_factory=dict)
    any_free: bool = False
    largest: tuple[int, str] = (0, "")
    largest_free: int = 0
    sizes: dict[int, int] = field(default_factory=dict)  # memory -> most devices of one pool and group
    shared_sizes: set[int] = field(default_factory=set)  # memory of shareable devices
    whole_sizes: set[int] = field(default_factory=set)  # memory of devices taken whole
    holders: list[tuple[int, OrderKey]] = field(default_factory=list)  # (lowest priority held at, order)
    lowered: list[tuple[int, str, Device]] = field(default_factory=list)  # by lowest
    closed: dict[int, set[str]] = field(default_factory=dict)  # memory -> "node (why)" out of service
    partitions: bool = False  # MIG partitions among the devices
    # Devices in service the order's filters leave out: (product, memory, shareable, free units), how many.
    filtered: dict[tuple[str, int, bool, int], int] = field(default_factory=dict)


def observe_survey(survey: Survey, ask: Ask, f: Findings, priority: int, order: OrderKey) -> None:
    """`_observe` from a survey: what it saw, and what this order's need makes of it."""
    for memory, where in survey.closed.items():
        if ask.holds(memory):
            f.out_of_service |= where
    f.admitted += survey.admitted
    f.partitions = f.partitions or survey.partitions
    f.unprofiled.extend(survey.unprofiled)
    for pool, n in survey.unprofiled_per_pool.items():
        f.unprofiled_per_pool[pool] = f.unprofiled_per_pool.get(pool, 0) + n
    f.any_free = f.any_free or survey.any_free
    if survey.largest[0] > f.largest[0]:
        f.largest = survey.largest
    f.largest_free = max(f.largest_free, survey.largest_free)
    if any(ask.holds(m) for m in survey.whole_sizes) or any(
        ask.holds(m) and ask.share_for(ask.need.required, m) is not None for m in survey.shared_sizes
    ):
        f.fits_by_size = True
    for memory, n in survey.sizes.items():
        if (count := ask.spans(memory)) is not None and count <= n:
            f.fits_by_size = True
    for held_at, who in survey.holders:
        if held_at >= priority:
            break
        if who != order:
            f.lower.add(who)
    for (product, memory, shareable, free), n in survey.filtered.items():
        if would_hold(ask, memory, shareable, free):
            f.excluded[product] = f.excluded.get(product, 0) + n


def would_hold(ask: Ask, memory: int, shareable: bool, free: int) -> bool:
    """Whether a device of `memory` bytes with `free` units free would hold the order now."""
    if shareable:
        units = ask.share_for(ask.need.required, memory)
        return units is not None and units <= free
    return free == UNITS and ask.holds(memory)


def _plausible(need: MemoryNeed, f: Findings, ask_max: int) -> bool:
    """Whether the devices publishing no memory could hold the model were each as large as the
    largest accelerator made: then their missing profile is the answer, else the size is."""
    for count in f.unprofiled_per_pool.values():
        devices = 1
        while devices * 2 <= min(count, ask_max):
            devices *= 2
        if need.per_device(devices) <= PLAUSIBLE_GIB * GIB:
            return True
    return False


def refusal_for(need: MemoryNeed, classes: list[str], f: Findings) -> Refusal:
    """The one reason, within the closed set, why no device of `classes` takes the order now; where the
    accelerator policy leaves out devices that have room, it says so (issue 45: not "no device has room"
    while others of the class had it)."""
    refusal = _refusal(need, classes, f)
    if f.excluded and refusal.reason in (Reason.NO_CAPACITY, Reason.NO_COMPATIBLE_PLACEMENT):
        products = ", ".join(f"{n} × {p}" for p, n in sorted(f.excluded.items())[:4])
        refusal = Refusal(
            reason=refusal.reason,
            message=(
                f"{refusal.message.rstrip('.')}. Only {f.constraint} may take this order, which leaves out "
                f"devices with room for it ({products}); an administrator may widen the class, or the order "
                "waits for room on the devices it admits."
            ),
        )
    return refusal


def _refusal(need: MemoryNeed, classes: list[str], f: Findings) -> Refusal:
    """`refusal_for` before what the policy leaves out is said."""
    required = gib(need.required)
    where = ", ".join(classes)
    if f.out_of_service and (f.admitted == 0 or not f.fits_by_size or f.largest_free < need.required):
        return Refusal(
            reason=Reason.NO_CAPACITY,
            message=(
                f"No device of {where} in service has {required} GiB free; devices that would hold it are "
                f"on nodes out of service: {', '.join(sorted(f.out_of_service)[:4])}. Replanned when they "
                "return or room frees up elsewhere."
            ),
        )
    if f.admitted == 0:
        return Refusal(
            reason=Reason.NO_CAPACITY,
            message=(
                f"No usable device of {where} is published (none admitted, all tainted, or on nodes that "
                "take no new pods); "
                f"{required} GiB are needed. Replanned when capacity changes."
            ),
        )
    if not f.fits_by_size:
        return _too_large(need, where, f)
    if f.largest_free < need.required:
        return Refusal(
            reason=Reason.NO_CAPACITY,
            message=(
                f"No device of {where} has {required} GiB free right now (largest free piece "
                f"{gib(f.largest_free)} GiB); replanned when capacity frees up."
            ),
        )
    return Refusal(
        reason=Reason.NO_COMPATIBLE_PLACEMENT,
        message=(
            f"No room now: free capacity on {where} exists but not in a form that holds {required} GiB at "
            f"a permitted share or device count ({need.explanation}; {_tensor_parallel(need)} under tensor "
            f"parallel; largest free piece {gib(f.largest_free)} GiB). Replanned when capacity changes."
        ),
    )


def _too_large(need: MemoryNeed, where: str, f: Findings) -> Refusal:
    """No device the order's filters admit is large enough: an incomplete memory profile when devices
    publishing none could hold it, else the size."""
    required = gib(need.required)
    if f.unprofiled and _plausible(need, f, ask_max=8):
        return Refusal(
            reason=Reason.NO_COMPATIBLE_PLACEMENT,
            message=(
                f"The memory profile of the hardware is incomplete: {len(f.unprofiled)} device(s) of "
                f"{where} publish no memory capacity (e.g. {f.unprofiled[0]}), so no share can be "
                f"computed for {required} GiB. An administrator's subject; waiting will not help."
            ),
        )
    tensor_parallel = _tensor_parallel(need)
    needs = f"The model needs {required} GiB of accelerator memory on one device{_to_serve(need)}"
    if f.unprofiled:  # nothing unprofiled could hold it: too large is the answer
        return Refusal(
            reason=Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
            message=(
                f"{needs} ({need.explanation}), "
                f"or {tensor_parallel} under tensor parallel; the largest accelerator found publishes "
                f"{gib(f.largest[0])} GiB ({f.largest[1]}), and even the {len(f.unprofiled)} device(s) "
                f"publishing no memory (e.g. {f.unprofiled[0]}) could not hold it were they as large as "
                f"any accelerator made ({PLAUSIBLE_GIB} GiB). A smaller model, or more devices of one "
                f"node{_smaller(need)}."
            ),
        )
    partitions = (
        " MIG partitions are never combined for one order (a CUDA process sees one MIG device, so tensor "
        "parallel cannot span them): a larger profile, or whole cards."
        if f.partitions
        else ""
    )
    return Refusal(
        reason=Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
        message=(
            f"{needs} ({need.explanation}), "
            f"or {tensor_parallel} under tensor parallel; the largest accelerator found publishes "
            f"{gib(f.largest[0])} GiB ({f.largest[1]}; the runtime sees "
            f"{gib(visible_bytes(f.largest[0]))} GiB), the largest free now {gib(f.largest_free)} GiB. "
            f"A larger accelerator or more devices of one node are needed{_smaller(need)}.{partitions}"
        ),
    )


def _to_serve(need: MemoryNeed) -> str:
    """The serving target the need holds, as a refusal names it (issue 42)."""
    return f" {need.target} (the class's serving target)" if need.target else ""


def _smaller(need: MemoryNeed) -> str:
    return ", or a smaller serving target in the class" if need.target else ""


def _tensor_parallel(need: MemoryNeed) -> str:
    return ", ".join(f"{gib(need.per_device(n))} GiB on each of {n}" for n in (2, 4, 8))
