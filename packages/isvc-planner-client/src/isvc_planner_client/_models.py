"""The planner's wire contract: what the operator sends and what it gets back."""

from __future__ import annotations

from datetime import datetime

from isvc_api import (
    AcceleratorPolicy,
    Estimates,
    ModelFacts,
    Placement,
    Refusal,
    RuntimeRequirements,
    ServingTarget,
    Wire,
)
from pydantic import Field

__all__ = [
    "CapacityView",
    "DeviceHolder",
    "DeviceRoom",
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
    since: datetime | None = Field(
        default=None,
        description=(
            "Since when the scheduler has refused it (the pod's PodScheduled lastTransitionTime): room the "
            "ledger saw appear after that, a moment ago, is room the scheduler may not have tried yet."
        ),
    )


class PlanRequest(Wire):
    """Plan one order: its model facts, the class's accelerator policy and what it holds now."""

    order: OrderRef = Field(description="The order.")
    facts: ModelFacts = Field(description="Facts about the model.")
    accelerator_policy: AcceleratorPolicy | None = Field(default=None, description="From the class.")
    priority_class_name: str | None = Field(default=None, description="From the class.")
    requirements: RuntimeRequirements | None = Field(default=None, description="From the recipes.")
    serving: ServingTarget | None = Field(
        default=None,
        description=(
            "The load the order must carry: its class's serving target, each field it leaves out filled with its "
            "endpoint type's default (isvc_api.serving_load). Absent: the chat default."
        ),
    )
    holding: Placement | None = Field(default=None, description="The placement the order holds now.")
    refused: SchedulerRefusal | None = Field(
        default=None, description="Set when the scheduler refused to allocate the claim of `holding`."
    )
    dry_run: bool = Field(
        default=False, description="Answer what the order would get, reserving nothing (an estimate)."
    )
    waiting_since: datetime | None = Field(
        default=None,
        description=(
            "Since when the order has waited for room (the waiting room's count): orders of one priority that "
            "waited long are placed oldest first, before orders packed together for the most placed."
        ),
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


class DeviceHolder(Wire):
    """One holding of a device in the ledger: a claim's allocation, a LaunchPlan, or a reservation."""

    order: OrderRef | None = Field(default=None, description="The order it is for; null: none of ours.")
    kind: str = Field(description="claim, plan or reservation.")
    units: int | None = Field(default=None, description="Share units held (of 100); null: the whole device.")
    priority: int = Field(description="The priority it stands with (its order's class's PriorityClass).")


class DeviceRoom(Wire):
    """One published device as the ledger counts it: what is free, what is held and by whom."""

    driver: str = Field(description="DRA driver publishing the device.")
    pool: str = Field(description="Resource pool of the device.")
    device: str = Field(description="Name of the device in its ResourceSlice.")
    node: str | None = Field(default=None, description="Node of a node-local device.")
    card: str = Field(description="The physical card: parentUUID of a partition, else uuid, else the name.")
    product: str | None = Field(default=None, description="productName attribute.")
    memory_bytes: int | None = Field(default=None, description="Published memory; null: none published.")
    shareable: bool = Field(description="Claims share it by consumable capacity (shares).")
    device_classes: list[str] = Field(description="DeviceClasses whose selectors take it.")
    free_units: int = Field(description="Units (of 100) a new claim could take now.")
    held_units: int = Field(description="100 − free_units: held, or blocked by its partitions' counters.")
    blocked: bool = Field(default=False, description="Nobody holds it, its pool's counters leave it no room.")
    out_of_service: str | None = Field(default=None, description="Why its node takes no new pods.")
    holders: list[DeviceHolder] = Field(description="Who holds it, claims first.")


class CapacityView(Wire):
    """Every published device of the ledger, as `GET /v1/capacity` answers and `kubectl isvc capacity` shows."""

    devices: list[DeviceRoom] = Field(description="Sorted by node, pool, device, driver.")


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
    outranked: list[str] = Field(
        default_factory=list,
        description=(
            "Devices of the plan where orders of higher priority than this one hold the room it needs there, "
            "each with who. With `lost`: the loss is preemption (without, the devices went to holders of no "
            "order or of its own priority that came first: claims the scheduler allocated before this "
            "order's). On devices it stands on: a further replica of the order (growth) finds no room there "
            "because of them, where it would without them."
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
