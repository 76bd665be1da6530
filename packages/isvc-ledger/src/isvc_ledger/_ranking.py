"""Who stands on a device: one ranking of its holders, by priority and by who came first.

A claim's priority is its order's class's PriorityClass, never a label users can write (issue 14). On each
device, holders are ranked: those of no order first (nobody can release them), then by priority, then the
earlier holding; each holder stands if it fits beside those ranked above it. An order that does not fit
among those ranked above it has lost the device; since placing it there needs room among all other holders,
a superset of those, it can never be placed back on the device it lost while the ledger is unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from isvc_api import DeviceKey, OrderKey

from isvc_ledger._capacity import Consumption, fits
from isvc_ledger._device import UNITS
from isvc_ledger._holding import Holding, add, most
from isvc_ledger._ledger import Ledger

__all__ = ["Priorities", "Ranking"]


class Priorities:
    """PriorityClasses, and the class of each order and the PriorityClass each class names."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}  # PriorityClass -> value
        self.default = 0
        self.order_classes: dict[OrderKey, str | None] = {}  # order -> its InferenceServiceClass, if any
        self.class_priorities: dict[str, str | None] = {}  # class -> its priorityClassName, if any

    def of(self, name: str | None) -> int | None:
        """The value of a PriorityClass; the global default (or 0) for None; None when missing."""
        if name is None:
            return self.default
        return self.values.get(name)

    def of_order(self, order: OrderKey) -> int:
        """The priority of an order: its class's PriorityClass; the default for none, unknown or missing."""
        klass = self.order_classes.get(order)
        name = self.class_priorities.get(klass) if klass is not None else None
        value = self.of(name)
        return self.default if value is None else value

    def of_holding(self, h: Holding) -> int:
        """A reservation's priority as planned; a claim's or plan's that of its order, as it is now."""
        if h.order is not None and h.kind != "reservation":
            return self.of_order(h.order)
        return h.priority

    def put_order(self, obj: Mapping[str, Any]) -> tuple[bool, bool]:
        """An InferenceService's class (only it counts here): (known before, its class changed)."""
        meta = obj.get("metadata") or {}
        klass = (obj.get("spec") or {}).get("inferenceServiceClassName")
        key = (meta.get("namespace") or "", meta.get("name") or "")
        known = key in self.order_classes
        before = self.order_classes.get(key)
        self.order_classes[key] = klass if isinstance(klass, str) and klass else None
        return known, before != self.order_classes[key]

    def drop_order(self, obj: Mapping[str, Any]) -> None:
        """Forget an InferenceService."""
        meta = obj.get("metadata") or {}
        self.order_classes.pop((meta.get("namespace") or "", meta.get("name") or ""), None)

    def put_class(self, obj: Mapping[str, Any]) -> tuple[bool, bool]:
        """An InferenceServiceClass's priorityClassName: (new or changed, changed from a known value)."""
        name = (obj.get("spec") or {}).get("priorityClassName")
        value = name if isinstance(name, str) and name else None
        key = obj["metadata"]["name"]
        changed = key in self.class_priorities and self.class_priorities[key] != value
        moved = key not in self.class_priorities or self.class_priorities[key] != value
        self.class_priorities[key] = value
        return moved, changed

    def put_priority_class(self, pc: Mapping[str, Any]) -> bool:
        """A PriorityClass's value (and whether it is the global default): whether anything changed."""
        name = pc["metadata"]["name"]
        value = int(pc.get("value", 0))
        changed = self.values.get(name) != value
        self.values[name] = value
        if pc.get("globalDefault"):
            changed = changed or self.default != value
            self.default = value
        return changed


