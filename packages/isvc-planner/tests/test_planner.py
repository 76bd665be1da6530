"""Placement on NVIDIA-shaped fleets: co-placement, modes, classes, selectors and every reason."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import (
    GIB,
    LABEL_PRIORITY,
    SERVING_DEFAULTS,
    AcceleratorPolicy,
    EndpointType,
    ModelFacts,
    Placement,
    PlacementMode,
    Reason,
    RuntimeRequirements,
    ServingTarget,
    SharingMode,
)
from isvc_planner import (
    Inventory,
    Planner,
    judge_plan,
    memory_need,
)
from isvc_planner._survey import Surveys
from isvc_planner_client import (
    OrderRef,
    PlanRequest,
    PlanResponse,
)
from isvc_testing import (
    fleet_claim,
    fleet_device_classes,
    fleet_gpu,
    fleet_mig,
    fleet_order,
    fleet_priority_class,
    fleet_service_class,
    fleet_slice,
)


def sized(facts: ModelFacts, gib: float) -> ModelFacts:
    """A model whose whole need is about `gib` GiB: weights only, tiny KV, known overhead."""
    weights = (gib - 1) / 1.2  # KV unknown: taken as 10 % of the weights, overhead 1 GiB + 10 %
    return facts.model_copy(
        update={
            "parameter_count": int(weights * GIB / 2),
            "dtype": "bfloat16",
            "num_layers": None,
            "quantization": "None",
        }
    )


def plan(
    planner: Planner, facts: ModelFacts, name: str = "o", namespace: str = "ns", **kw: Any
) -> PlanResponse:
    return planner.plan(PlanRequest(order=OrderRef(namespace=namespace, name=name), facts=facts, **kw))


def inventory(
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]] | None = None,
    priority: list[dict[str, Any]] | None = None,
    classes: list[dict[str, Any]] | None = None,
    ranked: list[tuple[str, str, int]] | None = None,
) -> Inventory:
    """`ranked`: (namespace, order, priority value) of orders holding claims; each gets a class whose
    PriorityClass has that value, as the planner learns it (issue 14: never from claim labels)."""
    values = sorted({v for _, _, v in ranked or []})
    return Inventory.from_objects(
        classes or fleet_device_classes(),
        slices,
        claims or [],
        [*(priority or []), *(fleet_priority_class(f"p{v}", v) for v in values)],
        orders=[fleet_order(ns, name, f"c{v}") for ns, name, v in ranked or []],
        service_classes=[fleet_service_class(f"c{v}", f"p{v}") for v in values],
    )


@pytest.fixture
def half(models: dict[str, ModelFacts]) -> ModelFacts:
    """A model that needs a bit under half of an 80 GiB card."""
    return sized(models["qwen7b"], 38)


def test_two_half_card_models_share_one_card(half: ModelFacts) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0), fleet_gpu("n1", 1)])]))
    a, b = plan(planner, half, "a"), plan(planner, half, "b")
    assert a.placement and b.placement
    assert a.placement.devices == b.placement.devices
    assert a.placement.placement_mode == PlacementMode.SHARED
    assert a.placement.sharing_mode == SharingMode.SHARES
    assert (
        a.placement.share_percent is not None
        and a.placement.share_percent + (b.placement.share_percent or 0) <= 100
    )


def test_placement_is_filled_for_the_workload_builder(models: dict[str, ModelFacts]) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    p = plan(planner, models["qwen7b"]).placement
    assert p is not None
    assert (p.device_class_name, p.driver, p.pool, p.devices, p.node_name) == (
        "gpu.nvidia.com",
        "gpu.nvidia.com",
        "n1",
        ["gpu-0"],
        "n1",
    )
    assert p.device_uuids and p.device_uuids[0].startswith("GPU-")
    assert p.accelerator_product_name == "NVIDIA H100 80GB HBM3"
    assert p.accelerator_memory_gi_b == 80
    # 18.67 GiB of the 79.5 GiB the runtime sees, rounded up: the weights, the runtime's overhead and margin,
    # and the KV cache of the chat default (16 requests of 2,048 tokens at once, 32,768 tokens; issue 42)
    assert p.share_percent == 24
    assert p.memory_gi_b == pytest.approx(0.24 * 80, abs=0.01)
    assert p.device_count == 1


def test_estimates_come_with_the_plan_as_quantities(models: dict[str, ModelFacts]) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    est = plan(planner, models["qwen7b"]).estimates
    assert est is not None
    assert (est.cpu, est.memory, est.model_volume) == (
        "1",
        "8Gi",
        "17Gi",
    )  # a share: 2 × its fraction, at least 1
    assert "× 2 B (bfloat16 as loaded)" in est.explanation
    assert est.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2
    assert est.context_length >= 4096 and "on this placement" in est.explanation


def test_best_fit_fills_a_partially_used_card_before_an_empty_one(
    half: ModelFacts, models: dict[str, ModelFacts]
) -> None:
    claims = [fleet_claim("x", "c1", "other", [("n1", "gpu-1", 60)])]
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0), fleet_gpu("n1", 1)])], claims))
    p = plan(planner, sized(models["qwen7b"], 20)).placement
    assert p is not None and p.devices == ["gpu-1"]


def test_whole_device_on_dedicated_gpus_takes_the_smallest_that_holds(models: dict[str, ModelFacts]) -> None:
    devices = [
        fleet_gpu("n1", 0, shares=False),
        fleet_gpu("n1", 1, memory_gi=40, product="NVIDIA A100-SXM4-40GB", shares=False),
    ]
    planner = Planner(inventory([fleet_slice("n1", devices)]))
    p = plan(planner, models["qwen7b"]).placement
    assert p is not None
    assert (p.placement_mode, p.sharing_mode, p.devices) == (
        PlacementMode.WHOLE_DEVICE,
        SharingMode.NONE,
        ["gpu-1"],
    )
    assert p.share_percent is None


def test_mig_partition_smallest_sufficient(models: dict[str, ModelFacts]) -> None:
    migs = [
        fleet_mig("n1", 0, "3g.40gb", 0, 40),
        fleet_mig("n1", 0, "2g.20gb", 4, 20),
        fleet_mig("n1", 0, "1g.10gb", 6, 10),
    ]
    planner = Planner(inventory([fleet_slice("n1", migs)]))
    p = plan(
        planner,
        sized(models["qwen7b"], 15),
        accelerator_policy=AcceleratorPolicy(device_class_names=["mig.nvidia.com"]),
    ).placement
    assert p is not None
    assert (p.device_class_name, p.sharing_mode, p.devices) == (
        "mig.nvidia.com",
        SharingMode.PARTITION,
        ["gpu-0-mig-2g20gb-14-4"],
    )


def test_tensor_parallel_uses_a_power_of_two_devices_of_one_node(models: dict[str, ModelFacts]) -> None:
    gpus = [fleet_gpu("n1", i, shares=False) for i in range(4)]
    planner = Planner(
        inventory([fleet_slice("n1", gpus), fleet_slice("n2", [fleet_gpu("n2", 0, shares=False)])])
    )
    p = plan(planner, sized(models["qwen7b"], 150)).placement
    assert p is not None
    assert p.placement_mode == PlacementMode.MULTI_DEVICE
    assert p.device_count == 2 and p.node_name == "n1" and len(p.device_uuids or []) == 2


def test_device_classes_are_tried_in_policy_order(models: dict[str, ModelFacts]) -> None:
    slices = [fleet_slice("n1", [fleet_gpu("n1", 0), fleet_mig("n1", 1, "3g.40gb", 0, 40)])]
    planner = Planner(inventory(slices))
    order = ["mig.nvidia.com", "gpu.nvidia.com"]
    p = plan(
        planner, models["qwen7b"], accelerator_policy=AcceleratorPolicy(device_class_names=order)
    ).placement
    assert p is not None and p.device_class_name == "mig.nvidia.com"


def test_no_plan_spans_mig_partitions_issue_41(models: dict[str, ModelFacts]) -> None:
    """Two 3g.40gb partitions hold 60 GiB together, but a CUDA process sees one MIG device: the order is
    refused, and says why (issue 41: it was planned over both, and vLLM cannot run so)."""
    parts = [fleet_mig("n1", 0, "3g.40gb", 0, 40), fleet_mig("n1", 0, "3g.40gb", 4, 40)]
    planner = Planner(inventory([fleet_slice("n1", parts)]))
    answer = plan(planner, sized(models["qwen7b"], 60))
    assert answer.placement is None and answer.refusal is not None
    assert answer.refusal.reason == Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY
    assert "MIG partitions are never combined" in answer.refusal.message
    whole = Planner(
        inventory([fleet_slice("n1", [fleet_gpu("n1", i, memory_gi=40, shares=False) for i in (0, 1)])])
    )
    p = plan(whole, sized(models["qwen7b"], 60)).placement
    assert p is not None and p.device_count == 2  # whole cards of one node still combine


def test_policy_selector_narrows_the_devices(models: dict[str, ModelFacts]) -> None:
    devices = [fleet_gpu("n1", 0), fleet_gpu("n1", 1, memory_gi=40, product="NVIDIA A100-SXM4-40GB")]
    planner = Planner(inventory([fleet_slice("n1", devices)]))
    selector = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')"
    p = plan(planner, models["qwen7b"], accelerator_policy=AcceleratorPolicy(selector=selector)).placement
    assert p is not None and p.devices == ["gpu-0"]


@pytest.mark.parametrize("walked", [False, True])
def test_no_capacity_under_a_narrow_class_names_the_constraint_issue_45(
    models: dict[str, ModelFacts], walked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H100 is full; an L4 and an A100 have room, but the class admits H100s only: the refusal says the
    class's selector leaves them out, not that no device has room (issue 45). The same whether the class is
    surveyed once for many orders or walked for this one."""
    if walked:
        monkeypatch.setattr(Surveys, "surveyed", lambda *_: None)
    devices = [
        fleet_gpu("n1", 0),
        fleet_gpu("n1", 1, memory_gi=40, product="NVIDIA A100-SXM4-40GB"),
        fleet_gpu("n1", 2, memory_gi=24, product="NVIDIA L4"),
    ]
    inv = inventory([fleet_slice("n1", devices)])
    inv.upsert_claim(fleet_claim("x", "full", "full", [("n1", "gpu-0", 100)]))
    selector = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')"
    policy = AcceleratorPolicy(selector=selector)
    refusal = plan(Planner(inv), models["qwen7b"], accelerator_policy=policy).refusal
    assert refusal is not None and refusal.reason == Reason.NO_CAPACITY
    assert f"the class's accelerator selector `{selector}`" in refusal.message
    assert "1 × NVIDIA A100-SXM4-40GB, 1 × NVIDIA L4" in refusal.message
    # without the selector, nothing is said of it: the order is placed
    assert plan(Planner(inv), models["qwen7b"], "b").placement is not None


