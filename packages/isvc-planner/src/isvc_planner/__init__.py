"""isvc resource planner: places inference orders on DRA devices, estimates what they need.

The wire contract, the client and the selector language are in `isvc_planner_client`; the books it places
on (the DRA read-model and the ledger) in `isvc_ledger`.
"""

from isvc_planner._answer import ClaimShape, judge_plan
from isvc_planner._app import PlannerMetrics, create_app
from isvc_planner._auth import CallerCheck
from isvc_planner._estimate import DEFAULT_CONTEXT, MemoryNeed, estimate, memory_need
from isvc_planner._heard import SCHEDULER_RETRY
from isvc_planner._inventory import Inventory
from isvc_planner._kube import PAGE, KubeSync, load_api
from isvc_planner._planner import SOLVER_SECONDS, Planner

__all__ = [
    "DEFAULT_CONTEXT",
    "PAGE",
    "SCHEDULER_RETRY",
    "SOLVER_SECONDS",
    "CallerCheck",
    "ClaimShape",
    "Inventory",
    "KubeSync",
    "MemoryNeed",
    "Planner",
    "PlannerMetrics",
    "create_app",
    "estimate",
    "judge_plan",
    "load_api",
    "memory_need",
]