class Ranking:
    """Where orders stand on the devices they hold, over one ledger and its priorities."""

    def __init__(self, ledger: Ledger, priorities: Priorities) -> None:
        self.ledger = ledger
        self.priorities = priorities

    def displaced(self, order: OrderKey) -> list[str]:
        """Why an order no longer stands on a device it holds (empty: it stands on all of them)."""
        return [why for key in sorted(self.ledger.holds(order)) if (why := self.displaced_on(order, key))]

    def displaced_on(self, order: OrderKey, key: DeviceKey) -> str | None:
        """Why the order does not stand on one device it holds, or None when it does."""
        device = self.ledger.fleet.devices[key]
        ranked = self._ranked(key)
        used: Consumption = {}
        whole = stood = False
        for who, priority, _, load in ranked:
            alone = not device.multi or load is None  # it takes the device whole
            stands = not stood if alone else not whole and fits(used, load or {}, device.capacities)
            if stands:
                stood = True
                whole = whole or alone
                add(used, load or {})
            elif who == order:
                above = [f"{w[0]}/{w[1]}" if w else "a claim of no order" for w, *_ in ranked if w != order]
                return (
                    f"{device.ident}: holders of higher priority or earlier ({', '.join(above[:4])}) "
                    f"leave no room for this order's holding at priority {priority}"
                )
        return None

    def outranked(self, order: OrderKey, units: int, alike: Collection[DeviceKey] | None = None) -> list[str]:
        """Devices where orders of higher priority than the order hold the room it needs, with who.

        Where it has lost a device it holds (`displaced`): its own holding would fit were they gone, so the
        loss is preemption. Growth: a further claim of `units` (one more replica) may take any device of
        `alike` (its plan's shape on the class; default: the devices it holds); where one has room, growth is
        not blocked; otherwise each that would have room were they gone is named, so growth is blocked by
        priority, not by a full class. Holders of no order and orders of its own priority or below never
        outrank it: they came first, or yield to it.
        """
        ledger = self.ledger
        held = ledger.holds(order)
        lost = {key for key in held if self.displaced_on(order, key) is not None}
        out = [said for key in sorted(lost) if (said := self._above(order, key, units, (order,)))]
        growth = [
            k
            for k in sorted(alike if alike is not None else held)
            if k not in lost and k in ledger.fleet.devices
        ]
        if any(ledger.room(k) >= self._need(k, units) for k in growth):
            return out
        return out + [said for key in growth if (said := self._above(order, key, units, ()))]

    def _need(self, key: DeviceKey, units: int) -> int:
        return units if self.ledger.fleet.devices[key].shareable else UNITS

    def _above(
        self, order: OrderKey, key: DeviceKey, units: int, mine_too: tuple[OrderKey, ...]
    ) -> str | None:
        """Who of higher priority than the order holds the room it needs on one device (counting `mine_too`'s
        holdings as free), when they alone stand in the way; None otherwise."""
        ledger, prio = self.ledger, self.priorities
        mine = prio.of_order(order)
        above: dict[OrderKey, int] = {}
        for h in ledger.holdings_on(key):
            held_at = prio.of_holding(h)
            if h.order is not None and h.order != order and held_at > mine:
                above[h.order] = max(above.get(h.order, held_at), held_at)
        need = self._need(key, units)
        if not above or ledger.room(key, mine_too) >= need or ledger.room(key, (*mine_too, *above)) < need:
            return None
        who = ", ".join(f"{ns}/{n} at priority {p}" for (ns, n), p in sorted(above.items())[:4])
        return f"{ledger.fleet.devices[key].ident}: {who}"

    def _ranked(self, key: DeviceKey) -> list[tuple[OrderKey | None, int, float, Consumption | None]]:
        """The holders of a device in standing order: (order, priority, since, what it takes or None for all)."""
        ledger, prio = self.ledger, self.priorities
        device = ledger.fleet.devices[key]
        per: dict[object, tuple[OrderKey | None, int, float, list[Holding]]] = {}
        for h in ledger.holders(key):
            who: object = h.order if h.order is not None else h.source
            order, at, since, hs = per.get(who, (h.order, prio.of_holding(h), h.since, []))
            hs.append(h)
            per[who] = (order, max(at, prio.of_holding(h)), min(since, h.since), hs)
        out = []
        for order, at, since, hs in per.values():
            load: Consumption | None = {}
            claimed: Consumption = {}
            planned: Consumption = {}
            for h in hs:
                taken = ledger.consumption(h, device)
                if taken is None:
                    load = None
                    break
                if h.kind == "claim":
                    add(claimed, taken)
                else:
                    planned = most(planned, taken)
            if load is not None:
                load = most(claimed, planned)
            out.append((order, at, since, load))
        out.sort(key=lambda r: (r[0] is not None, -r[1], r[2], r[0] or ("", "")))
        return out
