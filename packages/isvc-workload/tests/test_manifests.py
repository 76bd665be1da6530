"""The children of an order: names, labels, owners, and what each carries."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from isvc_api import (
    LABEL_MANAGED_BY,
    LABEL_ORDER,
    LABEL_PRIORITY,
    MANAGER,
    TLS,
    Constraints,
    Exposure,
    ExposureType,
    InferenceService,
    InferenceServiceClassSpec,
    LaunchPlanSpec,
    ModelPolicy,
    Placement,
    PlacementMode,
    Reason,
    Refusal,
    ScalingPolicy,
    SharingMode,
    UpdateStrategy,
)
from isvc_workload import (
    CPU_TARGET_PERCENT,
    FETCH_CONTAINER_NAME,
    REPLICAS_BY,
    RUNTIME_HASH_ANNOTATION,
    START_PERMIT_ANNOTATION,
    ModelVolume,
    PlanNotExpressible,
    SettingsIncomplete,
    WorkloadInputs,
    WorkloadSettings,
    auth_secret,
    autoscaler,
    claim_template_name,
    disruption_budget,
    endpoint_url,
    external_host,
    ingress,
    model_volume,
    outgrown,
    read_token,
    resource_claim_template,
    service,
    settle,
    statefulset,
)
from workload_builders import make_inputs, make_order

SETTINGS = WorkloadSettings(public_domain_template="%s.example.com", cluster_issuer_name="letsencrypt")

BUILDERS: dict[str, Callable[[WorkloadInputs], dict[str, Any] | None]] = {
    "ResourceClaimTemplate": resource_claim_template,
    "StatefulSet": lambda i: statefulset(i, SETTINGS),
    "Service": service,
    "Ingress": lambda i: ingress(i, SETTINGS),
    "Secret": lambda i: auth_secret(i.order),
}
NAMES = {"Secret": "llm-a-auth"}


def _container(manifest: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = manifest["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["server"]
    return containers[0]


def _env(manifest: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(manifest)["env"]}


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_every_child_is_named_after_the_order_labelled_and_owned_by_it(kind: str) -> None:
    manifest = BUILDERS[kind](make_inputs())
    assert manifest is not None
    meta = manifest["metadata"]
    name = claim_template_name(make_inputs()) if kind == "ResourceClaimTemplate" else NAMES.get(kind, "llm-a")
    assert (manifest["kind"], meta["name"], meta["namespace"]) == (kind, name, "team")
    assert {k: meta["labels"][k] for k in (LABEL_ORDER, LABEL_MANAGED_BY, "heritage", "module")} == {
        LABEL_ORDER: "llm-a",
        LABEL_MANAGED_BY: MANAGER,
        "heritage": "deckhouse",
        "module": "isvc",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "kind": "InferenceService",
            "name": "llm-a",
            "uid": "uid-1234",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_an_order_without_uid_cannot_own_children() -> None:
    order = make_order().model_copy(
        update={"metadata": make_order().metadata.model_copy(update={"uid": None})}
    )
    with pytest.raises(PlanNotExpressible, match=r"metadata\.uid"):
        service(make_inputs(order=order))


# ---------------------------------------------------------------- ResourceClaimTemplate


def _placement(**kw: Any) -> Placement:
    base: dict[str, Any] = {
        "device_class_name": "gpu.nvidia.com",
        "driver": "gpu.nvidia.com",
        "placement_mode": PlacementMode.WHOLE_DEVICE,
    }
    return Placement(**(base | kw))


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        pytest.param(
            _placement(device_uuids=["GPU-1"]),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].uuid == 'GPU-1'"
                        }
                    }
                ],
            },
            id="one device pinned with ==",
        ),
        pytest.param(
            _placement(
                placement_mode=PlacementMode.MULTI_DEVICE,
                device_count=2,
                device_uuids=["GPU-1", "GPU-2"],
                driver="gpu.example.com",
            ),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 2,
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.example.com' && "
                            "device.attributes['gpu.example.com'].uuid in "
                            "['GPU-1', 'GPU-2']"
                        }
                    }
                ],
            },
            id="several devices pinned with in, attribute domain from the driver",
        ),
        pytest.param(
            _placement(
                placement_mode=PlacementMode.SHARED, sharing_mode=SharingMode.SHARES, share_percent=50
            ),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "capacity": {"requests": {"shares": "50"}},
            },
            id="a share asks for consumable shares, unpinned when no uuid is planned",
        ),
        pytest.param(
            _placement(
                placement_mode=PlacementMode.SHARED,
                sharing_mode=SharingMode.SHARES,
                share_percent=25,
                memory_gi_b=19.5,
            ),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "capacity": {"requests": {"shares": "25", "memory": "19968Mi"}},
            },
            id="a share with planned memory asks for both (a plan without the planner's requests)",
        ),
        pytest.param(
            _placement(
                placement_mode=PlacementMode.SHARED,
                sharing_mode=SharingMode.SHARES,
                share_percent=9,
                memory_gi_b=7.2,
                capacity_requests={"memory": "7372Mi", "shares": "9"},
            ),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
                "capacity": {"requests": {"memory": "7372Mi", "shares": "9"}},
            },
            id="issue 26: the planner's requests as they are, memory floored (7.2 GiB is 7372.8Mi, not 7373Mi)",
        ),
        pytest.param(
            _placement(
                placement_mode=PlacementMode.MULTI_DEVICE,
                sharing_mode=SharingMode.SHARES,
                device_count=2,
                capacity_requests={"memory": "81920Mi", "shares": "100"},
            ),
            {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 2,
                "capacity": {"requests": {"memory": "81920Mi", "shares": "100"}},
            },
            id="tensor parallel on shareable cards asks each card whole, as the ledger counts it",
        ),
        pytest.param(
            _placement(
                device_class_name="mig.nvidia.com",
                placement_mode=PlacementMode.SHARED,
                sharing_mode=SharingMode.PARTITION,
                share_percent=50,
            ),
            {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1},
            id="a partition is a device of its own, no shares",
        ),
    ],
)
def test_the_claim_template_requests_the_planned_devices(
    placement: Placement, expected: dict[str, Any]
) -> None:
    manifest = resource_claim_template(make_inputs(placement=placement))
    assert [{"name": "gpu", "exactly": expected}] == manifest["spec"]["spec"]["devices"]["requests"]


def test_a_plan_that_needs_another_claim_gets_another_template_and_the_same_one_keeps_its_name() -> None:
    """Issue 16: the API server refuses an edit of a template's spec, so a new share is a new template."""
    shared = _placement(
        placement_mode=PlacementMode.SHARED, sharing_mode=SharingMode.SHARES, share_percent=31
    )
    smaller = shared.model_copy(update={"share_percent": 27})
    first, again = (claim_template_name(make_inputs(placement=shared)) for _ in range(2))
    other = claim_template_name(make_inputs(placement=smaller))
    assert first == again != other
    rolled = statefulset(make_inputs(placement=smaller), SETTINGS)["spec"]["template"]["spec"]
    assert rolled["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": other}]


