"""isvc controller: reconciles orders (InferenceService) and classes (InferenceServiceClass)."""

from isvc_operator._adapters import CatalogModels, Health, PlannerService, Workload
from isvc_operator._api import Cluster
from isvc_operator._class import ClassReconciler
from isvc_operator._controller import Controller, OrdersByPhase, order_of_plan
from isvc_operator._estimate import Caller, Estimator
from isvc_operator._kube import Informer, KubeCluster, api_client
from isvc_operator._main import build, main, parser
from isvc_operator._order import OrderReconciler, PassResult
from isvc_operator._policy import BUILTIN_EXPOSURE, EffectivePolicy, judge_class
from isvc_operator._ports import (
    Deps,
    HealthPort,
    Judgement,
    ModelPort,
    PlannerPort,
    PlanOutcome,
    RecipesPort,
    TemporaryError,
    WorkloadPort,
    WorkloadUnbuildable,
)
from isvc_operator._queue import ShutDownError, WorkQueue
from isvc_operator._recipes import Recipes
from isvc_operator._rollout import ROLL_DEADLINE, RollPacer, StartWaiters
from isvc_operator._scope import OrderScope
from isvc_operator._seal import SEAL, Sealer
from isvc_operator._status import phase
from isvc_operator._waiting import WaitingRoom

__all__ = [
    "BUILTIN_EXPOSURE",
    "ROLL_DEADLINE",
    "SEAL",
    "Caller",
    "CatalogModels",
    "ClassReconciler",
    "Cluster",
    "Controller",
    "Deps",
    "EffectivePolicy",
    "Estimator",
    "Health",
    "HealthPort",
    "Informer",
    "Judgement",
    "KubeCluster",
    "ModelPort",
    "OrderReconciler",
    "OrderScope",
    "OrdersByPhase",
    "PassResult",
    "PlanOutcome",
    "PlannerPort",
    "PlannerService",
    "Recipes",
    "RecipesPort",
    "RollPacer",
    "Sealer",
    "ShutDownError",
    "StartWaiters",
    "TemporaryError",
    "WaitingRoom",
    "WorkQueue",
    "Workload",
    "WorkloadPort",
    "WorkloadUnbuildable",
    "api_client",
    "build",
    "judge_class",
    "main",
    "order_of_plan",
    "parser",
    "phase",
]
