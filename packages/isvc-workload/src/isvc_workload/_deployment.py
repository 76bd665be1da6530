"""Deployment `{order}`: the replicas that serve the model."""

from __future__ import annotations

from typing import Any

from isvc_api import LABEL_ORDER, Authentication, ModelSource

from isvc_workload._claim_template import CLAIM_NAME, claim_template_name
from isvc_workload._common import WorkloadInputs, child_labels, child_metadata
from isvc_workload._ports import api_key_env, container_ports
from isvc_workload._secret import AUTH_SECRET_KEY, auth_secret_name
from isvc_workload._settings import WorkloadSettings

__all__ = [
    "CONTAINER_NAME",
    "FETCH_CONTAINER_NAME",
    "HF_TOKEN_ENV",
    "MODEL_MOUNT_PATH",
    "RUNTIME_HASH_ANNOTATION",
    "TOKEN_HASH_ANNOTATION",
    "deployment",
    "model_volume_size",
]

CONTAINER_NAME = "server"
FETCH_CONTAINER_NAME = "fetch-model"
MODEL_MOUNT_PATH = "/models"
HF_TOKEN_ENV = "HF_TOKEN"
RUNTIME_HASH_ANNOTATION = "ai.deckhouse.io/runtime-hash"
TOKEN_HASH_ANNOTATION = "ai.deckhouse.io/token-hash"
_MODEL_VOLUME = "models"


def _strategy(inputs: WorkloadInputs) -> dict[str, Any]:
    if inputs.update_strategy is not None and inputs.update_strategy.type == "Recreate":
        return {"type": "Recreate"}
    # A surge pod would need a device the plan did not reserve; replace in place instead.
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def _env(inputs: WorkloadInputs) -> list[dict[str, Any]]:
    # The user's Hub token goes to the fetch container only: the runtime reads the model offline.
    ours: list[dict[str, Any]] = []
    key_env = api_key_env(inputs.runtime)
    if key_env and inputs.exposure.authentication == Authentication.TOKEN:
        ours.append(
            {
                "name": key_env,
                "valueFrom": {
                    "secretKeyRef": {"name": auth_secret_name(inputs.name), "key": AUTH_SECRET_KEY}
                },
            }
        )
    taken = {e["name"] for e in ours}
    plain = [{"name": k, "value": v} for k, v in sorted(inputs.runtime.env.items()) if k not in taken]
    return plain + ours


def _hf_token_env(inputs: WorkloadInputs) -> list[dict[str, Any]]:
    ref = inputs.order.spec.model.auth_secret_ref
    if ref is None:
        return []
    return [{"name": HF_TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}]


def _model_dir(inputs: WorkloadInputs) -> str:
    extra = inputs.runtime.model_extra or {}
    directory = extra.get("model_dir", extra.get("modelDir"))
    if directory:
        return str(directory)
    return f"{MODEL_MOUNT_PATH}/{inputs.order.spec.model.ref.name.split('@', 1)[0]}"


# Restricted Pod Security: no root, no privilege escalation, no capabilities, the runtime's seccomp.
_POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                 "seccompProfile": {"type": "RuntimeDefault"}}
_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                       "runAsNonRoot": True}
_FETCH_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def _fetch_container(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any] | None:
    """Downloads a Hugging Face model at the commit the order was resolved to, with the user's token."""
    model = inputs.order.spec.model
    if settings.model_fetch_image is None or model.src != ModelSource.HUGGING_FACE:
        return None
    repo, _, revision = model.ref.name.partition("@")
    command = ["hf", "download", repo, "--local-dir", _model_dir(inputs)]
    commit = inputs.model_commit or revision
    if commit:
        command += ["--revision", commit]
    env = [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}, {"name": "HF_HOME", "value": "/tmp/hf"}]
    if settings.huggingface_endpoint:
        env.append({"name": "HF_ENDPOINT", "value": settings.huggingface_endpoint})
    return {
        "name": FETCH_CONTAINER_NAME,
        "image": settings.model_fetch_image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": command,
        "env": env + _hf_token_env(inputs),
        "resources": _FETCH_RESOURCES,
        "securityContext": _CONTAINER_SECURITY,
        "volumeMounts": [{"name": _MODEL_VOLUME, "mountPath": MODEL_MOUNT_PATH}],
    }


def _container(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any]:
    runtime = inputs.runtime
    ports = [
        {"name": p.name, "containerPort": p.container_port, "protocol": "TCP"}
        for p in container_ports(runtime)
    ]
    mounts: list[dict[str, Any]] = [{"name": _MODEL_VOLUME, "mountPath": MODEL_MOUNT_PATH}]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": runtime.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": list(runtime.args),
        "env": _env(inputs),
        "ports": ports,
        "resources": {
            "requests": {"cpu": inputs.estimates.cpu, "memory": inputs.estimates.memory},
            "limits": {"memory": inputs.estimates.memory},
            "claims": [{"name": CLAIM_NAME}],
        },
        "securityContext": _CONTAINER_SECURITY,
        "readinessProbe": {
            "httpGet": {"path": runtime.health_path, "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "volumeMounts": mounts,
    }
    if runtime.command:
        container["command"] = list(runtime.command)
    return container


def _replicas(inputs: WorkloadInputs) -> int | None:
    constraints = inputs.constraints
    if constraints is None:
        return 1
    # An autoscaler (made when the bounds leave it room) owns the count; applying one here would fight it.
    owned = constraints.autoscaler and constraints.max_replicas > constraints.min_replicas
    return None if owned else constraints.min_replicas


def deployment(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any]:
    """The Deployment of the order; its pod template changes only when the compiled runtime does."""
    name = inputs.name
    content_hash = inputs.runtime.content_hash
    pod_annotations = {RUNTIME_HASH_ANNOTATION: content_hash} if content_hash else {}
    if inputs.token_digest:  # the runtime reads its API key at start: a new token needs new pods
        pod_annotations[TOKEN_HASH_ANNOTATION] = inputs.token_digest
    volumes: list[dict[str, Any]] = [
        {"name": _MODEL_VOLUME, "emptyDir": {"sizeLimit": inputs.estimates.model_volume}},
    ]
    pod_spec: dict[str, Any] = {
        "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name(inputs)}],
        "containers": [_container(inputs, settings)],
        "volumes": volumes,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,  # the runtime talks to no API server
        "securityContext": _POD_SECURITY,
    }
    fetch = _fetch_container(inputs, settings)
    if fetch is not None:
        pod_spec["initContainers"] = [fetch]
    priority_class = inputs.constraints.priority_class_name if inputs.constraints else None
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    template_meta: dict[str, Any] = {"labels": child_labels(name)}
    if pod_annotations:
        template_meta["annotations"] = pod_annotations
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {LABEL_ORDER: name}},
        "strategy": _strategy(inputs),
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    replicas = _replicas(inputs)
    if replicas is not None:
        spec = {"replicas": replicas, **spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": child_metadata(inputs.order, name),
        "spec": spec,
    }


def model_volume_size(deployment: dict[str, Any] | None) -> str | None:
    """The sizeLimit of the model volume a Deployment read from the cluster holds, if any."""
    if not deployment:
        return None
    volumes = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    for volume in volumes:
        if volume.get("name") == _MODEL_VOLUME:
            size = (volume.get("emptyDir") or {}).get("sizeLimit")
            return str(size) if size is not None else None
    return None
