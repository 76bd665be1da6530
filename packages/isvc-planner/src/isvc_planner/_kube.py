"""Keeps an Inventory current from the cluster: list + watch per kind, one thread each.

The only module that imports the Kubernetes client.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, cast

from isvc_ledger import loading
from kubernetes import client, config, watch

from isvc_planner._auth import ReviewFailed, TokenReviewer
from isvc_planner._inventory import Inventory

__all__ = ["KubeSync", "load_api", "token_reviewer"]

_config: Any = config  # the client ships partial hints; these calls are untyped
_watch: Any = watch

log = logging.getLogger("isvc_planner.kube")


@dataclass(frozen=True)
class _Kind:
    group: str
    version: str
    plural: str


DEVICE_CLASSES = _Kind("resource.k8s.io", "v1", "deviceclasses")
SLICES = _Kind("resource.k8s.io", "v1", "resourceslices")
CLAIMS = _Kind("resource.k8s.io", "v1", "resourceclaims")
PRIORITY_CLASSES = _Kind("scheduling.k8s.io", "v1", "priorityclasses")
NODES = _Kind("", "v1", "nodes")  # which take new pods: a cordoned or tainted node's devices are not offered
# Whose a claim is and at what priority: order -> class -> priorityClassName (issue 14; never claim labels).
ORDERS = _Kind("ai.deckhouse.io", "v1alpha1", "inferenceservices")
SERVICE_CLASSES = _Kind("ai.deckhouse.io", "v1alpha1", "inferenceserviceclasses")
# What the module planned and no claim shows yet: a plan holds its devices for as long as it exists.
PLANS = _Kind("ai.deckhouse.io", "v1alpha1", "launchplans")


def load_api(kubeconfig: str | None = None) -> client.ApiClient:
    """An API client from a kubeconfig file, or from the pod's service account."""
    if kubeconfig:
        return cast(client.ApiClient, _config.new_client_from_config(config_file=kubeconfig))
    _config.load_incluster_config()
    return client.ApiClient()


def token_reviewer(api: client.ApiClient, *, timeout: float = 5.0) -> TokenReviewer:
    """Asks the API server whose a bearer token is (TokenReview; the planner's RBAC allows create)."""
    auth = client.AuthenticationV1Api(api)

    def review(token: str) -> str | None:
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        try:
            answer: Any = auth.create_token_review(body, _request_timeout=timeout)
        except Exception as error:  # unreachable, forbidden, timed out: the caller retries later
            raise ReviewFailed(str(error).splitlines()[0] if str(error) else type(error).__name__) from error
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return None
        return cast(str | None, status.user.username)

    return review


PAGE = 100  # objects of one list answer: an order or a claim may carry 256 KiB of a user's annotations
# One listing at a time, whatever the kind: the watches of every kind fail together (an API server
# restarting), and relists of orders and claims at the annotation limit at once held a page of each (~25 MiB
# of JSON each, decoded) and took the planner 210 MiB above its start (the hostile-input suite). Taken before
# the ledger's lock, never inside it.
_LISTING = threading.Lock()


