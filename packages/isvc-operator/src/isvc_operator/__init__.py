"""isvc controller: reconciles orders (InferenceService) and classes (InferenceServiceClass)."""

from isvc_operator._controller import ClusterAdapter, Controller
from isvc_operator._kube import Informer, KubeCluster, api_client
from isvc_operator._main import build, main, parser
from isvc_operator._policy import BUILTIN_EXPOSURE, EffectivePolicy, judge_class
from isvc_operator._queue import ShutDownError, WorkQueue
from isvc_operator._reconcile import (
    Cluster,
    Deps,
    HealthPort,
    ModelPort,
    PlannerPort,
    PlanOutcome,
    RecipesPort,
    Reconciler,
    TemporaryError,
    WorkloadPort,
    WorkloadVerdict,
)
from isvc_operator._state import Pass, Verdict
from isvc_operator._wiring import PlannerService

__all__ = [
    "BUILTIN_EXPOSURE",
    "Cluster",
    "ClusterAdapter",
    "Controller",
    "Deps",
    "EffectivePolicy",
    "HealthPort",
    "Informer",
    "KubeCluster",
    "ModelPort",
    "Pass",
    "PlanOutcome",
    "PlannerPort",
    "PlannerService",
    "RecipesPort",
    "Reconciler",
    "ShutDownError",
    "TemporaryError",
    "Verdict",
    "WorkQueue",
    "WorkloadPort",
    "WorkloadVerdict",
    "api_client",
    "build",
    "judge_class",
    "main",
    "parser",
]
