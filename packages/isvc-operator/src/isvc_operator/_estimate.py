"""The estimate webhook: what an order would get, told to a server-side dry run as admission warnings.

`kubectl isvc estimate` (or `kubectl create --dry-run=server`) creates an order as its user; the API
server checks the user's own `create` permission and the schema, then calls this validating webhook for
dry runs only. The answer is always `allowed` and carries warnings `isvc-estimate: key=value`: the
ClassResolved and ModelResolved steps as a pass runs them, the planner asked with `dryRun` (nothing is
reserved), the recipe compiled for its placement. Nothing is written: no status, plan, event or Secret.
"""

from __future__ import annotations

import logging

from isvc_api import (
    ConditionType,
    InferenceService,
    LaunchPlanSpec,
    Reason,
    Refusal,
    Verdict,
)

from isvc_operator._ports import Deps, Obj, TemporaryError
from isvc_operator._scope import OrderScope
from isvc_operator._steps import klass, model

__all__ = ["PREFIX", "Estimator"]

log = logging.getLogger(__name__)
PREFIX = "isvc-estimate: "
_LIMIT = 4000  # the API server keeps at most 4096 characters of warnings
_VALUE = 200  # characters of one warning's value; longer texts are split over repeated keys


def _facts_of(plan: LaunchPlanSpec) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in plan.placement.to_wire().items():
        if not isinstance(value, list):
            out.append((key, str(value)))
    if plan.estimates is not None:
        out += [(k, str(v)) for k, v in plan.estimates.to_wire().items() if k != "explanation"]
    if plan.runtime is not None:
        out += [("runtime", plan.runtime.recipe), ("image", plan.runtime.image)]
        if plan.runtime.served_name:
            out.append(("servedName", plan.runtime.served_name))
        out += [("arg", arg) for arg in plan.runtime.args]
    if plan.estimates is not None and plan.estimates.explanation:
        out.append(("explanation", plan.estimates.explanation))
    return out


def _warnings(facts: list[tuple[str, str]]) -> list[str]:
    """key=value warnings within the API server's limit; long values split, the explanation dropped first."""
    lines: list[str] = []
    for key, value in facts:
        chunks = [value[i : i + _VALUE] for i in range(0, len(value), _VALUE)] or [""]
        lines += [f"{PREFIX}{key}={chunk}" for chunk in chunks]
    while sum(len(line) for line in lines) > _LIMIT and any("explanation=" in line for line in lines):
        lines.remove(next(line for line in reversed(lines) if "explanation=" in line))
    return lines


class Estimator:
    """Answers AdmissionReviews of dry-run order creations with what the order would get."""

    def __init__(self, deps: Deps) -> None:
        self.d = deps

    def review(self, review: Obj) -> Obj:
        """The AdmissionReview response: always allowed, warnings only for a dry-run create."""
        request = review.get("request") or {}
        warnings: list[str] = []
        if request.get("dryRun") and request.get("operation", "CREATE") == "CREATE":
            try:
                facts = self.estimate(request.get("object") or {}, request.get("namespace") or "")
                warnings = _warnings(facts)
            except Exception as exc:  # an estimate never blocks or breaks a dry run
                log.exception("estimate failed")
                warnings = _warnings(
                    [
                        ("version", "1"),
                        ("verdict", "Unknown"),
                        ("message", f"the estimate failed: {type(exc).__name__}: {exc}"),
                    ]
                )
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": request.get("uid", ""), "allowed": True, "warnings": warnings},
        }

    def estimate(self, obj: Obj, namespace: str) -> list[tuple[str, str]]:
        """(key, value) facts of what the order in `obj` would get in `namespace`."""
        meta = dict(obj.get("metadata") or {})
        meta.update(namespace=namespace, name=meta.get("name") or meta.get("generateName") or "estimate")
        order = InferenceService.model_validate({**obj, "metadata": meta, "status": None})
        scope = OrderScope(order=order, raw=obj, now=self.d.clock())
        head = [("version", "1")]
        steps = ((ConditionType.CLASS_RESOLVED, klass.step), (ConditionType.MODEL_RESOLVED, model.step))
        for type_, step in steps:
            verdict = step(scope, self.d)
            scope.verdicts[type_] = verdict
            if not verdict.holds:
                return head + self._refused(type_, verdict, scope)
        return head + self._planned(scope)

    def _refused(self, type_: ConditionType, verdict: Verdict, scope: OrderScope) -> list[tuple[str, str]]:
        verdict_word = "Unknown" if verdict.status == "Unknown" else "Refused"
        facts = [
            ("verdict", verdict_word),
            ("class", scope.order.spec.inference_service_class_name or ""),
            ("condition", type_.value),
            ("reason", verdict.reason),
            ("message", verdict.message),
        ]
        if scope.endpoint_type is not None:
            facts.append(("endpointType", scope.endpoint_type.value))
        return facts

    def _refusal(self, scope: OrderScope, refusal: Refusal) -> list[tuple[str, str]]:
        return self._refused(ConditionType.PLANNED, Verdict.refuse(refusal.reason, refusal.message), scope)

    def _planned(self, scope: OrderScope) -> list[tuple[str, str]]:
        assert scope.facts is not None and scope.policy is not None
        requirements = self.d.recipes.requirements(scope.facts, scope.endpoint_type)
        if isinstance(requirements, Refusal):
            return self._refusal(scope, requirements)
        try:
            outcome = self.d.planner.plan(
                scope.order, scope.facts, scope.policy, requirements, None, dry_run=True
            )
        except TemporaryError as exc:
            return self._refused(
                ConditionType.PLANNED,
                Verdict(
                    status="Unknown",
                    reason=Reason.PLANNER_REQUEST_FAILED.value,
                    message=f"the planner did not answer ({exc})",
                ),
                scope,
            )
        if outcome.refusal is not None or outcome.placement is None or outcome.estimates is None:
            return self._refusal(
                scope,
                outcome.refusal
                or Refusal(
                    reason=Reason.PLANNER_REQUEST_FAILED, message="the planner answered without a placement"
                ),
            )
        served = scope.order.spec.model.ref.name.split("@", 1)[0]
        compiled = self.d.recipes.compile(
            scope.facts, scope.endpoint_type, outcome.placement, outcome.estimates, served
        )
        if isinstance(compiled, Refusal):
            return self._refusal(scope, compiled)
        plan = LaunchPlanSpec(placement=outcome.placement, estimates=outcome.estimates, runtime=compiled)
        facts: list[tuple[str, str]] = [
            ("verdict", "Planned"),
            ("class", scope.order.spec.inference_service_class_name or ""),
        ]
        if scope.endpoint_type is not None:
            facts.append(("endpointType", scope.endpoint_type.value))
        return facts + _facts_of(plan)