def test_allowed_share_percents_round_the_share_up(models: dict[str, ModelFacts]) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    policy = AcceleratorPolicy(allowed_share_percents=[25, 50, 100])
    p = plan(planner, models["qwen7b"], accelerator_policy=policy).placement
    assert p is not None and p.share_percent == 25
    p = plan(planner, sized(models["qwen7b"], 30), "b", accelerator_policy=policy).placement
    assert p is not None and p.share_percent == 50


def test_minimum_compute_capability_is_honoured(models: dict[str, ModelFacts]) -> None:
    devices = [fleet_gpu("n1", 0, compute_capability="8.0.0"), fleet_gpu("n1", 1, compute_capability="9.0.0")]
    planner = Planner(inventory([fleet_slice("n1", devices)]))
    p = plan(
        planner, models["qwen7b"], requirements=RuntimeRequirements(min_compute_capability="8.9")
    ).placement
    assert p is not None and p.devices == ["gpu-1"]


# ---------------------------------------------------------------- pools, withdrawn devices, own holdings


def test_incomplete_pools_and_older_generations_are_not_used(models: dict[str, ModelFacts]) -> None:
    slices = [
        fleet_slice("n1", [fleet_gpu("n1", 0)], count=2),  # one of two slices: incomplete
        fleet_slice("n2", [fleet_gpu("n2", 0)], generation=1),
        fleet_slice("n2", [fleet_gpu("n2", 5)], generation=0),
    ]
    inv = inventory(slices)
    assert sorted(inv.view.fleet.devices) == [("gpu.nvidia.com", "n2", "gpu-0")]


