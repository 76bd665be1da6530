"""Who holds what of the published devices, and the room left, in kube-scheduler's own arithmetic.

Holdings are every ResourceClaim's allocation (admin access excepted), as the scheduler recorded it (a
shared result consumes its `consumedCapacity`, any other the whole device); the module's LaunchPlans, each
holding its devices at what its claim will ask for as long as it exists (an order whose claim waits keeps
its room); and reservations of plans not yet stored as a LaunchPlan. An order counts once per device: its
allocated claims together, or its plan (or reservation), whichever takes more of each capacity. What a
holding consumes is computed as the scheduler computes it (`_capacity`: request policies, rounding, every
published capacity), so the ledger never admits a claim the scheduler would not; a shareable device's free
room is the largest share whose claim still fits. A holding on a device that is no longer published
consumes nothing that exists and frees nothing.

Partitionable devices (KEP-4815) draw on counter sets their pool publishes (`sharedCounters`): as
kube-scheduler's allocator does (`checkAvailableCounters`), every held device of the pool consumes its
counters, and a device nobody holds is free only while its own consumption still fits what is left of every
counter it names; otherwise it counts as fully used ("blocked").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from decimal import Decimal
from typing import Any

from cachetools import LRUCache
from isvc_api import DeviceKey, OrderKey

from isvc_ledger._capacity import Consumption, consumed, consumption, fits
from isvc_ledger._device import UNITS, Device, capacity_key
from isvc_ledger._fleet import Fleet, PoolKey
from isvc_ledger._holding import CLAIM, Holding, add, merged, most

__all__ = ["Ledger"]

_ROOMS = 65536  # answers of _room_beside kept, by capacities and use (cleared when full)
_ZERO = Decimal(0)
_NOBODY: frozenset[OrderKey] = frozenset()

Touched = dict[DeviceKey, None]  # devices whose holdings changed, in the order they were touched


class Ledger:
    """Holdings of claims, plans and reservations on the fleet's devices, and what each leaves free."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.claims: dict[str, list[Holding]] = {}
        # Claims of orders nobody allocated yet, by order: a replica that has not started (what keeps a
        # plan on a closed node from standing, though another replica of the order still runs there).
        self.unallocated: dict[OrderKey, set[str]] = {}
        self.plans: dict[OrderKey, list[Holding]] = {}
        self.reservations: dict[OrderKey, list[Holding]] = {}
        self._holdings: dict[DeviceKey, dict[str, Holding]] = {}
        self._order_sources: dict[OrderKey, set[str]] = {}  # order -> sources of its holdings
        self._room: dict[DeviceKey, int] = {}
        # What held devices consume of their pool's counters, and the devices nobody holds that this blocks.
        self.consumed: dict[PoolKey, dict[tuple[str, str], int]] = {}
        self._blocked: set[DeviceKey] = set()
        # Holdings released or changed per device (those of an order a standing refusal there names aside),
        # and when (wall clock) such a holding last went or changed.
        self.released: dict[DeviceKey, int] = {}
        self.freed: dict[DeviceKey, float] = {}
        # Whether a holding of this order going from this device is its own move under a refusal there,
        # not the cluster changing (set by who keeps the refusals).
        self.quiet: Callable[[DeviceKey, OrderKey | None], bool] = lambda key, order: False
        self._takes: LRUCache[tuple[tuple[object, ...], int], Consumption | None] = LRUCache(65536)
        self._rooms: dict[tuple[object, ...], int] = {}  # _room_beside's answers by capacities and use

    # ------------------------------------------------------------------ holdings

    def set_source(
        self,
        source: str,
        table: dict[Any, list[Holding]],
        key: Any,
        holdings: list[Holding],
        touched: Touched,
    ) -> None:
        """A claim's, plan's or reservation's holdings now; the devices they change go into `touched`."""
        old = table.pop(key, None) or []
        if holdings:
            table[key] = holdings
        sources = self._order_sources
        if not old:  # new holdings (a listing's, the common case): one short pass
            self._take_up(source, holdings, touched)
            return
        for h in old:
            known = sources.get(h.order) if h.order is not None else None
            if known is not None:
                known.discard(source)
        self._replace(source, old, holdings, touched)
        for h in holdings:
            if h.order is not None:
                known = sources.get(h.order)
                if known is None:
                    sources[h.order] = {source}
                else:
                    known.add(source)

    def _take_up(self, source: str, new: list[Holding], touched: Touched) -> None:
        """A source's first holdings: on their devices, and under their orders."""
        held, sources = self._holdings, self._order_sources
        for h in new:
            slot = held.get(h.device)
            if slot is None:
                held[h.device] = {source: h}
            else:
                prev = slot.get(source)
                slot[source] = h if prev is None else merged(prev, h)
            touched[h.device] = None
            if h.order is not None:
                known = sources.get(h.order)
                if known is None:
                    sources[h.order] = {source}
                else:
                    known.add(source)

    def _replace(self, source: str, old: list[Holding], new: list[Holding], touched: Touched) -> None:
        held = self._holdings
        if old:
            kept = {(h.device, h) for h in new}
            now = 0.0
            for h in old:
                held.get(h.device, {}).pop(source, None)
                touched[h.device] = None
                if (h.device, h) not in kept and not self.quiet(h.device, h.order):
                    self.released[h.device] = self.released.get(h.device, 0) + 1
                    self.freed[h.device] = now = now or time.time()
        for h in new:
            slot = held.get(h.device)
            if slot is None:
                held[h.device] = {source: h}
            else:
                prev = slot.get(source)
                slot[source] = h if prev is None else merged(prev, h)
            touched[h.device] = None
        if old:
            for h in old:
                if not held.get(h.device, True):
                    del held[h.device]

    def note_unallocated(self, order: OrderKey, uid: str, waits: bool) -> bool:
        """Keep which claims of the order wait for an allocation; whether one that began to wait strands
        the order (its plan names a device out of service: a replica that cannot start there)."""
        waiting = self.unallocated.get(order)
        if waits == (waiting is not None and uid in waiting):
            return False
        if waits:
            self.unallocated.setdefault(order, set()).add(uid)
            return self.is_stranded(order)
        assert waiting is not None
        waiting.discard(uid)
        if not waiting:
            del self.unallocated[order]
        return False

    def forget(self, key: DeviceKey) -> None:
        """A device no longer published: nothing counted of it stays."""
        self._blocked.discard(key)
        self._room.pop(key, None)

    def holdings_on(self, key: DeviceKey) -> list[Holding]:
        """Every holding on a device, published or not, in a stable order."""
        return sorted((self._holdings.get(key) or {}).values(), key=lambda h: h.source)

    def holders(self, key: DeviceKey) -> Collection[Holding]:
        """Every holding on a device, in the order they were taken up (not to be changed by the caller)."""
        return (self._holdings.get(key) or {}).values()

    def held(self, key: DeviceKey) -> bool:
        """Whether anyone holds the device."""
        return bool(self._holdings.get(key))

    def holds(self, order: OrderKey) -> set[DeviceKey]:
        """Published devices an order holds: by its allocated claims, its plan or its reservation."""
        return {
            h.device
            for source in self._order_sources.get(order, ())
            for h in self._source_holdings(source)
            if h.order == order and h.device in self.fleet.devices
        }

    def claimed(self, order: OrderKey) -> set[DeviceKey]:
        """Devices the order's allocated claims hold, published or not."""
        return {
            h.device
            for source in self._order_sources.get(order, ())
            if source.startswith(CLAIM)
            for h in self.claims.get(source[len(CLAIM) :], [])
            if h.order == order
        }

    def _source_holdings(self, source: str) -> list[Holding]:
        kind, _, rest = source.partition(":")
        if kind == "claim":
            return self.claims.get(rest, [])
        namespace, _, name = rest.partition("/")
        table = self.plans if kind == "plan" else self.reservations
        return table.get((namespace, name), [])

    def held_by(self, order: OrderKey) -> dict[DeviceKey, int]:
        """Units an order's holdings free on each published device it holds, were it to let them go."""
        return {key: self.room(key, (order,)) - self.room(key) for key in sorted(self.holds(order))}

    def orphans(self) -> list[Holding]:
        """Holdings on devices no longer published: they free nothing, also not for their holder."""
        devices = self.fleet.devices
        return [h for key, hs in self._holdings.items() if key not in devices for h in hs.values()]

    def running_on(self, order: OrderKey, key: DeviceKey) -> bool:
        """Whether a claim of the order is allocated on the device: a pod of it was placed there and runs."""
        return any(h.kind == "claim" and h.order == order for h in (self._holdings.get(key) or {}).values())

    # ------------------------------------------------------------------ consumption and room

    def consumption(self, h: Holding, device: Device) -> Consumption | None:
        """What one holding consumes of a device; None: all of it."""
        if h.whole or not device.multi:
            return None
        if h.recorded is not None:
            return dict(h.recorded)
        asked = dict(h.request or ())
        taken = consumption(asked, device.capacities)
        if taken is None:  # asks what the device's policy refuses: counted as asked, it is never allocated so
            taken = {n: asked.get(n, consumed(None, c)) for n, c in device.capacities.items()}
        return taken

    def load(
        self,
        key: DeviceKey,
        exclude: frozenset[OrderKey] = _NOBODY,
        holders: Collection[Holding] | None = None,
    ) -> tuple[bool, Consumption]:
        """(taken whole, consumed per capacity) of a published device by every holder not excluded (its
        holdings, when the caller has them). Each order counts once: its allocated claims together, or its
        plan or reservation, whichever is more."""
        device = self.fleet.devices[key]
        whole = False
        total: Consumption = {}
        if holders is None:
            holders = (self._holdings.get(key) or {}).values()
        for h in holders:  # claims alone (the common case): each order's claims together, one sum
            if not h.source.startswith(CLAIM):
                break
            if h.order is not None and h.order in exclude:
                continue
            if h.whole or not device.multi:
                whole = True
                continue
            for name, amount in h.recorded or ():  # a shared result: what the scheduler recorded
                total[name] = total.get(name, _ZERO) + amount
        else:
            return whole, total
        return self._load_mixed(device, exclude, holders)

    def _load_mixed(
        self, device: Device, exclude: frozenset[OrderKey], holders: Collection[Holding]
    ) -> tuple[bool, Consumption]:
        """`load` where plans or reservations hold beside claims."""
        whole = False
        total: Consumption = {}
        claimed: dict[OrderKey, Consumption] = {}
        planned: dict[OrderKey, Consumption] = {}
        for h in holders:
            if h.order is not None and h.order in exclude:
                continue
            taken = self.consumption(h, device)
            if taken is None:
                whole = True
            elif h.order is None:
                add(total, taken)
            elif h.kind == "claim":
                add(claimed.setdefault(h.order, {}), taken)
            else:
                planned[h.order] = most(planned.get(h.order, {}), taken)
        for order, taken in claimed.items():
            add(total, most(taken, planned.pop(order)) if order in planned else taken)
        for taken in planned.values():
            add(total, taken)
        return whole, total

    def share_take(self, device: Device, units: int) -> Consumption | None:
        """What the claim of `units` shares consumes of a shareable device (None: its policy refuses it),
        remembered per capacities: devices of one model ask alike."""
        slot = (device.capacity_key or capacity_key(device.capacities), units)
        if slot not in self._takes:
            self._takes[slot] = consumption(device.share_request(units), device.capacities)
        return self._takes[slot]

    def _fits_share(self, device: Device, used: Mapping[str, Decimal], units: int) -> bool:
        take = self.share_take(device, units)
        return take is not None and fits(used, take, device.capacities)

    def room(self, key: DeviceKey, exclude: Iterable[OrderKey] = ()) -> int:
        """Free units of a published device for someone who may count `exclude`'s holdings as free: the
        largest share whose claim fits every capacity of a shareable device beside what the others hold
        (the scheduler's arithmetic), else UNITS for a device nobody else holds and 0 for one held."""
        device = self.fleet.devices.get(key)
        if device is None:
            return 0
        skip = frozenset(exclude) if exclude else _NOBODY
        holders = (self._holdings.get(key) or {}).values()
        if not skip or not any(h.order in skip for h in holders):
            cached = self._room.get(key)
            if cached is not None:
                return cached
        if key in self._blocked:
            return 0
        if not device.shareable:
            return 0 if any(h.order is None or h.order not in skip for h in holders) else UNITS
        if not holders:  # the same for every device of its capacities (remembered by _room_beside)
            return self._room_beside(device, {})
        whole, used = self.load(key, skip, holders)
        if whole:
            return 0
        return self._room_beside(device, used)

    def count(self, device: Device) -> int:
        """`room(device.key)` counted anew (not from the cache), for a device that is published."""
        key = device.key
        if key in self._blocked:
            return 0
        held = self._holdings.get(key)
        if not device.shareable:
            return 0 if held else UNITS
        if not held:
            return self._room_beside(device, {})
        whole, used = self.load(key, _NOBODY, held.values())
        return 0 if whole else self._room_beside(device, used)

    def recount(self, key: DeviceKey) -> int | None:
        """Count a device's room anew and keep it; None when it is not published."""
        device = self.fleet.devices.get(key)
        if device is None:
            self._room.pop(key, None)
            return None
        return self.recounted(device)

    def recounted(self, device: Device) -> int:
        """Count a published device's room anew, keep it and give it."""
        free = self._room[device.key] = self.count(device)
        return free

    def _room_beside(self, device: Device, used: Consumption) -> int:
        """The largest share of a shareable device whose claim fits beside what is `used`, remembered by
        the device's capacities and that use: devices of one model held alike have the same room."""
        slot = (device.capacity_key or capacity_key(device.capacities), tuple(sorted(used.items())))
        room = self._rooms.get(slot)
        if room is None:
            if len(self._rooms) >= _ROOMS:
                self._rooms.clear()
            room = self._rooms[slot] = self._search_room(device, used)
        return room

    def _search_room(self, device: Device, used: Consumption) -> int:
        """The largest share (percent) whose claim fits beside `used`: a claim of more takes more of every
        capacity, so the answer is where fitting stops."""
        top = UNITS
        if self._fits_share(device, used, top):
            return top
        low, high = 0, top  # the largest share that fits lies in [low, high)
        while high - low > 1:
            mid = (low + high) // 2
            if self._fits_share(device, used, mid):
                low = mid
            else:
                high = mid
        return low

    def fits_share(self, key: DeviceKey, units: int, exclude: Iterable[OrderKey] = ()) -> bool:
        """Whether a claim of `units` shares (UNITS: the whole of a device that is not shareable) fits."""
        return self.room(key, exclude) >= units

    def used(self, key: DeviceKey) -> int:
        """Units of a published device that are not free (UNITS − `room`): what others hold, or all of it
        when its counters are drawn down by its partitioned siblings."""
        return UNITS - self.room(key)

    def left(self, key: DeviceKey) -> Consumption | None:
        """What is left of each capacity of a shareable device beside every holding; None when it is
        taken whole, blocked by its counters, or not published."""
        device = self.fleet.devices.get(key)
        if device is None or not device.multi or key in self._blocked:
            return None
        whole, used = self.load(key)
        if whole:
            return None
        return {name: c.value - used.get(name, Decimal(0)) for name, c in device.capacities.items()}

    # ------------------------------------------------------------------ counters

    def recount_counters(self, pool: PoolKey) -> None:
        """What the pool's held devices consume of its counter sets, and which devices that blocks."""
        devices = self.fleet.devices
        keys = [k for k in self.fleet.pool_devices(pool) if devices[k].consumes]
        self._blocked.difference_update(keys)
        consumed_: dict[tuple[str, str], int] = {}
        for key in keys:
            if self._holdings.get(key):
                for counter_set, counter, amount in devices[key].consumes:
                    consumed_[(counter_set, counter)] = consumed_.get((counter_set, counter), 0) + amount
        self.consumed[pool] = consumed_
        if not consumed_:
            self.consumed.pop(pool, None)
        published = self.fleet.counters.get(pool, {})
        for key in keys:
            if self._holdings.get(key):
                continue
            for counter_set, counter, amount in devices[key].consumes:
                left = published.get((counter_set, counter), 0) - consumed_.get((counter_set, counter), 0)
                if amount > left:  # a counter the pool does not publish has nothing left
                    self._blocked.add(key)
                    break

    def blocked(self, key: DeviceKey) -> bool:
        """Whether a device nobody holds has no room left in the counters it draws on."""
        return key in self._blocked

    def counters_left(self, pool: PoolKey) -> dict[tuple[str, str], int]:
        """What is left of each shared counter of a pool, (counter set, counter) -> amount."""
        consumed_ = self.consumed.get(pool, {})
        return {
            name: value - consumed_.get(name, 0) for name, value in self.fleet.counters.get(pool, {}).items()
        }

    def admits(self, takes: Iterable[tuple[DeviceKey, Mapping[str, Decimal] | None]]) -> bool:
        """Whether new holdings fit together beside every holding there, in the ledger's arithmetic: each
        (device, its claim's capacity requests, or None to take the device whole); the counters the devices
        nobody holds yet draw on must hold them all."""
        by_device: dict[DeviceKey, list[Mapping[str, Decimal] | None]] = {}
        for key, requests in takes:
            by_device.setdefault(key, []).append(requests)
        for key, asked in by_device.items():
            device = self.fleet.devices.get(key)
            if device is None or key in self._blocked:
                return False
            if any(r is None for r in asked) or not device.multi:
                if len(asked) > 1 or self._holdings.get(key):
                    return False
                continue
            whole, used = self.load(key)
            if whole:
                return False
            for requests in asked:
                take = consumption(requests, device.capacities)
                if take is None or not fits(used, take, device.capacities):
                    return False
                add(used, take)
        return self.counters_fit(by_device)

    def counters_fit(self, keys: Iterable[DeviceKey]) -> bool:
        """Whether devices not held yet could all be taken together without overdrawing a counter."""
        extra: dict[tuple[PoolKey, tuple[str, str]], int] = {}
        for key in keys:
            device = self.fleet.devices.get(key)
            if device is None or self._holdings.get(key):
                continue
            pool = (key[0], key[1])
            for counter_set, counter, amount in device.consumes:
                slot = (pool, (counter_set, counter))
                extra[slot] = extra.get(slot, 0) + amount
        for (pool_id, name), amount in extra.items():
            left = self.fleet.counters.get(pool_id, {}).get(name, 0) - self.consumed.get(pool_id, {}).get(
                name, 0
            )
            if amount > left:
                return False
        return True

    # ------------------------------------------------------------------ service

    def gone(self, order: OrderKey, keys: Iterable[DeviceKey], node: str | None) -> list[str]:
        """Devices of a plan the order can no longer start on, each with why (the node's state, or gone). A
        device on a closed node where a pod of the order runs still stands: closing a node stops new pods,
        not the ones it runs; it is lost once that pod goes (evicted by a drain, or the node's taint), or
        once a replica of the order waits to start (every replica's claim names the plan's devices, so it
        never starts there, and a drain would wait for it for ever)."""
        out: list[str] = []
        for key in dict.fromkeys(keys):
            why = self.fleet.out_of_service(key, node)
            if why is not None and (key not in self.fleet.devices or not self._stands_closed(order, key)):
                out.append(why)
        return out

    def _stands_closed(self, order: OrderKey, key: DeviceKey) -> bool:
        """Whether the order stands on a device out of service: a pod of it runs there and none waits."""
        return self.running_on(order, key) and order not in self.unallocated

    def stranded(self) -> list[OrderKey]:
        """Orders whose plan places them on a device out of service where no pod of theirs runs, or where a
        replica of theirs waits to start: each is to be judged again (planned elsewhere, or waiting with why)."""
        return sorted(order for order in self.plans if self.is_stranded(order))

    def is_stranded(self, order: OrderKey) -> bool:
        """Whether one order's plan is stranded (`stranded`)."""
        devices = self.fleet.devices
        return any(
            h.device not in devices
            or (devices[h.device].tainted and not self._stands_closed(order, h.device))
            for h in self.plans.get(order, ())
        )
