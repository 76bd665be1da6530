"""The steps of an order's pass, in order: each owns one condition and returns its outcome (the verdict, the
status fields it decided, the writes it intends), which the reconciler applies."""

from collections.abc import Callable

from isvc_api import ConditionType

from isvc_operator._outcome import Outcome
from isvc_operator._ports import Deps
from isvc_operator._scope import OrderScope
from isvc_operator._steps import health, klass, model, plan, scaling, workload

__all__ = ["STEPS", "Step"]

Step = Callable[[OrderScope, Deps], Outcome]

STEPS: tuple[tuple[ConditionType, Step], ...] = (
    (ConditionType.CLASS_RESOLVED, klass.step),
    (ConditionType.MODEL_RESOLVED, model.step),
    (ConditionType.PLANNED, plan.step),
    (ConditionType.WORKLOAD_READY, workload.step),
    (ConditionType.READY, health.step),
    (ConditionType.SCALING_HEALTHY, scaling.step),
)
