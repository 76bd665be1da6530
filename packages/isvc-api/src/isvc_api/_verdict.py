"""One condition verdict: what a step or a judge says about the condition it owns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from isvc_api._conditions import Condition
from isvc_api._reasons import ConditionType, LaunchPlanConditionType, Reason, StatusReason

__all__ = ["SHARE_RANGE", "Verdict", "share_in_range"]

SHARE_RANGE = range(1, 101)  # a share is 1..100 percent of one device, wherever it is judged


def share_in_range(share: int | None) -> bool:
    """Whether a share percent is one a device can carry (1..100)."""
    return share is not None and share in SHARE_RANGE


class Verdict(BaseModel):
    """Status, a reason (from the closed set when not True) and a message that says what to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str

    @classmethod
    def ok(cls, reason: StatusReason, message: str) -> Verdict:
        """The condition holds."""
        return cls(status="True", reason=reason.value, message=message)

    @classmethod
    def refuse(cls, reason: Reason, message: str) -> Verdict:
        """The condition does not hold, for one reason of the closed set."""
        return cls(status="False", reason=reason.value, message=message)

    @classmethod
    def waiting(cls, on: ConditionType, why: str) -> Verdict:
        """Unknown: an earlier condition is not True, so this one cannot be told yet."""
        return cls(
            status="Unknown", reason=StatusReason.WAITING.value, message=f"waits for {on.value}: {why}"
        )

    @property
    def holds(self) -> bool:
        """Whether the status is True."""
        return self.status == "True"

    def condition(
        self, type_: ConditionType | LaunchPlanConditionType, observed_generation: int | None = None
    ) -> Condition:
        """The verdict as the condition `type_` of an order (or of its LaunchPlan)."""
        return Condition(
            type=type_.value,
            status=self.status,
            reason=self.reason,
            message=self.message,
            observed_generation=observed_generation,
        )
