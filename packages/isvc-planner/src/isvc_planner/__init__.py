"""isvc resource planner: places inference orders on DRA devices, estimates what they need.

The wire contract, the client and the selector language are in `isvc_planner_client`.
"""

from isvc_planner._app import PlannerMetrics, create_app
from isvc_planner._auth import CallerCheck
from isvc_planner._estimate import DEFAULT_CONTEXT, MemoryNeed, estimate, memory_need
from isvc_planner._inventory import UNITS, Device, Holding, Inventory, SelectorFault, loading
from isvc_planner._kube import PAGE, KubeSync, load_api
from isvc_planner._planner import SOLVER_SECONDS, ClaimShape, Planner, judge_plan
from isvc_planner._view import capacity_view

__all__ = [
    "DEFAULT_CONTEXT",
    "PAGE",
    "SOLVER_SECONDS",
    "UNITS",
    "CallerCheck",
    "ClaimShape",
    "Device",
    "Holding",
    "Inventory",
    "KubeSync",
    "MemoryNeed",
    "Planner",
    "PlannerMetrics",
    "SelectorFault",
    "capacity_view",
    "create_app",
    "estimate",
    "judge_plan",
    "load_api",
    "loading",
    "memory_need",
]
