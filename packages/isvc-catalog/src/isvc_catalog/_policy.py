"""The model policy of a class: which API contract an order gets, which models it may serve."""

from __future__ import annotations

from isvc_api import EndpointType, InferenceServiceClassSpec, ModelFacts, Reason, Refusal

__all__ = ["admit"]


def _count(n: int) -> str:
    for scale, unit in ((10**12, "T"), (10**9, "B"), (10**6, "M")):
        if n >= scale:
            return f"{n:,} ({n / scale:.2f}{unit})"
    return f"{n:,}"


def _names(items: list[EndpointType] | list[str]) -> str:
    return ", ".join(str(i) for i in items) if items else "none"


def admit(facts: ModelFacts, class_spec: InferenceServiceClassSpec | None) -> EndpointType | Refusal | None:
    """The endpoint type the order gets, None for a class-less order, or the policy's refusal.

    Effective set = the class's allowedEndpointTypes narrowed by the endpoint types the source says
    the model serves (None: no facts, the whole list stands); the first element in the class's order
    wins. Then allowedFormats and maxParameterCount. A class-less order has none of these checks.
    """
    if class_spec is None:
        return None
    policy = class_spec.model_policy
    allowed = list(policy.allowed_endpoint_types)
    served = facts.endpoint_types
    effective = [t for t in allowed if served is None or t in served]
    if not effective:
        return Refusal(
            reason=Reason.ENDPOINT_TYPE_POLICY_CONFLICT,
            message=(
                f"The class allows the API contracts {_names(allowed)}, and {facts.name} serves "
                f"{_names(served or [])}: they do not intersect, and nothing in the order can fix "
                "that. Ask your administrator for a different class."
            ),
        )
    formats = policy.allowed_formats
    if formats is not None and facts.format not in formats:
        found = (
            f"{facts.name} is {facts.format.value}"
            if facts.format is not None
            else f"the source did not tell the format of {facts.name}"
        )
        return Refusal(
            reason=Reason.FORMAT_NOT_ALLOWED,
            message=(
                f"The class admits models in {_names([f.value for f in formats])} only, and {found}. "
                "Name a model in an admitted format, or ask your administrator for a different class."
            ),
        )
    limit = policy.max_parameter_count
    if limit is not None:
        count = facts.parameter_count
        if count is None:
            return Refusal(
                reason=Reason.PARAMETER_COUNT_NOT_ALLOWED,
                message=(
                    f"The class admits at most {_count(limit)} parameters, and the source did not tell "
                    f"the parameter count of {facts.name}, so the limit cannot be checked. Name a model "
                    "whose source publishes it, or ask your administrator for a different class."
                ),
            )
        if count > limit:
            return Refusal(
                reason=Reason.PARAMETER_COUNT_NOT_ALLOWED,
                message=(
                    f"{facts.name} has {_count(count)} parameters, and the class admits at most "
                    f"{_count(limit)}. Name a smaller model, or ask your administrator for a "
                    "different class."
                ),
            )
    return effective[0]
