"""The planner's wire contract: what the operator sends and what it gets back."""

from __future__ import annotations

from isvc_api import (
    AcceleratorPolicy,
    Estimates,
    ModelFacts,
    Placement,
    Refusal,
    RuntimeRequirements,
    Wire,
)
from pydantic import Field

__all__ = [
    "HoldRequest",
    "HoldVerdict",
    "OrderRef",
    "PlanManyRequest",
    "PlanManyResponse",
    "PlanRequest",
    "PlanResponse",
    "Released",
    "Reservation",
    "Reservations",
    "ReservedDevice",
    "RoomChange",
    "SchedulerRefusal",
    "Victim",
]


class OrderRef(Wire):
    """The order a plan is for."""

    namespace: str = Field(description="Namespace of the order.")
    name: str = Field(description="Name of the order.")
    uid: str | None = Field(default=None, description="uid of the order.")


class Victim(Wire):
    """An order of lower priority whose holdings must be released for the plan to hold."""

    namespace: str = Field(description="Namespace of the order to release.")
    name: str = Field(description="Name of the order to release.")


class SchedulerRefusal(Wire):
    """kube-scheduler could not allocate the claim of the order's plan: the pod's PodScheduled=False,
    reason Unschedulable, message with "cannot allocate all claims". The planner avoids those devices for
    this order (and distrusts them for a while for everyone) and plans it elsewhere; ResourceClaimExhausted,
    with the scheduler's words, once no other device of any allowed class has room."""

    placement: Placement = Field(description="The placement the refused claim was pinned to (the plan).")
    message: str = Field(description="The scheduler's words: the pod's PodScheduled message.")


class PlanRequest(Wire):
    """Plan one order: its model facts, the class's accelerator policy and what it holds now."""

    order: OrderRef = Field(description="The order.")
    facts: ModelFacts = Field(description="Facts about the model.")
    accelerator_policy: AcceleratorPolicy | None = Field(default=None, description="From the class.")
    priority_class_name: str | None = Field(default=None, description="From the class.")
    requirements: RuntimeRequirements | None = Field(default=None, description="From the recipes.")
    holding: Placement | None = Field(default=None, description="The placement the order holds now.")
    refused: SchedulerRefusal | None = Field(
        default=None, description="Set when the scheduler refused to allocate the claim of `holding`."
    )
    dry_run: bool = Field(
        default=False, description="Answer what the order would get, reserving nothing (an estimate)."
    )


class PlanResponse(Wire):
    """A placement with its estimates, or a refusal; plus orders to release for it (preemption)."""

    placement: Placement | None = Field(default=None, description="Where the order goes.")
    estimates: Estimates | None = Field(default=None, description="What it needs.")
    refusal: Refusal | None = Field(default=None, description="Why it cannot be placed.")
    preempt: list[Victim] = Field(default_factory=list, description="Orders to release first.")


class Released(Wire):
    """Whether a reservation was dropped (false: there was none)."""

    released: bool = Field(description="A reservation was held and is gone.")


class PlanManyRequest(Wire):
    """Orders that wait together, to be placed jointly: the most of them that fit."""

    orders: list[PlanRequest] = Field(description="The orders; each answer is at its order's index.")


class PlanManyResponse(Wire):
    """One answer per order, in the order of the request."""

    answers: list[PlanResponse] = Field(description="The answers, index by index.")


class ReservedDevice(Wire):
    """Units of one published device a reservation holds."""

    driver: str = Field(description="DRA driver publishing the device.")
    pool: str = Field(description="Resource pool of the device (a node's, for node-local devices).")
    device: str = Field(description="Name of the device in its ResourceSlice.")
    units: int | None = Field(default=None, description="Share units held (of 100); null: the whole device.")


class Reservation(Wire):
    """Devices held for an order's plan that its ResourceClaim does not show yet."""

    order: OrderRef = Field(description="The order the plan was made for (no uid: the planner keeps none).")
    devices: list[ReservedDevice] = Field(description="What the reservation holds.")
    age_seconds: float = Field(description="Seconds since the plan reserved them (a new plan renews it).")
    expires_in_seconds: float = Field(description="Seconds until the reservation lapses by itself.")


class Reservations(Wire):
    """Every reservation the planner holds now, by order namespace and name."""

    reservations: list[Reservation] = Field(description="One per order holding a reservation.")


class HoldRequest(Wire):
    """The plan an order holds, to be judged against the ledger."""

    order: OrderRef = Field(description="The order whose plan it is.")
    placement: Placement = Field(description="The placement its LaunchPlan stores.")


class HoldVerdict(Wire):
    """Whether the stored placement is one, and whether the order still stands on the devices it holds."""

    refusal: Refusal | None = Field(
        default=None, description="LaunchPlanNotAPlacement when the stored placement is not a placement."
    )
    lost: list[str] = Field(
        default_factory=list,
        description=(
            "Devices the order no longer stands on, each with why: holders ranked above it (no order, higher "
            "priority, or earlier) leave no room beside them. Empty: it stands on every device it holds."
        ),
    )
    gone: list[str] = Field(
        default_factory=list,
        description=(
            "Devices of the plan out of service for the order, each with why: its node deleted, cordoned, not "
            "ready or tainted with no pod of the order running there, or the device withdrawn. An inventory "
            "change: the order is to be planned anew (or to wait, saying so), never called a defect."
        ),
    )


class RoomChange(Wire):
    """The ledger's count of changes that may have made room, as a token to wait on, and the orders stranded
    on hardware out of service."""

    epoch: str = Field(
        description=(
            "Changes when room may have appeared (a holding released or smaller, a pool published, a class, "
            "node or priority changed), or when the planner restarted."
        )
    )
    stranded: list[OrderRef] = Field(
        default_factory=list,
        description=(
            "Orders whose plan places them on a device out of service (node deleted, closed or not ready, "
            "device withdrawn) where no pod of theirs runs: to be judged again now."
        ),
    )
