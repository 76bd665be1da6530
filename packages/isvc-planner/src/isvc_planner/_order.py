"""One order as the planner sees it: what it asks of a device, and a placement it could be given."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from isvc_api import DeviceKey, OrderKey, PlacementMode, SharingMode, visible_bytes
from isvc_ledger import UNITS, Device
from isvc_planner_client import PlanRequest

from isvc_planner._estimate import MemoryNeed

__all__ = ["Ask", "Candidate", "Order"]


@dataclass(frozen=True)
class Candidate:
    """A placement the search found: a class, its devices, units per device, mode, sharing; lower rank wins."""

    device_class: str
    devices: tuple[Device, ...]
    units: int  # per device
    mode: PlacementMode
    sharing: SharingMode
    rank: tuple[object, ...]


@dataclass
class Ask:
    """What one order asks of a device: its need, permitted shares and modes, filters, what it holds."""

    need: MemoryNeed
    shares: tuple[int, ...]
    modes: set[tuple[PlacementMode, SharingMode]]
    max_devices: int
    selector: str | None
    min_cc: str | None
    own: set[DeviceKey]  # devices the order holds: counted as free for it
    prefer: set[DeviceKey]
    order: OrderKey = ("", "")
    margin: int = 0
    # Refused by the scheduler although the ledger saw room: device -> smallest share refused (None: whole).
    distrust: dict[DeviceKey, int | None] = field(default_factory=dict)
    refused: tuple[str, str] | None = None  # (devices, the scheduler's words) of the last refusal
    kept: frozenset[DeviceKey] = frozenset()  # devices kept for an older waiting order: not offered

    def allows(self, mode: PlacementMode, sharing: SharingMode) -> bool:
        return (mode, sharing) in self.modes

    def usable(self, memory: int) -> int:
        """Bytes of a whole device publishing `memory` the order may count on: what the runtime sees,
        less the margin (which covers the percent the runtime's utilization is floored by)."""
        return visible_bytes(memory) * (UNITS - self.margin) // UNITS

    def holds(self, memory: int) -> bool:
        """Whether a whole device of `memory` bytes holds the order, margin included."""
        return self.usable(memory) >= self.need.required

    def fit(
        self, memory: int, shareable: bool, kind: str | None
    ) -> tuple[int, PlacementMode, SharingMode] | None:
        """Units, mode and sharing one device of `memory` bytes would give the order, or None: a share of
        a shareable device, else the whole device (a partition when it is a MIG one)."""
        if shareable:
            units = self.share_for(self.need.required, memory) if memory else None
            if units is None or not self.allows(PlacementMode.SHARED, SharingMode.SHARES):
                return None
            return units, PlacementMode.SHARED, SharingMode.SHARES
        sharing = SharingMode.PARTITION if kind == "mig" else SharingMode.NONE
        if not self.holds(memory) or not self.allows(PlacementMode.WHOLE_DEVICE, sharing):
            return None
        return UNITS, PlacementMode.WHOLE_DEVICE, sharing

    def spans(self, memory: int) -> int | None:
        """The fewest devices of `memory` bytes (2, 4, 8 …, at most `max_devices`) that hold the order
        under tensor parallel, or None."""
        count = 2
        usable = self.usable(memory)
        while count <= self.max_devices and self.need.per_device(count) > usable:
            count *= 2
        return None if count > self.max_devices else count

    def share_for(self, amount: int, memory: int) -> int | None:
        """The permitted share of a device of `memory` bytes that holds `amount`, or None.

        Shares are of the memory the runtime sees; the runtime leaves `margin` percent of what it is
        given unclaimed (its utilization floored to a percent), so that much is added.
        """
        seen = visible_bytes(memory)
        if seen <= 0:
            return None
        raw = max(1, math.ceil(amount * UNITS / seen) + self.margin)
        i = bisect.bisect_left(self.shares, raw)
        return self.shares[i] if i < len(self.shares) else None


@dataclass(frozen=True)
class Order:
    """One order as the ledger sees it: its need, priority and what it asks for."""

    request: PlanRequest
    key: OrderKey
    need: MemoryNeed
    priority: int
    ask: Ask
    classes: list[str]