def test_replan_counts_own_holding_as_available(half: ModelFacts) -> None:
    claims = [
        fleet_claim("ns", "mine", "o", [("n1", "gpu-0", 48)]),
        fleet_claim("x", "theirs", "other", [("n1", "gpu-0", 52)]),
    ]
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])], claims))
    p = plan(planner, half, "o").placement
    assert p is not None and p.devices == ["gpu-0"]
    assert plan(planner, half, "stranger").refusal is not None


def test_a_withdrawn_device_is_never_available_even_to_its_holder(half: ModelFacts) -> None:
    claims = [fleet_claim("ns", "mine", "o", [("n1", "gpu-0", 48)])]
    inv = inventory([fleet_slice("n1", [fleet_gpu("n1", 1)])], claims)
    inv.upsert_claim(fleet_claim("x", "theirs", "other", [("n1", "gpu-1", 90)]))
    holding = Placement(
        placement_mode=PlacementMode.SHARED,
        driver="gpu.nvidia.com",
        pool="n1",
        devices=["gpu-0"],
        share_percent=48,
    )
    r = plan(Planner(inv), half, "o", holding=holding)
    assert r.placement is None and r.refusal is not None
    assert len(inv.view.ledger.orphans()) == 1


def test_back_to_back_plans_do_not_get_the_same_room(models: dict[str, ModelFacts]) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0, shares=False)])]))
    assert plan(planner, models["qwen7b"], "a").placement is not None
    assert plan(planner, models["qwen7b"], "b").refusal is not None
    assert plan(planner, models["qwen7b"], "a").placement is not None  # its own reservation


