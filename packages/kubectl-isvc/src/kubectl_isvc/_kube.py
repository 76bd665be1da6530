"""The adapter to a cluster: requests with the caller's kubeconfig, through the official client's own
connection pool (its TLS, client certificates, proxies and token refresh), answers as plain JSON."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from kubectl_isvc._errors import Forbidden, NotFound, ReadFailed, Unreachable
from kubectl_isvc._read import Obj, parse_warnings

__all__ = ["KubeReader"]


def _reason(status: int, data: bytes) -> str:
    """The API server's own words for a refusal (the `message` of its Status object)."""
    try:
        body = json.loads(data)
        return str(body.get("message") or body)
    except (ValueError, AttributeError):
        return data.decode("utf-8", "replace")[:500] or f"HTTP {status}"


def _utf8(value: str) -> str:
    """A header value as the API server wrote it. It writes warnings as UTF-8 (apimachinery's NewWarningHeader
    takes any valid UTF-8 text); Python's HTTP client reads header bytes as ISO-8859-1, which made "×" "Ã\x97"."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


class KubeReader:
    """A Reader on the cluster of a kubeconfig context (or the in-cluster service account)."""

    def __init__(
        self, kubeconfig: str | None = None, context: str | None = None, timeout: float = 10.0
    ) -> None:
        cfg = client.Configuration()
        self._namespace = "default"
        try:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            self._namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
        except (ConfigException, FileNotFoundError, TypeError) as e:
            if kubeconfig or context:
                raise Unreachable("kubeconfig", str(e)) from None
            try:
                config.load_incluster_config(client_configuration=cfg)
            except ConfigException:
                raise Unreachable("kubeconfig", f"{e}; and not running in a cluster") from None
            try:
                with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                    self._namespace = f.read().strip() or "default"
            except OSError:
                pass
        self._cfg = cfg
        self._pool = client.rest.RESTClientObject(cfg).pool_manager
        self._timeout = timeout

    @property
    def namespace(self) -> str:
        return self._namespace

    def _headers(self, accept: str) -> dict[str, str]:
        if self._cfg.refresh_api_key_hook is not None:
            self._cfg.refresh_api_key_hook(self._cfg)
        headers = {"Accept": accept, "User-Agent": "kubectl-isvc"}
        settings: dict[str, Any] = dict(self._cfg.auth_settings())
        for auth in settings.values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return headers

    def _request(
        self,
        method: str,
        path: str,
        what: str,
        query: dict[str, str] | None = None,
        body: Obj | None = None,
        accept: str = "application/json",
    ) -> Any:
        url = self._cfg.host.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
        headers = self._headers(accept)
        payload = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            payload = json.dumps(body).encode()
        try:
            response = self._pool.request(
                method,
                url,
                headers=headers,
                body=payload,
                timeout=self._timeout,
                retries=False,
                preload_content=True,
            )
        except Exception as e:  # urllib3's errors: connection refused, TLS, timeout
            raise Unreachable(what, f"the API server did not answer ({type(e).__name__}: {e})") from None
        if response.status == 404:
            raise NotFound(what, _reason(404, response.data), 404)
        if response.status in (401, 403):
            raise Forbidden(what, _reason(response.status, response.data), response.status)
        if response.status >= 500:
            raise Unreachable(what, _reason(response.status, response.data), response.status)
        if response.status >= 400:
            raise ReadFailed(what, _reason(response.status, response.data), response.status)
        return response

    def get(self, path: str, what: str) -> Obj:
        result: Obj = json.loads(self._request("GET", path, what).data)
        return result

    def items(self, path: str, what: str, labels: str | None = None, fields: str | None = None) -> list[Obj]:
        query = {k: v for k, v in (("labelSelector", labels), ("fieldSelector", fields)) if v}
        items: list[Obj] = json.loads(self._request("GET", path, what, query).data).get("items") or []
        return items

    def text(self, path: str, what: str, query: dict[str, str]) -> str:
        data: bytes = self._request("GET", path, what, query, accept="text/plain, */*").data
        return data.decode("utf-8", "replace")

    def create(self, path: str, what: str, body: Obj, query: dict[str, str]) -> tuple[Obj, list[str]]:
        response = self._request("POST", path, what, query, body)
        warnings = parse_warnings([_utf8(v) for v in response.headers.getlist("Warning")])
        obj: Obj = json.loads(response.data)
        return obj, warnings