def test_claims_made_from_the_template_carry_the_order_and_its_priority() -> None:
    labels = resource_claim_template(make_inputs(priority=1000))["spec"]["metadata"]["labels"]
    assert (labels[LABEL_ORDER], labels[LABEL_PRIORITY]) == ("llm-a", "1000")


@pytest.mark.parametrize(
    ("placement", "field"),
    [
        (_placement(device_class_name=None), "placement.deviceClassName"),
        (_placement(driver=None, device_uuids=["GPU-1"]), "placement.driver"),
        (_placement(device_count=2, device_uuids=["GPU-1"]), "placement.deviceUuids"),
        (
            _placement(
                placement_mode=PlacementMode.SHARED, sharing_mode=SharingMode.SHARES, share_percent=150
            ),
            "placement.sharePercent",
        ),
    ],
)
def test_a_plan_the_claim_cannot_carry_is_refused_naming_the_field(placement: Placement, field: str) -> None:
    with pytest.raises(PlanNotExpressible) as caught:
        resource_claim_template(make_inputs(placement=placement))
    assert caught.value.field == field


def test_uuids_are_quoted_as_cel_strings() -> None:
    manifest = resource_claim_template(make_inputs(placement=_placement(device_uuids=["x' || true || '"])))
    expression = manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"][
        "expression"
    ]
    assert expression.endswith("== 'x\\' || true || \\''")


# ---------------------------------------------------------------- StatefulSet


