"""The resource planner on a real control plane: every Planned refusal from a real order, co-placement,
preemption by priority, hand-written launch plans and a plan kept in force."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import conditions_line
from isvc_testbed.orders import GROUP, VERSION, Orders, assert_refused, condition, hf
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
QWEN_32B = "Qwen/Qwen2.5-32B-Instruct-AWQ"
BGE = "BAAI/bge-m3"


def _product(name: str) -> str:
    return f"device.attributes['{GPU}'].productName == '{name}'"


L4_ONLY = _product("NVIDIA L4")
FOUR_AT_ONCE = {"concurrentRequests": 4}  # a class's serving target: 4 requests of the chat default's 2,048
H100_ONLY = _product("NVIDIA H100 80GB HBM3")
GH200_ONLY = _product("NVIDIA GH200 480GB")


# ---------------------------------------------------------------- helpers


class Bed(Orders):
    """Orders (as alice) and classes, priority classes and plans (as admin) made by one test, undone after."""

    def klass(
        self,
        name: str,
        *,
        selector: str | None = None,
        endpoint_types: tuple[str, ...] = ("Chat",),
        priority_class: str | None = None,
        shares: list[int] | None = None,
        wait_ready: bool = True,
        serving: dict[str, int] | None = None,
    ) -> str:
        accel: dict[str, Any] = {"deviceClassNames": [GPU]}
        if selector:
            accel["selector"] = selector
        if shares:
            accel["allowedSharePercents"] = shares
        spec: dict[str, Any] = {
            "modelPolicy": {"allowedEndpointTypes": list(endpoint_types)},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": accel,
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        if serving:
            spec["serving"] = serving
        self.create_class(name, spec, ready=True if wait_ready else None)
        return name

    def priority_class(self, name: str, value: int) -> str:
        scheduling = k8s.SchedulingV1Api(self.admin_api)
        scheduling.create_priority_class(
            k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value)
        )
        self.cleanup.append(lambda: scheduling.delete_priority_class(name))
        return name

    def hf_token(self) -> str:
        """Secret plan-hf-token (key token) that the stand-in hub accepts for gated models."""
        core = k8s.CoreV1Api(self.admin_api)
        try:
            core.create_namespaced_secret(
                self.ns,
                k8s.V1Secret(
                    metadata=k8s.V1ObjectMeta(name="plan-hf-token"), string_data={"token": "hf_test_token"}
                ),
            )
        except ApiException as e:
            if e.status != 409:
                raise
        return "plan-hf-token"

    def order(self, name: str, model: str, klass: str, secret: str | None = None) -> str:
        return self.create(name, hf(model, secret), klass)

    def set_model(self, name: str, model: str, secret: str | None = None) -> None:
        self.alice.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, "inferenceservices", name, {"spec": {"model": hf(model, secret)}}
        )


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Bed]:
    with Bed(module, admin_api, alice_api, team_a) as b:
        yield b


# ---------------------------------------------------------------- refusals


def test_an_order_beyond_what_its_class_may_use_says_no_capacity(bed: Bed) -> None:
    klass = bed.klass("plan-l4-only", selector=L4_ONLY)
    first, second = bed.order("nocap-1", QWEN, klass), bed.order("nocap-2", QWEN, klass)
    bed.wait_ready(first)
    bed.wait_ready(second)
    placed = {bed.status(n)["resolved"]["acceleratorProductName"] for n in (first, second)}
    assert placed == {"NVIDIA L4"}
    third = bed.order("nocap-3", QWEN, klass)
    status = bed.wait_reason(third, "Planned", "NoCapacity")
    assert_refused(status, "Planned", "NoCapacity", "GiB free right now", "replanned")


def test_a_cordoned_node_is_not_planned_on_until_it_opens(bed: Bed) -> None:
    """The scheduler places no pod on a cordoned node: the planner offers its devices to no plan."""
    core = k8s.CoreV1Api(bed.admin_api)
    klass = bed.klass("plan-h100-cordon", selector=H100_ONLY)
    core.patch_node("gpu-h100-0", {"spec": {"unschedulable": True}})
    try:
        order = bed.order("cordoned", QWEN, klass)
        status = bed.wait_reason(order, "Planned", "NoCapacity")
        assert_refused(status, "Planned", "NoCapacity", "on nodes out of service: gpu-h100-0 (cordoned)")
        assert bed.plan(order) is None
    finally:
        core.patch_node("gpu-h100-0", {"spec": {"unschedulable": False}})
    assert bed.wait_ready(order, timeout=180)["resolved"]["nodeName"] == "gpu-h100-0"


def test_a_model_larger_than_every_accelerator_says_no_accelerator_with_enough_memory(bed: Bed) -> None:
    klass = bed.klass("plan-h100-only", selector=H100_ONLY)
    order = bed.order("too-large", "meta-llama/Llama-3.1-405B-Instruct", klass, secret=bed.hf_token())
    status = bed.wait_reason(order, "Planned", "NoAcceleratorWithEnoughMemory")
    message = assert_refused(
        status,
        "Planned",
        "NoAcceleratorWithEnoughMemory",
        "the largest accelerator found publishes 79.65 GiB (NVIDIA H100 80GB HBM3",  # 81559Mi, NVML's total
        "NVIDIA H100 80GB HBM3",
    )
    required = float(message.split("The model needs ")[1].split(" GiB")[0])
    assert required > 8 * 80  # more than all eight H100s of the node together: no tensor-parallel plan


def test_a_device_without_memory_capacity_says_no_compatible_placement_for_an_administrator(bed: Bed) -> None:
    klass = bed.klass("plan-gh200-only", selector=GH200_ONLY)
    order = bed.order("no-profile", QWEN, klass)
    status = bed.wait_reason(order, "Planned", "NoCompatiblePlacement")
    assert_refused(
        status,
        "Planned",
        "NoCompatiblePlacement",
        "memory profile of the hardware is incomplete",
        "An administrator's subject",
        "waiting will not help",
    )
    assert bed.plan(order) is None


def test_free_memory_in_no_permitted_share_says_no_compatible_placement_no_room_now(bed: Bed) -> None:
    # Only 60 % shares: two embedding orders take 60 % of each L4, leaving 40 % (9.6 GiB) on each --
    # more than a third one needs, but not a permitted share.
    klass = bed.klass("plan-l4-sixty", selector=L4_ONLY, endpoint_types=("Embeddings",), shares=[60])
    first, second = bed.order("sixty-1", BGE, klass), bed.order("sixty-2", BGE, klass)
    for name in (first, second):
        assert bed.wait_ready(name)["resolved"]["sharePercent"] == 60
    third = bed.order("sixty-3", BGE, klass)
    status = bed.wait_reason(third, "Planned", "NoCompatiblePlacement")
    message = assert_refused(
        status,
        "Planned",
        "NoCompatiblePlacement",
        "No room now",
        "permitted share",
        "Replanned when capacity changes",
    )
    assert "incomplete" not in message
    bed.delete(first)
    bed.wait_ready(third, 120)


def test_a_planner_killed_midway_says_planner_request_failed_and_the_order_recovers_untouched(
    bed: Bed,
) -> None:
    klass = bed.klass("plan-h100-crash", selector=H100_ONLY)
    bed.module.stop_planner()
    try:
        order = bed.order("planner-down", QWEN, klass)
        status = bed.wait_reason(order, "Planned", "PlannerRequestFailed")
        assert_refused(status, "Planned", "PlannerRequestFailed", "the planner did not answer", "retried")
        generation = bed.alice.get_namespaced_custom_object(
            GROUP, VERSION, bed.ns, "inferenceservices", order
        )["metadata"]["generation"]
    finally:
        bed.module.start_planner()
    status = bed.wait_ready(order)
    assert condition(status, "Planned")["status"] == "True"
    assert (
        bed.alice.get_namespaced_custom_object(GROUP, VERSION, bed.ns, "inferenceservices", order)[
            "metadata"
        ]["generation"]
        == generation
    )


def test_a_model_too_large_for_anything_says_so_on_a_class_that_tries_a_device_without_memory(
    bed: Bed,
) -> None:
    """Issue 16: on default-llm (which may try the GH200 that publishes no memory) a 405B model was
    told its hardware profile was incomplete, an administrator's subject."""
    name = bed.create(
        "too-large-default", hf("meta-llama/Llama-3.1-405B-Instruct", bed.hf_token()), "default-llm"
    )
    status = bed.wait_reason(name, "Planned", "NoAcceleratorWithEnoughMemory")
    assert_refused(status, "Planned", "NoAcceleratorWithEnoughMemory", "publishing no memory", "288 GiB")


