"""isvc ledger: the DRA read-model (slices, classes, counters, pools → devices and what each can give) and
the ledger of who holds what, in kube-scheduler's own arithmetic; the planner and `kubectl isvc capacity`
read the same books. No service dependencies."""

from isvc_ledger._books import Books, View, loading
from isvc_ledger._capacity import (
    Capacity,
    Consumption,
    Policy,
    consumed,
    consumption,
    fits,
    parse_capacities,
    quantity_text,
    share_request,
    violates,
)
from isvc_ledger._classes import DeviceClasses, SelectorFault
from isvc_ledger._device import UNITS, Device, GroupKey
from isvc_ledger._fleet import DEPARTED_TTL, Fleet, node_state
from isvc_ledger._holding import Holding
from isvc_ledger._index import Group, RoomIndex
from isvc_ledger._ledger import Ledger
from isvc_ledger._ranking import Priorities, Ranking
from isvc_ledger._selectors import SelectorMemo, reads
from isvc_ledger._view import capacity_view

__all__ = [
    "DEPARTED_TTL",
    "UNITS",
    "Books",
    "Capacity",
    "Consumption",
    "Device",
    "DeviceClasses",
    "Fleet",
    "Group",
    "GroupKey",
    "Holding",
    "Ledger",
    "Policy",
    "Priorities",
    "Ranking",
    "RoomIndex",
    "SelectorFault",
    "SelectorMemo",
    "View",
    "capacity_view",
    "consumed",
    "consumption",
    "fits",
    "loading",
    "node_state",
    "parse_capacities",
    "quantity_text",
    "reads",
    "share_request",
    "violates",
]
