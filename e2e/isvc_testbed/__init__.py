"""Local test bed: a real control plane, KWOK nodes, a fake GPU DRA driver, a stand-in inference server."""

from isvc_testbed._bins import bin_dir, require_bins
from isvc_testbed._errors import (
    BinariesMissing,
    ComponentDied,
    FleetError,
    ImagesMissing,
    StartTimeout,
    TestbedError,
)

__all__ = [
    "BinariesMissing",
    "ComponentDied",
    "FleetError",
    "ImagesMissing",
    "StartTimeout",
    "TestbedError",
    "bin_dir",
    "require_bins",
]