def test_reservation_expires_and_yields_to_the_claim(models: dict[str, ModelFacts]) -> None:
    inv = inventory([fleet_slice("n1", [fleet_gpu("n1", 0, shares=False)])])
    planner = Planner(inv, reservation_ttl=0.0)
    assert plan(planner, models["qwen7b"], "a").placement is not None
    assert plan(planner, models["qwen7b"], "b").placement is not None  # a's reservation expired
    inv.upsert_claim(fleet_claim("ns", "b-claim", "b", [("n1", "gpu-0", None)]))
    assert plan(planner, models["qwen7b"], "c").refusal is not None


def test_tainted_devices_are_not_offered(models: dict[str, ModelFacts]) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0, taint=True)])]))
    r = plan(planner, models["qwen7b"])
    assert r.refusal is not None and r.refusal.reason == Reason.NO_CAPACITY


def test_devices_of_a_node_that_takes_no_new_pods_are_not_offered_until_it_does(
    models: dict[str, ModelFacts],
) -> None:
    """The scheduler never places a pod on a cordoned or NoSchedule-tainted node: neither does the plan."""
    inv = inventory([fleet_slice("n1", [fleet_gpu("n1", 0)]), fleet_slice("n2", [fleet_gpu("n2", 0)])])
    planner = Planner(inv)
    inv.upsert_node({"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})
    inv.upsert_node(
        {
            "metadata": {"name": "n2"},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        }
    )
    r = plan(planner, models["qwen7b"], "a")
    assert r.refusal is not None and r.refusal.reason == Reason.NO_CAPACITY
    inv.upsert_node(
        {
            "metadata": {"name": "n2"},
            "spec": {"taints": [{"key": "example.com/prefer-not", "effect": "PreferNoSchedule"}]},
        }
    )  # a preference is no bar
    r = plan(planner, models["qwen7b"], "b")
    assert r.placement is not None and r.placement.node_name == "n2"
    inv.delete_node({"metadata": {"name": "n1"}})
    assert (
        inv.view.fleet.node_states["n1"] == "deleted"
    )  # its slices may outlive it a moment: nothing is placed there
    inv.upsert_node({"metadata": {"name": "n1"}, "spec": {}})  # back, and open
    assert "n1" not in inv.view.fleet.closed_nodes and "n1" not in inv.view.fleet.departed


# ---------------------------------------------------------------- reasons


def test_no_capacity_when_every_device_is_taken(models: dict[str, ModelFacts]) -> None:
    claims = [fleet_claim("x", "c", "other", [("n1", "gpu-0", 100)])]
    r = plan(Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])], claims)), models["qwen7b"])
    assert r.refusal is not None and r.refusal.reason == Reason.NO_CAPACITY