def test_a_serving_order_stays_ready_on_its_plan_while_the_planner_is_down(bed: Bed) -> None:
    """SPEC §9: a planner that fails to answer never takes a Ready order out of Ready."""
    klass = bed.klass("plan-h100-outage", selector=H100_ONLY)
    order = bed.order("outage", QWEN, klass)
    before = bed.wait_ready(order)
    bed.module.stop_planner()
    try:
        # A Ready order at rest has no pass to show the outage in (its probes run apart): alice's edit
        # of a label brings one, after the minute the controller keeps a plan's judgement for.
        time.sleep(61)
        bed.alice.patch_namespaced_custom_object(
            GROUP, VERSION, bed.ns, "inferenceservices", order, {"metadata": {"labels": {"touched": "yes"}}}
        )
        status = bed.wait_reason(order, "Planned", "LaunchPlanInForce", timeout=60)
        assert "the planner did not answer" in condition(status, "Planned")["message"]
        assert status["phase"] == "Ready" and status["endpoint"] == before["endpoint"]
        assert status["launchPlanName"] == order and status["resolved"] == before["resolved"]
    finally:
        bed.module.start_planner()
    bed.wait_reason(order, "Planned", "Planned")


def test_a_class_naming_a_missing_priority_class_says_priority_class_not_found(bed: Bed) -> None:
    klass = bed.klass(
        "plan-missing-priority", selector=H100_ONLY, priority_class="plan-no-such-priority", wait_ready=False
    )
    order = bed.order("no-priority", QWEN, klass)
    status = bed.wait_reason(order, "Planned", "PriorityClassNotFound")
    assert_refused(status, "Planned", "PriorityClassNotFound", "plan-no-such-priority", "administrator")
    assert condition(status, "ClassResolved")["status"] == "True"


