"""The errors of isvc-workload: inputs that cannot be turned into manifests."""

from __future__ import annotations

__all__ = ["IsvcWorkloadError", "PlanNotExpressible", "SettingsIncomplete"]


class IsvcWorkloadError(Exception):
    """Base of every error this package raises.

    IsvcWorkloadError
    ├── PlanNotExpressible   the order or its plan cannot be written as manifests (permanent)
    └── SettingsIncomplete   the module settings lack what the exposure needs (permanent)

    Every builder is pure, so nothing here is temporary: retrying with the same input gives the
    same answer. The operator records the message as WorkloadError and waits for the input to change.
    """

    permanent: bool = True


class PlanNotExpressible(IsvcWorkloadError):
    """The order or its launch plan lacks a field the manifests need, or holds one they cannot carry."""

    def __init__(self, field: str, value: object, why: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field}={value!r}: {why}")


class SettingsIncomplete(IsvcWorkloadError):
    """A module setting the exposure needs is not set."""