def test_not_enough_memory_names_required_and_largest(models: dict[str, ModelFacts]) -> None:
    devices = [fleet_gpu("n1", 0, memory_gi="23034Mi", product="NVIDIA L4")]  # as the DRA driver publishes
    r = plan(Planner(inventory([fleet_slice("n1", devices)])), models["llama70b_fp8"])
    assert r.refusal is not None and r.refusal.reason == Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY
    need = memory_need(models["llama70b_fp8"], load=SERVING_DEFAULTS[EndpointType.CHAT])
    assert need is not None and f"needs {round(need.required / GIB, 2)} GiB" in r.refusal.message
    assert f"{round(need.per_device(8) / GIB, 2)} GiB on each of 8" in r.refusal.message
    assert "largest accelerator found publishes 22.49 GiB (NVIDIA L4" in r.refusal.message
    assert "KV 327,680 B/token" in r.refusal.message
    # issue 42: the refusal names the serving target it sized for, and a smaller one as a way out
    assert (
        "on one device to serve 16 requests of 2,048 tokens at once and a request of up to 8,192 tokens "
        "(the class's serving target)" in r.refusal.message
    )
    assert r.refusal.message.endswith("or a smaller serving target in the class.")


def test_a_70b_fp8_model_on_an_empty_h100_node_is_placed_not_refused_issue_10(
    models: dict[str, ModelFacts],
) -> None:
    """Main refused it forever (NoCompatiblePlacement): TP was tried only past the raw card size."""
    devices = [fleet_gpu("n1", i, memory_gi="81559Mi", shares=False) for i in range(8)]
    r = plan(Planner(inventory([fleet_slice("n1", devices)])), models["llama70b_fp8"])
    assert r.placement is not None and r.estimates is not None
    assert r.estimates.context_length >= 4096


def test_tensor_parallel_when_one_card_leaves_less_than_the_minimum_context(
    models: dict[str, ModelFacts],
) -> None:
    devices = [fleet_gpu("n1", i, memory_gi="46068Mi", product="NVIDIA L40S", shares=False) for i in range(4)]
    r = plan(Planner(inventory([fleet_slice("n1", devices)])), models["llama70b_fp8"])
    assert r.placement is not None and r.placement.device_count == 2


def test_incomplete_memory_profile_is_told_apart(models: dict[str, ModelFacts]) -> None:
    r = plan(Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0, memory_gi=None)])])), models["qwen7b"])
    assert r.refusal is not None and r.refusal.reason == Reason.NO_COMPATIBLE_PLACEMENT
    assert "memory profile of the hardware is incomplete" in r.refusal.message
    assert "administrator" in r.refusal.message


def test_a_model_too_large_for_any_accelerator_made_is_too_large_even_beside_unprofiled_devices(
    models: dict[str, ModelFacts],
) -> None:
    """Issue 16: on default-llm a 405B model was told its hardware profile was incomplete."""
    huge = models["llama8b"].model_copy(
        update={
            "name": "meta-llama/Llama-3.1-405B-Instruct",
            "parameter_count": 405_853_388_800,
            "dtype_counts": None,
            "weight_bytes": None,
        }
    )
    slices = [
        fleet_slice("h", [fleet_gpu("h", i) for i in range(2)]),
        fleet_slice("gh", [fleet_gpu("gh", 0, memory_gi=None)]),
    ]  # one device, memory unpublished
    r = plan(Planner(inventory(slices)), huge)
    assert r.refusal is not None and r.refusal.reason == Reason.NO_ACCELERATOR_WITH_ENOUGH_MEMORY
    assert "publishing no memory" in r.refusal.message and "288 GiB" in r.refusal.message
    # A model an unprofiled device could hold, were it large: its profile is the answer.
    large = huge.model_copy(update={"parameter_count": 120_000_000_000})  # > 2 H100s, < 288 GiB
    r = plan(Planner(inventory(slices)), large)
    assert r.refusal is not None and r.refusal.reason == Reason.NO_COMPATIBLE_PLACEMENT
    assert "memory profile of the hardware is incomplete" in r.refusal.message


def test_free_pieces_too_small_everywhere_is_no_capacity(half: ModelFacts) -> None:
    claims = [
        fleet_claim("x", "c0", "p", [("n1", "gpu-0", 70)]),
        fleet_claim("x", "c1", "q", [("n1", "gpu-1", 70)]),
    ]
    r = plan(Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0), fleet_gpu("n1", 1)])], claims)), half)
    assert r.refusal is not None and r.refusal.reason == Reason.NO_CAPACITY
    assert "largest free piece 24.0 GiB" in r.refusal.message


def test_room_in_a_form_the_policy_forbids_is_no_room_now(half: ModelFacts) -> None:
    claims = [fleet_claim("x", "c0", "p", [("n1", "gpu-0", 40)])]
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])], claims))
    r = plan(planner, half, accelerator_policy=AcceleratorPolicy(allowed_share_percents=[100]))
    assert r.refusal is not None and r.refusal.reason == Reason.NO_COMPATIBLE_PLACEMENT
    assert r.refusal.message.startswith("No room now")
    assert "incomplete" not in r.refusal.message


