"""An order as alice runs llama.cpp's server on the real node, end to end, and a real crash is reported.

The bed (isvc_testbed.llamabed, shared with `nox -s up -- --real-node`) runs the module's controller and
planner on the host and everything of an order for real on the real node: the planner places it on the node's
card, the kubelet prepares the claim, the fetch init container downloads the generated tiny model from the
stand-in Hub (the one variant the catalog chose of the repository's two), `llama-server` starts with the
arguments the controller compiled, the controller's probe passes with the order's token through the API
server's port-forward, the order goes Ready, and the openai client gets a completion.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime

import openai
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.llamabed import CLASS, CUT_REPO, ORDER, RECIPE, REPO, Bed, llama_bed
from isvc_testbed.orders import condition, hf
from isvc_testbed.standin import StandIn
from isvc_testbed.tinymodel import GGUF_FILE
from isvc_workload import CONTAINER_NAME
from kubernetes import client as k8s


@pytest.fixture(scope="module")
def bed(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    fleet: Fleet,
    standin: StandIn,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[Bed]:
    """The llama.cpp bed on the real node (isvc_testbed.llamabed) until the module ends; no order's pod
    dialled out of the node's namespace meanwhile."""
    with llama_bed(cluster, admin_api, alice_api, standin.url_template, team_a) as bed:
        yield bed
    dropped = cluster.node.forward_dropped()
    assert dropped == bed.dropped, "an order's pod dialled out of the real node's namespace"


def test_an_order_by_alice_goes_ready_on_the_real_node_and_answers_a_chat_completion(bed: Bed) -> None:
    orders, core = bed.orders, bed.core
    orders.create(ORDER, hf(REPO), CLASS)
    try:
        status = orders.wait_ready(ORDER, timeout=180)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(ORDER)}") from None
    assert condition(status, "Ready").get("status") == "True"
    plan = orders.plan(ORDER)
    assert plan is not None
    runtime = plan["spec"]["runtime"]
    # placed on the real node's card, and the pod runs there with the arguments the controller compiled
    assert plan["spec"]["placement"]["nodeName"] == bed.cluster.node.name
    pod = core.read_namespaced_pod(f"{ORDER}-0", orders.ns)
    assert pod.spec.node_name == bed.cluster.node.name
    server = next(c for c in pod.spec.containers if c.name == CONTAINER_NAME)
    # a share of the card: the runtime's command runs behind the start gate (issue 25)
    assert (server.image, server.command[:2], server.command[4:]) == (
        runtime["image"],
        ["/bin/sh", "-c"],
        runtime["command"],
    )
    assert server.args == runtime["args"]
    assert runtime["recipe"] == RECIPE
    assert [s.state.terminated.exit_code for s in pod.status.init_container_statuses] == [0]
    log = core.read_namespaced_pod_log(pod.metadata.name, orders.ns, container=CONTAINER_NAME)
    model_path = runtime["args"][runtime["args"].index("-m") + 1]
    assert model_path == f"/models/{REPO}/{GGUF_FILE}"  # the variant resolution chose, under its own name
    assert f"loading model '{model_path}'" in log and "model loaded" in log, log[-2000:]
    # the claim was allocated the node's card and prepared there for real (the DRA plugin's record of it)
    [ref] = pod.status.resource_claim_statuses
    resource = k8s.ResourceV1Api(orders.admin_api)
    claim = resource.read_namespaced_resource_claim(ref.resource_claim_name, orders.ns)
    [result] = claim.status.allocation.devices.results
    assert (result.pool, result.device) == (bed.cluster.node.name, bed.cluster.node.devices()[0].name)
    assert (bed.cluster.node.dra_state_dir / f"{claim.metadata.uid}.json").is_file()
    # the fetch downloaded that variant alone, not the repository's other one
    assert plan["spec"]["modelFiles"] == [GGUF_FILE]
    assert sorted(p.name for p in bed.model_dir(ORDER, REPO).glob("*.gguf")) == [GGUF_FILE]

    reply = bed.chat(ORDER, runtime["servedName"])
    assert reply.usage is not None and reply.usage.completion_tokens > 0, reply
    with pytest.raises(openai.AuthenticationError):  # a wrong token: llama-server itself says 401
        bed.client(ORDER, api_key="wrong", timeout=30).models.list()
    bed.gone(ORDER)