def test_a_selector_that_errors_on_a_device_says_placement_undecidable(bed: Bed) -> None:
    klass = bed.klass("plan-bad-selector", selector=f"device.attributes['{GPU}'].index == 0")
    order = bed.order("undecidable", QWEN, klass)
    status = bed.wait_reason(order, "Planned", "PlacementUndecidable")
    assert_refused(
        status,
        "Planned",
        "PlacementUndecidable",
        "no such key",
        "search never started",
        "waiting will not help",
    )
    time.sleep(6)  # it never passes on its own
    assert condition(bed.status(order), "Planned")["reason"] == "PlacementUndecidable"


# ---------------------------------------------------------------- co-placement and preemption


def test_a_class_with_a_larger_serving_target_gets_a_larger_share_for_the_same_model_issue_42(
    bed: Bed,
) -> None:
    """The same model in a class asking 64 requests of 2,048 tokens at once gets a larger share than in one
    taking the chat default (16): 48 more requests of 57,344 B a token are 5.25 GiB, 6.6 % of the 79.15 GiB
    an H100 shows the runtime. Each says what it serves, and its runtime runs that many at once."""
    default = bed.klass("plan-h100-serve16", selector=H100_ONLY)
    larger = bed.klass("plan-h100-serve64", selector=H100_ONLY, serving={"concurrentRequests": 64})
    small, big = bed.order("serve-16", QWEN, default), bed.order("serve-64", QWEN, larger)
    resolved = {name: bed.wait_ready(name)["resolved"] for name in (small, big)}
    assert resolved[big]["sharePercent"] - resolved[small]["sharePercent"] in (6, 7, 8), resolved
    for name, at_once in ((small, 16), (big, 64)):
        r = resolved[name]
        assert r["requestTokens"] == 2048 and r["concurrentRequests"] >= at_once, r
        assert r["kvCacheTokens"] >= at_once * 2048 and r["contextLength"] >= 8192, r
        plan = bed.plan(name)
        assert plan is not None
        args = plan["spec"]["runtime"]["args"]
        assert int(args[args.index("--max-num-seqs") + 1]) == r["concurrentRequests"]