@pytest.mark.parametrize(
    ("constraints", "replicas"),
    [
        (None, 1),
        (Constraints(min_replicas=2, max_replicas=4), 2),
        (Constraints(min_replicas=1, max_replicas=4, autoscaler=True), None),
        (Constraints(min_replicas=2, max_replicas=2, autoscaler=True), 2),
    ],
    ids=["no scaling policy: one", "minReplicas", "autoscaler owns the count", "no room to scale: min"],
)
def test_replicas_come_from_the_constraints(constraints: Constraints | None, replicas: int | None) -> None:
    spec = statefulset(make_inputs(constraints=constraints), SETTINGS)["spec"]
    assert spec.get("replicas") == replicas
    hpa = autoscaler(make_inputs(constraints=constraints))
    assert (hpa is None) == (replicas is not None)  # exactly one of them owns the count


def test_the_autoscaler_scales_the_orders_set_within_the_class_bounds() -> None:
    inputs = make_inputs(constraints=Constraints(min_replicas=1, max_replicas=3, autoscaler=True))
    hpa = autoscaler(inputs)
    assert hpa is not None and hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": statefulset(inputs, SETTINGS)["metadata"]["name"],
    }
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 3)
    assert spec["metrics"][0]["resource"]["target"]["averageUtilization"] == CPU_TARGET_PERCENT
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"


