"""Partitions the driver publishes without a uuid (DynamicMIG): a plan holds one placement of its profile on
its parent, and the one its claim is allocated on is that one (issue 41)."""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER
from isvc_ledger import Books

DRIVER = "gpu.nvidia.com"
PARENT = "GPU-a1a1a1a1-0000-0000-0000-000000000000"


def _placement(start: int) -> dict[str, Any]:
    """A 1g.5gb placement of an A100-SXM4-40GB as the driver publishes it under DynamicMIG (its shapes:
    dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/partitions.go, mig.go): no uuid, one memory slice."""
    return {
        "name": f"gpu-0-mig-1g5gb-19-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "parentUUID": {"string": PARENT},
            "profile": {"string": "1g.5gb"},
            "productName": {"string": "NVIDIA A100-SXM4-40GB"},
        },
        "capacity": {"memory": {"value": "4864Mi"}, "multiprocessors": {"value": "14"}},
        "consumesCounters": [
            {
                "counterSet": "gpu-0-counter-set",
                "counters": {"memory": {"value": "4864Mi"}, f"memory-slice-{start}": {"value": "1"}},
            }
        ],
    }


def _slices() -> list[dict[str, Any]]:
    counters = {"memory": {"value": "40192Mi"}} | {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
    pool = {"name": "n1", "generation": 1, "resourceSliceCount": 2}
    return [
        {
            "metadata": {"name": "00000-gpu.nvidia.com-n1"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n1",
                "pool": pool,
                "sharedCounters": [{"name": "gpu-0-counter-set", "counters": counters}],
            },
        },
        {
            "metadata": {"name": "00001-gpu.nvidia.com-n1"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n1",
                "pool": pool,
                "devices": [_placement(s) for s in range(7)],
            },
        },
    ]


CLASS = {
    "metadata": {"name": "mig.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].type == 'mig'"}}]},
}


def _plan(device: str) -> dict[str, Any]:
    placement = {
        "deviceClassName": "mig.nvidia.com",
        "driver": DRIVER,
        "pool": "n1",
        "devices": [device],
        "placementMode": "WholeDevice",
        "sharingMode": "Partition",
    }
    return {"metadata": {"namespace": "ns", "name": "o"}, "spec": {"placement": placement}}


def _claim(device: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}
    return {
        "metadata": {"namespace": "ns", "name": "o-0-gpu", "uid": "u0", "labels": {LABEL_ORDER: "o"}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def key(start: int) -> tuple[str, str, str]:
    return (DRIVER, "n1", f"gpu-0-mig-1g5gb-19-{start}")


def test_a_plan_on_a_partition_without_uuid_is_answered_by_its_claim_on_another_placement() -> None:
    books = Books.from_objects([CLASS], _slices(), [], plans=[_plan("gpu-0-mig-1g5gb-19-0")])
    ledger = books.ledger
    assert books.fleet.devices[key(0)].pin == {"parentUUID": PARENT, "profile": "1g.5gb"}
    assert ledger.room(key(0)) == 0 and ledger.room(key(3)) == 100  # the plan holds the placement it names
    books.upsert_claim(_claim("gpu-0-mig-1g5gb-19-3"))  # the scheduler took another placement of it
    assert ledger.room(key(3)) == 0 and ledger.room(key(0)) == 100  # the plan's is that one: 0 is free again
    assert ledger.holds(("ns", "o")) == {key(3)}
    books.delete_claim(_claim("gpu-0-mig-1g5gb-19-3"))  # the replica went: it takes any such placement again
    assert ledger.room(key(0)) == 100 and ledger.room(key(3)) == 100


def test_a_plan_whose_every_claim_runs_on_another_device_of_its_shape_holds_that_one_only_issue_40() -> None:
    """A card planned was taken first: the claim's second choice put the order on another of its shape. The
    plan no longer holds the planned card, also once a replica waits again (it takes any of the shape)."""
    books = Books.from_objects([CLASS], _slices(), [], plans=[_plan("gpu-0-mig-1g5gb-19-0")])
    ledger = books.ledger
    books.upsert_claim(_claim("gpu-0-mig-1g5gb-19-3"))
    assert ledger.holds(("ns", "o")) == {key(3)} and ledger.room(key(0)) == 100
    waiting = _claim("gpu-0-mig-1g5gb-19-3") | {
        "metadata": {"namespace": "ns", "name": "o-1-gpu", "uid": "u1", "labels": {LABEL_ORDER: "o"}}
    }
    waiting["status"] = {}
    books.upsert_claim(waiting)  # a further replica's claim, not allocated yet
    assert ledger.holds(("ns", "o")) == {key(3)} and ledger.room(key(0)) == 100
