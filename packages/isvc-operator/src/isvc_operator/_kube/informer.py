"""The informer: list once, follow the watch, keep a cache; and the index of every Ingress by host."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from isvc_api import LABEL_ORDER, Obj
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from isvc_operator._kube.compact import compact
from isvc_operator._kube.discovery import Discovery

__all__ = ["METADATA_LIST", "METADATA_WATCH", "PAGE", "Handler", "HostIndex", "Informer"]

log = logging.getLogger(__name__)

PAGE = 100  # objects of one list answer: an order may carry 256 KiB of a user's annotations
Handler = Callable[[str, Obj], None]
# What the API server is asked for when only metadata is wanted (PartialObjectMetadata, as client-go's
# metadata informers ask): the objects' data never crosses the wire.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _said(exc: Exception) -> str:
    """An error in one line: the API server's status and reason, not its headers and body."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}".strip()
    return f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__


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
        discovery: Discovery,
        api_version: str,
        kind: str,
        label_selector: str | None = None,
        resync: float | None = None,
        metadata_only: bool = False,
        store: bool = True,
        transform: Callable[[Obj], Obj] = compact,
    ) -> None:
        self._discovery = discovery
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
        self._backoff = 0.5  # the wait before the next list after a broken one

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
        """The list, page by page: `PAGE` objects an answer, so that thousands of orders of 256 KiB of annotations
        each are never one answer parsed whole before the cache drops what it does not keep."""
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

    def _typed(self, obj: Obj) -> Obj:
        """A listed object with its kind and apiVersion, as a watch event carries them: the API server leaves
        them out of a built-in kind's list items, and a child's seal covers its kind."""
        obj.setdefault("kind", self.kind)
        obj.setdefault("apiVersion", self.api_version)
        return obj

    def _relist(self, resource: Any) -> str:
        version = ""
        fresh: dict[tuple[str, str], Obj] = {}
        for page in self._pages(resource):
            version = str(page["metadata"].get("resourceVersion", "")) or version
            if self._store:
                fresh.update((_key(o), self._transform(self._typed(o))) for o in page.get("items") or [])
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
        while not self._stop.is_set():
            try:
                resource = self._discovery.resource(self.api_version, self.kind)
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
                self._follow(resource, version)
            except ResourceNotFoundError:
                # The kind is not served (yet): an absent optional API is not an error.
                self._absent("discovery does not list it")
            except ApiException as exc:
                if exc.status != 404:
                    self._broke(exc)
                    continue
                # The kind went away while watched (its CRD deleted): a kind not served, as at start.
                self._discovery.forget(self.api_version, self.kind)
                self._absent("the API server answers 404")
            except Exception as exc:  # reconnect on anything: the loop must not die
                self._broke(exc)

    def _follow(self, resource: Any, version: str) -> None:
        """Follow the watch from `version` until the informer stops; replay the cache every `resync` seconds."""
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
            self._backoff = 0.5

    def _absent(self, why: str) -> None:
        """The kind is not served: the cache empties, and discovery is asked again after RETRY_ABSENT."""
        self._not_served(why)
        self.synced.set()
        self._stop.wait(self.RETRY_ABSENT)

    def _broke(self, exc: Exception) -> None:
        """A broken list or watch: one line, a wait, and the next wait doubled (at most 30 s)."""
        if not self._stop.is_set():
            log.warning("watch of %s broke (%s); relisting in %.1fs", self.kind, _said(exc), self._backoff)
        self._stop.wait(self._backoff)
        self._backoff = min(self._backoff * 2, 30)


class HostIndex:
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