@pytest.mark.parametrize(
    ("constraints", "budget"),
    [
        (None, False),
        (Constraints(min_replicas=1, max_replicas=1), False),
        (Constraints(min_replicas=2, max_replicas=2), True),
        (Constraints(min_replicas=1, max_replicas=4, autoscaler=True), True),
    ],
    ids=["no scaling policy", "one replica", "two replicas", "autoscaled from one"],
)
def test_a_disruption_budget_takes_replicas_one_at_a_time_where_there_can_be_several(
    constraints: Constraints | None, budget: bool
) -> None:
    """Issue 27: orders had no budget, so `kubectl drain` took every replica down at once; a one-replica
    order gets none, so it never holds a drain."""
    pdb = disruption_budget(make_inputs(constraints=constraints))
    assert (pdb is not None) == budget
    if pdb is not None:
        assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["name"] == "llm-a"
        assert pdb["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {LABEL_ORDER: "llm-a"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        }
        assert pdb["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"


def test_the_pod_claims_its_device_through_the_template_and_the_server_uses_it() -> None:
    manifest = statefulset(make_inputs(), SETTINGS)
    pod_spec = manifest["spec"]["template"]["spec"]
    template = resource_claim_template(make_inputs())["metadata"]["name"]
    assert template.startswith("llm-a-")
    assert pod_spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": template}]
    assert _container(manifest)["resources"] == {
        "requests": {"cpu": "4", "memory": "24Gi"},
        "limits": {"memory": "24Gi"},
        "claims": [{"name": "gpu"}],
    }
    assert "tolerations" not in pod_spec
    assert "nodeSelector" not in pod_spec


def _whole_device() -> Placement:
    return Placement(
        device_class_name="gpu.nvidia.com",
        driver="gpu.nvidia.com",
        placement_mode=PlacementMode.WHOLE_DEVICE,
        sharing_mode=SharingMode.NONE,
        device_uuids=["GPU-1"],
    )


def test_the_server_runs_the_compiled_runtime() -> None:
    container = _container(statefulset(make_inputs(placement=_whole_device()), SETTINGS))
    assert (container["image"], container["command"], container["args"]) == (
        "vllm/vllm-openai:v0.11.0",
        ["vllm", "serve"],
        ["/models/org/model", "--port", "8000"],
    )
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/models"]


def test_the_model_volume_is_a_claim_template_sized_by_the_estimate_and_read_back() -> None:
    manifest = statefulset(make_inputs(placement=_whole_device()), SETTINGS)
    spec = manifest["spec"]
    [template] = spec["volumeClaimTemplates"]
    name = template["metadata"]["name"]
    assert name.startswith("models-") and template["metadata"]["labels"][LABEL_ORDER] == "llm-a"
    assert template["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "40Gi"}},
    }
    assert "volumes" not in spec["template"]["spec"]  # no emptyDir: the volume is the set's own claim
    assert _container(manifest)["volumeMounts"] == [{"name": name, "mountPath": "/models"}]
    assert model_volume(manifest) == ModelVolume(name=name, size="40Gi")
    assert model_volume(None) is None


def test_the_set_is_parallel_behind_the_orders_service_and_its_volumes_go_with_it() -> None:
    spec = statefulset(make_inputs(), SETTINGS)["spec"]
    assert (spec["serviceName"], spec["podManagementPolicy"]) == ("llm-a", "Parallel")
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}
    recreate = statefulset(make_inputs(update_strategy=UpdateStrategy(type="Recreate")), SETTINGS)["spec"]
    assert recreate["updateStrategy"] == {"type": "RollingUpdate"}  # a set replaces each pod in place anyway


def test_the_storage_class_setting_names_the_class_and_another_size_another_template() -> None:
    classed = statefulset(make_inputs(), SETTINGS.model_copy(update={"model_volume_storage_class": "fast"}))
    assert classed["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast"
    plain = model_volume(statefulset(make_inputs(), SETTINGS))
    bigger = model_volume(statefulset(make_inputs(estimates=_estimates("80Gi")), SETTINGS))
    assert plain is not None and bigger is not None
    assert len({plain.name, bigger.name, model_volume(classed).name}) == 3  # type: ignore[union-attr]


def _estimates(volume: str) -> Any:
    return make_inputs().estimates.model_copy(update={"model_volume": volume})


def test_a_held_volume_large_enough_is_kept_as_the_set_holds_it() -> None:
    """The API server refuses a change to a set's claim templates: a smaller model stays on the big volume."""
    held = statefulset(make_inputs(estimates=_estimates("80Gi")), SETTINGS)
    wanted = statefulset(make_inputs(), SETTINGS)
    settled = settle(wanted, held)
    assert isinstance(settled, dict)
    assert settled["spec"]["volumeClaimTemplates"] == held["spec"]["volumeClaimTemplates"]
    assert (
        _container(settled)["volumeMounts"][0]["name"]
        == held["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    )
    assert settled["spec"]["template"]["spec"]["containers"][0]["args"] == _container(wanted)["args"]
    assert settle(wanted, None) is wanted and settle(wanted, wanted) is wanted


def test_an_order_that_outgrew_the_held_volume_is_refused_with_the_procedure() -> None:
    held = statefulset(make_inputs(estimates=_estimates("20Gi")), SETTINGS)
    refusal = settle(statefulset(make_inputs(), SETTINGS), held)
    assert isinstance(refusal, Refusal) and refusal.reason == Reason.WORKLOAD_ERROR
    assert "20Gi" in refusal.message and "40Gi" in refusal.message and "Release notes" in refusal.message
    # what the operator asks before it takes a new plan (issue 45): the same refusal, from the held set alone
    assert outgrown(held, "40Gi") == refusal
    assert outgrown(held, "20Gi") is None and outgrown(None, "40Gi") is None


@pytest.mark.parametrize(
    ("authentication", "has_key"),
    [("Token", True), ("None", False)],
)
def test_the_api_key_comes_from_the_auth_secret_only_when_a_token_is_required(
    authentication: str, has_key: bool
) -> None:
    exposure = Exposure(authentication=authentication)  # type: ignore[arg-type]
    env = _env(statefulset(make_inputs(exposure=exposure), SETTINGS))
    expected = {"secretKeyRef": {"name": "llm-a-auth", "key": "token"}} if has_key else None
    assert env.get("VLLM_API_KEY") == expected
    assert (env["A"], env["B"]) == ("1", "2")


def test_the_hf_token_reaches_the_fetch_container_only_and_is_never_copied() -> None:
    """Issue 12: the runtime reads the model offline and needs no Hub token."""
    with_ref = make_inputs(order=make_order(auth_ref={"name": "my-hf", "key": "hf"}))
    settings = SETTINGS.model_copy(update={"model_fetch_image": "registry/isvc/fetch@sha256:0"})
    pod = statefulset(with_ref, settings)["spec"]["template"]["spec"]
    fetch = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["initContainers"][0]["env"]}
    assert fetch["HF_TOKEN"] == {"secretKeyRef": {"name": "my-hf", "key": "hf"}}
    assert "HF_TOKEN" not in _env(statefulset(with_ref, settings))
    assert "HF_TOKEN" not in _env(statefulset(make_inputs(), SETTINGS))


def test_the_model_is_fetched_at_the_commit_the_plan_was_sized_for_through_the_configured_hub() -> None:
    settings = SETTINGS.model_copy(
        update={"model_fetch_image": "fetch", "huggingface_endpoint": "http://hub"}
    )
    inputs = make_inputs().model_copy(update={"model_commit": "0123abc"})
    fetch = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"][0]
    assert fetch["command"][-2:] == ["--revision", "0123abc"]
    assert {"name": "HF_ENDPOINT", "value": "http://hub"} in fetch["env"]


CACHE = "http://isvc-model-cache.d8-isvc.svc:8080"


def test_with_the_model_cache_the_download_step_asks_it_first_and_the_hub_for_the_rest() -> None:
    """Issue 46: the same `hf download`, through the cache (HF_ENDPOINT for that try) and then the Hub."""
    settings = SETTINGS.model_copy(
        update={
            "model_fetch_image": "fetch",
            "huggingface_endpoint": "http://hub",
            "model_cache_endpoint": CACHE,
        }
    )
    inputs = make_inputs(
        order=make_order(repo="org/model@abc123", auth_ref={"name": "my-hf", "key": "token"})
    )
    fetch = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"][0]
    plain = statefulset(inputs, SETTINGS.model_copy(update={"model_fetch_image": "fetch"}))
    download = plain["spec"]["template"]["spec"]["initContainers"][0]["command"]
    assert fetch["command"][:2] == ["/bin/sh", "-c"]
    assert fetch["command"][3:] == [FETCH_CONTAINER_NAME, *download]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in fetch["env"]}
    assert (env["ISVC_MODEL_CACHE"], env["ISVC_MODEL_DIR"], env["HF_ENDPOINT"]) == (
        CACHE,
        "/models/org/model",
        "http://hub",
    )
    assert env["HF_TOKEN"] == {
        "secretKeyRef": {"name": "my-hf", "key": "token"}
    }  # to the cache, then the Hub


def _run_step(tmp_path: Path, cache_serves: bool) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """The download step's shell, with an `hf` on PATH that logs the endpoint of each call; through the cache
    it leaves a partial file and fails unless `cache_serves`."""
    settings = SETTINGS.model_copy(
        update={
            "model_fetch_image": "fetch",
            "huggingface_endpoint": "http://hub",
            "model_cache_endpoint": CACHE,
        }
    )
    fetch = statefulset(make_inputs(), settings)["spec"]["template"]["spec"]["initContainers"][0]
    model_dir = tmp_path / "models"
    partial = model_dir / ".cache" / "huggingface" / "download" / "w.safetensors.abc.incomplete"
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "hf"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{partial}" ]; then echo "$HF_ENDPOINT partial-left" >> {calls}; '
        f'else echo "$HF_ENDPOINT" >> {calls}; fi\n'
        f'if [ "$HF_ENDPOINT" = "{CACHE}" ]; then mkdir -p {partial.parent}; touch {partial}; '
        f"exit {0 if cache_serves else 1}; fi\n"
    )
    fake.chmod(0o755)
    env = {e["name"]: e["value"] for e in fetch["env"] if "value" in e}
    env.update(ISVC_MODEL_DIR=str(model_dir), PATH=f"{bin_dir}:/usr/bin:/bin")
    done = subprocess.run(fetch["command"], env=env, capture_output=True, text=True, timeout=30)
    return calls.read_text().splitlines(), done


def test_the_download_step_goes_to_the_hub_when_the_cache_does_not_serve_and_drops_the_cut_partial(
    tmp_path: Path,
) -> None:
    calls, done = _run_step(tmp_path, cache_serves=False)
    assert done.returncode == 0, done.stderr
    assert calls == [CACHE, "http://hub"]  # the partial the cache's try left was removed before the Hub's
    assert "downloading the rest from the Hub" in done.stderr


def test_the_download_step_ends_when_the_cache_served_it(tmp_path: Path) -> None:
    calls, done = _run_step(tmp_path, cache_serves=True)
    assert (done.returncode, calls) == (0, [CACHE])
    assert "through the model cache at " + CACHE in done.stdout


def test_inference_pods_are_hardened() -> None:
    """Issue 12: restricted security context, no service-account token, limits from the estimate."""
    settings = SETTINGS.model_copy(update={"model_fetch_image": "fetch"})
    pod = statefulset(make_inputs(), settings)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        }
        assert container["resources"]["limits"]["memory"]