def test_class_selector_that_errors_is_undecidable(models: dict[str, ModelFacts]) -> None:
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index == 0"}}]},
    }
    r = plan(Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])], classes=[bad])), models["qwen7b"])
    assert r.refusal is not None and r.refusal.reason == Reason.PLACEMENT_UNDECIDABLE
    msg = r.refusal.message
    assert "gpu.nvidia.com" in msg and "selector #0" in msg and "gpu.nvidia.com/n1/gpu-0" in msg
    assert "index" in msg


def test_a_missing_attribute_is_named_in_the_words_of_the_cluster(models: dict[str, ModelFacts]) -> None:
    """kube-scheduler says `no such key: index`; the planner's PlacementUndecidable says the same."""
    policy = AcceleratorPolicy(selector="device.attributes['gpu.nvidia.com'].index == 0")
    r = plan(
        Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])])),
        models["qwen7b"],
        accelerator_policy=policy,
    )
    assert r.refusal is not None and r.refusal.reason == Reason.PLACEMENT_UNDECIDABLE
    assert "no such key: index" in r.refusal.message
    assert "search never started" in r.refusal.message


@pytest.mark.parametrize(
    "selector", ["device.attributes[", "device.attributes['gpu.nvidia.com'].nope == 'x'"]
)
def test_policy_selector_that_cannot_be_judged_is_undecidable(
    models: dict[str, ModelFacts], selector: str
) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    r = plan(planner, models["qwen7b"], accelerator_policy=AcceleratorPolicy(selector=selector))
    assert r.refusal is not None and r.refusal.reason == Reason.PLACEMENT_UNDECIDABLE
    assert "CEL" in r.refusal.message


def test_missing_priority_class(models: dict[str, ModelFacts]) -> None:
    r = plan(
        Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])])),
        models["qwen7b"],
        priority_class_name="gold",
    )
    assert r.refusal is not None and r.refusal.reason == Reason.PRIORITY_CLASS_NOT_FOUND
    assert "gold" in r.refusal.message


def test_higher_priority_preempts_the_fewest_lower_orders(half: ModelFacts) -> None:
    claims = [
        fleet_claim("x", "c0", "low", [("n1", "gpu-0", 80)]),
        fleet_claim("y", "c1", "lower", [("n1", "gpu-1", 30)]),
        fleet_claim("y", "c2", "lowest", [("n1", "gpu-1", 40)]),
    ]
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0), fleet_gpu("n1", 1)])],
        claims,
        [fleet_priority_class("gold", 1000)],
        ranked=[("x", "low", 10), ("y", "lower", 5), ("y", "lowest", 1)],
    )
    r = plan(Planner(inv), half, priority_class_name="gold")
    assert r.placement is not None and r.placement.devices == ["gpu-1"]
    assert [(v.namespace, v.name) for v in r.preempt] == [("y", "lowest")]


def test_preemption_that_cannot_free_enough_fails(half: ModelFacts) -> None:
    claims = [
        fleet_claim("x", "c0", "low", [("n1", "gpu-0", 10)]),
        fleet_claim("x", "c1", None, [("n1", "gpu-0", 80)]),
    ]
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        claims,
        [fleet_priority_class("gold", 1000)],
        ranked=[("x", "low", 1)],
    )
    r = plan(Planner(inv), half, priority_class_name="gold")
    assert r.refusal is not None and r.refusal.reason == Reason.PLANNING_PREEMPTION_FAILED


def test_a_displaced_order_replanning_before_its_claim_goes_does_not_land_back(half: ModelFacts) -> None:
    """While a preemption is under way the card is over-committed (the victim's claim and the new
    reservation); the victim counts its own claim as free, yet it has lost the card to the higher priority:
    it is not planned back there (issue 26: a pass must not undo the previous pass's work)."""
    claims = [fleet_claim("x", "c0", "victim", [("n1", "gpu-0", 80)])]
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        claims,
        [fleet_priority_class("gold", 1000), fleet_priority_class("tin", 1)],
        ranked=[("x", "victim", 1)],
    )
    planner = Planner(inv)
    urgent = plan(planner, half, "urgent", "y", priority_class_name="gold")
    assert urgent.placement is not None
    assert [(v.namespace, v.name) for v in urgent.preempt] == [("x", "victim")]
    again = plan(planner, sized(half, 60), "victim", "x", priority_class_name="tin")
    assert again.placement is None and again.refusal is not None
    assert again.refusal.reason == Reason.NO_CAPACITY
    assert inv.view.ranking.displaced(("x", "victim")) and not inv.view.ranking.displaced(("y", "urgent"))
    assert (
        inv.view.ledger.room(("gpu.nvidia.com", "n1", "gpu-0"), [("x", "victim")]) < 60
    )  # not for it: it lost the card


