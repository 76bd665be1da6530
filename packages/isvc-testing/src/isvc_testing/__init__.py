"""isvc test support: fleet builders for DRA objects; the stand-in Hub and the benchmark are submodules."""

from isvc_testing._fleet import (
    DRIVER,
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_mig,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)

__all__ = [
    "DRIVER",
    "fleet_claim",
    "fleet_device_classes",
    "fleet_gpu",
    "fleet_mig",
    "fleet_order",
    "fleet_priority_class",
    "fleet_service_class",
    "fleet_slice",
]
