"""The set and its settled model volume, on a real control plane (issue 12, point 2).

The order's workload is a StatefulSet whose model volume is a claim from its volume claim template, bound by
the real PV controller to a volume of the test bed's stand-in provisioner. An edit to a model that needs a
larger volume is refused for good (the API server never changes a set's claim templates) with the
`SettledRegionTooSmall` event alice reads; the Release notes procedure (delete the StatefulSet) brings the
order back to Ready on a larger volume; a smaller model then fits on it without touching the volume again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_planner_client import PlannerClient
from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import NAMESPACE, token_file
from isvc_testbed.orders import GROUP, VERSION, Orders, condition, hf
from isvc_testbed.volumes import STORAGE_CLASS
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

pytestmark = pytest.mark.e2e

SMALL, LARGE = "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct"


class Bed(Orders):
    def workload(self, name: str) -> Any | None:
        try:
            return k8s.AppsV1Api(self.admin_api).read_namespaced_stateful_set(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def bound_volumes(self, name: str) -> dict[str, str]:
        """The order's model-volume claims that are Bound: name → capacity."""
        claims = (
            k8s.CoreV1Api(self.admin_api)
            .list_namespaced_persistent_volume_claim(self.ns, label_selector=f"{LABEL_ORDER}={name}")
            .items
        )
        return {
            c.metadata.name: c.status.capacity["storage"]
            for c in claims
            if c.status.phase == "Bound" and c.metadata.deletion_timestamp is None
        }

    def edit(self, name: str, repo: str) -> None:
        self.alice.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, "inferenceservices", name, {"spec": {"model": hf(repo)}}
        )


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


def _held_units(module: Any, cluster: Cluster, namespace: str, name: str) -> set[int | None]:
    """The share units the planner's ledger holds for an order (`GET /v1/capacity`, asked as the controller)."""
    token = token_file(cluster.service_account_kubeconfig(NAMESPACE, "controller"))
    with PlannerClient(
        module.planner_url, timeout=10, token_file=token, ca_file=module.planner_ca
    ) as planner:
        return {
            h.units
            for d in planner.capacity().devices
            for h in d.holders
            if h.order is not None and (h.order.namespace, h.order.name) == (namespace, name)
        }


def _volume(workload: Any) -> tuple[str, int]:
    [template] = workload.spec.volume_claim_templates
    return template.metadata.name, int(parse_quantity(template.spec.resources.requests["storage"]))


def test_an_order_outgrowing_its_settled_volume_is_refused_and_the_procedure_brings_it_back(
    bed: Bed, cluster: Cluster
) -> None:
    bed.create_class(
        "settled",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
        },
    )
    name = bed.create("settled", hf(SMALL), "settled")
    bed.wait_ready(name)
    workload = bed.workload(name)
    assert workload is not None and workload.spec.pod_management_policy == "Parallel"
    assert workload.spec.service_name == name
    first_volume, first_size = _volume(workload)
    assert workload.spec.volume_claim_templates[0].spec.storage_class_name == STORAGE_CLASS
    [(claim, capacity)] = bed.bound_volumes(name).items()  # bound by the PV controller, pod placed on it
    assert claim == f"{first_volume}-{name}-0" and int(parse_quantity(capacity)) == first_size

    served = bed.status(name)["resolved"]
    assert served["servedModel"] == SMALL
    bed.edit(name, LARGE)
    status = bed.wait(
        name,
        lambda s: condition(s, "WorkloadReady").get("reason") == "WorkloadError",
        90,
        "WorkloadError: the order outgrew its volume",
    )
    # Issue 31: the old replica serves, so the order is Degraded (not Pending), and status.resolved describes
    # it (the small model where it runs), not the refused plan, which the Planned condition names.
    status = bed.wait(name, lambda s: s.get("phase") == "Degraded", 30, "Degraded while the old set serves")
    assert condition(status, "Ready")["status"] == "True"
    resolved = status["resolved"]
    assert resolved["servedModel"] == SMALL
    assert {k: resolved.get(k) for k in ("acceleratorProductName", "devices", "modelVolume")} == {
        k: served.get(k) for k in ("acceleratorProductName", "devices", "modelVolume")
    }
    assert resolved["replanCount"] == served["replanCount"] + 1  # the recomputation is counted all the same
    # Issue 45, point 3: Planned and the LaunchPlan (InForce) described the refused plan, and the planner held
    # its share beside the one serving. Now they describe the small model, naming the refused plan.
    planned = condition(status, "Planned")
    assert (planned["status"], planned["reason"]) == ("True", "LaunchPlanInForce"), planned
    assert "is not taken" in planned["message"], planned
    plan = bed.plan(name)
    assert plan is not None and SMALL in plan["spec"]["runtime"]["servedName"]
    [in_force] = plan["status"]["conditions"]
    assert (in_force["type"], in_force["status"], in_force["reason"]) == (
        "InForce",
        "True",
        "LaunchPlanInForce",
    )
    share = plan["spec"]["placement"].get("sharePercent")
    held_units = _held_units(bed.module, cluster, bed.ns, name)
    assert held_units == {share}, held_units  # the serving plan's share alone
    message = condition(status, "WorkloadReady")["message"]
    assert "Release notes" in message and f"delete statefulset {name}" in message
    events = wait_for(
        lambda: [e for e in bed.events(name) if e[1] == "SettledRegionTooSmall"],
        30,
        what="a SettledRegionTooSmall event alice reads",
    )
    assert events[0][0] == "Warning" and "smaller than the order now needs" in events[0][2]
    held = bed.workload(name)
    assert held is not None and _volume(held) == (first_volume, first_size)  # never edited
    assert held.status.ready_replicas == 1  # the old replica keeps serving meanwhile
    bed.wait(
        name,
        lambda s: condition(s, "WorkloadReady").get("reason") == "WorkloadError",
        10,
        "still refused: it does not pass on its own",
    )
    assert len([e for e in bed.events(name) if e[1] == "SettledRegionTooSmall"]) == 1  # once, not per pass

    # The Release notes procedure: delete the StatefulSet; the module makes it anew with the larger volume.
    k8s.AppsV1Api(bed.admin_api).delete_namespaced_stateful_set(name, bed.ns)
    bed.wait_ready(name, timeout=180)
    remade = bed.workload(name)
    assert remade is not None and remade.metadata.uid != held.metadata.uid
    second_volume, second_size = _volume(remade)
    assert second_size > first_size and second_volume != first_volume
    wait_for(
        lambda: list(bed.bound_volumes(name)) == [f"{second_volume}-{name}-0"],
        60,
        what="only the larger volume left (the old one went with its set)",
    )

    # A smaller model fits on the volume the set holds: the set rolls, its claim template stays.
    bed.edit(name, SMALL)
    status = bed.wait(
        name,
        lambda s: (
            condition(s, "WorkloadReady").get("status") == "True"
            and (s.get("resolved") or {}).get("servedModel") == SMALL
        ),
        120,
        "Ready on the smaller model",
    )
    kept = bed.workload(name)
    assert kept is not None and kept.metadata.uid == remade.metadata.uid
    assert _volume(kept) == (second_volume, second_size)
    assert kept.metadata.generation > remade.metadata.generation  # the pod template did change
    # Issue 45, point 3: status said the small model's estimate while the set kept the larger volume.
    assert int(parse_quantity(status["resolved"]["modelVolume"])) == second_size, status["resolved"]
