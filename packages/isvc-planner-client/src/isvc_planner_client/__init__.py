"""isvc planner client: the planner's wire contract, a typed HTTP client, its errors, and the device
selector language (DRA CEL over quantities) that the planner and its callers both judge."""

from isvc_planner_client._cel import (
    CelJudge,
    SelectorError,
    attribute_is,
    cel_literal,
    device_activation,
    one_of,
)
from isvc_planner_client._client import SERVICE_ACCOUNT_TOKEN, PlannerClient, TokenFileAuth
from isvc_planner_client._errors import (
    PlannerError,
    PlannerProtocolError,
    PlannerUnavailableError,
)
from isvc_planner_client._models import (
    CapacityView,
    DeviceHolder,
    DeviceRoom,
    HoldRequest,
    HoldVerdict,
    OrderRef,
    PlanManyRequest,
    PlanManyResponse,
    PlanRequest,
    PlanResponse,
    Released,
    Reservation,
    Reservations,
    ReservedDevice,
    RoomChange,
    SchedulerRefusal,
    Victim,
)

__all__ = [
    "SERVICE_ACCOUNT_TOKEN",
    "CapacityView",
    "CelJudge",
    "DeviceHolder",
    "DeviceRoom",
    "HoldRequest",
    "HoldVerdict",
    "OrderRef",
    "PlanManyRequest",
    "PlanManyResponse",
    "PlanRequest",
    "PlanResponse",
    "PlannerClient",
    "PlannerError",
    "PlannerProtocolError",
    "PlannerUnavailableError",
    "Released",
    "Reservation",
    "Reservations",
    "ReservedDevice",
    "RoomChange",
    "SchedulerRefusal",
    "SelectorError",
    "TokenFileAuth",
    "Victim",
    "attribute_is",
    "cel_literal",
    "device_activation",
    "one_of",
]
