"""isvc resource planner: places inference orders on DRA devices, estimates what they need."""

from isvc_planner._app import create_app
from isvc_planner._cel import CelJudge, SelectorError
from isvc_planner._client import PlannerClient
from isvc_planner._errors import PlannerError, PlannerProtocolError, PlannerUnavailableError, QuantityError
from isvc_planner._estimate import DEFAULT_CONTEXT, MemoryNeed, estimate, memory_need
from isvc_planner._inventory import UNITS, Device, Holding, Inventory, SelectorFault
from isvc_planner._models import (
    OrderRef,
    PlanManyRequest,
    PlanManyResponse,
    PlanRequest,
    PlanResponse,
    Released,
    Victim,
)
from isvc_planner._planner import Planner, judge_plan
from isvc_planner._quantity import parse_quantity

__all__ = [
    "DEFAULT_CONTEXT",
    "UNITS",
    "CelJudge",
    "Device",
    "Holding",
    "Inventory",
    "MemoryNeed",
    "OrderRef",
    "PlanManyRequest",
    "PlanManyResponse",
    "PlanRequest",
    "PlanResponse",
    "Planner",
    "PlannerClient",
    "PlannerError",
    "PlannerProtocolError",
    "PlannerUnavailableError",
    "QuantityError",
    "Released",
    "SelectorError",
    "SelectorFault",
    "Victim",
    "create_app",
    "estimate",
    "judge_plan",
    "memory_need",
    "parse_quantity",
]
