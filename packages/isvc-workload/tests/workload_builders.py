"""Builders of orders, plans and cluster objects shared by the tests (imported by name)."""

from __future__ import annotations

from typing import Any

from isvc_api import (
    CompiledRuntime,
    Estimates,
    InferenceService,
    Placement,
    PlacementMode,
    Port,
    SharingMode,
)
from isvc_workload import WorkloadInputs


def make_order(
    name: str = "llm-a",
    namespace: str = "team",
    auth_ref: dict[str, str] | None = None,
    repo: str = "org/model",
) -> InferenceService:
    model: dict[str, Any] = {"src": "HuggingFace", "ref": {"name": repo}}
    if auth_ref is not None:
        model["authSecretRef"] = auth_ref
    return InferenceService.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": "uid-1234"},
            "spec": {"model": model},
        }
    )


def make_inputs(**overrides: Any) -> WorkloadInputs:
    base: dict[str, Any] = {
        "order": make_order(),
        "placement": Placement(
            device_class_name="gpu.nvidia.com",
            driver="gpu.nvidia.com",
            placement_mode=PlacementMode.SHARED,
            sharing_mode=SharingMode.SHARES,
            share_percent=50,
            device_uuids=["GPU-1"],
        ),
        "estimates": Estimates(
            required_memory_gi_b=20,
            weights_gi_b=14,
            kv_cache_gi_b=4,
            overhead_gi_b=2,
            context_length=8192,
            cpu="4",
            memory="24Gi",
            model_volume="40Gi",
        ),
        "runtime": CompiledRuntime(
            recipe="vllm-chat",
            image="vllm/vllm-openai:v0.11.0",
            command=["vllm", "serve"],
            args=["/models/org/model", "--port", "8000"],
            env={"B": "2", "A": "1"},
            ports=[Port(name="http", container_port=8000), Port(name="metrics", container_port=8000)],
            health_path="/health",
            content_hash="hash-1",
            api_key_env="VLLM_API_KEY",
            model_dir="/models/org/model",
        ),
    }
    base.update(overrides)
    return WorkloadInputs(**base)


def pod(
    name: str,
    *,
    ready: bool = False,
    scheduled: tuple[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    claim: str | None = None,
    terminating: bool = False,
) -> dict[str, Any]:
    """A pod as the API returns it; `scheduled` is (reason, message) of PodScheduled=False."""
    conditions: list[dict[str, Any]] = []
    if scheduled is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": scheduled[0], "message": scheduled[1]}
        )
    else:
        conditions.append({"type": "PodScheduled", "status": "True"})
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    status: dict[str, Any] = {"phase": "Running" if ready else "Pending", "conditions": conditions}
    if containers is not None:
        status["containerStatuses"] = containers
    if init_containers is not None:
        status["initContainerStatuses"] = init_containers
    if claim is not None:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    meta: dict[str, Any] = {"name": name}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": status}


def waiting(
    reason: str,
    *,
    name: str = "server",
    restarts: int = 0,
    last_exit: int | None = None,
    last_reason: str = "Error",
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "ready": False,
        "restartCount": restarts,
        "state": {"waiting": {"reason": reason}},
    }
    if last_exit is not None:
        status["lastState"] = {"terminated": {"exitCode": last_exit, "reason": last_reason}}
    return status


def running(*, name: str = "server", restarts: int = 0, last_exit: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "ready": False,
        "restartCount": restarts,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
    }
    if last_exit is not None:
        status["lastState"] = {"terminated": {"exitCode": last_exit, "reason": "Error"}}
    return status


def deployment(replicas: int = 1, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "llm-a"},
        "spec": {"replicas": replicas},
        "status": {"conditions": conditions or []},
    }


def claim(name: str, *, allocated: bool, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
        "status": {},
    }
    if allocated:
        obj["status"]["allocation"] = {"devices": {"results": [{"request": "gpu", "device": "gpu-0"}]}}
    return obj
