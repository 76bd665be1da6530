"""The class reconciler: judge an InferenceServiceClass and write its Ready condition."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from isvc_api import (
    API_VERSION,
    ClassReason,
    Condition,
    InferenceServiceClass,
    InferenceServiceClassStatus,
    now,
    set_condition,
)

from isvc_operator._api import Cluster
from isvc_operator._policy import judge_class

__all__ = ["ClassReconciler"]

log = logging.getLogger(__name__)


class ClassReconciler:
    """Level-triggered over one class: its Ready condition says whether every part of it holds."""

    def __init__(
        self,
        cluster: Cluster,
        selector_error: Callable[[str], str | None],
        clock: Callable[[], datetime] = now,
    ) -> None:
        self.cluster = cluster
        self.selector_error = selector_error
        self.clock = clock

    def reconcile(self, name: str) -> None:
        """Judge the class `name`; a class gone is done. The status is written only when it changes."""
        raw = self.cluster.klass(name)
        if raw is None:
            return
        klass = InferenceServiceClass.model_validate(raw)
        spec = klass.spec
        pc_name = spec.priority_class_name
        pc_exists = self.cluster.priority_class_exists(pc_name) if pc_name else None
        selector = spec.accelerator_policy.selector if spec.accelerator_policy else None
        reason, message = judge_class(spec, pc_exists, self.selector_error(selector) if selector else None)
        previous = klass.status or InferenceServiceClassStatus()
        conditions = set_condition(
            previous.conditions,
            Condition(
                type="Ready",
                status="True" if reason == ClassReason.READY else "False",
                reason=reason.value,
                message=message,
                observed_generation=klass.metadata.generation,
            ),
            at=self.clock(),
        )
        status = InferenceServiceClassStatus(
            observed_generation=klass.metadata.generation, conditions=conditions
        )
        if status.to_wire() == previous.to_wire():
            return
        self.cluster.apply_status(
            {
                "apiVersion": API_VERSION,
                "kind": "InferenceServiceClass",
                "metadata": {"name": name},
                "status": status.to_wire(),
            }
        )
        log.debug("class %s: %s", name, reason.value)
