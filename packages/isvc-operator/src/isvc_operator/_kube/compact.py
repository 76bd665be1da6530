"""What the informers' cache keeps of each object: little of what users write, keys and short strings shared."""

from __future__ import annotations

import sys
from typing import Any

from isvc_api import GROUP, LABEL_MANAGED_BY, Obj, request_device_class
from isvc_workload import START_GATE_ANNOTATIONS, START_GATE_VOLUME

from isvc_operator._seal import DIGEST, EDITORS, SEALED_KINDS, editors, view_digest

__all__ = [
    "POD_SPEC_READ",
    "compact",
    "compact_child",
    "compact_claim",
    "compact_host",
    "compact_pod",
    "compact_scaler",
    "ingress_hosts",
    "slim",
]


def slim(obj: Obj) -> Obj:
    """The object as the cache keeps it: without managedFields, and of its labels and annotations only the
    module's own (`ai.deckhouse.io/…`, and app.kubernetes.io/managed-by), at most `_KEPT_KEYS` of each with
    values of at most `_KEPT_VALUE` characters. No pass reads the rest, and a user's annotations (256 KiB an
    object) on every order and on every object carrying an order's label would be most of the cache."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        for field in ("labels", "annotations"):
            found = meta.get(field)
            if isinstance(found, dict):
                kept = {
                    k: v
                    for k, v in found.items()
                    if _ours(k) and isinstance(v, str) and len(v) <= _KEPT_VALUE
                }
                meta[field] = dict(list(kept.items())[:_KEPT_KEYS])
    return obj


_KEPT_KEYS = 16
_KEPT_VALUE = 1024
_OUR_PREFIX = f"{GROUP}/"


def _ours(key: str) -> bool:
    return key.startswith(_OUR_PREFIX) or key == LABEL_MANAGED_BY


_SHORT = 64  # strings up to this length are interned: keys, kinds, reasons, label values recur


def _shared(value: Any) -> Any:
    """The same JSON value with its keys and short strings interned: thousands of cached objects then
    share one copy of each (a cached object's size roughly halves)."""
    if isinstance(value, dict):
        return {sys.intern(k): _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    if isinstance(value, str) and len(value) <= _SHORT:
        return sys.intern(value)
    return value


def compact(obj: Obj) -> Obj:
    """What the cache keeps of an object: slimmed, with interned keys and short strings."""
    shared: Obj = _shared(slim(obj))
    return shared


def _controlled_by_order(obj: Obj) -> bool:
    return any(
        o.get("controller") and o.get("kind") == "InferenceService"
        for o in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def compact_child(obj: Obj) -> Obj:
    """A child of an order kind (set, Service, Ingress, autoscaler, NetworkPolicy, claim template) as the
    cache keeps it: the digest of what its seal covers, taken from the object as it arrived, then slimmed.
    An object that carries an order's label but that no order controls (a user's) keeps its metadata only:
    no pass reads more of it."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and obj.get("kind") in SEALED_KINDS:
        meta[DIGEST] = view_digest(obj)
        meta[EDITORS] = editors(obj)
    if not _controlled_by_order(obj):
        obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    return compact(obj)


POD_SPEC_READ = ("nodeName", "resourceClaims")  # the only parts of a pod's spec a pass reads


def compact_pod(obj: Obj) -> Obj:
    """A pod as the cache keeps it: metadata and status, and of its spec only what passes read (the
    containers and tolerations are most of a pod and the workload's own manifest holds them), the start gate's
    volume among its volumes; its start gate's annotations whatever else a user put beside them."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        kept = {k: spec[k] for k in POD_SPEC_READ if k in spec}
        gate = [
            v for v in spec.get("volumes") or [] if isinstance(v, dict) and v.get("name") == START_GATE_VOLUME
        ]
        obj["spec"] = {**kept, "volumes": gate} if gate else kept
    found = (obj.get("metadata") or {}).get("annotations")
    marks = {
        k: v
        for k, v in (found if isinstance(found, dict) else {}).items()
        if k in START_GATE_ANNOTATIONS and isinstance(v, str) and len(v) <= _KEPT_VALUE
    }
    out = compact(obj)
    if marks:
        out["metadata"]["annotations"] = {**(out["metadata"].get("annotations") or {}), **marks}
    return out


def ingress_hosts(obj: Obj) -> list[str]:
    """The hosts an Ingress publishes (its rules' and its TLS sections')."""
    spec = obj.get("spec") or {}
    hosts = [r.get("host") for r in spec.get("rules") or [] if isinstance(r, dict)]
    hosts += [h for t in spec.get("tls") or [] if isinstance(t, dict) for h in t.get("hosts") or []]
    return sorted({h for h in hosts if isinstance(h, str) and h})


def compact_host(obj: Obj) -> Obj:
    """Any Ingress of the cluster as the host index keeps it: who it is, who controls it, when it came, and
    the hosts it publishes: an External host must be the order's before it is published."""
    meta = obj.get("metadata") or {}
    kept = {
        k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp", "ownerReferences") if k in meta
    }
    return compact({"kind": "Ingress", "metadata": kept, "hosts": ingress_hosts(obj)[:_HOSTS]})


_HOSTS = 64  # hosts of one Ingress the index keeps


def compact_scaler(obj: Obj) -> Obj:
    """Any HorizontalPodAutoscaler of the cluster as its index keeps it: who it is, who controls it, and what
    it scales: an autoscaler aimed at an order's set is the order's or goes."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "ownerReferences") if k in meta}
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    aimed = {k: str(target[k]) for k in ("apiVersion", "kind", "name") if k in target}
    return compact({"kind": "HorizontalPodAutoscaler", "metadata": kept, "target": aimed})


_CLAIM_REQUESTS = 32  # requests of one claim, as the API server allows


def compact_claim(obj: Obj) -> Obj:
    """A ResourceClaim as the cache keeps it: its status, and of its spec the device class of each request
    (a user's claim may carry 32 requests of 10 KiB selectors each, which no pass reads)."""
    requests = ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []
    kept = []
    for request in requests[:_CLAIM_REQUESTS] if isinstance(requests, list) else []:
        entry: Obj = {"name": request.get("name")} if isinstance(request, dict) else {}
        device_class = request_device_class(request)
        if device_class is not None:  # a prioritized list's first choice, kept as one request asking it
            entry["exactly"] = {"deviceClassName": device_class}
        kept.append(entry)
    obj["spec"] = {"devices": {"requests": kept}}
    return compact(obj)
