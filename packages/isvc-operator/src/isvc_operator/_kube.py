"""The one module that talks to the Kubernetes API: informers, server-side apply, reads and events."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import isvc_catalog
from cachetools import TTLCache
from isvc_api import GROUP, LABEL_MANAGED_BY, LABEL_ORDER, MANAGER, VERSION
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from isvc_operator._ports import namespace_terminating
from isvc_operator._seal import DIGEST, SEALED_KINDS, view_digest

__all__ = ["Informer", "KubeCluster", "api_client"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GV = f"{GROUP}/{VERSION}"
REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read: seconds
PAGE = 100  # objects of one list answer: an order may carry 256 KiB of a user's annotations
WATCH_TIMEOUT = (5.0, 90.0)  # the server ends a watch after 60 s and sends bookmarks meanwhile
Handler = Callable[[str, Obj], None]
# What the API server is asked for when only metadata is wanted (PartialObjectMetadata, as client-go's
# metadata informers ask): the objects' data never crosses the wire.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


# A character beyond the Basic Multilingual Plane as json.dumps escapes it: a UTF-16 surrogate pair, after an
# even number of backslashes (an odd number would make the first backslash a literal one).
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def apply_body(manifest: Obj) -> bytes:
    """The manifest as the YAML a server-side apply is read as: JSON, but with a character beyond the BMP as a
    YAML `\\U` escape. The API server's YAML decoder refuses the surrogate pairs json.dumps writes for them
    ("found invalid Unicode character escape code"), so one such character in a user's model name, echoed
    into a condition message, made every status write of the order fail (the hostile-input suite found it)."""

    def scalar(m: re.Match[str]) -> str:
        high, low = int(m.group(2), 16), int(m.group(3), 16)
        return f"{m.group(1)}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    return _SURROGATE_PAIR.sub(scalar, json.dumps(manifest)).encode()


def api_client(kubeconfig: str | None) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig file, or from the in-cluster service account."""
    if kubeconfig:
        return k8s_config.new_client_from_config(config_file=kubeconfig)
    k8s_config.load_incluster_config()
    return k8s.ApiClient()


# The dynamic client's discovery cache is not safe across threads: a lookup that misses rebuilds it while
# other threads search it (KeyError 'resources'), and each miss is a full rediscovery (every group version
# asked again, the cache file rewritten). One lock, and resources found are kept; a kind not served is asked
# again at most every ten seconds, and then by its own group version only (one small request) until listed.
_DISCOVERY_LOCK = threading.Lock()
_FOUND: dict[tuple[int, str, str], Any] = {}
_MISSING: TTLCache[tuple[int, str, str], bool] = TTLCache(maxsize=256, ttl=10.0)
_ABSENT: set[tuple[int, str, str]] = set()


def _listed(dyn: DynamicClient, api_version: str, kind: str) -> bool:
    """Whether the API server's discovery of `api_version` lists `kind`: one request, no rediscovery."""
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    try:
        answer = dyn.request("get", path, serialize=False)
    except NotFoundError:
        return False
    resources = json.loads(answer.data).get("resources") or []
    return any(r.get("kind") == kind for r in resources if "/" not in r.get("name", ""))


def resource_of(dyn: DynamicClient, api_version: str, kind: str) -> Any:
    """The dynamic client's resource for a kind; ResourceNotFoundError when the API server serves none."""
    key = (id(dyn), api_version, kind)
    with _DISCOVERY_LOCK:
        found = _FOUND.get(key)
        if found is not None:
            return found
        if key in _MISSING:
            raise ResourceNotFoundError(f"{kind} in {api_version} is not served")
        if key in _ABSENT and not _listed(dyn, api_version, kind):
            _MISSING[key] = True
            raise ResourceNotFoundError(f"{kind} in {api_version} is still not served")
        try:
            found = dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            _MISSING[key] = True
            _ABSENT.add(key)
            raise
        _ABSENT.discard(key)
        _FOUND[key] = found
        return found


def forget_resource(dyn: DynamicClient, api_version: str, kind: str) -> None:
    """A kind that went away (its CRD deleted): asked of discovery again, as a kind never served is."""
    key = (id(dyn), api_version, kind)
    with _DISCOVERY_LOCK:
        _FOUND.pop(key, None)
        _ABSENT.add(key)
        _MISSING[key] = True