def test_equal_priority_never_preempts(half: ModelFacts) -> None:
    claims = [fleet_claim("x", "c0", "peer", [("n1", "gpu-0", 90)])]
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        claims,
        [fleet_priority_class("gold", 1000)],
        ranked=[("x", "peer", 1000)],
    )
    r = plan(Planner(inv), half, priority_class_name="gold")
    assert r.refusal is not None and r.refusal.reason == Reason.NO_CAPACITY and r.preempt == []


# Issue 14, finding 5: namespace users may write ResourceClaims; a label was the claim's priority.
def test_a_claim_relabelled_to_a_huge_priority_is_still_preempted_at_its_orders_priority(
    half: ModelFacts,
) -> None:
    claim = fleet_claim("x", "c0", "victim", [("n1", "gpu-0", 80)])
    claim["metadata"]["labels"][LABEL_PRIORITY] = "1000000000"
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        [claim],
        [fleet_priority_class("gold", 1000)],
        ranked=[("x", "victim", 1)],
    )

    r = plan(Planner(inv), half, priority_class_name="gold")

    assert [(v.namespace, v.name) for v in r.preempt] == [("x", "victim")]


def test_a_claims_priority_follows_its_orders_class_as_it_changes(half: ModelFacts) -> None:
    claims = [fleet_claim("x", "c0", "held", [("n1", "gpu-0", 80)])]
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        claims,
        [fleet_priority_class("gold", 1000), fleet_priority_class("top", 5000)],
        ranked=[("x", "held", 1)],
    )
    assert inv.view.priorities.of_order(("x", "held")) == 1

    inv.upsert_service_class(fleet_service_class("c1", "top"))  # the administrator raises the class
    r = plan(Planner(inv), half, "urgent", "y", priority_class_name="gold")
    assert (inv.view.priorities.of_order(("x", "held")), r.preempt) == (5000, [])

    inv.upsert_order(fleet_order("x", "held", None))  # the order leaves every class: the default, 0
    r = plan(Planner(inv), half, "urgent", "y", priority_class_name="gold")
    assert [(v.namespace, v.name) for v in r.preempt] == [("x", "held")]


def test_a_claim_of_an_order_the_planner_does_not_know_has_the_default_priority() -> None:
    claim = fleet_claim("x", "c0", "ghost", [("n1", "gpu-0", 80)])
    claim["metadata"]["labels"][LABEL_PRIORITY] = "1000000000"
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])], [claim], [fleet_priority_class("base", 7, default=True)]
    )

    assert [
        inv.view.priorities.of_holding(h)
        for h in inv.view.ledger.holdings_on(("gpu.nvidia.com", "n1", "gpu-0"))
    ] == [7]


# ---------------------------------------------------------------- judge_plan


@pytest.mark.parametrize(
    ("changes", "field", "value"),
    [
        ({"share_percent": 150}, "sharePercent", "150"),
        ({"share_percent": 0}, "sharePercent", "0"),
        ({"device_class_name": None}, "deviceClassName", "None"),
        ({"device_class_name": "tpu.example.com"}, "deviceClassName", "'tpu.example.com'"),
        ({"memory_gi_b": 640.0}, "memoryGiB", "640.0"),
    ],
)
def test_judge_names_field_and_value(changes: dict[str, Any], field: str, value: str) -> None:
    inv = inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])])
    good = Placement(
        device_class_name="gpu.nvidia.com",
        placement_mode=PlacementMode.SHARED,
        sharing_mode=SharingMode.SHARES,
        share_percent=50,
        memory_gi_b=40.0,
    )
    assert judge_plan(good, inv.view) is None
    refusal = judge_plan(good.model_copy(update=changes), inv.view)
    assert refusal is not None and refusal.reason == Reason.LAUNCH_PLAN_NOT_A_PLACEMENT
    assert f"{field}={value}" in refusal.message


