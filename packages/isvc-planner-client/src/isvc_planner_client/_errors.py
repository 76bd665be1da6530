"""Errors of the planner package.

PlannerError                      base of everything raised here
├── PlannerUnavailableError       temporary: the service did not answer, timed out or failed (5xx);
│                                 retry with a delay (the operator says PlannerRequestFailed)
└── PlannerProtocolError          permanent: the service answered something that is not the contract
"""

from __future__ import annotations

__all__ = ["PlannerError", "PlannerProtocolError", "PlannerUnavailableError"]


class PlannerError(Exception):
    """Base class of every error the planner package raises."""


class PlannerUnavailableError(PlannerError):
    """Temporary: the planner could not be reached or failed; retry with a delay."""

    def __init__(self, message: str, *, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PlannerProtocolError(PlannerError):
    """Permanent: the planner's answer (a 4xx or a malformed body) does not fit the contract."""