def test_the_priority_class_of_the_class_reaches_the_pod() -> None:
    constrained = make_inputs(
        constraints=Constraints(min_replicas=1, max_replicas=1, priority_class_name="high")
    )
    assert statefulset(constrained, SETTINGS)["spec"]["template"]["spec"]["priorityClassName"] == "high"
    assert "priorityClassName" not in statefulset(make_inputs(), SETTINGS)["spec"]["template"]["spec"]


def test_a_changed_runtime_rolls_the_workload_and_an_unchanged_one_never_does() -> None:
    first = statefulset(make_inputs(), SETTINGS)
    again = statefulset(make_inputs(), SETTINGS)
    changed_runtime = make_inputs().runtime.model_copy(update={"content_hash": "hash-2"})
    changed = statefulset(make_inputs(runtime=changed_runtime), SETTINGS)
    assert first == again
    gate = {START_PERMIT_ANNOTATION: "0"}  # a share of a card: pods are born waiting for their turn
    assert first["spec"]["template"]["metadata"]["annotations"] == {RUNTIME_HASH_ANNOTATION: "hash-1", **gate}
    assert changed["spec"]["template"]["metadata"]["annotations"] == {
        RUNTIME_HASH_ANNOTATION: "hash-2",
        **gate,
    }
    assert first["metadata"]["annotations"] == {REPLICAS_BY: "module"}  # whose the count is, under the seal


