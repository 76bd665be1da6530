"""One start at a time per shared device: the pod side of the gate and the turns the controller hands out.

Runtimes that share a card must not run their start-up (weights load, vLLM's memory profile, graph capture)
together: each would count the other's loading as its own. The gate has two halves:

- In the pod (`gate_pod_spec`): the runtime's command runs behind a few lines of `sh` that count the
  container's starts (an emptyDir outlives a container restart) and wait until the pod's annotation
  `ai.deckhouse.io/start-permit`, read through a downward API volume, names this start. Every start waits,
  the first and each restart alike; the pod needs no API access and no rights. If no permit comes within
  `wait_seconds` (the controller is gone), the runtime starts anyway and says so.
- In the controller (`Turn`, `start_asked`, `start_state`, `turn_lease`): a coordination Lease per device, in
  the module's namespace, names the one start under way. An order's pass takes the Lease for its own pod
  (an update or create with the Lease's resourceVersion: two passes never both win) and then writes the
  permit on that pod. A start ends when its container is Ready, exits or restarts, or after the bounded
  turn; then the next one waiting takes the Lease.

Pure: dicts in, dicts and words out.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from isvc_api import LABEL_MANAGED_BY, DeviceKey

__all__ = [
    "MEMORY_TAKEN",
    "SEAL_ITEM",
    "START_COUNT_PATH",
    "START_GATE_ANNOTATIONS",
    "START_GATE_PATH",
    "START_GATE_VOLUME",
    "START_PERMITTED_AT_ANNOTATION",
    "START_PERMIT_ANNOTATION",
    "START_PERMIT_SEAL_ANNOTATION",
    "START_TURN_LABEL",
    "Turn",
    "device_of",
    "gate_pod_spec",
    "memory_taken",
    "overdue_message",
    "permit_manifest",
    "permit_seal",
    "permit_view",
    "permitted_at",
    "permitted_start",
    "sealed_gate",
    "settled_lease",
    "start_asked",
    "start_state",
    "turn_lease",
    "turn_lease_name",
    "turn_of",
    "waiting_message",
]

START_PERMIT_ANNOTATION = "ai.deckhouse.io/start-permit"  # the start the pod may run: 0 none yet, then 1, 2 …
START_PERMITTED_AT_ANNOTATION = "ai.deckhouse.io/start-permitted-at"  # when that permit was written
# The controller's seal of that permit: an HMAC of the pod and the start under a key only the controller holds.
# A namespace user can write the pod's annotations (Kubernetes' `edit`), so the permit alone is no proof.
START_PERMIT_SEAL_ANNOTATION = "ai.deckhouse.io/start-permit-seal"
START_GATE_ANNOTATIONS = (
    START_PERMIT_ANNOTATION,
    START_PERMITTED_AT_ANNOTATION,
    START_PERMIT_SEAL_ANNOTATION,
)
START_TURN_LABEL = "ai.deckhouse.io/start-turn"  # on the Leases that hold a device's turn
_HOLDER = "ai.deckhouse.io/start-holder"  # on the Lease: <namespace>/<pod>/<uid>/<start>
_ORDER = "ai.deckhouse.io/start-order"  # on the Lease: <namespace>/<order> of the holder
_DEVICE = "ai.deckhouse.io/start-device"  # on the Lease: <driver>/<pool>/<device>
START_GATE_PATH = "/etc/isvc/start-gate"
START_COUNT_PATH = "/run/isvc/start"
START_GATE_VOLUME = "start-gate"
SEAL_ITEM = "seal"  # the gate volume's item of the permit's seal: a pod of a gate that waits for one
_COUNT_VOLUME = "start-count"
_SETTLED = "ai.deckhouse.io/start-settled"  # on the Lease: when its start's runtime said its memory is taken
# What each runtime prints once its start has taken the memory it keeps, after which a neighbour starting no
# longer moves what it measures; the turn ends there, not at Ready (the warm-up and the readiness probe's
# period after it take no memory of the card's). vLLM v0.11.0: "Graph capturing finished in %.0f secs, took
# %.2f GiB" (vllm/v1/worker/gpu_model_runner.py, after the KV cache is allocated), or with CUDA graphs off
# "init engine (profile, create kv cache, warmup model) took %.2f seconds" (vllm/v1/engine/core.py).
# llama.cpp: "warming up the model with an empty run" (common/common.cpp, common_init_from_params, once the
# weights, the KV cache and the compute buffers are allocated), which the server of the recipes' build does not
# print at its default verbosity, or else the server's "model loaded" (tools/server/server.cpp, after that
# warm-up: what the real node's llama-server prints half a second after it loads the tiny model).
MEMORY_TAKEN = {
    "vllm": re.compile(
        r"Graph capturing finished in|init engine \(profile, create kv cache, warmup model\) took"
    ),
    "llamacpp": re.compile(r"warming up the model with an empty run|: model loaded"),
}
_FAILED_WAITING = frozenset({"CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError"})


# $0 names the gate; "$@" is the runtime's command and arguments. `read` and the arithmetic are built into
# every POSIX sh (dash, bash, busybox ash); `sleep` runs in the background so a TERM ends the wait at once.
_SCRIPT = """trap 'exit 143' TERM INT
c=0; {{ read -r c < {count}/starts; }} 2>/dev/null
case "$c" in ''|*[!0-9]*) c=0;; esac
n=$((c + 1)); echo "$n" > {count}/starts
w=0
while :; do
  p=0; {{ read -r p < {gate}/permit; }} 2>/dev/null
  case "$p" in ''|*[!0-9]*) p=0;; esac
  s=; {{ read -r s < {gate}/seal; }} 2>/dev/null
  [ "$p" -ge "$n" ] && [ -n "$s" ] && break
  if [ "$w" -ge {limit} ]; then
    echo "isvc start gate: start $n had no turn after {limit} s; starting without one" >&2; break
  fi
  [ "$w" -eq 0 ] && echo "isvc start gate: start $n waits for its turn on the shared device" >&2
  sleep 1 & wait $!
  w=$((w + 1))
