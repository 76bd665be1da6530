"""StatefulSet `{order}`: the replicas that serve the model, each on its settled model volume.

The model volume comes from the set's one volume claim template, sized by the estimate. The API server never
changes a set's claim templates, so the template is named from its content and a set that holds one keeps it
(`settle`); an order that outgrows it is refused (`settled_region_check`) until the set is taken down.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from isvc_api import GROUP, LABEL_ORDER, Authentication, ModelSource, Refusal, SharingMode
from pydantic import BaseModel, ConfigDict

from isvc_workload._claim_template import CLAIM_NAME, claim_template_name
from isvc_workload._common import WorkloadInputs, child_labels, child_metadata
from isvc_workload._growth import settled_region_check
from isvc_workload._meter import meter_container
from isvc_workload._ports import api_key_env, container_ports
from isvc_workload._secret import AUTH_SECRET_KEY, auth_secret_name
from isvc_workload._settings import WorkloadSettings
from isvc_workload._start_gate import START_PERMIT_ANNOTATION, gate_pod_spec

__all__ = [
    "CONTAINER_NAME",
    "FETCH_CONTAINER_NAME",
    "HF_TOKEN_ENV",
    "MODEL_CACHE_ENV",
    "MODEL_MOUNT_PATH",
    "REPLICAS_BY",
    "REPLICAS_BY_AUTOSCALER",
    "REPLICAS_BY_MODULE",
    "RUNTIME_HASH_ANNOTATION",
    "TOKEN_HASH_ANNOTATION",
    "ModelVolume",
    "model_volume",
    "outgrown",
    "settle",
    "statefulset",
]

CONTAINER_NAME = "server"
FETCH_CONTAINER_NAME = "fetch-model"
MODEL_MOUNT_PATH = "/models"
HF_TOKEN_ENV = "HF_TOKEN"
RUNTIME_HASH_ANNOTATION = "ai.deckhouse.io/runtime-hash"
TOKEN_HASH_ANNOTATION = "ai.deckhouse.io/token-hash"
READINESS_PERIOD = 2  # seconds between the kubelet's readiness probes of a runtime
_MODEL_VOLUME = "models"  # the prefix of the claim template's name, which the volume takes


class ModelVolume(BaseModel):
    """The set's model volume: its claim template's name, size and StorageClass (None: the default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: str
    storage_class: str | None = None


def _wanted_volume(inputs: WorkloadInputs, settings: WorkloadSettings) -> ModelVolume:
    """The volume the estimate asks for, named from its content (a claim template's spec never changes)."""
    size, storage_class = inputs.estimates.model_volume, settings.model_volume_storage_class
    blob = json.dumps([size, storage_class]).encode()
    return ModelVolume(
        name=f"{_MODEL_VOLUME}-{hashlib.sha256(blob).hexdigest()[:8]}", size=size, storage_class=storage_class
    )


def _claim_template(volume: ModelVolume, order_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class:
        spec["storageClassName"] = volume.storage_class
    return {"metadata": {"name": volume.name, "labels": child_labels(order_name)}, "spec": spec}


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
_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
}
_FETCH_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
MODEL_CACHE_ENV = "ISVC_MODEL_CACHE"
# The download through the module's model cache, then, if that did not bring every file (the cache down, not
# there, full, a file it cannot check, a fill cut off), the same download from the Hub: the cache is never a
# reason an order cannot start. `hf` resumes a file from its partial download, so a cut-off file's partial
# goes first; files already complete stay (their metadata names the commit, so `hf` does not fetch them).
_VIA_CACHE = r"""echo "fetch-model: downloading through the model cache at $ISVC_MODEL_CACHE"
if HF_ENDPOINT="$ISVC_MODEL_CACHE" "$@"; then exit 0; fi
echo "fetch-model: the model cache did not serve every file; downloading the rest from the Hub" >&2
find "$ISVC_MODEL_DIR/.cache/huggingface/download" -name '*.incomplete' -exec rm -f {} + 2>/dev/null
exec "$@"
"""


def _fetch_container(
    inputs: WorkloadInputs, settings: WorkloadSettings, volume: str
) -> dict[str, Any] | None:
    """Downloads a Hugging Face model at the commit the order was resolved to, with the user's token: the
    files the plan names (a GGUF repository's chosen variant, not its every variant), else the repository.
    A catalog model is downloaded from the repository its catalog object names; one without a Hugging Face
    source gets no download step (its files reach the volume another way). With the module's model cache,
    the same download goes through the cache first and to the Hub for whatever the cache did not serve."""
    model = inputs.order.spec.model
    if settings.model_fetch_image is None:
        return None
    if model.src == ModelSource.HUGGING_FACE:
        repo, _, revision = model.ref.name.partition("@")
    elif model.src == ModelSource.AI_MODELS and inputs.model_repo:
        repo, revision = inputs.model_repo, ""
    else:
        return None
    command = ["hf", "download", repo, *(inputs.model_files or []), "--local-dir", _model_dir(inputs)]
    commit = inputs.model_commit or revision
    if commit:
        command += ["--revision", commit]
    env = [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}, {"name": "HF_HOME", "value": "/tmp/hf"}]
    if settings.huggingface_endpoint:
        env.append({"name": "HF_ENDPOINT", "value": settings.huggingface_endpoint})
    if settings.model_cache_endpoint:  # the cache first, the Hub for what it does not serve
        command = ["/bin/sh", "-c", _VIA_CACHE, FETCH_CONTAINER_NAME, *command]
        env += [
            {"name": MODEL_CACHE_ENV, "value": settings.model_cache_endpoint},
            {"name": "ISVC_MODEL_DIR", "value": _model_dir(inputs)},
        ]
    return {
        "name": FETCH_CONTAINER_NAME,
        "image": settings.model_fetch_image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": command,
        "env": env + _hf_token_env(inputs),
        "resources": _FETCH_RESOURCES,
        "securityContext": _CONTAINER_SECURITY,
        "volumeMounts": [{"name": volume, "mountPath": MODEL_MOUNT_PATH}],
    }


