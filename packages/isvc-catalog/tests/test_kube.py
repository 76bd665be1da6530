"""KubeCatalogApi against a loopback HTTP server that answers like the API server."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from isvc_api import CatalogKind
from isvc_catalog import Absent, CatalogLookupError, KubeCatalogApi
from kubernetes import client

OBJECT = {
    "apiVersion": "ai-models.deckhouse.io/v1alpha1",
    "kind": "Model",
    "metadata": {"name": "qwen", "namespace": "team"},
    "spec": {},
    "status": {"phase": "Ready"},
}
NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "reason": "NotFound",
    "code": 404,
    "message": 'models.ai-models.deckhouse.io "gone" not found',
    "details": {"name": "gone", "group": "ai-models.deckhouse.io", "kind": "models"},
}

MODELS = "/apis/ai-models.deckhouse.io/v1alpha1/namespaces/team/models"
ROUTES: dict[str, tuple[int, bytes]] = {
    f"{MODELS}/qwen": (200, json.dumps(OBJECT).encode()),
    f"{MODELS}/gone": (404, json.dumps(NOT_FOUND).encode()),
    f"{MODELS}/broken": (503, b'{"kind":"Status"}'),
    f"{MODELS}/secret": (403, b'{"kind":"Status"}'),
}


class Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        status, body = ROUTES.get(self.path, (404, b"404 page not found\n"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body.startswith(b"{") else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def api_for(url: str) -> KubeCatalogApi:
    config = client.Configuration()
    config.host = url
    config.retries = 0
    return KubeCatalogApi(client.ApiClient(config), timeout=2.0)


@pytest.fixture
def apiserver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_an_existing_object_is_returned(apiserver: str) -> None:
    assert api_for(apiserver).get(CatalogKind.MODEL, "qwen", "team") == OBJECT


def test_a_missing_object_is_told_from_an_unserved_kind(apiserver: str) -> None:
    api = api_for(apiserver)
    assert api.get(CatalogKind.MODEL, "gone", "team") == Absent.OBJECT
    assert api.get(CatalogKind.CLUSTER_MODEL, "gone", None) == Absent.KIND


def test_a_cluster_model_is_read_at_cluster_scope(apiserver: str) -> None:
    Handler.seen.clear()
    api_for(apiserver).get(CatalogKind.CLUSTER_MODEL, "bge", None)
    assert Handler.seen == ["/apis/ai-models.deckhouse.io/v1alpha1/clustermodels/bge"]


@pytest.mark.parametrize(("name", "needle"), [("broken", "HTTP 503"), ("secret", "HTTP 403")])
def test_a_failed_request_is_a_temporary_lookup_failure(apiserver: str, name: str, needle: str) -> None:
    with pytest.raises(CatalogLookupError, match=needle):
        api_for(apiserver).get(CatalogKind.MODEL, name, "team")


def test_a_forbidden_request_says_whose_permission_is_missing(apiserver: str) -> None:
    with pytest.raises(CatalogLookupError, match=r"HTTP 403.*catalog\.mode is None; an administrator"):
        api_for(apiserver).get(CatalogKind.MODEL, "secret", "team")
    with pytest.raises(CatalogLookupError) as other:
        api_for(apiserver).get(CatalogKind.MODEL, "broken", "team")
    assert "catalog.mode" not in other.value.message


def test_an_unreachable_api_server_is_a_temporary_lookup_failure() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CatalogLookupError):
        api_for(f"http://127.0.0.1:{port}").get(CatalogKind.MODEL, "qwen", "team")