done
echo "isvc start gate: start $n goes after $w s" >&2
exec "$@"
"""


def gate_pod_spec(
    container: dict[str, Any], wait_seconds: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The runtime container behind the gate, and the two volumes the gate reads and writes.

    The container keeps its arguments; its command becomes `sh -c <gate> start-gate <command>`, so a runtime
    whose recipe names no command (the image's entrypoint) cannot be gated and is returned as it is."""
    command = list(container.get("command") or [])
    if not command:
        return container, []
    script = _SCRIPT.format(count=START_COUNT_PATH, gate=START_GATE_PATH, limit=int(wait_seconds))
    gated = {
        **container,
        "command": ["/bin/sh", "-c", script, "start-gate", *command],
        "volumeMounts": [
            *container.get("volumeMounts", []),
            {"name": START_GATE_VOLUME, "mountPath": START_GATE_PATH, "readOnly": True},
            {"name": _COUNT_VOLUME, "mountPath": START_COUNT_PATH},
        ],
    }
    volumes = [
        {
            "name": START_GATE_VOLUME,
            "downwardAPI": {
                "items": [
                    {
                        "path": "permit",
                        "fieldRef": {"fieldPath": f"metadata.annotations['{START_PERMIT_ANNOTATION}']"},
                    },
                    {
                        "path": SEAL_ITEM,
                        "fieldRef": {"fieldPath": f"metadata.annotations['{START_PERMIT_SEAL_ANNOTATION}']"},
                    },
                ]
            },
        },
        {"name": _COUNT_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
    ]
    return gated, volumes


# ---------------------------------------------------------------------------------------- the pod's state


def _server(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == container), None)


