"""isvc test support: fleet builders for DRA objects, a NetworkPolicy judge; the stand-in Hub and the benchmark
are submodules."""

from isvc_testing._fleet import (
    DRIVER,
    fleet_claim,
    fleet_consumable,
    fleet_device_classes,
    fleet_gpu,
    fleet_mig,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)
from isvc_testing._netpol import Endpoint, admits

__all__ = [
    "DRIVER",
    "Endpoint",
    "admits",
    "fleet_claim",
    "fleet_consumable",
    "fleet_device_classes",
    "fleet_gpu",
    "fleet_mig",
    "fleet_order",
    "fleet_priority_class",
    "fleet_service_class",
    "fleet_slice",
]