def test_a_serving_target_no_card_can_hold_is_refused_with_the_figures_issue_42(bed: Bed) -> None:
    """1,024 requests of 32,768 tokens at once (Qwen2.5-7B's whole context each): 33.5 million tokens of KV,
    more than eight H100s hold under tensor parallel. NoAcceleratorWithEnoughMemory names the target."""
    klass = bed.klass(
        "plan-h100-serve-huge",
        selector=H100_ONLY,
        serving={"concurrentRequests": 1024, "typicalRequestTokens": 32768, "longestRequestTokens": 32768},
    )
    order = bed.order("serve-huge", QWEN, klass)
    status = bed.wait_reason(order, "Planned", "NoAcceleratorWithEnoughMemory")
    message = assert_refused(
        status,
        "Planned",
        "NoAcceleratorWithEnoughMemory",
        "to serve 1024 requests of 32,768 tokens at once and a request of up to 32,768 tokens (the class's "
        "serving target)",
        "the largest accelerator found publishes 79.65 GiB (NVIDIA H100 80GB HBM3",
        "a smaller serving target in the class",
    )
    required = float(message.split("The model needs ")[1].split(" GiB")[0])
    assert required > 1024 * 32768 * 57344 / 2**30  # the KV cache alone, at 57,344 B a token


def test_two_half_card_orders_share_one_h100_and_the_scheduler_allocates_both_claims(bed: Bed) -> None:
    klass = bed.klass("plan-h100-pair", selector=H100_ONLY)
    first, second = bed.order("half-1", QWEN, klass), bed.order("half-2", QWEN, klass)
    statuses = [bed.wait_ready(first), bed.wait_ready(second)]
    for status in statuses:
        resolved = status["resolved"]
        assert resolved["placementMode"] == "Shared" and resolved["sharingMode"] == "Shares"
        assert 1 <= resolved["sharePercent"] <= 50
        assert resolved["acceleratorProductName"] == "NVIDIA H100 80GB HBM3"
    plans = [bed.plan(first), bed.plan(second)]
    uuids = [p["spec"]["placement"]["deviceUuids"] for p in plans if p]
    assert len(uuids) == 2 and uuids[0] == uuids[1] and len(uuids[0]) == 1
    allocated = []
    for name in (first, second):
        claims = bed.claims(name)
        assert claims and all(c.status and c.status.allocation for c in claims), name
        allocated += [(r.pool, r.device) for c in claims for r in c.status.allocation.devices.results]
    assert len(set(allocated)) == 1, allocated
    pool, device = allocated[0]
    assert pool == plans[0]["spec"]["placement"]["pool"]
    assert device == plans[0]["spec"]["placement"]["devices"][0]


def test_a_higher_priority_order_displaces_a_lower_one_which_then_says_no_capacity(bed: Bed) -> None:
    low = bed.klass("plan-l4-low", selector=L4_ONLY, priority_class=bed.priority_class("plan-low", 100))
    high = bed.klass("plan-l4-high", selector=L4_ONLY, priority_class=bed.priority_class("plan-high", 1000))
    lows = [bed.order("low-1", QWEN, low), bed.order("low-2", QWEN, low)]
    for name in lows:
        bed.wait_ready(name)
    urgent = bed.order("urgent", QWEN, high)
    try:
        status = bed.wait_ready(urgent, 150)
    except TimeoutError as e:  # say who holds what, so a stall explains itself
        claims = k8s.ResourceV1Api(bed.admin_api).list_resource_claim_for_all_namespaces().items
        held = {
            f"{c.metadata.namespace}/{c.metadata.name}": [
                (r.pool, r.device) for r in c.status.allocation.devices.results
            ]
            for c in claims
            if c.status and c.status.allocation
        }
        lines = {n: conditions_line(bed.status(n)) for n in lows}
        raise AssertionError(f"{e}; lows: {lines}; allocated: {held}") from None
    assert status["resolved"]["acceleratorProductName"] == "NVIDIA L4"

    def displaced() -> str | None:
        for name in lows:
            planned = condition(bed.status(name), "Planned")
            if planned.get("reason") == "NoCapacity":
                return name
        return None

    try:
        victim = wait_for(displaced, 60, interval=0.5, what="a low-priority order displaced")
    except TimeoutError as e:
        lines = {n: conditions_line(bed.status(n)) for n in [*lows, urgent]}
        raise AssertionError(f"{e}: {lines}") from None
    assert_refused(bed.status(victim), "Planned", "NoCapacity", "GiB free right now")
    survivor = next(n for n in lows if n != victim)
    assert bed.status(survivor)["phase"] == "Ready"