def _permit(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(START_PERMIT_ANNOTATION)
    if value is None:
        return None
    return int(value) if str(value).isdigit() else 0


def permitted_start(pod: dict[str, Any]) -> int:
    """The start the pod's permit lets run: 0 when it names none (born at the gate, or not gated)."""
    return _permit(pod) or 0


def start_asked(pod: dict[str, Any], container: str) -> int | None:
    """The start a gated pod waits at the gate for (its container runs the gate and holds no permit for
    this start), or None: not gated, not running yet, already permitted, or Ready."""
    permit = _permit(pod)
    status = _server(pod, container)
    if permit is None or status is None or status.get("ready"):
        return None
    if "running" not in (status.get("state") or {}):
        return None
    start = int(status.get("restartCount") or 0) + 1
    return start if permit < start else None


def start_state(pod: dict[str, Any] | None, container: str, start: int) -> str:
    """Where start number `start` of a pod is: "starting", "ready", "ended" (it exited or was followed by a
    restart, or the pod is going) or "gone"."""
    if pod is None:
        return "gone"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "ended"
    status = _server(pod, container)
    if status is None:
        return "starting"
    if int(status.get("restartCount") or 0) + 1 > start:
        return "ended"
    state = status.get("state") or {}
    if state.get("terminated") or (state.get("waiting") or {}).get("reason") in _FAILED_WAITING:
        return "ended"
    return "ready" if status.get("ready") else "starting"


def memory_taken(runtime: str | None, output: str | None) -> bool:
    """Whether a start's own output (its container's current instance) says its runtime took its memory."""
    pattern = MEMORY_TAKEN.get(runtime or "")
    return pattern is not None and output is not None and pattern.search(output) is not None


def device_of(pod: dict[str, Any], claims: list[dict[str, Any]]) -> DeviceKey | None:
    """The device allocated to the claim the pod's status names and the pod owns (its first result), or None
    while it has none. Claims are read by the name the pod's status gives, never by labels a user can write."""
    meta = pod.get("metadata") or {}
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    named = {s.get("resourceClaimName") for s in statuses if s.get("resourceClaimName")}
    for claim in claims:
        claim_meta = claim.get("metadata") or {}
        owners = claim_meta.get("ownerReferences") or []
        if claim_meta.get("name") not in named or not any(o.get("uid") == meta.get("uid") for o in owners):
            continue
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        for result in results or []:
            return str(result.get("driver")), str(result.get("pool")), str(result.get("device"))
    return None


def sealed_gate(pod: dict[str, Any]) -> bool:
    """Whether the pod runs a gate that waits for a sealed permit (its spec, which no one changes after the pod
    is made, mounts the seal): a pod of an earlier gate waited for the permit alone."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if isinstance(volume, dict) and volume.get("name") == START_GATE_VOLUME:
            items = (volume.get("downwardAPI") or {}).get("items") or []
            return any(isinstance(i, dict) and i.get("path") == SEAL_ITEM for i in items)
    return False


def permit_view(pod: dict[str, Any], start: int) -> dict[str, Any]:
    """What the controller seals of a permit: the pod, by namespace, name and uid, and the start it lets run."""
    meta = pod.get("metadata") or {}
    who = f"{meta.get('namespace')}/{meta.get('name')}/{meta.get('uid')}"
    return {"kind": "StartPermit", "metadata": {}, "spec": {"pod": who, "start": start}}


def permit_seal(pod: dict[str, Any]) -> str | None:
    """The seal the pod's permit carries, as written on it (anyone's word until the controller checks it)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(START_PERMIT_SEAL_ANNOTATION)
    return value if isinstance(value, str) else None


def permit_manifest(pod: dict[str, Any], start: int, at: datetime, seal: str) -> dict[str, Any]:
    """The annotations that let start `start` of the pod run (server-side apply of its metadata), with the
    controller's seal of them (`seal`, of `permit_view`)."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "annotations": {
                START_PERMIT_ANNOTATION: str(start),
                START_PERMITTED_AT_ANNOTATION: _stamp(at),
                START_PERMIT_SEAL_ANNOTATION: seal,
            },
        },
    }


def permitted_at(pod: dict[str, Any]) -> datetime | None:
    """When the pod's current permit was written."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(START_PERMITTED_AT_ANNOTATION)
    return _parse(value)


# ---------------------------------------------------------------------------------------- the device's turn


@dataclass(frozen=True)
class Turn:
    """The start a device's Lease names: whose, since when, until when."""

    namespace: str
    pod: str
    uid: str
    start: int
    order_namespace: str
    order: str
    since: datetime
    until: datetime
    resource_version: str | None
    settled: datetime | None = None  # its runtime said its memory is taken: the turn ended then

    def of(self, pod: dict[str, Any], start: int) -> bool:
        """Whether the turn is this pod's, for this start."""
        return self.uid == (pod.get("metadata") or {}).get("uid") and self.start == start


