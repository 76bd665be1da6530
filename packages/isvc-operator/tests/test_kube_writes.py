"""The controller's writes as the kubernetes client sends them, on whichever client version is installed (CI runs
these at the lowest and the highest version the packages accept: noxfile.py).

Issue 45, point 0: the merge patch of `annotate` went as bytes, which kubernetes 37's REST layer passes to
json.dumps for JSON types (TypeError: every pass that asked a quota's refusal to be retried failed); before
37 the same layer did so for `application/apply-patch+yaml`, so every server-side apply failed there. The
requests reach a recorder on loopback standing in for the API server's HTTP side alone (discovery and one
answer per write): what is checked is what goes on the wire.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
import yaml
from isvc_operator._kube import KubeCluster
from kubernetes import client as k8s

_POD = {"kind": "Pod", "name": "pods", "namespaced": True, "singularName": "pod", "verbs": ["get", "patch"]}
_DISCOVERY: dict[str, Any] = {
    "/version": {"major": "1", "minor": "36", "gitVersion": "v1.36.3"},
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [_POD]},
}


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, bytes]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(_DISCOVERY.get(self.path.split("?")[0], {}))

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.path, str(self.headers.get("Content-Type")), body))
        self._answer({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})


@pytest.fixture
def cluster() -> Iterator[tuple[KubeCluster, list[tuple[str, str, bytes]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = k8s.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield KubeCluster(k8s.ApiClient(config), catalog_enabled=False), _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def test_an_annotation_is_a_json_merge_patch_of_the_metadata(
    cluster: tuple[KubeCluster, list[tuple[str, str, bytes]]],
) -> None:
    kube, seen = cluster

    kube.annotate("v1", "Pod", "ns", "p", {"ai.deckhouse.io/quota-retry": "gpus/7"})

    [(path, content_type, body)] = seen
    assert path.startswith("/api/v1/namespaces/ns/pods/p?")
    assert content_type == "application/merge-patch+json"
    assert json.loads(body) == {"metadata": {"annotations": {"ai.deckhouse.io/quota-retry": "gpus/7"}}}


def test_a_server_side_apply_is_the_manifest_as_yaml_with_its_characters_beyond_the_bmp(
    cluster: tuple[KubeCluster, list[tuple[str, str, bytes]]],
) -> None:
    kube, seen = cluster
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "x": "\U0001f600",
    }

    kube.apply(manifest)

    [(path, content_type, body)] = seen
    assert "fieldManager=isvc-controller" in path and "force=true" in path.lower()  # 34.1.0 writes True
    assert content_type.split(";")[0] == "application/apply-patch+yaml"
    assert yaml.safe_load(body) == manifest


def test_a_json_patch_is_the_list_of_operations(
    cluster: tuple[KubeCluster, list[tuple[str, str, bytes]]],
) -> None:
    kube, seen = cluster
    ops = [{"op": "replace", "path": "/spec/x", "value": 1}]

    kube.patch({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}, ops)

    [(_, content_type, body)] = seen
    assert (content_type, json.loads(body)) == ("application/json-patch+json", ops)
