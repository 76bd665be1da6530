"""The errors of isvc-health."""

from __future__ import annotations

__all__ = ["HealthError", "TemplateInvalid"]


class HealthError(Exception):
    """Base of every error this package raises.

    HealthError
    └── TemplateInvalid   a TemplateResolver template names an unknown field (permanent: a setting)

    A failed probe is not an error: the Prober returns it as a ProbeResult, and judge_health
    decides what it means. Nothing here is temporary.
    """

    permanent: bool = True


class TemplateInvalid(HealthError):
    """The endpoint template cannot be filled from namespace, name, service and port."""