def test_lower_priority_holdings_that_cannot_make_room_say_planning_preemption_failed(bed: Bed) -> None:
    # Both L4s hold a high-priority chat order; a low-priority embedding order sits beside one of them.
    # Releasing it frees far less than another chat order needs: preemption cannot work out. Sized for the
    # chat default (16 requests of 2,048 tokens at once), Qwen2.5-7B takes 86 % of an L4 and leaves no room
    # for bge-m3 (17 %: 2.43 GiB and TEI's 5 % margin); serving 4 at once (8,192 tokens of KV) it takes 80 %.
    high = bed.klass(
        "plan-l4-high2",
        selector=L4_ONLY,
        priority_class=bed.priority_class("plan-high2", 1000),
        serving=FOUR_AT_ONCE,
    )
    low = bed.klass(
        "plan-l4-low2",
        selector=L4_ONLY,
        endpoint_types=("Embeddings",),
        priority_class=bed.priority_class("plan-low2", 100),
    )
    for name in (
        bed.order("keep-1", QWEN, high),
        bed.order("keep-2", QWEN, high),
        bed.order("small-low", BGE, low),
    ):
        bed.wait_ready(name)
    order = bed.order("no-victims-enough", QWEN, high)
    status = bed.wait_reason(order, "Planned", "PlanningPreemptionFailed")
    assert_refused(
        status,
        "Planned",
        "PlanningPreemptionFailed",
        "lower-priority",
        "would still leave no room",
        "retried",
    )
    assert bed.status("small-low")["phase"] == "Ready"  # nobody was released for nothing


def _planned_and_held(bed: Bed, names: list[str]) -> dict[str, Any]:
    """Per order: the devices its plan names and those its claims were allocated (what a failure needs)."""
    where: dict[str, Any] = {}
    for name in names:
        plan = bed.plan(name) or {}
        placement = (plan.get("spec") or {}).get("placement") or {}
        where[name] = {
            "planned": (placement.get("devices"), placement.get("sharePercent")),
            "allocated": [
                (r.device, (r.consumed_capacity or {}).get("shares"))
                for c in bed.claims(name)
                if c.status and c.status.allocation
                for r in c.status.allocation.devices.results
            ],
        }
    return where


def test_orders_waiting_for_room_are_placed_together_so_that_the_most_fit(bed: Bed) -> None:
    # Both L4s are held whole. Two embedding orders (17 % of an L4 each) and two chat orders (80 %, serving 4
    # requests of 2,048 tokens at once; the chat default's 86 % would leave no room for an embedding order)
    # arrive and wait. One at a time, as they retry, both embeddings would share one card and a chat order
    # would find no card with 80 % free: three of four. Planned together, each chat order shares a card with
    # an embedding order: all four.
    # One order holds both cards (a 32B model under tensor parallel: one claim of two), so both come free in
    # one change. Two orders' claims, freed more than the waiting room's second (SETTLE) apart under load, gave
    # a pass one card, where the oldest first are the two embeddings (CI: three of four).
    whole = bed.klass("plan-l4-whole", selector=L4_ONLY, shares=[100])
    chat = bed.klass("plan-l4-chat", selector=L4_ONLY, serving=FOUR_AT_ONCE)
    embed = bed.klass("plan-l4-embed", selector=L4_ONLY, endpoint_types=("Embeddings",))
    blockers = [bed.order("hold-both", QWEN_32B, whole)]
    assert bed.wait_ready(blockers[0])["resolved"]["sharePercent"] == 100
    assert len(_planned_and_held(bed, blockers)["hold-both"]["allocated"]) == 2
    waiting = [
        bed.order("wait-embed-1", BGE, embed),
        bed.order("wait-embed-2", BGE, embed),
        bed.order("wait-chat-1", QWEN, chat),
        bed.order("wait-chat-2", QWEN, chat),
    ]
    for name in waiting:
        bed.wait_reason(name, "Planned", "NoCapacity")
    for name in blockers:
        bed.delete(name)
    try:
        statuses = {name: bed.wait_ready(name, 180) for name in waiting}
    except TimeoutError as e:
        lines = {n: conditions_line(bed.status(n)) for n in waiting}
        raise AssertionError(f"{e}: {lines}; where each stands: {_planned_and_held(bed, waiting)}") from None
    # Each order's claim holds exactly the device its plan names: what the planner chose together is what
    # the scheduler allocated, not merely what the plans say.
    uuids = {
        (s.spec.pool.name, d.name): d.attributes["uuid"].string
        for s in k8s.ResourceV1Api(bed.admin_api).list_resource_slice().items
        if s.spec.driver == GPU
        for d in s.spec.devices or []
    }
    shares: dict[str, list[int]] = {}
    for name, status in statuses.items():
        resolved = status["resolved"]
        assert resolved["acceleratorProductName"] == "NVIDIA L4"
        placement = bed.plan(name)["spec"]["placement"]  # type: ignore[index]
        assert (placement["placementMode"], placement["sharePercent"]) == ("Shared", resolved["sharePercent"])
        claims = bed.claims(name)
        allocated = [
            (r.pool, r.device, (r.consumed_capacity or {}).get("shares"))
            for c in claims
            if c.status and c.status.allocation
            for r in c.status.allocation.devices.results
        ]
        pool, device, share = placement["pool"], placement["devices"][0], placement["sharePercent"]
        assert allocated == [(pool, device, str(share))], name
        assert placement["deviceUuids"] == [uuids[(pool, device)]], name
        shares.setdefault(device, []).append(share)
    assert len(shares) == 2 and all(len(s) == 2 and sum(s) <= 100 for s in shares.values()), shares


