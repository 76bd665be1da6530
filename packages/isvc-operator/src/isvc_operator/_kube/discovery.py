"""The client every request to the API server goes through, and what its discovery says is served."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

__all__ = ["REQUEST_TIMEOUT", "WATCH_TIMEOUT", "CountedClient", "Discovery", "api_client"]

REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read: seconds
WATCH_TIMEOUT = (5.0, 90.0)  # the server ends a watch after 60 s and sends bookmarks meanwhile


def api_client(kubeconfig: str | None) -> k8s.ApiClient:
    """An ApiClient from a kubeconfig file, or from the in-cluster service account."""
    if kubeconfig:
        return k8s_config.new_client_from_config(config_file=kubeconfig)
    k8s_config.load_incluster_config()
    return k8s.ApiClient()


class CountedClient(DynamicClient):
    """The dynamic client, counting every request by verb and answer code (watches included) and giving each
    a timeout: a request never hangs a worker, a dead watch connection is noticed."""

    def __init__(self, api: k8s.ApiClient, requests: Callable[[str, str], None] | None = None) -> None:
        self._requests = requests or (lambda verb, code: None)
        super().__init__(api)

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        verb = "watch" if kwargs.get("watch") else method.lower()
        kwargs.setdefault("_request_timeout", WATCH_TIMEOUT if verb == "watch" else REQUEST_TIMEOUT)
        try:
            answer = super().request(method, path, *args, **kwargs)
        except ApiException as exc:
            self._requests(verb, str(exc.status))
            raise
        self._requests(verb, "2xx")
        return answer


class Discovery:
    """The dynamic client's resources, looked up once per kind.

    Its discovery cache is not safe across threads: a lookup that misses rebuilds it while other threads
    search it (KeyError 'resources'), and each miss is a full rediscovery (every group version asked again,
    the cache file rewritten). Here one lock guards the lookups, resources found are kept, and a kind not
    served is asked again at most every `RETRY_MISSING` seconds, then by its own group version only (one
    small request) until it is listed.
    """

    RETRY_MISSING = 10.0

    def __init__(self, dyn: DynamicClient) -> None:
        self.dyn = dyn
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], Any] = {}
        self._missing: TTLCache[tuple[str, str], bool] = TTLCache(maxsize=256, ttl=self.RETRY_MISSING)
        self._absent: set[tuple[str, str]] = set()

    def _listed(self, api_version: str, kind: str) -> bool:
        """Whether the API server's discovery of `api_version` lists `kind`: one request, no rediscovery."""
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            answer = self.dyn.request("get", path, serialize=False)
        except NotFoundError:
            return False
        resources = json.loads(answer.data).get("resources") or []
        return any(r.get("kind") == kind for r in resources if "/" not in r.get("name", ""))

    def resource(self, api_version: str, kind: str) -> Any:
        """The dynamic client's resource for a kind; ResourceNotFoundError when the API server serves none."""
        key = (api_version, kind)
        with self._lock:
            found = self._found.get(key)
            if found is not None:
                return found
            if key in self._missing:
                raise ResourceNotFoundError(f"{kind} in {api_version} is not served")
            if key in self._absent and not self._listed(api_version, kind):
                self._missing[key] = True
                raise ResourceNotFoundError(f"{kind} in {api_version} is still not served")
            try:
                found = self.dyn.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                self._missing[key] = True
                self._absent.add(key)
                raise
            self._absent.discard(key)
            self._found[key] = found
            return found

    def forget(self, api_version: str, kind: str) -> None:
        """A kind that went away (its CRD deleted): asked of discovery again, as a kind never served is."""
        key = (api_version, kind)
        with self._lock:
            self._found.pop(key, None)
            self._absent.add(key)
            self._missing[key] = True

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves the kind (a kind not served is asked again after RETRY_MISSING
        seconds, so passes do not each wait on a rediscovery)."""
        try:
            self.resource(api_version, kind)
            return True
        except ResourceNotFoundError:
            return False