def _stub(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What is kept of a listed object to tell, after a relist, that it went: its name, namespace and uid
    (every delete handler reads those alone), and its resourceVersion, to pass it by if it comes again
    unchanged."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}}


def _same(before: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> bool:
    """Whether an object is the one seen before: the same resourceVersion (the API server's word for it)."""
    if before is None:
        return False
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return bool(version) and version == (before.get("metadata") or {}).get("resourceVersion")


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


class KubeSync:
    """Lists and watches DeviceClasses, ResourceSlices, ResourceClaims, PriorityClasses and Nodes, and the
    orders, their classes (for the priority of what each claim holds) and their LaunchPlans; `orders=False`
    leaves those to the caller (a test bench without the module's CRDs)."""

    def __init__(
        self, inventory: Inventory, api: client.ApiClient, *, backoff: float = 2.0, orders: bool = True
    ) -> None:
        self.inventory = inventory
        self.objects = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.backoff = backoff
        self._stop = threading.Event()
        self._listed: set[str] = set()
        self._threads: list[threading.Thread] = []
        inv = inventory
        self._handlers: dict[
            _Kind, tuple[Callable[[Mapping[str, Any]], None], Callable[[Mapping[str, Any]], None]]
        ] = {
            DEVICE_CLASSES: (
                inv.upsert_device_class,
                lambda o: inv.delete_device_class(o["metadata"]["name"]),
            ),
            SLICES: (inv.upsert_slice, lambda o: inv.delete_slice(o["metadata"]["name"])),
            CLAIMS: (inv.upsert_claim, inv.delete_claim),
            PRIORITY_CLASSES: (
                inv.upsert_priority_class,
                lambda o: inv.delete_priority_class(o["metadata"]["name"]),
            ),
            NODES: (inv.upsert_node, inv.delete_node),
        }
        # Kinds whose listed pages are applied at once, the ledger locked once a page (claims: the most numerous).
        self._many: dict[_Kind, Callable[[list[Mapping[str, Any]]], None]] = {CLAIMS: inv.upsert_claims}
        if orders:
            self._handlers[ORDERS] = (inv.upsert_order, inv.delete_order)
            self._handlers[SERVICE_CLASSES] = (
                inv.upsert_service_class,
                lambda o: inv.delete_service_class(o["metadata"]["name"]),
            )
            self._handlers[PLANS] = (inv.upsert_plan, inv.delete_plan)

    def start(self) -> None:
        """Start one watch thread per kind."""
        for kind in self._handlers:
            thread = threading.Thread(
                target=self._run, args=(kind,), name=f"watch-{kind.plural}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Ask the watch threads to end at their next event or timeout."""
        self._stop.set()

    def _run(self, kind: _Kind) -> None:
        """List a kind, then watch it from where the list ended; a watch that ends (its 300 s are up) is
        taken up again from the last version it saw (bookmarks included), as client-go's reflector does:
        the kind is listed again only when a watch fails (its version expired: 410), never on a timer."""
        upsert, delete = self._handlers[kind]
        known: dict[str, Mapping[str, Any]] = {}  # what a relist needs to tell what went: names, not objects
        version: str | None = None
        relist = True
        while not self._stop.is_set():
            try:
                if relist:
                    known, version = self._relist(kind, known)
                    self._mark_listed(kind)
                    relist = False
                watch, began = _watch.Watch(), time.monotonic()
                stream = watch.stream(
                    *self._lister(kind),
                    resource_version=version,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj, what = event["object"], event["type"]
                    if not isinstance(obj, dict):  # the typed client's models (nodes): as plain dicts
                        obj = self.core.api_client.sanitize_for_serialization(obj)
                    if what in ("ADDED", "MODIFIED"):
                        known[_key(obj)] = _stub(obj)
                        upsert(obj)
                    elif what == "DELETED":
                        known.pop(_key(obj), None)
                        delete(obj)
                    elif what == "ERROR":  # the version expired (410 Gone) or the watch broke: list again
                        relist = True
                        break
                else:
                    version = getattr(watch, "resource_version", None) or version
                    if time.monotonic() - began < 1.0:  # closed at once (a server going away): not a spin
                        time.sleep(self.backoff)
            except Exception as error:  # any failure: relist after a pause, never die
                log.warning("watch %s failed: %s; relisting", kind.plural, error)
                relist = True
                time.sleep(self.backoff)

    def _relist(
        self, kind: _Kind, known: dict[str, Mapping[str, Any]]
    ) -> tuple[dict[str, Mapping[str, Any]], str | None]:
        """List a kind page by page, applying what changed since `known` and deleting what went; what is
        known of it now, and the version its watch starts from."""
        upsert, delete = self._handlers[kind]
        many = self._many.get(kind)
        fresh: dict[str, Mapping[str, Any]] = {}
        version: str | None = None
        # The first listing is applied at once and counted with the other kinds' once all are in (nothing is
        # planned before); a relist page by page, the ledger locked for one page at a time.
        synced = self.inventory.synced
        first = nullcontext() if synced else self.inventory.applying(until_synced=True)
        with _LISTING, loading(keep=not synced), first:
            for page in self._pages(kind):
                with self.inventory.applying():
                    changed = []
                    for obj in page.get("items") or []:
                        k = _key(obj)
                        if not _same(known.get(k), obj):  # listed again after a failed watch: passed by
                            changed.append(obj)
                        fresh[k] = _stub(obj)
                    if many is not None:
                        many(changed)
                    else:
                        for obj in changed:
                            upsert(obj)
                version = (page.get("metadata") or {}).get("resourceVersion") or version
                del page  # let go before the next page is read
            with self.inventory.applying():
                for k, gone in known.items():
                    if k not in fresh:
                        delete(gone)
        return fresh, version

    def _lister(self, kind: _Kind) -> tuple[Any, ...]:
        """The list call of a kind and its arguments: core kinds (nodes) have their own."""
        if kind is NODES:
            return (self.core.list_node,)
        return (self.objects.list_cluster_custom_object, kind.group, kind.version, kind.plural)

    def _list(self, kind: _Kind, cont: str | None = None) -> dict[str, Any]:
        """One page of a kind's list (`PAGE` objects at most), from the continue token of the previous."""
        call, *args = self._lister(kind)
        paging: dict[str, Any] = {"limit": PAGE}
        if cont:
            paging["_continue"] = cont
        # Parsed from the answer's bytes: the client would decode them to text first, one more copy of a
        # page (up to 25 MiB at the annotation limit) alive at once; and plain dicts for nodes too, not the
        # typed models.
        answer = call(*args, _preload_content=False, **paging)
        return cast(dict[str, Any], json.loads(answer.data))

    def _pages(self, kind: _Kind) -> Iterator[dict[str, Any]]:
        """A kind's list page by page (issue 29: claims, which namespace users write, were listed in one
        answer and every one kept whole until the next relist; a page is let go once it is read)."""
        cont: str | None = None
        while True:
            page = self._list(kind, cont)
            yield page
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                return

    def _mark_listed(self, kind: _Kind) -> None:
        self._listed.add(kind.plural)
        if len(self._listed) == len(self._handlers):
            # Marked synced, the ledger counts and indexes what the first listings applied. What they left
            # alive lives as long as the process: the collector's full passes skip it from now on (at
            # 10,000 nodes × 8 devices one pass held every request for 0.75 s; `nox -s bench`).
            with loading(keep=not self.inventory.synced):
                self.inventory.synced = True