def _container(inputs: WorkloadInputs, settings: WorkloadSettings, volume: str) -> dict[str, Any]:
    runtime = inputs.runtime
    ports = [
        {"name": p.name, "containerPort": p.container_port, "protocol": "TCP"}
        for p in container_ports(runtime)
    ]
    mounts: list[dict[str, Any]] = [{"name": volume, "mountPath": MODEL_MOUNT_PATH}]
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
        # Every 2 s, out of service after 30 s of failures: a runtime that answers again is behind the
        # order's Service within 2 s (issue 45: a restarted llama-server answered for 8.5 s before the 10 s
        # probe marked it ready, and the order read that it did not serve).
        "readinessProbe": {
            "httpGet": {"path": runtime.health_path, "port": "http"},
            "periodSeconds": READINESS_PERIOD,
            "failureThreshold": 15,
        },
        "volumeMounts": mounts,
    }
    if runtime.command:
        container["command"] = list(runtime.command)
    return container


REPLICAS_BY = f"{GROUP}/replicas-by"  # whose the set's replica count is
REPLICAS_BY_AUTOSCALER = "autoscaler"
REPLICAS_BY_MODULE = "module"


def _replicas(inputs: WorkloadInputs) -> int | None:
    constraints = inputs.constraints
    if constraints is None:
        return 1
    # An autoscaler (made when the bounds leave it room) owns the count; applying one here would fight it.
    owned = constraints.autoscaler and constraints.max_replicas > constraints.min_replicas
    return None if owned else constraints.min_replicas


def _pod_settings(name: str) -> dict[str, Any]:
    """What every pod of the set is, whatever it runs."""
    return {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,  # the runtime talks to no API server
        "securityContext": _POD_SECURITY,
        "affinity": _spread(name),
    }


def _spread(name: str) -> dict[str, Any]:
    """Replicas of one order prefer different nodes (issue 40): one node's drain or loss then leaves a
    replica serving. A preference, not a rule: where one node has the only room, replicas share it."""
    term = {"labelSelector": {"matchLabels": {LABEL_ORDER: name}}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
        }
    }


