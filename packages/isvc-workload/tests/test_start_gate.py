"""The start gate (issue 25): runtimes sharing a card start one at a time, restarts included."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from isvc_workload import (
    START_COUNT_PATH,
    START_GATE_PATH,
    START_PERMIT_ANNOTATION,
    START_PERMIT_SEAL_ANNOTATION,
    WorkloadSettings,
    device_of,
    gate_pod_spec,
    memory_taken,
    overdue_message,
    permit_manifest,
    permit_seal,
    permit_view,
    sealed_gate,
    settled_lease,
    start_asked,
    start_state,
    statefulset,
    turn_lease,
    turn_lease_name,
    turn_of,
    waiting_message,
)
from workload_builders import make_inputs

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
DEVICE = ("gpu.nvidia.com", "gpu-h100-0", "gpu-0")


def _pod(
    name: str = "llm-a-0",
    *,
    permit: str | None = "0",
    running: bool = True,
    ready: bool = False,
    restarts: int = 0,
    waiting: str | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {"startedAt": "2026-12-01T11:59:00Z"}} if running else {}
    if waiting:
        state = {"waiting": {"reason": waiting}}
    annotations = {} if permit is None else {START_PERMIT_ANNOTATION: permit}
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "annotations": annotations},
        "status": {
            "containerStatuses": [
                {"name": "server", "ready": ready, "restartCount": restarts, "state": state}
            ],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu-x"}],
        },
    }


def test_a_share_of_a_card_runs_its_runtime_behind_the_gate_and_a_whole_card_does_not() -> None:
    pod = statefulset(make_inputs(), WorkloadSettings())["spec"]["template"]
    [server] = pod["spec"]["containers"]
    assert server["command"][:2] == ["/bin/sh", "-c"] and server["command"][3:] == [
        "start-gate",
        "vllm",
        "serve",
    ]
    assert server["args"] == ["/models/org/model", "--port", "8000"]
    assert pod["metadata"]["annotations"][START_PERMIT_ANNOTATION] == "0"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    item = volumes["start-gate"]["downwardAPI"]["items"][0]
    assert item["fieldRef"]["fieldPath"] == f"metadata.annotations['{START_PERMIT_ANNOTATION}']"
    assert volumes["start-count"]["emptyDir"]["medium"] == "Memory"
    assert {m["mountPath"] for m in server["volumeMounts"]} >= {START_GATE_PATH, START_COUNT_PATH}
    assert "automountServiceAccountToken" in pod["spec"] and not pod["spec"]["automountServiceAccountToken"]


def test_a_runtime_without_a_command_is_left_ungated() -> None:
    container = {"name": "server", "image": "x", "args": ["a"]}
    assert gate_pod_spec(container, 60) == (container, [])


def test_a_running_container_without_a_permit_asks_for_its_start_and_a_restart_asks_again() -> None:
    assert start_asked(_pod(), "server") == 1
    assert start_asked(_pod(permit="1"), "server") is None  # permitted
    assert start_asked(_pod(permit="1", restarts=1), "server") == 2  # a restart is a start like any other
    assert start_asked(_pod(permit=None), "server") is None  # not gated
    assert start_asked(_pod(running=False), "server") is None  # still in its init containers
    assert start_asked(_pod(ready=True), "server") is None


def test_a_start_ends_when_ready_exited_restarted_or_gone() -> None:
    assert start_state(_pod(permit="1"), "server", 1) == "starting"
    assert start_state(_pod(permit="1", ready=True), "server", 1) == "ready"
    assert start_state(_pod(permit="1", restarts=1), "server", 1) == "ended"
    assert start_state(_pod(permit="1", waiting="CrashLoopBackOff"), "server", 1) == "ended"
    assert start_state(None, "server", 1) == "gone"


def test_the_device_is_the_pods_allocated_claim() -> None:
    claim = {
        "metadata": {"name": "llm-a-0-gpu-x", "ownerReferences": [{"name": "llm-a-0", "uid": "uid-llm-a-0"}]},
        "status": {
            "allocation": {
                "devices": {"results": [dict(zip(("driver", "pool", "device"), DEVICE, strict=True))]}
            }
        },
    }
    assert device_of(_pod(), [claim]) == DEVICE
    assert device_of(_pod("other-0"), [claim]) is None
    forged = {**claim, "metadata": {**claim["metadata"], "name": "made-by-a-user"}}
    assert device_of(_pod(), [forged]) is None  # a claim the pod's status does not name


def test_the_lease_names_the_turn_and_reads_back() -> None:
    lease = turn_lease("d8-isvc", DEVICE, _pod(), 1, "llm-a", NOW, 600, "42")
    assert lease["metadata"]["name"] == turn_lease_name(DEVICE) and len(turn_lease_name(DEVICE)) <= 63
    assert lease["metadata"]["resourceVersion"] == "42"
    assert (
        "resourceVersion" not in turn_lease("d8-isvc", DEVICE, _pod(), 1, "llm-a", NOW, 600, None)["metadata"]
    )
    lease["metadata"]["resourceVersion"] = "43"
    turn = turn_of(lease)
    assert turn is not None
    assert (turn.namespace, turn.pod, turn.start, turn.order, turn.resource_version) == (
        "team-a",
        "llm-a-0",
        1,
        "llm-a",
        "43",
    )
    assert turn.until - turn.since == timedelta(seconds=600) and turn.of(_pod(), 1) and not turn.of(_pod(), 2)
    assert turn_of(None) is None and turn_of({"metadata": {}, "spec": {}}) is None


def test_the_wait_names_the_neighbour_but_not_its_namespace() -> None:
    turn = turn_of(turn_lease("d8-isvc", DEVICE, _pod("llm-b-0"), 1, "llm-b", NOW, 600, None))
    assert turn is not None
    mine = waiting_message("llm-a-0", "team-a", DEVICE, turn)
    theirs = waiting_message("llm-a-0", "team-z", DEVICE, turn)
    assert "order llm-b is starting" in mine and "12:10:00Z" in mine
    assert "order llm-b of another namespace" in theirs and "team-a" not in theirs
    assert "600 s" in overdue_message("llm-b-0", NOW, 600)


def test_the_permit_is_the_pods_own_metadata_only() -> None:
    manifest = permit_manifest(_pod(), 2, NOW, "sealed")
    assert set(manifest) == {"apiVersion", "kind", "metadata"}
    assert manifest["metadata"]["annotations"][START_PERMIT_ANNOTATION] == "2"
    assert permit_seal(manifest) == "sealed"


def test_the_gate_reads_the_permits_seal_and_the_controller_knows_such_a_pod_issue_44() -> None:
    _, volumes = gate_pod_spec({"name": "server", "command": ["vllm"]}, 60)
    items = {i["path"]: i["fieldRef"]["fieldPath"] for i in volumes[0]["downwardAPI"]["items"]}
    assert items["seal"] == f"metadata.annotations['{START_PERMIT_SEAL_ANNOTATION}']"
    assert sealed_gate({"spec": {"volumes": volumes}}) and not sealed_gate(_pod())
    pod = _pod()
    view = permit_view(pod, 2)
    assert view["spec"] == {
        "pod": f"team-a/{pod['metadata']['name']}/{pod['metadata'].get('uid')}",
        "start": 2,
    }
    assert permit_view(pod, 3) != view


def test_a_permit_without_a_seal_starts_nothing_issue_44(tmp_path: Path) -> None:
    """A user who writes the permit annotation on her pod: the gate waits for the seal the module writes."""
    done = _gate(tmp_path, "1", limit=1, seal=None)
    assert "had no turn after 1 s" in done.stderr


# ------------------------------------------------------------------ the script itself, run by a real sh


def _gate(
    tmp: Path, permit: str | None, limit: int = 3, seal: str | None = "s"
) -> subprocess.CompletedProcess[str]:
    """The container's command with the gate's paths moved under `tmp`; the runtime is `echo ran`."""
    container, _ = gate_pod_spec({"name": "server", "command": ["echo", "ran"]}, limit)
    script = (
        container["command"][2]
        .replace(START_COUNT_PATH, str(tmp / "count"))
        .replace(START_GATE_PATH, str(tmp / "gate"))
    )
    (tmp / "count").mkdir(exist_ok=True)
    (tmp / "gate").mkdir(exist_ok=True)
    if permit is not None:
        (tmp / "gate" / "permit").write_text(permit)
    if seal is not None:
        (tmp / "gate" / "seal").write_text(seal)
    sh = shutil.which("sh")
    assert sh is not None
    return subprocess.run(
        [sh, "-c", script, *container["command"][3:]],
        capture_output=True,
        text=True,
        timeout=30,
        env=os.environ,
    )


@pytest.mark.parametrize("permit", ["1", "5"])
def test_the_script_runs_the_runtime_once_its_start_is_permitted(tmp_path: Path, permit: str) -> None:
    done = _gate(tmp_path, permit)
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    assert "start 1 goes after 0 s" in done.stderr


def test_the_script_counts_restarts_and_holds_a_second_start_its_permit_does_not_name(tmp_path: Path) -> None:
    assert _gate(tmp_path, "1").stdout == "ran\n"
    second = _gate(tmp_path, "1", limit=2)  # the container restarted: start 2, permit still 1
    assert "start 2 waits for its turn" in second.stderr and "start 2 had no turn after 2 s" in second.stderr
    assert second.stdout == "ran\n"  # bounded: with no controller to answer, it starts without a turn


def test_the_script_reads_a_missing_or_bad_permit_as_none(tmp_path: Path) -> None:
    assert "had no turn after 1 s" in _gate(tmp_path, None, limit=1).stderr
    assert (
        "had no turn after 1 s"
        in _gate(tmp_path / "x" if (tmp_path / "x").mkdir() else tmp_path, "1;2", 1).stderr
    )


@pytest.mark.parametrize(
    ("runtime", "output", "taken"),
    [
        ("vllm", "INFO [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB", True),
        (
            "vllm",
            "INFO [core.py:210] init engine (profile, create kv cache, warmup model) took 41.20 seconds",
            True,
        ),
        ("vllm", "INFO [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens", False),
        (
            "llamacpp",
            "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to "
            "disable)",
            True,
        ),
        ("llamacpp", "load_tensors: CPU model buffer size = 0.46 MiB", False),
        ("llamacpp", "0.00.498.832 I srv  llama_server: model loaded", True),  # the real node's llama-server
        ("tei", "Warming up model", False),  # a runtime that says nothing known holds its turn until Ready
        ("vllm", None, False),
    ],
)
def test_a_start_is_settled_when_its_runtime_says_its_memory_is_taken_issue_45(
    runtime: str, output: str | None, taken: bool
) -> None:
    assert memory_taken(runtime, output) is taken


def test_a_settled_turn_is_over_from_then_whatever_its_bound() -> None:
    pod = _pod()
    lease = turn_lease("d8-isvc", ("gpu.nvidia.com", "n", "gpu-0"), pod, 1, "llm-a", NOW, 600, "7")
    settled = settled_lease(lease, NOW + timedelta(seconds=20))
    turn = turn_of(settled)
    assert turn is not None and turn.of(pod, 1) and turn.settled == NOW + timedelta(seconds=20)
    assert turn.until == NOW + timedelta(seconds=20) and turn.resource_version == "7"
    assert turn_of(lease) is not None and turn_of(lease).until == NOW + timedelta(seconds=600)  # type: ignore[union-attr]