def test_a_crashing_runtime_is_reported_with_its_own_lines_and_the_report_lifts_when_it_comes_up(
    bed: Bed,
) -> None:
    orders = bed.orders
    name = "tiny-cut"
    orders.create(name, hf(CUT_REPO), CLASS)
    try:
        status = orders.wait(
            name,
            lambda s: condition(s, "WorkloadReady").get("reason") == "WorkloadStartupFailed",
            180,
            "WorkloadStartupFailed",
        )
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(name)}") from None
    message = condition(status, "WorkloadReady")["message"]
    # llama.cpp's own words about the file the fetch container downloaded
    assert "model is corrupted or incomplete" in message, message
    assert "failed to load model" in message, message
    assert status.get("phase") != "Ready"

    # the file is made whole on the model volume; the kubelet's next restart of the container loads it
    shutil.copyfile(bed.good_model, bed.model_dir(name, CUT_REPO) / GGUF_FILE)
    try:
        status = orders.wait_ready(name, timeout=240)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(name)}") from None
    ready = condition(status, "WorkloadReady")
    assert ready.get("status") == "True", ready
    bed.gone(name)


def _gate_line(log: str, words: str) -> datetime | None:
    """When the container said `words` (the CRI timestamp the API server hands out with `timestamps`)."""
    for line in log.splitlines():
        stamp, _, text = line.partition(" ")
        if words in text:
            whole, _, fraction = stamp.rstrip("Z").partition(".")
            return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")
    return None


def test_two_orders_on_the_one_card_start_their_llama_servers_one_at_a_time(bed: Bed) -> None:
    """Issue 25: two co-tenants of the node's one card, created together, go through the same start gate: the
    second llama-server starts only once the first has taken its memory (issue 45: not at its Ready; times
    from the API server: the pods' conditions and the containers' own lines)."""
    orders, core = bed.orders, bed.core
    names = ["tiny-one", "tiny-two"]
    for name in names:
        orders.create(name, hf(REPO), CLASS)
    try:
        for name in names:
            orders.wait(
                name,
                lambda s: condition(s, "WorkloadReady").get("status") == "True",
                240,
                "its replica Ready",
            )
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{bed.diagnosis(names[0])}\n{bed.diagnosis(names[1])}") from None
    pods = {n: core.read_namespaced_pod(f"{n}-0", orders.ns) for n in names}
    logs = {
        n: core.read_namespaced_pod_log(f"{n}-0", orders.ns, container=CONTAINER_NAME, timestamps=True)
        for n in names
    }
    goes = {n: _gate_line(logs[n], "isvc start gate: start 1 goes") for n in names}
    assert all(goes.values()), logs
    earlier, later = sorted(names, key=lambda n: goes[n] or datetime.max.replace(tzinfo=UTC))
    ready = next(c.last_transition_time for c in pods[earlier].status.conditions if c.type == "Ready")
    assert "waits for its turn on the shared device" in logs[later], logs[later][-2000:]
    later_goes = goes[later]
    # Issue 45, point 9: the turn passes once the earlier llama-server has taken its memory (its own line),
    # not at its Ready (the readiness probe's period after it)
    taken = _gate_line(logs[earlier], ": model loaded")
    earlier_goes = goes[earlier]
    assert taken is not None and earlier_goes is not None, logs[earlier][-2000:]
    assert later_goes is not None and later_goes >= taken, (later_goes, taken)
    print(
        f"{earlier}: gate went {earlier_goes.time()}, memory taken +{(taken - earlier_goes).total_seconds():.2f} s, "
        f"Ready +{(ready - earlier_goes).total_seconds():.2f} s (whole seconds); {later}: gate went "
        f"+{(later_goes - earlier_goes).total_seconds():.2f} s"
    )
    # one card: both claims allocated the node's device, both permits for the first start
    resource = k8s.ResourceV1Api(orders.admin_api)
    for name, pod in pods.items():
        [ref] = pod.status.resource_claim_statuses
        claim = resource.read_namespaced_resource_claim(ref.resource_claim_name, orders.ns)
        [result] = claim.status.allocation.devices.results
        assert result.device == bed.cluster.node.devices()[0].name, name
        assert pod.metadata.annotations["ai.deckhouse.io/start-permit"] == "1"
    for name in names:
        bed.gone(name)
