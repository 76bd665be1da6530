"""ClassResolved: the class exists, holds, and admits the order's namespace."""

from __future__ import annotations

from isvc_api import ClassReason, InferenceServiceClass, Reason, StatusReason, Verdict

from isvc_operator._outcome import Outcome
from isvc_operator._policy import EffectivePolicy, class_ready
from isvc_operator._ports import Deps
from isvc_operator._scope import RETRY_SOON, OrderScope

__all__ = ["step"]


def _refused(reason: Reason, message: str) -> Outcome:
    """No policy in force: the constraints go from the status with it."""
    return Outcome(Verdict.refuse(reason, message), {"constraints": None})


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Decide the policy in force: the class's, or the built-in defaults of an order that names none."""
    name = scope.order.spec.inference_service_class_name
    if name is None:
        scope.policy = EffectivePolicy.builtin()
        verdict = Verdict.ok(StatusReason.RESOLVED, "no class named: the platform's built-in defaults apply.")
        return Outcome(verdict, {"constraints": scope.policy.constraints})
    raw = deps.cluster.klass(name)
    if raw is None:
        return _refused(
            Reason.CLASS_NOT_FOUND,
            (
                f"spec.inferenceServiceClassName names {name!r}, and no such class exists; compare "
                "the name with the classes your administrator ships (an upgrade may have renamed it)."
            ),
        )
    klass = InferenceServiceClass.model_validate(raw)
    ready, reason, _ = class_ready(klass.status.conditions if klass.status else [])
    if reason is None:
        # A class just created has not been judged yet: a moment, not a refusal for anyone to fix.
        return Outcome(
            Verdict(
                status="Unknown",
                reason=StatusReason.WAITING.value,
                message=f"class {name!r} has not been judged yet; asked again shortly.",
            ),
            {"constraints": None},
            requeue_after=RETRY_SOON,
        )
    if not ready and reason != ClassReason.PRIORITY_CLASS_MISSING.value:
        return _refused(
            Reason.CLASS_NOT_READY,
            (f"class {name!r} exists but is not ready ({reason}); this is your administrator's to fix."),
        )
    policy = EffectivePolicy.of(klass)
    if not policy.admits(scope.namespace):
        return _refused(
            Reason.NAMESPACE_NOT_ALLOWED,
            (
                f"class {name!r} does not admit orders from namespace {scope.namespace!r} "
                "(admissionPolicy.allowedNamespaces); ask your administrator, or use another class."
            ),
        )
    scope.policy = policy
    return Outcome(
        Verdict.ok(StatusReason.RESOLVED, f"class {name!r} applies."), {"constraints": policy.constraints}
    )
