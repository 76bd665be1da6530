"""Runtimes that share a card start one at a time (issue 25), on a real control plane.

KWOK runs no process: its start-gate stages (isvc_testbed/kwok-start-gate.yaml) stand for the few lines of sh
the runtime container starts behind, so a pod on a share runs, not ready, until the controller writes its
start permit, and only then does its runtime "start" and get Ready. Times are read from the API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from isvc_testbed.cluster import HANGING_NAMESPACE, SLOW_START_NAMESPACE
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.module import START_TURN_SECONDS
from isvc_testbed.orders import Orders, condition, hf
from kubernetes import client as k8s
from kubernetes import watch

pytestmark = pytest.mark.e2e

QWEN = "Qwen/Qwen2.5-7B-Instruct"
GPU = "gpu.nvidia.com"
PERMIT = "ai.deckhouse.io/start-permit"
PERMITTED_AT = "ai.deckhouse.io/start-permitted-at"
SEAL = "ai.deckhouse.io/start-permit-seal"
EDITOR = "d8:user-authz:isvc:editor"


class Bed(Orders):
    def one_card(self, name: str, fleet: Any) -> str:
        """A class whose orders all land on one H100 (pinned by its uuid), as shares."""
        uuid = fleet.idle(self.admin_api, "gpu-h100-0").uuid
        self.create_class(
            name,
            {
                "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                "acceleratorPolicy": {
                    "deviceClassNames": [GPU],
                    "selector": f"device.attributes['{GPU}'].uuid == '{uuid}'",
                },
            },
        )
        return name

    def pod(self, name: str) -> Any:
        """The order's one pod; None before the set has made it."""
        pods = (
            k8s.CoreV1Api(self.admin_api)
            .list_namespaced_pod(self.ns, label_selector=f"ai.deckhouse.io/inference-service={name}")
            .items
        )
        assert len(pods) <= 1, [p.metadata.name for p in pods]
        return pods[0] if pods else None

    def permit(self, name: str) -> str | None:
        pod = self.pod(name)
        return None if pod is None else (pod.metadata.annotations or {}).get(PERMIT)


def _ready_since(pod: Any) -> datetime:
    return next(
        c.last_transition_time for c in pod.status.conditions if c.type == "Ready" and c.status == "True"
    )


def _started(pod: Any) -> datetime:
    [server] = [s for s in pod.status.container_statuses if s.name == "server"]
    return server.state.running.started_at


def _permitted(pod: Any) -> datetime:
    return datetime.fromisoformat(pod.metadata.annotations[PERMITTED_AT].replace("Z", "+00:00"))


def _args(bed: Bed, name: str) -> list[str]:
    workload = k8s.AppsV1Api(bed.admin_api).read_namespaced_stateful_set(name, bed.ns)
    [server] = [c for c in workload.spec.template.spec.containers if c.name == "server"]
    return [*server.command, *server.args]


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    """Alice's orders in namespace start-slow, where KWOK's runtime takes 1.5 s from permit to Ready."""
    slow = user_namespace(
        admin_api, SLOW_START_NAMESPACE, user="alice", cluster_role="d8:user-authz:isvc:editor"
    )
    with Bed(module, admin_api, alice_api, slow) as b:
        yield b


def test_two_orders_on_one_card_start_one_after_the_other_with_their_kv_budgets(bed: Bed, fleet: Any) -> None:
    klass = bed.one_card("gate-one-card", fleet)
    first, second = bed.create("gate-1", hf(QWEN), klass), bed.create("gate-2", hf(QWEN), klass)
    statuses = {n: bed.wait_ready(n) for n in (first, second)}
    pods = {n: bed.pod(n) for n in (first, second)}
    devices = {tuple(statuses[n]["resolved"]["devices"]) for n in (first, second)}
    assert len(devices) == 1, devices  # one card
    earlier, later = sorted((first, second), key=lambda n: _permitted(pods[n]))
    assert pods[earlier].metadata.annotations[PERMIT] == pods[later].metadata.annotations[PERMIT] == "1"
    # the later one's runtime started only once the earlier one was Ready (whole seconds, as the API server keeps
    # them); a start takes 1.5 s here, so the later permit is at least a second after the earlier one
    assert _permitted(pods[later]) >= _ready_since(pods[earlier])
    assert (_permitted(pods[later]) - _permitted(pods[earlier])).total_seconds() >= 1
    assert _started(pods[later]) >= _ready_since(pods[earlier])
    for name in (first, second):
        args = _args(bed, name)
        assert args[:2] == ["/bin/sh", "-c"]  # behind the start gate
        budget = int(args[args.index("--kv-cache-memory-bytes") + 1])
        plan = bed.plan(name)
        assert plan is not None
        assert (
            budget == plan["spec"]["estimates"]["kvCacheBytes"] == statuses[name]["resolved"]["kvCacheBytes"]
        )
        assert "--kv-cache-memory-bytes" in plan["spec"]["runtime"]["args"]
        assert statuses[name]["resolved"]["marginGiB"] > 0