# ---------------------------------------------------------------- launch plans


def _share_150(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LaunchPlan",
        "metadata": {"name": name},
        "spec": {
            "placement": {
                "deviceClassName": GPU,
                "placementMode": "Shared",
                "sharingMode": "Shares",
                "sharePercent": 150,
            }
        },
    }


def test_a_hand_written_plan_with_share_150_says_not_a_placement_until_deleted(bed: Bed) -> None:
    klass = bed.klass("plan-h100-hand", selector=H100_ONLY)
    name = "hand-plan"
    bed.admin.create_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", _share_150(name))
    try:
        bed.order(name, QWEN, klass)
        status = bed.wait_reason(name, "Planned", "LaunchPlanNotAPlacement")
        message = assert_refused(
            status,
            "Planned",
            "LaunchPlanNotAPlacement",
            "sharePercent=150",
            "outside 1..100",
            "delete the LaunchPlan",
        )
        # Issue 16: the name the FAQ's recovery one-liner reads stays while the plan exists, and the
        # message says what to do once.
        assert status["launchPlanName"] == name
        assert message.lower().count("delete the launchplan") == 1
        assert "Warning" in [e[0] for e in bed.wait_events(name, "LaunchPlanNotAPlacement")]
        time.sleep(5)  # judged, never trusted, never overwritten
        assert bed.plan(name)["spec"]["placement"]["sharePercent"] == 150  # type: ignore[index]
    finally:
        bed.admin.delete_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", name)
    status = bed.wait_ready(name)
    plan = bed.plan(name)
    assert plan is not None
    assert plan["spec"]["placement"]["sharePercent"] == status["resolved"]["sharePercent"]
    assert 1 <= plan["spec"]["placement"]["sharePercent"] <= 100
    assert plan["metadata"]["ownerReferences"][0]["name"] == name