def test_the_model_is_fetched_by_an_init_container_when_a_fetch_image_is_set() -> None:
    settings = SETTINGS.model_copy(update={"model_fetch_image": "hf-cli:1"})
    inputs = make_inputs(
        order=make_order(repo="org/model@abc123", auth_ref={"name": "my-hf", "key": "token"})
    )
    init = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["fetch-model"]
    assert init[0]["command"] == [
        "hf",
        "download",
        "org/model",
        "--local-dir",
        "/models/org/model",
        "--revision",
        "abc123",
    ]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "my-hf", "key": "token"}}} in init[0][
        "env"
    ]
    assert "initContainers" not in statefulset(inputs, SETTINGS)["spec"]["template"]["spec"]


def test_only_the_files_the_plan_names_are_fetched_from_a_gguf_repository() -> None:
    """A GGUF repository holds many variants (tens of GB together): the plan's files, the chosen variant's
    shards, are downloaded under their own names, which the runtime's -m points at."""
    shards = ["m-q4_k_m-00001-of-00002.gguf", "m-q4_k_m-00002-of-00002.gguf"]
    plan = LaunchPlanSpec(
        placement=make_inputs().placement,
        estimates=make_inputs().estimates,
        runtime=make_inputs().runtime,
        model_commit="abc123",
        model_files=shards,
    )
    inputs = WorkloadInputs.from_plan(make_order(repo="org/m-GGUF"), plan, None)
    settings = SETTINGS.model_copy(update={"model_fetch_image": "hf-cli:1"})
    init = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"][0]
    assert init["command"][:5] == ["hf", "download", "org/m-GGUF", *shards]
    assert init["command"][5:] == ["--local-dir", "/models/org/model", "--revision", "abc123"]


def _catalog_order(auth_ref: dict[str, str] | None = None) -> InferenceService:
    model: dict[str, Any] = {"src": "AIModels", "ref": {"kind": "ClusterModel", "name": "bge-m3"}}
    if auth_ref is not None:
        model["authSecretRef"] = auth_ref
    return InferenceService.model_validate(
        {"metadata": {"name": "llm-a", "namespace": "team", "uid": "uid-1234"}, "spec": {"model": model}}
    )


def _catalog_plan(repo: str | None, commit: str | None) -> LaunchPlanSpec:
    runtime = make_inputs().runtime.model_copy(update={"model_dir": "/models/bge-m3"})
    return LaunchPlanSpec(
        placement=make_inputs().placement,
        estimates=make_inputs().estimates,
        runtime=runtime,
        model_commit=commit,
        model_repo=repo,
    )