def statefulset(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any]:
    """The set of the order; its pod template changes only when the compiled runtime (or the plan's claim
    template, or the endpoint's token) does, and its model volume is the estimate's, named from its content.

    Pods are replaced in place, one at a time (a surge pod would need a device the plan did not reserve), so
    a class's `updateStrategy` Recreate and RollingUpdate roll the same way; Parallel starts every replica at
    once (ordered start-up buys a model server nothing). On a share of a card the runtime starts behind the
    start gate (`_start_gate`): its pods are born with `start-permit: "0"` and wait for the controller's turn.
    """
    name = inputs.name
    volume = _wanted_volume(inputs, settings)
    content_hash = inputs.runtime.content_hash
    pod_annotations = {RUNTIME_HASH_ANNOTATION: content_hash} if content_hash else {}
    if inputs.token_digest:  # the runtime reads its API key at start: a new token needs new pods
        pod_annotations[TOKEN_HASH_ANNOTATION] = inputs.token_digest
    server = _container(inputs, settings, volume.name)
    gate_volumes: list[dict[str, Any]] = []
    if inputs.placement.sharing_mode == SharingMode.SHARES:  # co-tenants of a card start one at a time
        server, gate_volumes = gate_pod_spec(server, settings.start_gate_wait_seconds)
        if gate_volumes:
            pod_annotations[START_PERMIT_ANNOTATION] = "0"
    meter = meter_container(inputs, settings)  # counts the runtime's own answers (issue 42)
    pod_spec: dict[str, Any] = {
        "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name(inputs)}],
        "containers": [server, *([meter] if meter else [])],
        **_pod_settings(name),
    }
    if gate_volumes:
        pod_spec["volumes"] = gate_volumes
    fetch = _fetch_container(inputs, settings, volume.name)
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
        "serviceName": name,  # the order's Service
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {LABEL_ORDER: name}},
        "updateStrategy": {"type": "RollingUpdate"},
        # The model volumes are a cache of the Hub: they go with their replica and with the set.
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"},
        "template": {"metadata": template_meta, "spec": pod_spec},
        "volumeClaimTemplates": [_claim_template(volume, name)],
    }
    return _counted(inputs, spec)


def _counted(inputs: WorkloadInputs, spec: dict[str, Any]) -> dict[str, Any]:
    """The set with its replica count, or none when its autoscaler owns it; whose the count is, said on the set
    itself (under the module's seal), so a `kubectl scale` or a user's autoscaler is undone like any change."""
    replicas = _replicas(inputs)
    if replicas is not None:
        spec = {"replicas": replicas, **spec}
    annotations = {REPLICAS_BY: REPLICAS_BY_AUTOSCALER if replicas is None else REPLICAS_BY_MODULE}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": child_metadata(inputs.order, inputs.name, annotations),
        "spec": spec,
    }


def model_volume(statefulset: dict[str, Any] | None) -> ModelVolume | None:
    """The model volume a set (built here, or read from the cluster) holds; None without a set."""
    if not statefulset:
        return None
    for template in (statefulset.get("spec") or {}).get("volumeClaimTemplates") or []:
        name = str((template.get("metadata") or {}).get("name") or "")
        if name == _MODEL_VOLUME or name.startswith(f"{_MODEL_VOLUME}-"):
            spec = template.get("spec") or {}
            size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
            if size is None:
                return None
            return ModelVolume(name=name, size=str(size), storage_class=spec.get("storageClassName"))
    return None


def outgrown(held: dict[str, Any] | None, needed_size: str) -> Refusal | None:
    """WorkloadError when the model volume of the set the cluster holds is smaller than `needed_size` (a set's
    claim templates never change), with the procedure; None without a set or when it is large enough."""
    kept = model_volume(held)
    refusal = settled_region_check(kept.size if kept is not None else None, needed_size)
    if held is None or refusal is None:
        return None
    meta = held["metadata"]
    return refusal.model_copy(
        update={
            "message": (
                f"StatefulSet {meta['name']}: {refusal.message} The procedure: `kubectl -n {meta['namespace']} "
                f"delete statefulset {meta['name']}`; the module then makes the set anew with a volume of the "
                "new size (the old replicas stop serving until a new one is ready)."
            )
        }
    )


def settle(wanted: dict[str, Any], held: dict[str, Any] | None) -> dict[str, Any] | Refusal:
    """The set to apply over the one the cluster holds: `wanted` keeping the held model volume (the API server
    refuses any change to a set's claim templates), or WorkloadError when the order now needs more than it.

    A held volume larger than needed stays: a smaller model fits on it.
    """
    kept, needed = model_volume(held), model_volume(wanted)
    if kept is None or needed is None or kept == needed:
        return wanted
    refusal = outgrown(held, needed.size)
    if refusal is not None:
        return refusal
    order = str((wanted["metadata"].get("labels") or {}).get(LABEL_ORDER) or wanted["metadata"]["name"])
    spec = dict(wanted["spec"])
    spec["volumeClaimTemplates"] = [_claim_template(kept, order)]
    pod = dict(spec["template"]["spec"])
    for key in ("containers", "initContainers"):
        if key in pod:
            pod[key] = [
                {
                    **c,
                    "volumeMounts": [
                        {**m, "name": kept.name} if m["name"] == needed.name else m
                        for m in c.get("volumeMounts") or []
                    ],
                }
                for c in pod[key]
            ]
    spec["template"] = {**spec["template"], "spec": pod}
    return {**wanted, "spec": spec}