def test_a_plan_replaced_by_hand_after_the_order_is_judged_too(bed: Bed) -> None:
    """Issue 31: an administrator's edit of the module's own plan (its `computed-by` annotation kept, as
    `kubectl edit` keeps it) was blamed on the module ("report this as a defect"); the order kept serving on
    its workload while it read Pending."""
    klass = bed.klass("plan-h100-hand2", selector=H100_ONLY)
    name = bed.order("hand-plan-after", QWEN, klass)
    bed.wait_ready(name)
    plan = bed.plan(name)
    assert plan is not None and plan["metadata"]["annotations"]["ai.deckhouse.io/computed-by"]
    # edited by hand: share 150, the annotation left as it was
    bed.admin.patch_namespaced_custom_object(
        GROUP, VERSION, bed.ns, "launchplans", name, {"spec": {"placement": {"sharePercent": 150}}}
    )
    status = bed.wait_reason(name, "Planned", "LaunchPlanNotAPlacement")
    message = assert_refused(
        status,
        "Planned",
        "LaunchPlanNotAPlacement",
        "sharePercent=150",
        "delete the LaunchPlan",
        "edited by",
        phase="Degraded",  # its workload keeps answering (Ready stays True)
    )
    assert "defect" not in message and condition(status, "Ready")["status"] == "True"
    count = status["resolved"]["replanCount"]
    bed.admin.delete_namespaced_custom_object(GROUP, VERSION, bed.ns, "launchplans", name)
    status = bed.wait_ready(name)
    assert status["resolved"]["replanCount"] == count + 1  # issue 16: the recomputation counts


def test_a_ready_order_edited_to_an_unplaceable_model_keeps_its_plan_in_force(bed: Bed) -> None:
    klass = bed.klass("plan-h100-force", selector=H100_ONLY)
    name = bed.order("in-force", QWEN, klass)
    before = bed.wait_ready(name)
    plan_before = bed.plan(name)
    assert plan_before is not None
    assert plan_before["spec"]["placement"]["sharePercent"] == before["resolved"]["sharePercent"]
    count = before["resolved"]["replanCount"]
    bed.set_model(name, "meta-llama/Llama-3.1-405B-Instruct", secret=bed.hf_token())
    status = bed.wait_reason(name, "Planned", "LaunchPlanInForce")
    planned = condition(status, "Planned")
    assert planned["status"] == "True"
    assert "NoAcceleratorWithEnoughMemory" in planned["message"]
    assert "the largest accelerator found publishes 79.65 GiB" in planned["message"]  # an H100's 81559Mi
    assert status["phase"] == "Ready" and condition(status, "Ready")["status"] == "True"
    assert status["resolved"]["replanCount"] == count + 1
    time.sleep(8)  # several passes: still Ready, on the same plan, counted once
    status = bed.status(name)
    assert status["phase"] == "Ready"
    assert condition(status, "Planned")["reason"] == "LaunchPlanInForce"
    assert status["resolved"]["replanCount"] == count + 1
    assert bed.plan(name)["spec"]["placement"] == plan_before["spec"]["placement"]  # type: ignore[index]
    # placeable, and its volume fits the set's (a larger one is refused and the plan before stays: issue 45)
    bed.set_model(name, "Qwen/Qwen2.5-3B-Instruct")
    status = bed.wait(
        name,
        lambda s: (
            condition(s, "Planned").get("reason") == "Planned" and s["resolved"]["replanCount"] == count + 2
        ),
        60,
        "replanned onto Qwen2.5-3B",
    )
    assert "Qwen/Qwen2.5-3B-Instruct" in bed.plan(name)["spec"]["runtime"]["args"]  # type: ignore[index]


def test_a_ready_order_edited_to_a_model_on_another_share_rolls_onto_a_new_claim_template(bed: Bed) -> None:
    """Issue 16: the API server refused the claim template's update (its spec is immutable), so the order
    stayed WorkloadError until the edit was reverted."""
    klass = bed.klass("plan-h100-reshare", selector=H100_ONLY)
    name = bed.order("reshare", QWEN_32B, klass)
    before = bed.wait_ready(name)
    old = bed.templates(name)
    bed.set_model(name, QWEN)
    # While the one replica is replaced the order stays Ready (a rollout is a blip), so wait for the
    # workload itself on the new share.
    bed.wait(
        name,
        lambda s: (
            s.get("phase") == "Ready"
            and condition(s, "Planned")["reason"] == "Planned"
            and condition(s, "WorkloadReady")["reason"] == "WorkloadAvailable"
            and s["resolved"]["sharePercent"] != before["resolved"]["sharePercent"]
        ),
        90,
        "Ready again on another share",
    )
    wait_for(
        lambda: bed.templates(name) and not bed.templates(name) & old,
        60,
        what="the workload on a new claim template, the old one gone",
    )
    bed.wait_events(name, "Serving")
    reasons = [e[1] for e in bed.events(name)]
    assert "Planned" in reasons and "Serving" in reasons  # issue 16: the order tells its story in events
