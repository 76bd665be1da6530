"""One ledger of who holds what (issues 26 and 29), on a real control plane.

- The hot loop: two low-priority orders whose claims a quota blocks keep their plans on one H100 (37 % each)
  while the planner restarts (it forgot what it reserved for them, as a lapsed reservation did); an order of
  higher priority of another namespace takes 37 % of the same card. The one it displaces is taken down once
  and waits with its reason; nothing is recreated, no reason flips (watched for 10 s after it settles).
  Before, the controller judged displacement from the LaunchPlans and the planner from claims and
  reservations: the displaced order was planned back onto the card and displaced again, over and over.
- Phantom claims: alice, with Kubernetes' `edit` role in her namespace, creates claims carrying her order's
  label, pinned by uuid to its card (read from her LaunchPlan), with no pod. The planner counted such
  claims as held for ever; another tenant's order on that card is now placed and Ready.
- First come: a claim of another party, allocated by the scheduler between the order's plan and its pod
  being scheduled (its pod's priority puts it first in the scheduler's queue), takes the card the class
  allows; the ledger could not count it when it planned (a claim nobody allocated holds nothing). The
  scheduler refuses the order's claim, the planner hears it and finds no other room: the order says
  ResourceClaimExhausted naming the card and quoting the scheduler, no disagreement logged, nothing taken
  down; the other party's pod goes and the order is Ready on its card.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_api import LABEL_ORDER
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Device, Fleet
from isvc_testbed.helpers import ignore_404, user_namespace, wait_for
from isvc_testbed.module import ModuleProcesses, conditions_line
from isvc_testbed.orders import Orders, assert_refused, condition, hf
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"
QWEN = "Qwen/Qwen2.5-7B-Instruct"


def _one_card(card: Device) -> str:
    return f"device.attributes['{GPU}'].uuid == '{card.uuid}'"


def _class(
    orders: Orders, name: str, selector: str, shares: list[int], priority_class: str | None = None
) -> str:
    spec: dict[str, Any] = {
        "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
        "exposure": {"type": "ClusterLocal", "authentication": "Token"},
        "acceleratorPolicy": {
            "deviceClassNames": [GPU],
            "selector": selector,
            "allowedSharePercents": shares,
        },
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    orders.create_class(name, spec)
    return name


def _priority_class(orders: Orders, name: str, value: int) -> str:
    scheduling = k8s.SchedulingV1Api(orders.admin_api)
    scheduling.create_priority_class(k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value))
    orders.cleanup.append(lambda: scheduling.delete_priority_class(name))
    return name


@pytest.fixture
def two_namespaces(
    module: ModuleProcesses, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient
) -> Iterator[tuple[Orders, Orders]]:
    first = user_namespace(admin_api, "ledger-a", user="alice", cluster_role="d8:user-authz:isvc:editor")
    second = user_namespace(admin_api, "ledger-b", user="alice", cluster_role="d8:user-authz:isvc:editor")
    with Orders(module, admin_api, alice_api, first) as a, Orders(module, admin_api, alice_api, second) as b:
        yield a, b


def _uids(orders: Orders, names: list[str]) -> dict[str, set[str]]:
    """The uid of each LaunchPlan and StatefulSet of these orders that exists now, by kind/order."""
    apps = k8s.AppsV1Api(orders.admin_api)
    seen: dict[str, set[str]] = {}
    for name in names:
        plan = orders.plan(name)
        if plan is not None:
            seen.setdefault(f"LaunchPlan/{name}", set()).add(plan["metadata"]["uid"])
        sets = apps.list_namespaced_stateful_set(orders.ns, label_selector=f"{LABEL_ORDER}={name}").items
        for s in sets:
            seen.setdefault(f"StatefulSet/{name}", set()).add(s.metadata.uid)
    return seen


def test_a_quota_blocked_order_beside_a_higher_priority_one_ends_in_one_state_issue_26(
    module: ModuleProcesses, fleet: Fleet, two_namespaces: tuple[Orders, Orders]
) -> None:
    blocked, other = two_namespaces
    card = _one_card(fleet.idle(blocked.admin_api, "gpu-h100-0"))
    low = _class(blocked, "ledger-low", card, [37])
    high = _class(blocked, "ledger-high", card, [37], _priority_class(blocked, "ledger-high", 1000))
    core = k8s.CoreV1Api(blocked.admin_api)
    quota = k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="no-claims"),
        spec=k8s.V1ResourceQuotaSpec(hard={"count/resourceclaims.resource.k8s.io": "0"}),
    )
    core.create_namespaced_resource_quota(blocked.ns, quota)
    blocked.cleanup.append(lambda: core.delete_namespaced_resource_quota("no-claims", blocked.ns))
    lows = [blocked.create(n, hf(QWEN), low) for n in ("first", "second")]
    for name in lows:  # planned 37 % each; the quota keeps their claims from being made
        blocked.wait_true(name, "Planned")
    module.stop_planner()  # what it reserved for them is gone; their LaunchPlans are not
    module.start_planner()
    urgent = other.create("urgent", hf(QWEN), high)
    history: dict[str, set[str]] = {}
    phases: dict[str, list[str]] = {n: [] for n in lows}

    def look() -> None:
        for kind, uids in (_uids(blocked, lows) | _uids(other, [urgent])).items():
            history.setdefault(kind, set()).update(uids)
        for name in lows:
            reason = str(blocked.status(name).get("reason") or "")
            if not phases[name] or phases[name][-1] != reason:
                phases[name].append(reason)

    def settled() -> bool:
        look()
        planned = [condition(blocked.status(n), "Planned") for n in lows]
        return other.status(urgent).get("phase") == "Ready" and sorted(p.get("status") for p in planned) == [
            "False",
            "True",
        ]

    try:
        wait_for(settled, 120, interval=0.5, what="the urgent order Ready and one blocked order waiting")
        end = time.monotonic() + 10  # then nothing moves: a loop recreated the plan every few hundred ms
        while time.monotonic() < end:
            look()
            time.sleep(0.5)
    except TimeoutError as e:
        lines = {n: conditions_line(blocked.status(n)) for n in lows}
        raise AssertionError(
            f"{e}; blocked: {lines}; urgent: {conditions_line(other.status(urgent))}"
        ) from None
    waiting = next(n for n in lows if condition(blocked.status(n), "Planned").get("status") == "False")
    # 26 % left, the class permits 37 %: no room in a permitted share now, a reason that waits for room
    assert condition(blocked.status(waiting), "Planned")["reason"] in {
        "NoCapacity",
        "NoCompatiblePlacement",
        "PlanningPreemptionFailed",
    }
    assert blocked.plan(waiting) is None and other.status(urgent)["phase"] == "Ready"
    assert all(len(uids) == 1 for uids in history.values()), history  # created once each, never again
    preempted = [e for e in blocked.events(waiting) if e[1] == "Preempted"]
    assert len(preempted) == 1, preempted
    assert len(phases[waiting]) <= 3, phases  # its reason went to waiting once and stayed


def test_claims_a_namespace_user_made_with_no_pod_hold_no_device_issue_29(
    module: ModuleProcesses,
    fleet: Fleet,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    team_a: str,
) -> None:
    """Alice has Kubernetes' `edit` role (the module's editor role is aggregated into it) in her namespace."""
    squat = user_namespace(admin_api, "ledger-squat", user="alice", cluster_role="edit")
    card = fleet.idle(admin_api, "gpu-h100-0")
    with (
        Orders(module, admin_api, alice_api, squat) as hers,
        Orders(module, admin_api, alice_api, team_a) as theirs,
    ):
        half = _class(hers, "ledger-h100-half", f"device.attributes['{GPU}'].uuid == '{card.uuid}'", [50])
        hers.create("mine", hf(QWEN), half)
        hers.wait_ready("mine")
        plan = hers.plan("mine")
        assert plan is not None and plan["spec"]["placement"]["deviceUuids"] == [card.uuid]
        resource = k8s.ResourceV1Api(alice_api)  # as alice: `edit` lets her write claims
        phantoms = [f"phantom-{i}" for i in range(4)]
        for name in phantoms:
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "labels": {LABEL_ORDER: "mine"}},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": GPU,
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f"device.driver == '{GPU}' && "
                                                f"device.attributes['{GPU}'].uuid == '{card.uuid}'"
                                            }
                                        }
                                    ],
                                    "capacity": {"requests": {"shares": "50"}},
                                },
                            }
                        ]
                    }
                },
            }
            resource.create_namespaced_resource_claim(squat, claim)  # type: ignore[arg-type]
        try:
            theirs.create("neighbour", hf(QWEN), half)
            status = theirs.wait_ready("neighbour", 90)
            assert status["resolved"]["devices"] == [f"{card.node}/{card.name}"]
        finally:
            for name in phantoms:
                ignore_404(lambda name=name: resource.delete_namespaced_resource_claim(name, squat))


def _first_come(orders: Orders, namespace: str, card_uuid: str, shares: int, priority_class: str) -> None:
    """Another party's claim for `shares` of the card and the pod using it (not an order: no module label)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "first-come"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": GPU,
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "selectors": [{"cel": {"expression": _one_card_uuid(card_uuid)}}],
                            "capacity": {"requests": {"shares": str(shares)}},
                        },
                    }
                ]
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "first-come"},
        "spec": {
            "priorityClassName": priority_class,
            "containers": [
                {"name": "c", "image": "first-come:none", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "first-come"}],
            "terminationGracePeriodSeconds": 0,
        },
    }
    resource, core = k8s.ResourceV1Api(orders.admin_api), k8s.CoreV1Api(orders.admin_api)
    resource.create_namespaced_resource_claim(namespace, claim)  # type: ignore[arg-type]
    core.create_namespaced_pod(namespace, pod)  # type: ignore[arg-type]
    orders.cleanup.append(
        lambda: ignore_404(lambda: resource.delete_namespaced_resource_claim("first-come", namespace))
    )
    orders.cleanup.append(
        lambda: ignore_404(
            lambda: core.delete_namespaced_pod("first-come", namespace, grace_period_seconds=0)
        )
    )