def _said(exc: Exception) -> str:
    """An error in one line: the API server's status and reason, not its headers and body."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}".strip()
    return f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__


def slim(obj: Obj) -> Obj:
    """The object as the cache keeps it: without managedFields, and of its labels and annotations only the
    module's own (`ai.deckhouse.io/…`, and app.kubernetes.io/managed-by), at most `_KEPT_KEYS` of each with
    values of at most `_KEPT_VALUE` characters. No pass reads the rest, and a user's annotations (256 KiB an
    object) on every order and on every object carrying an order's label were most of the cache (issue 29)."""
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
    if not _controlled_by_order(obj):
        obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    return compact(obj)


POD_SPEC_READ = ("nodeName", "resourceClaims")  # the only parts of a pod's spec a pass reads


def compact_pod(obj: Obj) -> Obj:
    """A pod as the cache keeps it: metadata and status, and of its spec only what passes read (the
    containers, volumes and tolerations are most of a pod and the workload's own manifest holds them)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        obj["spec"] = {k: spec[k] for k in POD_SPEC_READ if k in spec}
    return compact(obj)


def ingress_hosts(obj: Obj) -> list[str]:
    """The hosts an Ingress publishes (its rules' and its TLS sections')."""
    spec = obj.get("spec") or {}
    hosts = [r.get("host") for r in spec.get("rules") or [] if isinstance(r, dict)]
    hosts += [h for t in spec.get("tls") or [] if isinstance(t, dict) for h in t.get("hosts") or []]
    return sorted({h for h in hosts if isinstance(h, str) and h})


def compact_host(obj: Obj) -> Obj:
    """Any Ingress of the cluster as the host index keeps it: who it is, who controls it, when it came, and
    the hosts it publishes (issue 29: an External host must be the order's before it is published)."""
    meta = obj.get("metadata") or {}
    kept = {
        k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp", "ownerReferences") if k in meta
    }
    return compact({"kind": "Ingress", "metadata": kept, "hosts": ingress_hosts(obj)[:_HOSTS]})


_HOSTS = 64  # hosts of one Ingress the index keeps
_CLAIM_REQUESTS = 32  # requests of one claim, as the API server allows


def compact_claim(obj: Obj) -> Obj:
    """A ResourceClaim as the cache keeps it: its status, and of its spec the device class of each request
    (a user's claim may carry 32 requests of 10 KiB selectors each, which no pass reads)."""
    requests = ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []
    kept = []
    for request in requests[:_CLAIM_REQUESTS] if isinstance(requests, list) else []:
        exactly = request.get("exactly") if isinstance(request, dict) else None
        entry: Obj = {"name": request.get("name")} if isinstance(request, dict) else {}
        if isinstance(exactly, dict) and exactly.get("deviceClassName"):
            entry["exactly"] = {"deviceClassName": exactly["deviceClassName"]}
        kept.append(entry)
    obj["spec"] = {"devices": {"requests": kept}}
    return compact(obj)


class _MetadataOnly:
    """A resource whose reads ask for metadata only: every list and watch sends the PartialObjectMetadata
    Accept header, with no fallback to whole objects."""

    def __init__(self, resource: Any) -> None:
        self._resource = resource

    def get(self, *args: Any, **kwargs: Any) -> Any:
        accept = METADATA_WATCH if kwargs.get("watch") else METADATA_LIST
        return self._resource.get(*args, header_params={"Accept": accept}, **kwargs)


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace") or "", meta["name"]


class Informer:
    """List+watch one resource into a cache, calling handlers on every change (level-triggered use).

    It lists once, then follows the watch from the listed resourceVersion (bookmarks keep it current);
    only a broken watch (410 Gone, an error, a lost connection) lists again. `resync` seconds, when
    given, replays the cache to the handlers as SYNC events — no API call — as client-go's resync does.

    `metadata_only` asks the API server for the objects' metadata alone (PartialObjectMetadata);
    `store=False` keeps nothing: handlers see each watch event, and after each list but the first the
    relist handlers are called instead of SYNC and DELETED events (what changed while the watch was down
    cannot be told without a store; before the first list nothing was watched, so nothing was missed).

    A kind not served (an optional API absent, or its CRD deleted while watched: the list or watch answers
    404) is asked of discovery every RETRY_ABSENT seconds, quietly: one line says it is not served, one that
    it is served again; its cached objects are gone with it (DELETED).
    """

    RETRY_ABSENT = 10.0

    def __init__(
        self,
        dyn: DynamicClient,
        api_version: str,
        kind: str,
        label_selector: str | None = None,
        resync: float | None = None,
        metadata_only: bool = False,
        store: bool = True,
        transform: Callable[[Obj], Obj] = compact,
    ) -> None:
        self._dyn = dyn
        self._transform = transform
        self._metadata_only = metadata_only
        self._store = store
        self._relist_handlers: list[Callable[[], None]] = []
        self._served_handlers: list[Callable[[], None]] = []
        self._listed = False
        self.api_version = api_version
        self.kind = kind
        self._selector = label_selector
        self._resync = resync
        self._cache: dict[tuple[str, str], Obj] = {}
        # (namespace, order label) -> keys: an order's children without scanning every cached object
        self._by_order: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._lock = threading.Lock()
        self._handlers: list[Handler] = []
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: k8s_watch.Watch | None = None
        self._served: bool | None = None  # None until discovery first answered

    def add_handler(self, handler: Handler) -> None:
        """Call `handler(event_type, obj)` on ADDED, MODIFIED, DELETED and resync."""
        self._handlers.append(handler)

    def add_relist_handler(self, handler: Callable[[], None]) -> None:
        """Call `handler()` after each list but the first of an informer that keeps no store."""
        self._relist_handlers.append(handler)

    def add_served_handler(self, handler: Callable[[], None]) -> None:
        """Call `handler()` once the kind is served after it was not (its API installed while the controller
        runs), when its first list is in the cache."""
        self._served_handlers.append(handler)

    def get(self, namespace: str | None, name: str) -> Obj | None:
        """A cached object, or None."""
        with self._lock:
            return self._cache.get((namespace or "", name))

    def of_order(self, namespace: str, order: str) -> list[Obj]:
        """Cached objects of `namespace` labelled as children of `order` (an index, not a scan)."""
        with self._lock:
            keys = self._by_order.get((namespace, order), ())
            return [self._cache[k] for k in sorted(keys) if k in self._cache]

    def _index(self, key: tuple[str, str], obj: Obj | None, old: Obj | None) -> None:
        """Keep the order index with the cache (called holding the lock)."""
        for o, add in ((old, False), (obj, True)):
            label = ((o or {}).get("metadata", {}).get("labels") or {}).get(LABEL_ORDER)
            if not label:
                continue
            slot = (key[0], label)
            if add:
                self._by_order.setdefault(slot, set()).add(key)
            else:
                keys = self._by_order.get(slot)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_order[slot]

    def list(self, namespace: str | None = None) -> list[Obj]:
        """Cached objects, optionally of one namespace."""
        with self._lock:
            return [o for (ns, _), o in self._cache.items() if namespace is None or ns == namespace]

    def start(self) -> None:
        """Run the list+watch loop in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop()

    def _emit(self, kind: str, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:
                log.exception("handler failed for %s %s", self.kind, _key(obj))

    def _pages(self, resource: Any) -> Any:
        """The list, page by page: `PAGE` objects an answer (issue 29: thousands of orders of 256 KiB of
        annotations each were one answer, parsed whole before the cache dropped what it does not keep)."""
        cont: str | None = None
        while True:
            # Raw JSON, not the dynamic client's ResourceInstance tree: a relist of thousands of objects at
            # start would build (and then flatten) one wrapper per field.
            response = resource.get(
                label_selector=self._selector, serialize=False, limit=PAGE, _continue=cont
            )
            page = json.loads(response.data)
            yield page
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                return

    def _relist(self, resource: Any) -> str:
        version = ""
        fresh: dict[tuple[str, str], Obj] = {}
        for page in self._pages(resource):
            version = str(page["metadata"].get("resourceVersion", "")) or version
            if self._store:
                fresh.update((_key(o), self._transform(o)) for o in page.get("items") or [])
        relisted, self._listed = self._listed, True
        if not self._store:
            for handler in self._relist_handlers if relisted else ():
                try:
                    handler()
                except Exception:
                    log.exception("relist handler failed for %s", self.kind)
            self.synced.set()
            return version
        with self._lock:
            gone = [o for k, o in self._cache.items() if k not in fresh]
            self._cache = fresh
            self._by_order = {}
            for k, o in fresh.items():
                self._index(k, o, None)
        for obj in gone:
            self._emit("DELETED", obj)
        for obj in fresh.values():
            self._emit("SYNC", obj)
        self.synced.set()
        return version

    def _keep(self, kind: str, obj: Obj) -> None:
        """Bring the cache and its index up to one watch event."""
        with self._lock:
            key = _key(obj)
            old = self._cache.pop(key, None) if kind == "DELETED" else self._cache.get(key)
            if kind != "DELETED":
                self._cache[key] = obj
            self._index(key, None if kind == "DELETED" else obj, old)

    def _replay(self) -> None:
        """Hand every cached object to the handlers again (SYNC), from memory."""
        with self._lock:
            cached = list(self._cache.values())
        for obj in cached:
            self._emit("SYNC", obj)

    def _not_served(self, why: str) -> None:
        """The kind is not served: said once, and what the cache held of it is gone."""
        if self._served is not False:
            log.info("%s (%s) is not served (%s); watched again once it is", self.kind, self.api_version, why)
        self._served = False
        with self._lock:
            gone = list(self._cache.values())
            self._cache, self._by_order = {}, {}
        for obj in gone:
            self._emit("DELETED", obj)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                resource = resource_of(self._dyn, self.api_version, self.kind)
                appeared = self._served is False
                if appeared:
                    log.info("%s (%s) is served again; watching it", self.kind, self.api_version)
                self._served = True
                if self._metadata_only:
                    resource = _MetadataOnly(resource)
                version = self._relist(resource)
                for handler in self._served_handlers if appeared else ():
                    try:
                        handler()
                    except Exception:
                        log.exception("served handler failed for %s", self.kind)
                replayed = time.monotonic()
                while not self._stop.is_set():
                    if self._resync is not None and time.monotonic() - replayed >= self._resync:
                        self._replay()
                        replayed = time.monotonic()
                    self._watcher = k8s_watch.Watch()
                    # The watcher's raw events, not DynamicClient.watch's: that wraps every event in a
                    # ResourceInstance the cache would drop at once.
                    for event in self._watcher.stream(
                        resource.get,
                        label_selector=self._selector,
                        resource_version=version,
                        timeout_seconds=60,
                        allow_watch_bookmarks=True,
                        serialize=False,
                    ):
                        kind, raw = event["type"], event["raw_object"]
                        if kind == "ERROR":
                            raise ApiException(status=raw.get("code", 500), reason=raw.get("message"))
                        obj = self._transform(raw) if self._store and kind != "BOOKMARK" else raw
                        version = obj.get("metadata", {}).get("resourceVersion", version)
                        if kind == "BOOKMARK":
                            continue
                        if self._store:
                            self._keep(kind, obj)
                        self._emit(kind, obj)
                        if self._stop.is_set():
                            break
                    backoff = 0.5
            except ResourceNotFoundError:
                # The kind is not served (yet): an absent optional API is not an error.
                self._not_served("discovery does not list it")
                self.synced.set()
                self._stop.wait(self.RETRY_ABSENT)
            except ApiException as exc:
                if exc.status != 404:
                    backoff = self._broke(exc, backoff)
                    continue
                # The kind went away while watched (its CRD deleted): a kind not served, as at start.
                forget_resource(self._dyn, self.api_version, self.kind)
                self._not_served("the API server answers 404")
                self.synced.set()
                self._stop.wait(self.RETRY_ABSENT)
            except Exception as exc:  # reconnect on anything: the loop must not die
                backoff = self._broke(exc, backoff)

    def _broke(self, exc: Exception, backoff: float) -> float:
        """A broken list or watch: one line, a wait, and the next wait doubled (at most 30 s)."""
        if not self._stop.is_set():
            log.warning("watch of %s broke (%s); relisting in %.1fs", self.kind, _said(exc), backoff)
        self._stop.wait(backoff)
        return min(backoff * 2, 30)


class _HostIndex:
    """Ingresses of every namespace by the hosts they publish, kept current by their informer."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self._by_host: dict[str, set[tuple[str, str]]] = {}
        self._hosts: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()
        informer.add_handler(self._on_ingress)

    def _on_ingress(self, event: str, obj: Obj) -> None:
        key = _key(obj)
        hosts = [] if event == "DELETED" else list(obj.get("hosts") or [])
        with self._lock:
            for host in self._hosts.pop(key, []):
                self._by_host.get(host, set()).discard(key)
            if hosts:
                self._hosts[key] = hosts
                for host in hosts:
                    self._by_host.setdefault(host, set()).add(key)

    def naming(self, host: str) -> list[Obj]:
        with self._lock:
            keys = sorted(self._by_host.get(host, set()))
        return [o for k in keys if (o := self.informer.get(*k)) is not None]


# What the kubelet answers (HTTP 200, the text in place of the output) for a container instance it has
# already removed, or whose log file is gone: kubernetes v1.36.3 pkg/kubelet/kuberuntime/
# kuberuntime_container.go GetContainerLogs, and k8s.io/cri-client v0.36.3 pkg/logs/logs.go ReadLogs.
LOG_GONE_NOTICES = ("unable to retrieve container logs for ", "failed to try resolving symlinks in path ")


class KubeCluster:
    """The operator's view of the cluster (the Cluster port): cached reads through informers where one
    holds the kind, live reads of orders, plans and Secrets, writes by server-side apply."""

    def __init__(
        self,
        api: k8s.ApiClient,
        catalog_enabled: bool = True,
        requests: Callable[[str, str], None] | None = None,
        resync: float | None = None,
    ) -> None:
        self.api = api
        self.dyn = DynamicClient(api)
        self._event_lock = threading.Lock()
        self._last_event = 0
        self._count(requests or (lambda verb, code: None))
        self.core = k8s.CoreV1Api(api)
        sel = LABEL_ORDER
        # Only orders are replayed: a replay is a pass per order, its plan judged again by the planner.
        self.orders = Informer(self.dyn, GV, "InferenceService", resync=resync)
        self.classes = Informer(self.dyn, GV, "InferenceServiceClass")
        self.plans = Informer(self.dyn, GV, "LaunchPlan")
        child = compact_child
        self.statefulsets = Informer(self.dyn, "apps/v1", "StatefulSet", label_selector=sel, transform=child)
        # Only to remove the Deployment an earlier version made an order's workload of (the set took over).
        self.deployments = Informer(self.dyn, "apps/v1", "Deployment", label_selector=sel, transform=child)
        self.pods = Informer(self.dyn, "v1", "Pod", label_selector=sel, transform=compact_pod)
        self.claims = Informer(
            self.dyn, "resource.k8s.io/v1", "ResourceClaim", label_selector=sel, transform=compact_claim
        )
        self.templates = Informer(
            self.dyn, "resource.k8s.io/v1", "ResourceClaimTemplate", label_selector=sel, transform=child
        )
        self.ingresses = Informer(
            self.dyn, "networking.k8s.io/v1", "Ingress", label_selector=sel, transform=child
        )
        self.services = Informer(self.dyn, "v1", "Service", label_selector=sel, transform=child)
        self.autoscalers = Informer(
            self.dyn, "autoscaling/v2", "HorizontalPodAutoscaler", label_selector=sel, transform=child
        )
        self.network_policies = Informer(
            self.dyn, "networking.k8s.io/v1", "NetworkPolicy", label_selector=sel, transform=child
        )
        # Every Ingress of the cluster, by the hosts it publishes: whose an External host is.
        self.hosts = _HostIndex(Informer(self.dyn, "networking.k8s.io/v1", "Ingress", transform=compact_host))
        self.budgets = Informer(self.dyn, "policy/v1", "PodDisruptionBudget", label_selector=sel)
        # The metrics path's own kinds, when the cluster serves them (an informer of a kind not served waits)
        self.pod_metrics = Informer(self.dyn, "deckhouse.io/v1alpha1", "PodMetric", label_selector=sel)
        self.scaled_objects = Informer(self.dyn, "keda.sh/v1alpha1", "ScaledObject", label_selector=sel)
        self.pod_monitors = Informer(self.dyn, "monitoring.coreos.com/v1", "PodMonitor", label_selector=sel)
        self.priority_classes = Informer(self.dyn, "scheduling.k8s.io/v1", "PriorityClass")
        # Namespaces' quotas: a quota refusing part of an order's workload is judged against them, and a
        # change to one passes the orders of its namespace whose workload is not up.
        self.quotas = Informer(self.dyn, "v1", "ResourceQuota")
        catalog_gv = f"{isvc_catalog.CATALOG_GROUP}/{isvc_catalog.CATALOG_VERSION}"
        # The catalog objects orders name: a fix there lifts ModelNotReady / ModelNotFound at once.
        self.catalog = [
            Informer(self.dyn, catalog_gv, kind) for kind in ("Model", "ClusterModel") if catalog_enabled
        ]
        # Secrets: their metadata only, and nothing kept — an event says which Secret changed, and the
        # orders naming it are passed; a pass reads the one Secret it needs live (get_secret).
        self.secrets = Informer(self.dyn, "v1", "Secret", metadata_only=True, store=False)
        self.informers = [
            self.orders,
            self.classes,
            self.plans,
            self.statefulsets,
            self.deployments,
            self.pods,
            self.claims,
            self.templates,
            self.ingresses,
            self.services,
            self.autoscalers,
            self.network_policies,
            self.hosts.informer,
            self.budgets,
            self.pod_metrics,
            self.scaled_objects,
            self.pod_monitors,
            self.priority_classes,
            self.quotas,
            self.secrets,
            *self.catalog,
        ]
        self.catalog_enabled = catalog_enabled
        self._owned = {
            "StatefulSet": self.statefulsets,
            "Deployment": self.deployments,
            "Pod": self.pods,
            "ResourceClaim": self.claims,
            "ResourceClaimTemplate": self.templates,
            "Ingress": self.ingresses,
            "HorizontalPodAutoscaler": self.autoscalers,
            "PodDisruptionBudget": self.budgets,
            "PodMetric": self.pod_metrics,
            "ScaledObject": self.scaled_objects,
            "PodMonitor": self.pod_monitors,
            "Service": self.services,
            "NetworkPolicy": self.network_policies,
        }

    def start(self, timeout: float = 60.0) -> None:
        """Start every informer and wait until each has listed once."""
        for informer in self.informers:
            informer.start()
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"informer for {informer.kind} did not sync")

    def stop(self) -> None:
        """Stop every informer."""
        for informer in self.informers:
            informer.stop()

    def _count(self, requests: Callable[[str, str], None]) -> None:
        """Count every request of the dynamic client by verb and answer code (watches included), and give
        each a timeout: a request never hangs a worker, a dead watch connection is noticed."""
        original = self.dyn.request

        def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            verb = "watch" if kwargs.get("watch") else method.lower()
            kwargs.setdefault("_request_timeout", WATCH_TIMEOUT if verb == "watch" else REQUEST_TIMEOUT)
            try:
                answer = original(method, path, *args, **kwargs)
            except ApiException as exc:
                requests(verb, str(exc.status))
                raise
            requests(verb, "2xx")
            return answer

        self.dyn.request = counted

    # ---- reads (the Cluster port)

    def order(self, namespace: str, name: str) -> Obj | None:
        """An order, read live: a pass starts from what the API server holds."""
        return self.get(GV, "InferenceService", namespace, name)

    def klass(self, name: str) -> Obj | None:
        """A class from the cache; read live until the cache has synced (a standby answering estimates)."""
        if not self.classes.synced.is_set():
            return self.get(GV, "InferenceServiceClass", None, name)
        return self.classes.get(None, name)

    def priority_class_exists(self, name: str) -> bool:
        return self.priority_classes.get(None, name) is not None

    def priority_value(self, name: str | None) -> int:
        """The value of a PriorityClass from the cache; 0 for none or a missing one."""
        obj = self.priority_classes.get(None, name) if name else None
        return int(obj.get("value", 0)) if obj else 0

    def launch_plan(self, namespace: str, name: str) -> Obj | None:
        """An order's LaunchPlan, read live."""
        return self.get(GV, "LaunchPlan", namespace, name)

    def ingresses_naming(self, host: str) -> list[Obj]:
        """Every Ingress of the cluster that publishes `host` (name, namespace, uid, owners, creation time)."""
        return self.hosts.naming(host)

    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]:
        """Children of an order from the cache: objects of `kind` labelled with its name."""
        return self._owned[kind].of_order(namespace, order)

    def cached(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A child of an order as the cache holds it (kinds the controller watches), or None."""
        informer = self._owned.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A live read; None when the object (or its kind) does not exist."""
        try:
            resource = resource_of(self.dyn, api_version, kind)
            got: Obj = resource.get(name=name, namespace=namespace).to_dict()
            return got
        except ResourceNotFoundError:
            return None
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves the kind (discovery; a kind not served is asked again after ten
        seconds, so passes do not each wait on a rediscovery)."""
        try:
            resource_of(self.dyn, api_version, kind)
            return True
        except ResourceNotFoundError:
            return False

    def get_secret(self, namespace: str, name: str) -> Obj | None:
        """A Secret read live: no Secret's data is cached (least privilege in memory); only their metadata
        is watched, to pass the orders that name one when it changes."""
        return self.get("v1", "Secret", namespace, name)

    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None:
        """The tail of a container's output, previous instance first; None when it cannot be had.

        The kubelet keeps one dead instance: while the current one has itself just exited, the one before it
        is gone and the kubelet answers 200 with a notice instead of its output; the current one's is read.
        """
        for previous in (True, False):
            try:
                text: str = self.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=container,
                    tail_lines=lines,
                    previous=previous,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                if text and not text.startswith(LOG_GONE_NOTICES):
                    return text
            except ApiException:
                continue
        return None

    def quotas_in(self, namespace: str) -> list[Obj]:
        """The ResourceQuotas of a namespace, from the cache."""
        return self.quotas.list(namespace)

    def failed_create(self, namespace: str, kind: str, name: str, uid: str) -> str | None:
        """What the workload controller last said when the cluster refused to create a pod of that object
        (its newest FailedCreate event), read live; None when it said nothing or the events cannot be read."""
        return self.refused(namespace, kind, name, uid, "FailedCreate")

    def refused(self, namespace: str, kind: str, name: str, uid: str, reason: str) -> str | None:
        """The message of the newest event `reason` a controller recorded on that object (this uid), read
        live; None when there is none or the events cannot be read."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
        try:
            events = self.core.list_namespaced_event(
                namespace, field_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ).items
        except ApiException as exc:
            log.warning("events of %s %s/%s not read: %s", kind, namespace, name, exc.reason)
            return None
        ours = [e for e in events if e.involved_object.uid == uid]
        if not ours:
            return None
        never = datetime.min.replace(tzinfo=UTC)
        newest = max(ours, key=lambda e: e.last_timestamp or e.event_time or never)
        return str(newest.message or "") or None

    # ---- writes

    def apply(self, manifest: Obj, dry_run: bool = False) -> Obj:
        """Server-side apply with the one field manager, taking ownership of conflicting fields; `dry_run`:
        what the object would be (the API server's defaults and admission included), nothing written."""
        resource = resource_of(self.dyn, manifest["apiVersion"], manifest["kind"])
        return self._apply(resource, manifest, dry_run)

    def apply_status(self, manifest: Obj) -> Obj:
        """Server-side apply of the status subresource."""
        resource = resource_of(self.dyn, manifest["apiVersion"], manifest["kind"])
        return self._apply(resource.subresources["status"], manifest)

    def _apply(self, resource: Any, manifest: Obj, dry_run: bool = False) -> Obj:
        meta = manifest["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        path = resource.path(name=meta["name"], namespace=namespace)
        extra = {"dry_run": "All"} if dry_run else {}
        out: Obj = self.dyn.request(
            "patch",
            path,
            body=apply_body(manifest),
            content_type="application/apply-patch+yaml",
            field_manager=MANAGER,
            force_conflicts=True,
            **extra,
        ).to_dict()
        return out

    def patch(self, manifest: Obj, ops: list[Obj], dry_run: bool = False) -> Obj:
        """A JSON patch of the object `manifest` names (a child restored whole, issue 29)."""
        resource = resource_of(self.dyn, manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        extra = {"dry_run": "All"} if dry_run else {}
        out: Obj = self.dyn.request(
            "patch",
            resource.path(name=meta["name"], namespace=namespace),
            body=ops,
            content_type="application/json-patch+json",
            field_manager=MANAGER,
            **extra,
        ).to_dict()
        return out

    def lease(self, namespace: str, name: str) -> Obj | None:
        """A coordination Lease, read live."""
        return self.get("coordination.k8s.io/v1", "Lease", namespace, name)

    def take_lease(self, manifest: Obj) -> bool:
        """Replace a Lease at the resourceVersion it was read at, or create it when it had none; False on 409."""
        resource = resource_of(self.dyn, manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        try:
            if meta.get("resourceVersion"):
                resource.replace(body=manifest, namespace=meta["namespace"])
            else:
                resource.create(body=manifest, namespace=meta["namespace"])
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def create(self, manifest: Obj) -> Obj:
        """Create an object; an existing one is returned as it is (never overwritten)."""
        resource = resource_of(self.dyn, manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        try:
            out: Obj = resource.create(body=manifest, namespace=meta.get("namespace")).to_dict()
            return out
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self.get(manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"])
        assert existing is not None
        return existing

    def annotate(
        self, api_version: str, kind: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        """Set annotations on an object by a merge patch of its metadata, under the controller's field manager;
        an object gone meanwhile is left alone."""
        try:
            resource = resource_of(self.dyn, api_version, kind)
            self.dyn.request(
                "patch",
                resource.path(name=name, namespace=namespace),
                body=json.dumps({"metadata": {"annotations": annotations}}).encode(),
                content_type="application/merge-patch+json",
                field_manager=MANAGER,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete an object; a missing one is already deleted."""
        try:
            resource = resource_of(self.dyn, api_version, kind)
            resource.delete(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def user_may(
        self,
        username: str,
        uid: str,
        groups: tuple[str, ...],
        extra: Mapping[str, tuple[str, ...]],
        verb: str,
        resource: str,
        namespace: str,
        name: str,
    ) -> bool:
        """A SubjectAccessReview of a user the API server vouched for; False when it cannot be asked."""
        review = k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user=username,
                uid=uid or None,
                groups=list(groups),
                extra={k: list(v) for k, v in extra.items()} or None,
                resource_attributes=k8s.V1ResourceAttributes(
                    verb=verb, resource=resource, namespace=namespace, name=name
                ),
            )
        )
        try:
            answer = k8s.AuthorizationV1Api(self.api).create_subject_access_review(
                review, _request_timeout=REQUEST_TIMEOUT
            )
        except Exception as exc:  # unreachable or forbidden: not allowed
            log.warning(
                "access review for %s (%s %s %s/%s) failed: %s",
                username,
                verb,
                resource,
                namespace,
                name,
                exc,
            )
            return False
        return bool(answer.status and answer.status.allowed)

    def _event_time(self) -> int:
        """Nanoseconds since the epoch, strictly after the last event's: event names sort as they were made."""
        with self._event_lock:
            self._last_event = max(time.time_ns(), self._last_event + 1)
            return self._last_event

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        """Record an event on an object (best effort: an event is never worth a failed pass).

        Named `<object>.<nanoseconds, hex>`, as client-go's recorder names them (tools/record makeEvent): the
        API server lists events by name, and `kubectl describe` sorts that list by lastTimestamp, which has
        whole seconds, with Go's sort.Sort; a list already in time order stays in its order, so events of one
        second are shown in the order they were made, not in the random order of generated names."""
        meta = involved["metadata"]
        made = self._event_time()
        now = datetime.fromtimestamp(made / 1e9, UTC)
        body = k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name=f"{meta['name']}.{made:x}", namespace=meta.get("namespace")),
            involved_object=k8s.V1ObjectReference(
                api_version=involved.get("apiVersion"),
                kind=involved.get("kind"),
                name=meta["name"],
                namespace=meta.get("namespace"),
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=k8s.V1EventSource(component=MANAGER),
        )
        try:
            self.core.create_namespaced_event(
                meta.get("namespace") or "default", body, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if namespace_terminating(exc):  # the namespace goes, with the object the event was about
                log.debug("event %s on %s not recorded: its namespace is being deleted", reason, meta["name"])
                return
            log.warning("event %s on %s not recorded: %s", reason, meta["name"], exc.reason)