def turn_lease_name(device: DeviceKey) -> str:
    """The Lease that holds a device's turn, named from the device (a name is no longer than a label)."""
    digest = hashlib.sha256("/".join(device).encode()).hexdigest()[:20]
    return f"isvc-start-{digest}"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def turn_of(lease: dict[str, Any] | None) -> Turn | None:
    """The turn a Lease holds, or None (no Lease, or nobody named in it)."""
    if not lease:
        return None
    meta = lease.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    spec = lease.get("spec") or {}
    holder = str(annotations.get(_HOLDER) or "").split("/")
    order = str(annotations.get(_ORDER) or "").split("/")
    since = _parse(spec.get("acquireTime"))
    seconds = spec.get("leaseDurationSeconds")
    if len(holder) != 4 or not holder[3].isdigit() or since is None or not isinstance(seconds, int):
        return None
    settled = _parse(annotations.get(_SETTLED))
    return Turn(
        namespace=holder[0],
        pod=holder[1],
        uid=holder[2],
        start=int(holder[3]),
        order_namespace=order[0] if len(order) == 2 else holder[0],
        order=order[1] if len(order) == 2 else holder[1],
        since=since,
        until=min(since + timedelta(seconds=seconds), settled)
        if settled
        else since + timedelta(seconds=seconds),
        resource_version=meta.get("resourceVersion"),
        settled=settled,
    )


def turn_lease(
    namespace: str,
    device: DeviceKey,
    pod: dict[str, Any],
    start: int,
    order: str,
    at: datetime,
    seconds: int,
    resource_version: str | None,
) -> dict[str, Any]:
    """The Lease giving `device`'s turn to start `start` of `pod` (of `order`) from `at` for `seconds`.

    With the resourceVersion of the Lease read, the write succeeds only if nobody took the turn since."""
    meta = pod["metadata"]
    metadata: dict[str, Any] = {
        "name": turn_lease_name(device),
        "namespace": namespace,
        "labels": {START_TURN_LABEL: "true", LABEL_MANAGED_BY: "isvc-controller"},
        "annotations": {
            _HOLDER: f"{meta['namespace']}/{meta['name']}/{meta.get('uid', '')}/{start}",
            _ORDER: f"{meta['namespace']}/{order}",
            _DEVICE: "/".join(device),
        },
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": f"{meta['namespace']}/{meta['name']}",
            "acquireTime": _stamp(at),
            "renewTime": _stamp(at),
            "leaseDurationSeconds": int(seconds),
        },
    }


def settled_lease(lease: dict[str, Any], at: datetime) -> dict[str, Any]:
    """The Lease of a turn whose start's runtime said at `at` that its memory is taken: the turn is over then
    (written with the resourceVersion read, so a turn taken since is never overwritten)."""
    meta = dict(lease.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), _SETTLED: _stamp(at)}
    kept = {
        k: meta[k] for k in ("name", "namespace", "labels", "annotations", "resourceVersion") if k in meta
    }
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": kept,
        "spec": lease.get("spec"),
    }


def _clock(at: datetime) -> str:
    return at.strftime("%H:%M:%SZ")


def waiting_message(pod: str, namespace: str, device: DeviceKey, turn: Turn) -> str:
    """WorkloadNotReady for a replica that waits for a co-tenant's start. The co-tenant is named by its
    order; its namespace only when it is the waiter's own (a user may not see the others)."""
    whose = (
        f"order {turn.order}"
        if turn.order_namespace == namespace
        else f"order {turn.order} of another namespace"
    )
    return (
        f"Replica {pod} waits for its turn to start: runtimes that share a device start one at a time, and "
        f"{whose} is starting on device {device[1]}/{device[2]} since {_clock(turn.since)} (until it is Ready, "
        f"or {_clock(turn.until)} at the latest). This passes on its own."
    )


def overdue_message(pod: str, since: datetime, seconds: int) -> str:
    """WorkloadNotReady for a replica whose start outlasted its turn: its co-tenants no longer wait for it."""
    return (
        f"Replica {pod} started its runtime at {_clock(since)} and is not Ready after the {seconds} s a start "
        "may keep the runtimes sharing its device waiting: they start now without waiting for it. A start "
        "this long is worth a look at the container's output; it passes once the replica is Ready."
    )
