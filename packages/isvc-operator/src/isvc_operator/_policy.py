"""The policy an order is judged by: its class, or the platform's built-in defaults when it names none."""

from __future__ import annotations

import attrs
from isvc_api import (
    MIN_REPLICAS_ZERO,
    TLS,
    AcceleratorPolicy,
    Authentication,
    ClassReason,
    Condition,
    Constraints,
    EndpointType,
    Exposure,
    ExposureType,
    InferenceServiceClass,
    InferenceServiceClassSpec,
    UpdateStrategy,
    find_condition,
    share_in_range,
)

__all__ = ["BUILTIN_EXPOSURE", "EffectivePolicy", "judge_class"]

# The values the bundled class default-llm had on the day class-less orders shipped. Hard-wired on
# purpose: they must keep working when an administrator deletes or edits that object.
BUILTIN_EXPOSURE = Exposure(type=ExposureType.EXTERNAL, authentication=Authentication.TOKEN, tls=TLS())


@attrs.frozen
class EffectivePolicy:
    """What applies to one order, whether it came from a class or from the defaults."""

    class_name: str | None
    spec: InferenceServiceClassSpec | None
    exposure: Exposure
    constraints: Constraints
    accelerator: AcceleratorPolicy | None
    priority_class_name: str | None
    update_strategy: UpdateStrategy

    @property
    def token_required(self) -> bool:
        """Whether the endpoint wants a bearer token."""
        return self.exposure.authentication == Authentication.TOKEN

    @property
    def endpoint_types(self) -> list[EndpointType] | None:
        """The class's ordered list of contracts; None for class-less orders (no check)."""
        return None if self.spec is None else list(self.spec.model_policy.allowed_endpoint_types)

    @classmethod
    def builtin(cls) -> EffectivePolicy:
        """The policy of an order that names no class."""
        return cls(
            class_name=None,
            spec=None,
            exposure=BUILTIN_EXPOSURE,
            constraints=Constraints.of_class(None),
            accelerator=None,
            priority_class_name=None,
            update_strategy=UpdateStrategy(),
        )

    @classmethod
    def of(cls, klass: InferenceServiceClass) -> EffectivePolicy:
        """The policy a class sets; blocks it leaves out behave as absent."""
        spec = klass.spec
        return cls(
            class_name=klass.metadata.name,
            spec=spec,
            exposure=spec.exposure or Exposure(),
            constraints=Constraints.of_class(spec),
            accelerator=spec.accelerator_policy,
            priority_class_name=spec.priority_class_name,
            update_strategy=spec.update_strategy or UpdateStrategy(),
        )

    def admits(self, namespace: str) -> bool:
        """Whether the admission policy lets orders of this namespace in."""
        if self.spec is None or self.spec.admission_policy is None:
            return True
        allowed = self.spec.admission_policy.allowed_namespaces
        return allowed is None or namespace in allowed


def judge_class(
    spec: InferenceServiceClassSpec,
    priority_class_exists: bool | None,
    selector_error: str | None,
) -> tuple[ClassReason, str]:
    """Whether a class holds, and the administrator's message when it does not."""
    if not spec.model_policy.allowed_endpoint_types:
        return ClassReason.NO_ENDPOINT_TYPES, (
            "modelPolicy.allowedEndpointTypes is empty: no order can be given an API contract; "
            "list at least one of Chat, Embeddings, Rerank."
        )
    if selector_error is not None:
        return ClassReason.INVALID_SELECTOR, (
            f"acceleratorPolicy.selector does not compile: {selector_error}; fix the CEL expression."
        )
    shares = (spec.accelerator_policy.allowed_share_percents or []) if spec.accelerator_policy else []
    bad = [s for s in shares if not share_in_range(s)]
    if bad:
        return ClassReason.INVALID_POLICY, (
            f"acceleratorPolicy.allowedSharePercents holds {bad}, outside 1..100; remove them."
        )
    if spec.scaling_policy is not None and spec.scaling_policy.min_replicas < 1:  # stored before the CEL rule
        return ClassReason.INVALID_POLICY, f"scalingPolicy.{MIN_REPLICAS_ZERO}"
    if spec.priority_class_name and priority_class_exists is False:
        return ClassReason.PRIORITY_CLASS_MISSING, (
            f"priorityClassName {spec.priority_class_name!r} names no PriorityClass in the cluster; "
            "create it or change the class."
        )
    return ClassReason.READY, "the class holds."


def class_ready(conditions: list[Condition]) -> tuple[bool, str | None, str]:
    """Whether a class's own Ready condition is True, with its reason and message."""
    ready = find_condition(conditions, "Ready")
    if ready is None:
        return False, None, "the class has not been judged yet"
    return ready.status == "True", ready.reason, ready.message