def test_a_co_tenant_that_never_gets_ready_holds_the_other_only_for_the_bounded_turn(
    module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str, fleet: Any
) -> None:
    hanging_ns = user_namespace(
        admin_api, HANGING_NAMESPACE, user="alice", cluster_role="d8:user-authz:isvc:editor"
    )
    with (
        Bed(module, admin_api, alice_api, hanging_ns) as there,
        Bed(module, admin_api, alice_api, team_a) as here,
    ):
        klass = here.one_card("gate-hang-card", fleet)
        stuck = there.create("gate-stuck", hf(QWEN), klass)
        wait_for(
            lambda: there.permit(stuck) == "1",
            60,
            what="the hanging order's replica holding the card's turn",
        )
        waiting = here.create("gate-waits", hf(QWEN), klass)
        status = here.wait(
            waiting,
            lambda s: "waits for its turn" in condition(s, "WorkloadReady").get("message", ""),
            60,
            "the second order waiting for its turn",
        )
        assert condition(status, "WorkloadReady")["reason"] == "WorkloadNotReady"
        message = condition(status, "WorkloadReady")["message"]
        assert f"order {stuck} of another namespace is starting" in message, message
        assert HANGING_NAMESPACE not in message
        here.wait_ready(waiting, timeout=START_TURN_SECONDS + 60)
        permitted, held_since = _permitted(here.pod(waiting)), _permitted(there.pod(stuck))
        assert (permitted - held_since).total_seconds() >= START_TURN_SECONDS
        said = there.wait(
            stuck,
            lambda s: "start now without waiting for it" in condition(s, "WorkloadReady").get("message", ""),
            30,
            "the hanging order saying why its co-tenants went on",
        )
        assert condition(said, "WorkloadReady")["reason"] == "WorkloadNotReady"


def _readiness(
    api: k8s.ApiClient, namespace: str, order: str, seen: list[tuple[str, datetime]], stop: Any
) -> None:
    """Every moment a pod of the order reads Ready, as the API server streams its changes: (uid, when)."""
    stream = watch.Watch()
    for event in stream.stream(
        k8s.CoreV1Api(api).list_namespaced_pod,
        namespace,
        label_selector=f"ai.deckhouse.io/inference-service={order}",
        timeout_seconds=120,
    ):
        pod = event["object"]
        if any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or [])):
            seen.append((pod.metadata.uid, datetime.now(UTC)))
        if stop.is_set():
            stream.stop()


def test_a_pod_writing_its_own_permit_does_not_start_before_its_turn_issue_44(
    module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, fleet: Any
) -> None:
    """Issue 44, point 5: a namespace user with `edit` wrote `start-permit` on her order's waiting pod and its
    runtime started while a co-tenant's start held the card. The permit alone now starts nothing (the gate
    waits for the module's seal); a made-up seal gets the pod deleted at once (KWOK "starts" it the moment the
    annotations arrive; a real runtime would have loaded nothing yet); her replica starts in its turn, once the
    co-tenant's bounded turn is over."""
    hanging = user_namespace(admin_api, HANGING_NAMESPACE, user="alice", cluster_role=EDITOR)
    forger = user_namespace(admin_api, "gate-forger", user="alice", cluster_role=EDITOR)
    user_namespace(admin_api, forger, user="alice", cluster_role="edit")
    with (
        Bed(module, admin_api, alice_api, hanging) as there,
        Bed(module, admin_api, alice_api, forger) as here,
    ):
        klass = here.one_card("gate-forge-card", fleet)
        holder = there.create("gate-holds", hf(QWEN), klass)
        wait_for(lambda: there.permit(holder) == "1", 60, what="the co-tenant holding the card's turn")
        held_since = _permitted(there.pod(holder))
        name = here.create("gate-forges", hf(QWEN), klass)
        here.wait(
            name,
            lambda s: "waits for its turn" in condition(s, "WorkloadReady").get("message", ""),
            60,
            "her order waiting for its turn",
        )
        seen: list[tuple[str, datetime]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_readiness, args=(admin_api, forger, name, seen, stop), daemon=True)
        watcher.start()
        pods = k8s.CoreV1Api(alice_api)  # alice herself, with `edit`
        forged_uids, lived = [], []
        for forged in ({PERMIT: "1"}, {PERMIT: "1", SEAL: "0" * 32}):
            pod = here.pod(name)
            assert (pod.metadata.annotations or {}).get(PERMIT) == "0"
            forged_uids.append(pod.metadata.uid)
            pods.patch_namespaced_pod(pod.metadata.name, forger, {"metadata": {"annotations": forged}})
            began = time.monotonic()
            wait_for(
                lambda uid=pod.metadata.uid: (p := here.pod(name)) is not None and p.metadata.uid != uid,
                30,
                what=f"the pod with {sorted(forged)} made anew",
            )
            lived.append(round(time.monotonic() - began, 2))
        here.wait_ready(name, timeout=START_TURN_SECONDS + 60)
        stop.set()
        ready = here.pod(name)
        print(f"forged pods made anew after {lived} s; Ready moments of her pods: {seen}")
        # the permit alone starts nothing: the gate waits for the module's seal
        assert [at for uid, at in seen if uid == forged_uids[0]] == [], seen
        # a made-up seal starts the runtime only until the controller deletes its pod, on the pod's change
        assert lived[1] < 2, lived
        # her replica that serves started in its turn, once the co-tenant's bounded turn was over
        turn_over = (_permitted(ready) - held_since).total_seconds()
        assert turn_over >= START_TURN_SECONDS, turn_over
        assert all(
            (at - held_since).total_seconds() >= START_TURN_SECONDS
            for uid, at in seen
            if uid not in forged_uids
        ), seen
        events = [e for e in here.events(name) if e[1] == "StartPermitForged"]
        assert len(events) == 2 and events[0][0] == "Warning", here.events(name)
        assert (ready.metadata.annotations or {}).get(SEAL)  # the module's own permit carries its seal
