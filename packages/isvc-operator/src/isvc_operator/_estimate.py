"""The estimate webhook: what an order would get, told to a server-side dry run as admission warnings.

`kubectl isvc estimate` (or `kubectl create --dry-run=server`) creates an order as its user; the API
server checks the user's own `create` permission and the schema, then calls this validating webhook for
dry runs only. The answer is always `allowed` and carries warnings `isvc-estimate: key=value`: the
ClassResolved and ModelResolved steps as a pass runs them, the planner asked with `dryRun` (nothing is
reserved), the recipe compiled for its placement. Nothing is written: no status, plan, event or Secret.

Anyone who can reach the webhook can post a review naming another team's Secret, in any namespace, which the
controller would read with its own rights. So a review is *vouched for* only when the API
server presented its client certificate (`Caller.vouched`, checked by the HTTPS server); only then are its
namespace and user believed. The token Secret an order names is read only for a vouched review, and only when
the API server answers that the asking user may `get` that Secret herself (SubjectAccessReview): the estimate
reads with the user's rights, never the controller's. A catalog `Model` of a namespace is read only for a
vouched review as well. Otherwise the estimate says `Unknown` and why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import attrs
from isvc_api import (
    CatalogKind,
    ConditionType,
    InferenceService,
    LaunchPlanSpec,
    ModelSource,
    Obj,
    Reason,
    Refusal,
    Verdict,
)

from isvc_operator._ports import Deps, TemporaryError
from isvc_operator._scope import OrderScope
from isvc_operator._steps import klass, model
from isvc_operator._steps.planning import compile_launch, serving_of

__all__ = ["PREFIX", "Caller", "Estimator"]

log = logging.getLogger(__name__)
PREFIX = "isvc-estimate: "
_LIMIT = 4000  # the API server keeps at most 4096 characters of warnings
_VALUE = 200  # characters of one warning's value; longer texts are split over repeated keys


def _text(value: object) -> str:
    """A value as a warning carries it: a string as it is, anything else as JSON, which YAML reads too, never
    Python's own text of it (issue 45: capacityRequests read `{'shares': '12', ...}`, a flag `True`)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _facts_of(plan: LaunchPlanSpec) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in plan.placement.to_wire().items():
        if not isinstance(value, list):
            out.append((key, _text(value)))
    if plan.estimates is not None:
        out += [(k, _text(v)) for k, v in plan.estimates.to_wire().items() if k != "explanation"]
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


@attrs.frozen
class Caller:
    """Who asks: the user a review names, and whether the API server vouched for the review (it presented the
    client certificate the webhook trusts). An unvouched review's user and namespace are the poster's word."""

    vouched: bool = False
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, request: Obj, vouched: bool) -> Caller:
        """The caller of a review's request (its userInfo)."""
        found = request.get("userInfo")
        info: Obj = found if isinstance(found, dict) else {}
        more = info.get("extra")
        extra: Obj = more if isinstance(more, dict) else {}
        return cls(
            vouched=vouched,
            username=str(info.get("username") or ""),
            uid=str(info.get("uid") or ""),
            groups=tuple(str(g) for g in info.get("groups") or [] if isinstance(g, str)),
            extra={str(k): tuple(str(v) for v in vs) for k, vs in extra.items() if isinstance(vs, list)},
        )


class Estimator:
    """Answers AdmissionReviews of dry-run order creations with what the order would get."""

    def __init__(self, deps: Deps) -> None:
        self.d = deps

    def review(self, review: Obj, vouched: bool = False) -> Obj:
        """The AdmissionReview response: always allowed, warnings only for a dry-run create. `vouched`: the
        API server sent it (the HTTPS server checked its client certificate)."""
        request = review.get("request") or {}
        warnings: list[str] = []
        if request.get("dryRun") and request.get("operation", "CREATE") == "CREATE":
            try:
                caller = Caller.of(request, vouched)
                facts = self.estimate(request.get("object") or {}, request.get("namespace") or "", caller)
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

    def estimate(self, obj: Obj, namespace: str, caller: Caller | None = None) -> list[tuple[str, str]]:
        """(key, value) facts of what the order in `obj` would get in `namespace`, asked by `caller`."""
        caller = caller or Caller()
        meta = dict(obj.get("metadata") or {})
        meta.update(namespace=namespace, name=meta.get("name") or meta.get("generateName") or "estimate")
        order = InferenceService.model_validate({**obj, "metadata": meta, "status": None})
        scope = OrderScope(order=order, raw=obj, now=self.d.clock())
        head = [("version", "1")]
        unread = self._unreadable(order, namespace, caller)
        if unread is not None:
            reason, message = unread
            return head + self._refused(
                ConditionType.MODEL_RESOLVED,
                Verdict(status="Unknown", reason=reason.value, message=message),
                scope,
            )
        steps = ((ConditionType.CLASS_RESOLVED, klass.step), (ConditionType.MODEL_RESOLVED, model.step))
        for type_, step in steps:
            verdict = step(scope, self.d).verdict
            scope.verdicts[type_] = verdict
            if not verdict.holds:
                return head + self._refused(type_, verdict, scope)
        return head + self._planned(scope)

    def _unreadable(
        self, order: InferenceService, namespace: str, caller: Caller
    ) -> tuple[Reason, str] | None:
        """Why the estimate may not read what the order names in its namespace, or None when it may: a token
        Secret only for a vouched caller who may read it herself; a namespace's catalog Model only for a
        vouched caller (an unvouched review's namespace is the poster's word)."""
        model = order.spec.model
        if (
            model.src == ModelSource.AI_MODELS
            and model.ref.kind != CatalogKind.CLUSTER_MODEL
            and not caller.vouched
        ):
            return Reason.CATALOG_LOOKUP_FAILED, (
                "the estimate reads a namespace's catalog Model only for a review the API server vouches for "
                "(the webhook's caller authentication is not configured); create the order to have it resolved."
            )
        ref = model.auth_secret_ref
        if ref is None:
            return None
        if not caller.vouched:
            return Reason.AUTH_SECRET_NOT_FOUND, (
                f"the estimate reads Secret {ref.name!r} only for a review the API server vouches for (the "
                "webhook's caller authentication is not configured); create the order to have the model resolved "
                "with its token."
            )
        if not self.d.cluster.user_may(
            caller.username, caller.uid, caller.groups, caller.extra, "get", "secrets", namespace, ref.name
        ):
            return Reason.AUTH_SECRET_NOT_FOUND, (
                f"{caller.username or 'the asking user'} may not read Secret {ref.name!r} in namespace "
                f"{namespace!r}, and the estimate reads only what its asker may; ask for read access to it, or "
                "create the order to have the model resolved with its token."
            )
        return None

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
                scope.order,
                scope.facts,
                scope.policy,
                requirements,
                None,
                dry_run=True,
                serving=serving_of(scope),
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
        compiled = compile_launch(scope, self.d, outcome.placement, outcome.estimates)
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
