"""isvc test support: the NVIDIA DRA driver's shapes, fleet builders for DRA objects, a NetworkPolicy judge;
the stand-in Hub and the benchmark are submodules."""

from isvc_testing._driver import (
    DRIVER,
    MIG_PROFILES,
    RELEASES,
    Gpu,
    Installation,
    MigInstance,
    MigProfile,
    driver_device_classes,
    driver_devices,
    driver_slices,
    quantity_binary,
    quantity_decimal,
)
from isvc_testing._fleet import (
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
    "MIG_PROFILES",
    "RELEASES",
    "Endpoint",
    "Gpu",
    "Installation",
    "MigInstance",
    "MigProfile",
    "admits",
    "driver_device_classes",
    "driver_devices",
    "driver_slices",
    "fleet_claim",
    "fleet_consumable",
    "fleet_device_classes",
    "fleet_gpu",
    "fleet_mig",
    "fleet_order",
    "fleet_priority_class",
    "fleet_service_class",
    "fleet_slice",
    "quantity_binary",
    "quantity_decimal",
]
