"""What a refusal reads of a class's devices: the findings of one order's search, from a survey of the class
shared by every order that holds nothing there (one walk over the fleet per ledger version), or walked for
this order alone."""

from __future__ import annotations

from isvc_api import OrderKey
from isvc_ledger import UNITS, Device, GroupKey, View

from isvc_planner._order import Ask
from isvc_planner._refusals import Findings, Survey, observe_survey, would_hold
from isvc_planner._search import MIG, passes, refused_for

__all__ = ["Surveys"]


class Surveys:
    """Each class's survey for an order's filters, remembered while the ledger does not change."""

    def __init__(self) -> None:
        self._surveys: dict[tuple[str, str | None, str | None], Survey] = {}

    def surveyed(self, view: View, cls: str, ask: Ask) -> Survey | None:
        """The class's survey for this order's filters, when it applies: the order holds nothing there and
        no refusal by the scheduler stands on a device of the class."""
        devices = view.fleet.devices
        if (
            ask.own
            or ask.kept
            or any(cls in d.classes for k in ask.distrust if (d := devices.get(k)) is not None)
        ):
            return None
        key = (cls, ask.selector, ask.min_cc)
        survey = self._surveys.get(key)
        if survey is not None and survey.version == view.version:
            return survey
        if len(self._surveys) > 64:
            self._surveys.clear()
        survey = self._surveys[key] = Survey(view.version)
        _walk(view, cls, ask, survey)
        return survey

    def observe(self, view: View, cls: str, ask: Ask, f: Findings, priority: int, order: OrderKey) -> None:
        """Add what the order's search on one class saw to `f`."""
        for node, (_, gone) in view.fleet.departed.items():
            for device in gone:
                if (
                    cls in device.classes
                    and device.memory is not None
                    and ask.holds(device.memory)
                    and passes(view, device, ask, refusals=False)
                ):
                    f.out_of_service.add(f"{node} (deleted)")
        f.constraint = f.constraint or _constraint(ask)
        survey = self.surveyed(view, cls, ask)
        if survey is not None:
            observe_survey(survey, ask, f, priority, order)
            return
        pools: dict[tuple[str, GroupKey], int] = {}
        for device in view.fleet.class_devices(cls):
            if device.tainted and device.memory is not None and ask.holds(device.memory):
                if passes(view, device, ask, refusals=False):
                    f.out_of_service.add(_closed(view, device))
                continue
            if device.tainted:
                continue
            if not passes(view, device, ask, refusals=False):
                free = view.ledger.room(device.key)
                if device.memory is not None and would_hold(ask, device.memory, device.shareable, free):
                    product = device.product or device.ident
                    f.excluded[product] = f.excluded.get(product, 0) + 1
                continue
            _observe_one(view, cls, device, ask, f, priority, order)
            if device.memory is not None and device.type != MIG:  # partitions are never combined
                pools[(device.pool, device.group)] = pools.get((device.pool, device.group), 0) + 1
        for (_, gkey), n in pools.items():
            if (count := ask.spans(gkey[0])) is not None and count <= n:
                f.fits_by_size = True


def _constraint(ask: Ask) -> str:
    """What the order's accelerator policy admits, in words (empty when it restricts nothing)."""
    said = [f"devices the class's accelerator selector `{ask.selector}` admits"] if ask.selector else []
    if ask.min_cc:
        said.append(f"devices of compute capability {ask.min_cc} or later (the runtime's need)")
    return " and ".join(said)


def _closed(view: View, device: Device) -> str:
    state = view.fleet.node_states.get(device.node or "") or "tainted by its driver"
    return f"{device.node or device.pool} ({state})"


def _free_bytes(device: Device, free: int) -> int:
    memory = device.memory or 0
    return free * memory // UNITS if device.shareable else (memory if free == UNITS else 0)


def _observe_one(
    view: View, cls: str, device: Device, ask: Ask, f: Findings, priority: int, order: OrderKey
) -> None:
    """What one device in service the order's filters admit adds to its findings."""
    ledger = view.ledger
    f.admitted += 1
    f.partitions = f.partitions or device.type == MIG
    free = ledger.room(device.key, (order,)) if device.key in ask.own else ledger.room(device.key)
    if device.key in ask.distrust and refused_for(device, ask):
        free = 0  # the scheduler said there is no room there for this order's claim
    for h in ledger.holdings_on(device.key):
        if h.order is not None and h.order != order and view.priorities.of_holding(h) < priority:
            f.lower.add(h.order)
    f.any_free = f.any_free or free > 0
    if device.memory is None:
        f.unprofiled.append(device.ident)
        f.unprofiled_per_pool[device.pool] = f.unprofiled_per_pool.get(device.pool, 0) + 1
        return
    if device.memory > f.largest[0]:
        f.largest = (device.memory, f"{device.product or device.ident}, class {cls}")
    f.largest_free = max(f.largest_free, _free_bytes(device, free))
    if ask.holds(device.memory) and (
        not device.shareable or ask.share_for(ask.need.required, device.memory) is not None
    ):
        f.fits_by_size = True


def _walk(view: View, cls: str, ask: Ask, survey: Survey) -> None:
    """Survey the class's devices the order's filters admit."""
    pools: dict[tuple[str, GroupKey], int] = {}
    lowest: dict[OrderKey, int] = {}
    ledger, prio = view.ledger, view.priorities
    for device in view.fleet.class_devices(cls):
        if device.tainted and device.memory is not None:
            if passes(view, device, ask, refusals=False):
                survey.closed.setdefault(device.memory, set()).add(_closed(view, device))
            continue
        if device.tainted:
            continue
        if not passes(view, device, ask, refusals=False):
            if device.memory is not None:
                slot = (
                    device.product or device.ident,
                    device.memory,
                    device.shareable,
                    ledger.room(device.key),
                )
                survey.filtered[slot] = survey.filtered.get(slot, 0) + 1
            continue
        survey.admitted += 1
        survey.partitions = survey.partitions or device.type == MIG
        free = ledger.room(device.key)
        under: int | None = None
        for h in ledger.holdings_on(device.key):
            if h.order is not None:
                held_at = prio.of_holding(h)
                lowest[h.order] = min(lowest.get(h.order, held_at), held_at)
                under = held_at if under is None else min(under, held_at)
        survey.any_free = survey.any_free or free > 0
        if device.memory is None:
            survey.unprofiled.append(device.ident)
            survey.unprofiled_per_pool[device.pool] = survey.unprofiled_per_pool.get(device.pool, 0) + 1
            continue
        if under is not None:
            survey.lowered.append((under, device.sort_key(), device))
        if device.memory > survey.largest[0]:
            survey.largest = (device.memory, f"{device.product or device.ident}, class {cls}")
        survey.largest_free = max(survey.largest_free, _free_bytes(device, free))
        (survey.shared_sizes if device.shareable else survey.whole_sizes).add(device.memory)
        if device.type != MIG:  # partitions are never combined
            pools[(device.pool, device.group)] = pools.get((device.pool, device.group), 0) + 1
    for (_, gkey), n in pools.items():
        survey.sizes[gkey[0]] = max(survey.sizes.get(gkey[0], 0), n)
    survey.holders = sorted((p, o) for o, p in lowest.items())
    survey.lowered.sort(key=lambda entry: entry[:2])
