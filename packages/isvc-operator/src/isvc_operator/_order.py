"""The order reconciler: a pass runs every step over one scope, then writes the status, whatever happened."""

from __future__ import annotations

import logging
from typing import Any

import attrs
from cachetools import TTLCache
from isvc_api import (
    ConditionType,
    InferenceService,
    OrderKey,
    Reason,
    StatusReason,
    Verdict,
)

from isvc_operator import _status
from isvc_operator._api import namespace_terminating
from isvc_operator._outcome import Outcome
from isvc_operator._ports import Deps, TemporaryError, WorkloadUnbuildable
from isvc_operator._scope import RETRY_SOON, OrderScope
from isvc_operator._steps import STEPS, Step

__all__ = ["OrderReconciler", "PassResult"]

log = logging.getLogger(__name__)


@attrs.frozen
class PassResult:
    """What a pass asks of the controller: a timed requeue, orders to pass now, a backoff after a failure."""

    requeue_after: float | None = None
    wake: tuple[OrderKey, ...] = ()
    failed: bool = False
    reason: str | None = None  # the order's status reason after the pass (the first condition not True)


class OrderReconciler:
    """Level-triggered: each pass reads the order, runs the steps in order and writes the status once.

    It keeps nothing between passes: what a later pass must know is in the order's status, its
    LaunchPlan or its children, so a restarted controller reaches the same decisions.
    """

    def __init__(self, deps: Deps) -> None:
        self.d = deps
        # Orders already said to go with their namespace (a log line once per order, not once per pass).
        self._said_going: TTLCache[OrderKey, bool] = TTLCache(maxsize=10_000, ttl=3600)

    def reconcile(self, namespace: str, name: str) -> PassResult:
        """One pass over the order namespace/name. NotFound means done."""
        raw = self.d.cluster.order(namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            return PassResult(wake=tuple(self._gone(namespace, name)))
        scope = OrderScope(order=InferenceService.model_validate(raw), raw=raw, now=self.d.clock())
        try:
            for type_, step in STEPS:
                self._take(scope, type_, self._run(type_, step, scope))
                if scope.terminating:
                    break
        finally:
            if not scope.terminating:
                self._finish(scope, raw)
        if scope.terminating:
            self._going(namespace, name)
            return PassResult()
        return PassResult(
            requeue_after=scope.requeue_after,
            wake=tuple(scope.wake),
            failed=bool(scope.failed),
            reason=_status.first_not_true(scope.verdicts),
        )

    def _finish(self, scope: OrderScope, raw: dict[str, Any]) -> None:
        """The status (when its content changed), the plan's status, and the events of the pass."""
        status = _status.build(scope)
        wait = _status.deferred(scope, status)
        if wait is None:
            _status.write(scope, self.d.cluster, status)
        else:  # the workload's progress, a moment after it began: written with the next step, or then
            scope.requeue(wait)
        try:
            _status.write_plan(scope, self.d.cluster)
        except Exception as exc:  # the plan went meanwhile: the next pass (its watch) writes or skips
            log.warning(
                "%s/%s: LaunchPlan status not written: %s",
                scope.namespace,
                scope.name,
                type(exc).__name__,
            )
            scope.requeue(RETRY_SOON)
        changes = _status.changes(scope) if wait is None else []
        for event in changes + scope.events:
            self.d.cluster.event(raw, event.type, event.reason, event.message)

    def _going(self, namespace: str, name: str) -> None:
        """An order whose namespace is being deleted: one line, once; the namespace takes the order and all it
        owns with it, so nothing is retried and nothing more is written."""
        if (namespace, name) in self._said_going:
            return
        self._said_going[(namespace, name)] = True
        log.info("%s/%s: its namespace is being deleted; the order goes with it", namespace, name)

    def _run(self, type_: ConditionType, step: Step, scope: OrderScope) -> Outcome:
        """One step, and the writes it intends; one that raises leaves its condition Unknown with where to look,
        and later steps wait."""
        try:
            outcome = step(scope, self.d)
            for write in outcome.writes:
                write.to(self.d.cluster, scope.namespace)
            return outcome
        except WorkloadUnbuildable as exc:
            return Outcome(Verdict.refuse(Reason.WORKLOAD_ERROR, f"the workload cannot be built: {exc}"))
        except TemporaryError as exc:
            message = f"a dependency did not answer while judging {type_.value} ({exc}); retried."
            return Outcome(_not_judged(message), requeue_after=RETRY_SOON)
        except Exception as exc:
            if namespace_terminating(exc):  # nothing can be made there any more: not a failure of the pass
                scope.terminating = True
                return Outcome(_not_judged(str(exc)[:300]))
            log.exception("%s/%s: judging %s failed", scope.namespace, scope.name, type_.value)
            scope.failed.append(type_)
            return Outcome(
                _not_judged(
                    f"the controller failed judging {type_.value}: {type(exc).__name__}: {str(exc)[:300]}; "
                    "its log (deployment isvc-controller in the module's namespace) has the details; "
                    "retried with backoff."
                )
            )

    @staticmethod
    def _take(scope: OrderScope, type_: ConditionType, outcome: Outcome) -> None:
        """A step's outcome, its writes made: its verdict, the status fields it decided, what it asks."""
        scope.verdicts[type_] = outcome.verdict
        if outcome.fields:
            scope.status = scope.status.model_copy(update=outcome.fields)
        scope.events.extend(outcome.events)
        scope.wake.extend(outcome.wake)
        if outcome.requeue_after is not None:
            scope.requeue(outcome.requeue_after)

    def _gone(self, namespace: str, name: str) -> list[OrderKey]:
        """A deleted order: what the planner may still reserve for it is released, on every pass of it.

        Not only while traces (its LaunchPlan, claim templates) remain: a plan whose LaunchPlan was
        collected or never written (the order deleted meanwhile), or a joint plan that placed a waiting
        order, reserves with no trace in the API, and the chaos suite counted such a reservation left
        behind. Release is idempotent and one call; nothing is remembered, so a restart changes nothing.
        """
        self.d.health.forget(namespace, name)
        self.d.planner.release(namespace, name)
        # A roll it was making holds its class's turn no longer: the orders waiting for it go on.
        return self.d.rolls.forget((namespace, name)) if self.d.rolls is not None else []


def _not_judged(message: str) -> Verdict:
    return Verdict(status="Unknown", reason=StatusReason.NOT_JUDGED.value, message=message)
