"""ModelResolved: the reference resolves, its Secret exists, and the class admits the model."""

from __future__ import annotations

import base64
import binascii

from isvc_api import (
    CatalogKind,
    ConditionType,
    ModelSource,
    ModelStatus,
    Reason,
    Refusal,
    StatusReason,
    Verdict,
)

from isvc_operator._outcome import Outcome
from isvc_operator._ports import Deps, TemporaryError
from isvc_operator._scope import RETRY_CAPACITY, RETRY_SOON, OrderScope

__all__ = ["step"]


class _Refused(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def _token(scope: OrderScope, deps: Deps) -> str | None:
    """The model source's token from the Secret the order names; refused when it is missing."""
    ref = scope.order.spec.model.auth_secret_ref
    if ref is None:
        return None
    secret = deps.cluster.get_secret(scope.namespace, ref.name)
    data = (secret or {}).get("data") or {}
    if secret is None or ref.key not in data:
        missing = "does not exist" if secret is None else f"has no key {ref.key!r}"
        # No timed retry: the Secret's watch passes the order again when that Secret appears or changes.
        raise _Refused(
            Verdict.refuse(
                Reason.AUTH_SECRET_NOT_FOUND,
                (
                    f"Secret {ref.name!r} named in spec.model.authSecretRef {missing} in namespace "
                    f"{scope.namespace!r}; create it, or correct the name."
                ),
            )
        )
    try:
        return base64.b64decode(data[ref.key], validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _Refused(
            Verdict.refuse(
                Reason.AUTH_SECRET_NOT_FOUND,
                (f"Secret {ref.name!r} key {ref.key!r} does not hold a UTF-8 token; put the token there."),
            )
        ) from None


def _resolved(scope: OrderScope, deps: Deps, token: str | None) -> Outcome:
    spec = scope.order.spec.model
    try:
        resolved = deps.models.resolve(spec, scope.namespace, token)
    except TemporaryError as exc:
        catalog = spec.src == ModelSource.AI_MODELS
        reason = Reason.CATALOG_LOOKUP_FAILED if catalog else Reason.MODEL_NOT_READY
        # The sources word their failure as a sentence: what failed, and that it is retried.
        said = str(exc).strip() or "the model source did not answer; asked again shortly."
        return Outcome(Verdict.refuse(reason, said), requeue_after=RETRY_SOON)
    if isinstance(resolved, Refusal):
        verdict = Verdict.refuse(resolved.reason, resolved.message)
        if resolved.reason.retried:  # the model status stands meanwhile
            return Outcome(verdict, requeue_after=RETRY_CAPACITY)
        return Outcome(verdict, {"model": None})
    assert scope.policy is not None
    admitted = deps.models.admit(resolved, scope.policy)
    if isinstance(admitted, Refusal):
        return Outcome(Verdict.refuse(admitted.reason, admitted.message), {"model": None})
    scope.facts, scope.endpoint_type = resolved, admitted
    model = ModelStatus(
        endpoint_type=admitted,
        format=resolved.format,
        parameter_count=resolved.parameter_count,
        quantization=resolved.quantization,
    )
    what = f" as {admitted.value}" if admitted else ""
    return Outcome(
        Verdict.ok(StatusReason.RESOLVED, f"model {spec.ref.name!r} resolved{what}."), {"model": model}
    )


def step(scope: OrderScope, deps: Deps) -> Outcome:
    """Resolve the model through its source with the order's token, then judge it by the class."""
    if scope.policy is None:
        return Outcome(scope.waits_for(ConditionType.CLASS_RESOLVED))
    spec = scope.order.spec.model
    if spec.src == ModelSource.AI_MODELS and not deps.catalog_enabled:
        return Outcome(
            Verdict.refuse(
                Reason.CATALOG_DISABLED,
                (
                    f"the order names catalog {spec.ref.kind or CatalogKind.MODEL} {spec.ref.name!r}, and "
                    "catalog integration is off (catalog.mode: None); name a HuggingFace source, or ask "
                    "for the setting to be changed."
                ),
            ),
            {"model": None},
        )
    try:
        token = _token(scope, deps)
    except _Refused as refused:
        return Outcome(refused.verdict)
    return _resolved(scope, deps, token)
