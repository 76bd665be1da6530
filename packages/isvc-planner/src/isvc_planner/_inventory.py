"""The owner of the planner's books: their lock, the watch handlers that change them, and the waiters.

The books (`isvc_ledger.Books`: the DRA read-model, the ledger, the room index, the priorities) keep no lock;
this owner holds one around every change its watches apply and around every decision, which reads the books
through a `View` (`reading`) and never takes the lock itself: like kube-scheduler's cache, one owner of
mutable state, decisions reading what it gives them. A view is not a copy (at 80,000 devices a copy per plan
would cost more than the plan): it is valid inside its `with` block, while watch events wait.

`freed` counts the changes that may have made room (a holding gone or smaller, a pool republished, a class,
node or priority changed); `wait_freed` lets a caller sleep until it moves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, TypeVar

from isvc_api import DeviceKey, OrderKey
from isvc_ledger import Books, Holding, View
from isvc_planner_client import CelJudge

from isvc_planner._distrust import Distrust

__all__ = ["Inventory"]

_T = TypeVar("_T")


class Inventory:
    """The books behind one lock, kept current incrementally by the kube adapter's watch threads while the
    service plans."""

    def __init__(self, judge: CelJudge | None = None) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self.freed = 0
        self._books = Books(judge, on_free=self._free)
        self._distrust = Distrust(self._books.fleet, self._books.ledger)

    @classmethod
    def from_objects(
        cls, *objects: Iterable[Mapping[str, Any]], **named: Iterable[Mapping[str, Any]]
    ) -> Inventory:
        """An inventory from plain objects, as `Books.from_objects` reads them."""
        inv = cls()
        built = Books.from_objects(*objects, **named)
        built._on_free = inv._free
        inv._books = built
        inv._distrust = Distrust(built.fleet, built.ledger)
        return inv

    # ------------------------------------------------------------------ reading

    @contextmanager
    def reading(self) -> Iterator[View]:
        """The books to decide on, with lapsed reservations dropped first; watch events wait until the block
        ends. Re-entrant: a decision may call the writes below inside it."""
        with self._lock:
            self._books.expire()
            yield self._books.view

    def at_once(self, call: Callable[[], _T]) -> list[_T]:
        """`[call()]` when nobody holds the books (the call runs under their lock), else `[]` at once: a
        caller on an event loop hands the call to a thread instead of waiting."""
        if not self._lock.acquire(blocking=False):
            return []
        try:
            return [call()]
        finally:
            self._lock.release()

    @property
    def view(self) -> View:
        """The books' parts as they are now, without the lock: for a caller on the books' own thread (a
        test, a one-shot build); a decision in the service reads `reading()`."""
        return self._books.view

    @property
    def synced(self) -> bool:
        """Whether every kind has been listed once: the ledger answers plans only then."""
        return self._books.synced

    @synced.setter
    def synced(self, value: bool) -> None:
        with self._lock:
            self._books.synced = value

    def stranded(self) -> list[OrderKey]:
        """Orders whose plan places them on a device out of service (`Ledger.stranded`)."""
        with self._lock:
            return self._books.ledger.stranded()

    # ------------------------------------------------------------------ waiters

    def _free(self) -> None:
        """Room may have appeared: wake whoever waits for it."""
        with self._changed:
            self.freed += 1
            self._changed.notify_all()

    def wait_freed(self, after: int, timeout: float) -> int:
        """Block until `freed` differs from `after` or `timeout` seconds pass; the value then."""
        with self._changed:
            self._changed.wait_for(lambda: self.freed != after, timeout)
            return self.freed

    # ------------------------------------------------------------------ watch handlers

    @contextmanager
    def applying(self, until_synced: bool = False) -> Iterator[None]:
        """A listing applied at once under the lock (`Books.applying`)."""
        with self._lock, self._books.applying(until_synced):
            yield

    def upsert_device_class(self, dc: Mapping[str, Any]) -> None:
        """Add or change a DeviceClass."""
        with self._lock:
            self._books.upsert_device_class(dc)

    def delete_device_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        with self._lock:
            self._books.delete_device_class(name)

    def upsert_slice(self, sl: Mapping[str, Any]) -> None:
        """Add or change a ResourceSlice."""
        with self._lock:
            self._books.upsert_slice(sl)

    def delete_slice(self, name: str) -> None:
        """Forget a ResourceSlice."""
        with self._lock:
            self._books.delete_slice(name)

    def upsert_claim(self, claim: Mapping[str, Any]) -> None:
        """Add or change a ResourceClaim."""
        with self._lock:
            self._books.upsert_claim(claim)

    def upsert_claims(self, claims: Iterable[Mapping[str, Any]]) -> None:
        """Add or change ResourceClaims (a listing's page), locked once."""
        with self._lock:
            self._books.upsert_claims(claims)

    def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Forget a ResourceClaim."""
        with self._lock:
            self._books.delete_claim(claim)

    def upsert_plan(self, plan: Mapping[str, Any]) -> None:
        """Add or change a LaunchPlan."""
        with self._lock:
            self._books.upsert_plan(plan)

    def delete_plan(self, plan: Mapping[str, Any]) -> None:
        """Forget a LaunchPlan."""
        with self._lock:
            self._books.delete_plan(plan)

    def upsert_order(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceService."""
        with self._lock:
            self._books.upsert_order(obj)

    def delete_order(self, obj: Mapping[str, Any]) -> None:
        """Forget an InferenceService."""
        with self._lock:
            self._books.delete_order(obj)

    def upsert_service_class(self, obj: Mapping[str, Any]) -> None:
        """Add or change an InferenceServiceClass."""
        with self._lock:
            self._books.upsert_service_class(obj)

    def delete_service_class(self, name: str) -> None:
        """Forget an InferenceServiceClass."""
        with self._lock:
            self._books.delete_service_class(name)

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        """A node opened or closed to new pods."""
        with self._lock:
            self._books.upsert_node(node)

    def delete_node(self, node: Mapping[str, Any]) -> None:
        """A node gone."""
        with self._lock:
            self._books.delete_node(node)

    def upsert_priority_class(self, pc: Mapping[str, Any]) -> None:
        """Add or change a PriorityClass."""
        with self._lock:
            self._books.upsert_priority_class(pc)

    def delete_priority_class(self, name: str) -> None:
        """Forget a PriorityClass."""
        with self._lock:
            self._books.delete_priority_class(name)

    # ------------------------------------------------------------------ reservations and refusals

    def reserve(
        self,
        order: OrderKey,
        priority: int,
        holdings: list[tuple[DeviceKey, int | None, Mapping[str, Decimal] | None]],
        ttl: float,
    ) -> None:
        """Hold devices for a plan not yet stored as a LaunchPlan, for `ttl` seconds (`Books.reserve`)."""
        with self._lock:
            self._books.reserve(order, priority, holdings, ttl)

    def release(self, order: OrderKey) -> None:
        """Drop the reservation of an order."""
        with self._lock:
            self._books.release(order)

    def expire(self, now: float | None = None) -> None:
        """Drop reservations whose time is up."""
        with self._lock:
            self._books.expire(now)

    def reserved_by(self, order: OrderKey) -> list[DeviceKey]:
        """Devices reserved for an order and not yet seen in its LaunchPlan."""
        with self._lock:
            return self._books.reserved_by(order)

    def reservations(self) -> list[tuple[OrderKey, float, float, list[Holding]]]:
        """(order, made at, deadline, holdings) of every reservation, by order; monotonic times."""
        with self._lock:
            return self._books.reservations()

    def distrust(
        self, keys: Iterable[DeviceKey], units: int | None, ttl: float, order: OrderKey | None
    ) -> bool:
        """A scheduler refusal where the ledger saw room (`Distrust.learn`); True when it is news."""
        with self._lock:
            return self._distrust.learn(keys, units, ttl, order)

    def distrusted(self) -> dict[DeviceKey, int | None]:
        """Devices a scheduler refusal still stands on: the smallest share refused (None: whole devices)."""
        with self._lock:
            return self._distrust.standing()

    def refused_order(self, key: DeviceKey) -> OrderKey | None:
        """The order whose claim the scheduler refused on a distrusted device."""
        with self._lock:
            return self._distrust.refused_order(key)

    def freed_at(self, key: DeviceKey) -> float:
        """When a holding of someone else on a device or its counter siblings last went or changed."""
        with self._lock:
            return self._distrust.freed_at(key)