def test_planner_answers_pass_the_judge(models: dict[str, ModelFacts]) -> None:
    inv = inventory([fleet_slice("n1", [fleet_gpu("n1", i) for i in range(2)])])
    p = plan(Planner(inv), models["qwen32b_awq"]).placement
    assert p is not None and judge_plan(p, inv.view) is None


def test_the_placement_carries_the_compute_capability_as_cuda_names_it(half: ModelFacts) -> None:
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0, compute_capability="8.9.0")])]))
    placed = plan(planner, half).placement
    assert placed is not None and placed.accelerator_compute_capability == "8.9"


def test_a_dry_run_answers_without_reserving(models: dict[str, ModelFacts]) -> None:
    """Issue 17: an estimate before ordering must hold no room."""
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    ask = PlanRequest(order=OrderRef(namespace="ns", name="would-be"), facts=models["qwen7b"], dry_run=True)
    answer = planner.plan(ask)
    assert answer.placement is not None
    assert not planner.inventory.reserved_by(("ns", "would-be"))


def test_a_displaced_order_is_never_planned_back_onto_the_card_it_lost_issue_26(half: ModelFacts) -> None:
    """The hot loop: whatever holds the card (claims, plans, reservations), an order that lost it in the
    ledger's ranking finds no room there while nothing changed, so no pass undoes the previous one."""
    inv = inventory(
        [fleet_slice("n1", [fleet_gpu("n1", 0)])],
        [],
        [fleet_priority_class("gold", 1000), fleet_priority_class("tin", 1)],
        ranked=[("x", "a", 1), ("x", "b", 1), ("y", "urgent", 1000)],
    )
    planner = Planner(inv, reservation_ttl=0.0)
    placed = {}
    for name in ("a", "b"):
        p = plan(planner, sized(half, 30), name, "x", priority_class_name="tin").placement
        assert p is not None
        placed[name] = p
        inv.upsert_plan(
            {
                "metadata": {"namespace": "x", "name": name},
                "spec": {"placement": p.to_wire(), "plannedAt": f"2026-12-01T10:00:0{len(placed)}Z"},
            }
        )
    inv.expire()  # what the planner reserved is gone (a restart, a lapse): the LaunchPlans hold
    urgent = plan(planner, sized(half, 30), "urgent", "y", priority_class_name="gold")
    assert urgent.placement is not None and [v.name for v in urgent.preempt] == ["b"]  # the later one
    inv.upsert_plan(
        {"metadata": {"namespace": "y", "name": "urgent"}, "spec": {"placement": urgent.placement.to_wire()}}
    )
    assert inv.view.ranking.displaced(("x", "b")) and not inv.view.ranking.displaced(("x", "a"))
    for _ in range(3):  # pass after pass, the displaced order is refused, never given the card back
        again = plan(planner, sized(half, 30), "b", "x", priority_class_name="tin", holding=placed["b"])
        assert again.placement is None


def test_a_larger_serving_target_gets_a_larger_share_and_the_estimates_say_what_it_serves(
    models: dict[str, ModelFacts],
) -> None:
    """Issue 42: the share holds the class's serving target, and the estimates say what the launch serves."""
    planner = Planner(inventory([fleet_slice("n1", [fleet_gpu("n1", 0)])]))
    default = plan(planner, models["qwen7b"], name="a", dry_run=True)
    bigger = plan(
        planner,
        models["qwen7b"],
        name="b",
        dry_run=True,
        serving=ServingTarget(
            concurrent_requests=64, typical_request_tokens=2048, longest_request_tokens=8192
        ),
    )
    assert default.placement is not None and bigger.placement is not None
    assert default.placement.share_percent is not None and bigger.placement.share_percent is not None
    # 48 more requests of 2,048 tokens at 57,344 B a token: 5.25 GiB, 6.6 % of the 79.5 GiB seen
    assert bigger.placement.share_percent - default.placement.share_percent in (6, 7, 8)
    for answer, requests in ((default, 16), (bigger, 64)):
        est = answer.estimates
        assert est is not None and est.request_tokens == 2048
        assert est.concurrent_requests is not None and est.concurrent_requests >= requests
        assert est.kv_cache_tokens is not None and est.kv_cache_tokens >= requests * 2048
        assert est.context_length >= 8192
        assert f"serves {est.concurrent_requests} requests of 2,048 tokens at once" in est.explanation