@pytest.mark.parametrize(("commit", "revision"), [("5617a9f", ["--revision", "5617a9f"]), (None, [])])
def test_a_catalog_model_is_fetched_from_the_repository_its_catalog_object_names(
    commit: str | None, revision: list[str]
) -> None:
    """The order names only the catalog object: the plan carries the object's Hugging Face repository and
    pinned revision, downloaded into the directory the runtime reads; no Secret is named, so no token."""
    inputs = WorkloadInputs.from_plan(_catalog_order(), _catalog_plan("BAAI/bge-m3", commit), None)
    settings = SETTINGS.model_copy(update={"model_fetch_image": "hf-cli:1"})
    init = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["fetch-model"]
    assert init[0]["command"] == ["hf", "download", "BAAI/bge-m3", "--local-dir", "/models/bge-m3", *revision]
    assert "HF_TOKEN" not in {e["name"] for e in init[0]["env"]}


def test_a_catalog_model_fetch_reads_the_token_the_order_names() -> None:
    inputs = WorkloadInputs.from_plan(
        _catalog_order({"name": "my-hf", "key": "token"}), _catalog_plan("org/gated", None), None
    )
    settings = SETTINGS.model_copy(update={"model_fetch_image": "hf-cli:1"})
    init = statefulset(inputs, settings)["spec"]["template"]["spec"]["initContainers"][0]
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "my-hf", "key": "token"}}}
    assert token in init["env"]


def test_a_catalog_model_without_a_hugging_face_source_gets_no_download_step() -> None:
    """Nothing names where its files are: they reach the volume another way, as before."""
    inputs = WorkloadInputs.from_plan(_catalog_order(), _catalog_plan(None, "v1"), None)
    settings = SETTINGS.model_copy(update={"model_fetch_image": "hf-cli:1"})
    assert "initContainers" not in statefulset(inputs, settings)["spec"]["template"]["spec"]


# ---------------------------------------------------------------- Service, Secret, endpoint


def test_the_service_publishes_http_on_8000_and_the_metrics_port() -> None:
    ports = service(make_inputs())["spec"]["ports"]
    assert ports == [
        {"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": 8000, "protocol": "TCP"},
    ]
    assert service(make_inputs())["spec"]["type"] == "ClusterIP"
    assert service(make_inputs())["spec"]["selector"] == {LABEL_ORDER: "llm-a"}


def test_each_auth_secret_holds_a_new_token_that_reads_back() -> None:
    first, second = auth_secret(make_order()), auth_secret(make_order())
    token = read_token(first)
    assert token is not None and len(token) >= 32
    assert token != read_token(second)
    assert base64.b64decode(first["data"]["token"]).decode() == token
    assert first["type"] == "Opaque"
    assert read_token({"data": {}}) is None


@pytest.mark.parametrize(
    ("exposure", "url"),
    [
        (ExposureType.EXTERNAL, "https://llm-a--team.example.com"),
        (ExposureType.CLUSTER_LOCAL, "http://llm-a.team.svc:8000"),
    ],
)
def test_the_endpoint_url_is_what_listens(exposure: ExposureType, url: str) -> None:
    assert endpoint_url("llm-a", "team", exposure, SETTINGS) == url


def test_an_external_endpoint_needs_the_public_domain() -> None:
    with pytest.raises(SettingsIncomplete):
        endpoint_url("llm-a", "team", ExposureType.EXTERNAL, WorkloadSettings())
    with pytest.raises(SettingsIncomplete):
        ingress(make_inputs(), WorkloadSettings())


