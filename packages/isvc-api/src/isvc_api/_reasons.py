"""The closed set of reasons an order can give, and the condition types that carry them."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CONDITION_ORDER",
    "NO_ROOM",
    "READINESS",
    "WAITING_FOR_ROOM",
    "ClassReason",
    "ConditionType",
    "LaunchPlanConditionType",
    "Phase",
    "Reason",
    "StatusReason",
]


class ConditionType(StrEnum):
    """Conditions of an order, in the order a reader should check them."""

    CLASS_RESOLVED = "ClassResolved"
    MODEL_RESOLVED = "ModelResolved"
    PLANNED = "Planned"
    WORKLOAD_READY = "WorkloadReady"
    READY = "Ready"
    SCALING_HEALTHY = "ScalingHealthy"  # growth, not readiness: True means healthy


class LaunchPlanConditionType(StrEnum):
    """Conditions of a LaunchPlan."""

    # True: the order runs on this plan (its Planned holds with this plan); False: the order refuses it
    # or could not replace it; Unknown: the order's Planned was not judged. Reason and message are the
    # order's Planned condition's.
    IN_FORCE = "InForce"


class Phase(StrEnum):
    """What an order is; its conditions say why."""

    PENDING = "Pending"
    READY = "Ready"
    DEGRADED = "Degraded"
    FAILED = "Failed"


class Reason(StrEnum):
    """The closed set of refusals. Every member is produced by a real path and explained in the FAQ."""

    # ClassResolved
    CLASS_NOT_FOUND = "ClassNotFound"  # the named class does not exist: user checks the name
    CLASS_NOT_READY = "ClassNotReady"  # the class exists but does not hold: administrator
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"  # admissionPolicy.allowedNamespaces excludes it
    # ModelResolved
    MODEL_NOT_FOUND = "ModelNotFound"  # the reference does not resolve
    MODEL_NOT_READY = "ModelNotReady"  # the catalog model exists but is not ready yet
    INVALID_MODEL_SOURCE = "InvalidModelSource"  # the reference lacks the shape its source needs
    AUTH_SECRET_NOT_FOUND = "AuthSecretNotFound"  # spec.model.authSecretRef names a missing Secret
    ENDPOINT_TYPE_POLICY_CONFLICT = "EndpointTypePolicyConflict"  # class list ∩ model types = ∅
    FORMAT_NOT_ALLOWED = "FormatNotAllowed"  # the model format is not in allowedFormats
    PARAMETER_COUNT_NOT_ALLOWED = "ParameterCountNotAllowed"  # above maxParameterCount
    CATALOG_DISABLED = "CatalogDisabled"  # catalog.mode: None and the order names a catalog model
    CATALOG_LOOKUP_FAILED = "CatalogLookupFailed"  # the catalog request failed: retried
    CATALOG_KIND_NOT_SERVED = "CatalogKindNotServed"  # the catalog does not serve that kind
    # Planned
    NO_CAPACITY = "NoCapacity"  # nothing allowed is free right now: replanned
    NO_ACCELERATOR_WITH_ENOUGH_MEMORY = "NoAcceleratorWithEnoughMemory"  # required vs largest
    NO_COMPATIBLE_PLACEMENT = "NoCompatiblePlacement"  # no room now, or memory profile incomplete
    PLANNER_REQUEST_FAILED = "PlannerRequestFailed"  # the planner did not answer: retried
    PLANNING_PREEMPTION_FAILED = "PlanningPreemptionFailed"  # freeing capacity did not work
    LAUNCH_PLAN_NOT_A_PLACEMENT = "LaunchPlanNotAPlacement"  # a stored plan is not a placement
    PRIORITY_CLASS_NOT_FOUND = "PriorityClassNotFound"  # the class names a missing PriorityClass
    QUANTIZATION_MISMATCH = "QuantizationMismatch"  # recipes exist, for another quantization
    NO_COMPATIBLE_RUNTIME_AVAILABLE = "NoCompatibleRuntimeAvailable"  # no recipe fits
    LAUNCH_PLAN_IN_FORCE = "LaunchPlanInForce"  # Ready order; recomputing its plan failed
    PLACEMENT_UNDECIDABLE = "PlacementUndecidable"  # the selector cannot be judged: never passes
    # WorkloadReady
    RESOURCE_CLAIM_EXHAUSTED = "ResourceClaimExhausted"  # the search happened and failed
    RESOURCE_CLAIM_PENDING = "ResourceClaimPending"  # a stage: the claim awaits allocation
    WORKLOAD_NOT_READY = "WorkloadNotReady"  # replicas still coming up: passes on its own
    WORKLOAD_ERROR = "WorkloadError"  # objects could not be applied or were refused
    WORKLOAD_STARTUP_FAILED = "WorkloadStartupFailed"  # every pod fails to start its container
    # Ready
    HEALTH_CHECK_FAILED = "HealthCheckFailed"  # never Ready yet, the probe has not succeeded
    SERVICE_UNHEALTHY = "ServiceUnhealthy"  # was Ready, the API stopped answering for long
    # ScalingHealthy
    SCALE_UP_BLOCKED = "ScaleUpBlocked"  # serving, but growth is blocked (phase Degraded)

    @property
    def retried(self) -> bool:
        """Whether the condition passes on its own (a timed requeue, or a watch of the object it waits for)
        rather than needing a fix of the order or the class."""
        return self in _PASSES_ON_ITS_OWN


_PASSES_ON_ITS_OWN = frozenset(
    {
        Reason.MODEL_NOT_READY,
        Reason.AUTH_SECRET_NOT_FOUND,
        Reason.CATALOG_LOOKUP_FAILED,
        Reason.NO_CAPACITY,
        Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
        Reason.NO_COMPATIBLE_PLACEMENT,
        Reason.PLANNER_REQUEST_FAILED,
        Reason.PLANNING_PREEMPTION_FAILED,
        Reason.RESOURCE_CLAIM_EXHAUSTED,
        Reason.RESOURCE_CLAIM_PENDING,
        Reason.WORKLOAD_NOT_READY,
        Reason.WORKLOAD_STARTUP_FAILED,
        Reason.HEALTH_CHECK_FAILED,
        Reason.SERVICE_UNHEALTHY,
        Reason.SCALE_UP_BLOCKED,
        Reason.LAUNCH_PLAN_IN_FORCE,
    }
)


# The canonical order of an order's conditions: status writes them so, and a reader checks the first five in
# turn (the first that is not True is where to look); ScalingHealthy is growth, not readiness.
CONDITION_ORDER = tuple(ConditionType)
READINESS = CONDITION_ORDER[:-1]

# The planner's answers that there is no room for the order now: it waits for room and is passed again when
# the planner's ledger may have made some (or the scheduler's refusal of its claim, kept until then).
NO_ROOM = frozenset(
    {
        Reason.NO_CAPACITY,
        Reason.NO_COMPATIBLE_PLACEMENT,
        Reason.PLANNING_PREEMPTION_FAILED,
        Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY,
        Reason.RESOURCE_CLAIM_EXHAUSTED,
    }
)
# Orders waiting for room as an administrator sees them (`kubectl isvc capacity`): no room from the planner,
# a claim the scheduler has not allocated yet, or room to grow blocked.
WAITING_FOR_ROOM = NO_ROOM | {Reason.RESOURCE_CLAIM_PENDING, Reason.SCALE_UP_BLOCKED}


class StatusReason(StrEnum):
    """Reasons that are not refusals: a condition that holds, or waits for an earlier one."""

    RESOLVED = "Resolved"  # ClassResolved / ModelResolved hold
    PLANNED = "Planned"  # Planned holds
    WORKLOAD_AVAILABLE = "WorkloadAvailable"  # WorkloadReady holds
    SERVING = "Serving"  # Ready holds
    SCALING_OK = "ScalingOK"  # ScalingHealthy holds
    WAITING = "WaitingForPreviousStep"  # Unknown: an earlier condition is not True yet
    NOT_JUDGED = "NotJudged"  # Unknown: the controller failed judging it this pass; its log says why


class ClassReason(StrEnum):
    """Why a class is or is not Ready: the administrator's view."""

    READY = "ClassReady"  # every part of the class holds
    NO_ENDPOINT_TYPES = "NoEndpointTypes"  # modelPolicy.allowedEndpointTypes is empty
    INVALID_SELECTOR = "InvalidSelector"  # the accelerator selector does not compile
    PRIORITY_CLASS_MISSING = "PriorityClassMissing"  # priorityClassName names no PriorityClass
    INVALID_POLICY = "InvalidPolicy"  # another part of the class does not hold
