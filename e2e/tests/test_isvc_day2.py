"""Day-2 operations on a real control plane (issue 27): a namespace's quota, a class edit that recreates pods,
a drain, where the module's own pods run, and a namespace deleted with its orders.

Each ends in an honest reason and a served order, never a stuck one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.orders import Orders, condition, hf
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

QWEN = "Qwen/Qwen2.5-7B-Instruct"
DEVICE_QUOTA = {
    f"{device_class}.deviceclass.resource.k8s.io/devices": "0"
    for device_class in ("gpu.nvidia.com", "mig.nvidia.com")
}


class Bed(Orders):
    """Orders (as alice) in a namespace of the test's own, and what the administrator made, undone after it."""

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.admin_api)

    def pods(self, name: str) -> list[Any]:
        items: list[Any] = self.core.list_namespaced_pod(
            self.ns, label_selector=f"{LABEL_ORDER}={name}"
        ).items
        return [p for p in items if p.metadata.deletion_timestamp is None]

    def quota(self, name: str, hard: dict[str, str]) -> None:
        """Create ResourceQuota `name` or change its limits, and wait until the quota controller counted them."""
        body: Any = {"metadata": {"name": name}, "spec": {"hard": hard}}
        try:
            self.core.create_namespaced_resource_quota(self.ns, body)
            self.cleanup.append(lambda: self.core.delete_namespaced_resource_quota(name, self.ns))
        except k8s.ApiException as e:
            if e.status != 409:
                raise
            self.core.patch_namespaced_resource_quota(name, self.ns, body)
        wait_for(
            lambda: (self.core.read_namespaced_resource_quota(name, self.ns).status.hard or {}) == hard,
            30,
            what=f"quota {name} counted",
        )


@pytest.fixture
def quota_bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, user_namespace(admin_api, "day2-quota")) as b:
        yield b


def test_a_quota_leaving_no_device_is_workload_error_naming_it_and_its_raise_is_acted_on_at_once(
    quota_bed: Bed,
) -> None:
    """Point 3: both orders read WorkloadNotReady "passes on its own" and `why` said "nobody's: wait"; the quota
    showed only in pod events, and a raise lifted it after the cluster's own retry delay (about 4 minutes)."""
    bed = quota_bed
    bed.quota("gpus", DEVICE_QUOTA)
    names = [bed.create(f"quota-{i}", hf(QWEN), "default-llm") for i in range(2)]
    for name in names:
        status = bed.wait_reason(name, "WorkloadReady", "WorkloadError", timeout=45)
        message = condition(status, "WorkloadReady")["message"]
        for words in (
            f"ResourceQuota gpus of namespace {bed.ns} refuses the device claim",
            "whoever administers",
        ):
            assert words in message, message
        assert "exceeded quota: gpus" in message  # the cluster's own words
    time.sleep(4)
    assert condition(bed.status(names[0]), "WorkloadReady")["reason"] == "WorkloadError"  # not on its own
    bed.quota("gpus", {key: "2" for key in DEVICE_QUOTA})
    raised = time.monotonic()
    for name in names:
        bed.wait_ready(name, timeout=30)
    print(f"both orders Ready {time.monotonic() - raised:.1f} s after the quota was raised")