def _one_card_uuid(uuid: str) -> str:
    return f"device.driver == '{GPU}' && device.attributes['{GPU}'].uuid == '{uuid}'"


def test_a_claim_the_scheduler_allocated_first_leaves_the_order_resource_claim_exhausted_issue_26(
    cluster: Cluster, module: ModuleProcesses, fleet: Fleet, two_namespaces: tuple[Orders, Orders]
) -> None:
    if not cluster.runs_scheduler:
        pytest.skip("the cluster's scheduler is not the test bed's to stop")
    orders, other = two_namespaces
    card = fleet.idle(orders.admin_api, "gpu-h100-0")
    klass = _class(orders, "ledger-first-come", _one_card(card), [37])
    first = _priority_class(orders, "ledger-first-come", 1_000_000)  # taken first from the scheduler's queue
    started = time.monotonic()
    with cluster.scheduler_stopped():
        name = orders.create("late", hf(QWEN), klass)
        planned = orders.wait_true(name, "Planned")
        assert planned["resolved"]["devices"] == [f"{card.node}/{card.name}"]
        # planned on the card; before its pod is scheduled, another party's claim for 70 % of it comes
        _first_come(other, other.ns, card.uuid, 70, first)
    status = orders.wait_reason(name, "WorkloadReady", "ResourceClaimExhausted", timeout=60)
    # the planner's answer on the order's status: the card, the scheduler's words, every class tried
    status = orders.wait(
        name,
        lambda s: (
            "could not allocate the claim planned on" in condition(s, "WorkloadReady").get("message", "")
        ),
        30,
        "the planner's answer in WorkloadReady",
    )
    assert_refused(
        status,
        "WorkloadReady",
        "ResourceClaimExhausted",
        f"The scheduler could not allocate the claim planned on {card.node}/{card.name} ({GPU})",
        "cannot allocate all claims",
        f"Every device class the order may use was tried ({GPU})",
    )
    refused = time.monotonic() - started
    # not a preemption and not a disagreement: nothing taken down, the ledger counted the claim it met
    assert orders.plan(name) is not None and not [e for e in orders.events(name) if e[1] == "Preempted"]
    assert f"the scheduler refused the claim of {orders.ns}/{name}" not in module.log("planner")
    core = k8s.CoreV1Api(other.admin_api)
    core.delete_namespaced_pod("first-come", other.ns, grace_period_seconds=0)  # room appears
    status = orders.wait_ready(name, 60)
    assert status["resolved"]["devices"] == [f"{card.node}/{card.name}"]
    assert f"the scheduler refused the claim of {orders.ns}/{name}" not in module.log("planner")
    print(
        f"first come: ResourceClaimExhausted {refused:.0f}s after the order was made, Ready "
        f"{time.monotonic() - started - refused:.0f}s after the other party's pod went"
    )