def test_the_ingress_serves_only_the_api_the_token_guards_with_tls_from_cert_manager() -> None:
    manifest = ingress(make_inputs(), SETTINGS)
    assert manifest["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == "letsencrypt"
    assert manifest["spec"]["tls"] == [{"hosts": ["llm-a--team.example.com"], "secretName": "llm-a-tls"}]
    rule = manifest["spec"]["rules"][0]
    assert rule["host"] == "llm-a--team.example.com"
    assert [p["path"] for p in rule["http"]["paths"]] == ["/v1/"]  # not /metrics, /invocations, /score
    assert rule["http"]["paths"][0]["backend"] == {"service": {"name": "llm-a", "port": {"name": "http"}}}


@pytest.mark.parametrize(("order", "namespace"), [("a-b", "c"), ("a", "b-c"), ("x" * 40, "y" * 40)])
def test_hosts_are_unambiguous_across_namespaces(order: str, namespace: str) -> None:
    """Issue 12: `<order>-<namespace>` gave a-b/c and a/b-c the same host."""
    host = external_host(order, namespace, SETTINGS).removesuffix(".example.com")
    assert len(host) <= 63 and host.split("--", 1)[0] == order
    assert external_host(order, namespace, SETTINGS) != external_host(order, namespace + "z", SETTINGS)


@pytest.mark.parametrize(
    ("class_issuer", "module_issuer", "expected"),
    [("class-ca", "module-ca", "class-ca"), (None, "module-ca", "module-ca"), (None, None, None)],
)
def test_the_issuer_of_the_class_wins_over_the_modules(
    class_issuer: str | None, module_issuer: str | None, expected: str | None
) -> None:
    exposure = Exposure(tls=TLS(cluster_issuer_name=class_issuer))
    settings = WorkloadSettings(public_domain_template="%s.example.com", cluster_issuer_name=module_issuer)
    annotations = ingress(make_inputs(exposure=exposure), settings)["metadata"]["annotations"]
    assert annotations.get("cert-manager.io/cluster-issuer") == expected


# ---------------------------------------------------------------- inputs


def test_a_class_less_order_gets_one_replica_and_the_default_exposure() -> None:
    plan = LaunchPlanSpec(
        placement=make_inputs().placement, estimates=make_inputs().estimates, runtime=make_inputs().runtime
    )
    bundled = WorkloadInputs.from_plan(make_order(), plan, None)
    assert (bundled.constraints, bundled.exposure) == (None, Exposure())
    assert statefulset(bundled, SETTINGS)["spec"]["replicas"] == 1


def test_a_class_echoes_its_scaling_priority_and_strategy() -> None:
    plan = LaunchPlanSpec(
        placement=make_inputs().placement, estimates=make_inputs().estimates, runtime=make_inputs().runtime
    )
    klass = InferenceServiceClassSpec(
        model_policy=ModelPolicy(allowed_endpoint_types=["Chat"]),  # type: ignore[list-item]
        scaling_policy=ScalingPolicy(min_replicas=2, max_replicas=3),
        priority_class_name="high",
        update_strategy=UpdateStrategy(type="Recreate"),
        exposure=Exposure(type=ExposureType.CLUSTER_LOCAL),
    )
    bundled = WorkloadInputs.from_plan(make_order(), plan, klass, priority=7)
    assert bundled.constraints == Constraints(min_replicas=2, max_replicas=3, priority_class_name="high")
    assert (bundled.exposure.type, bundled.priority) == (ExposureType.CLUSTER_LOCAL, 7)


def test_a_plan_without_runtime_cannot_be_run() -> None:
    plan = LaunchPlanSpec(placement=make_inputs().placement, estimates=make_inputs().estimates)
    with pytest.raises(PlanNotExpressible, match=r"spec\.runtime"):
        WorkloadInputs.from_plan(make_order(), plan, None)


def test_a_rerank_endpoint_also_publishes_the_rerank_path() -> None:
    runtime = make_inputs().runtime.model_copy(update={"endpoint_type": "Rerank"})
    paths = ingress(make_inputs(runtime=runtime), SETTINGS)["spec"]["rules"][0]["http"]["paths"]
    assert [(p["path"], p["pathType"]) for p in paths] == [("/v1/", "Prefix"), ("/rerank", "Exact")]


def test_the_token_digest_rolls_the_pods() -> None:
    one = statefulset(make_inputs().model_copy(update={"token_digest": "aaaa"}), SETTINGS)
    two = statefulset(make_inputs().model_copy(update={"token_digest": "bbbb"}), SETTINGS)
    assert one["spec"]["template"]["metadata"]["annotations"]["ai.deckhouse.io/token-hash"] == "aaaa"
    assert one["spec"]["template"] != two["spec"]["template"]


def test_a_runtime_that_answers_is_behind_the_service_within_two_seconds_issue_45() -> None:
    """A restarted llama-server answered for 8.5 s before the kubelet's 10 s readiness probe marked it ready."""
    probe = _container(statefulset(make_inputs(), SETTINGS))["readinessProbe"]
    assert probe["periodSeconds"] == 2 and probe["periodSeconds"] * probe["failureThreshold"] == 30
