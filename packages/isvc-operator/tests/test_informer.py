"""The informer lists once and follows the watch; only a broken watch lists again; a resync is from memory."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_operator._kube.discovery import Discovery
from isvc_operator._kube.informer import Informer
from kubernetes.client.exceptions import ApiException


def _pod(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "team-a", "resourceVersion": version}}


class _Response:
    """What the API client hands back with serialize=False: a body to read, or a watch's lines to stream."""

    def __init__(
        self, body: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None
    ) -> None:
        self.data = json.dumps(body).encode() if body is not None else b""
        self._lines = [
            json.dumps({"type": e["type"], "object": e["raw_object"]}).encode() + b"\n" for e in events or []
        ]

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        return iter(self._lines)

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class FakeDynamic:
    """Serves one list and a script of watch streams; stops the informer when the script runs out."""

    def __init__(self, streams: list[list[dict[str, Any]]], informer_stop: threading.Event) -> None:
        self.lists = 0
        self.watched_from: list[str] = []
        self._streams = streams
        self._stop = informer_stop
        self.resources = self

    def get(self, api_version: str | None = None, kind: str | None = None, **kwargs: Any) -> Any:
        if kind is not None:
            return self  # resources.get(api_version, kind) -> the resource
        if not kwargs.get("watch"):
            self.lists += 1
            return _Response({"items": [_pod("a", "1")], "metadata": {"resourceVersion": "10"}})
        self.watched_from.append(kwargs["resource_version"])
        if not self._streams:
            self._stop.set()
            return _Response(events=[])
        return _Response(events=self._streams.pop(0))


def run(informer: Informer, dyn: FakeDynamic) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    informer._discovery = Discovery(dyn)  # type: ignore[arg-type]
    informer._run()
    return seen


def test_a_watch_that_ends_is_resumed_from_its_version_without_listing_again() -> None:
    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    modified = {"type": "MODIFIED", "raw_object": _pod("a", "11")}
    bookmark = {"type": "BOOKMARK", "raw_object": {"metadata": {"resourceVersion": "12"}}}
    dyn = FakeDynamic([[modified], [bookmark], []], informer._stop)
    seen = run(informer, dyn)
    assert dyn.lists == 1
    assert dyn.watched_from == ["10", "11", "12", "12"]
    assert seen == [("SYNC", "a"), ("MODIFIED", "a")]


def test_a_watch_the_server_expired_lists_again() -> None:
    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    informer._stop.wait = lambda timeout=None: informer._stop.is_set()  # type: ignore[method-assign]
    gone = {"type": "ERROR", "raw_object": {"code": 410, "message": "too old resource version"}}
    dyn = FakeDynamic([[gone], []], informer._stop)
    seen = run(informer, dyn)
    assert dyn.lists == 2
    assert seen == [("SYNC", "a"), ("SYNC", "a")]


def test_a_resync_replays_the_cache_without_an_api_call() -> None:
    informer = Informer(None, "v1", "Pod", resync=0.0)  # type: ignore[arg-type]
    dyn = FakeDynamic([[], []], informer._stop)
    seen = run(informer, dyn)
    assert dyn.lists == 1
    assert seen == [("SYNC", "a")] * 4  # the list, then a replay before each of the three watches


def test_the_cache_keeps_no_managed_fields_or_last_applied_configuration() -> None:
    """Issue 15: at 2,000 orders the cached objects' managedFields alone weighed more than the goal."""
    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    heavy = _pod("a", "11")
    heavy["metadata"]["managedFields"] = [{"manager": "isvc", "fieldsV1": {"f:spec": {}}}]
    heavy["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "ai.deckhouse.io/keep": "me",
    }
    dyn = FakeDynamic([[{"type": "MODIFIED", "raw_object": heavy}]], informer._stop)
    run(informer, dyn)
    cached = informer.get("team-a", "a")
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
    assert cached["metadata"]["annotations"] == {"ai.deckhouse.io/keep": "me"}


def test_the_cache_keeps_of_labels_and_annotations_only_the_modules_own_issue_29() -> None:
    """Issue 29: users' annotations (256 KiB an object) on every order and labelled object filled the cache."""
    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    heavy = _pod("a", "11")
    heavy["metadata"]["labels"] = {
        "ai.deckhouse.io/inference-service": "o",
        "app.kubernetes.io/managed-by": "isvc-controller",
        **{f"user-{i}": "x" * 63 for i in range(100)},
        **{f"ai.deckhouse.io/user-{i}": "x" for i in range(100)},
    }
    heavy["metadata"]["annotations"] = {"user": "x" * 200_000, "ai.deckhouse.io/big": "x" * 2000}
    dyn = FakeDynamic([[{"type": "MODIFIED", "raw_object": heavy}]], informer._stop)
    run(informer, dyn)
    cached = informer.get("team-a", "a")
    assert cached is not None
    labels = cached["metadata"]["labels"]
    assert labels["ai.deckhouse.io/inference-service"] == "o" and len(labels) == 16
    assert all(k.startswith(("ai.deckhouse.io/", "app.kubernetes.io/managed-by")) for k in labels)
    assert cached["metadata"]["annotations"] == {}


def test_an_orders_children_are_found_by_its_label_through_an_index_kept_with_the_cache() -> None:
    """Issue 15: each pass scanned every cached object of each kind; at 2,000 orders that was most of it."""
    from isvc_api import LABEL_ORDER

    def child(name: str, order: str | None, version: str) -> dict[str, Any]:
        obj = _pod(name, version)
        if order:
            obj["metadata"]["labels"] = {LABEL_ORDER: order}
        return obj

    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    events = [
        {"type": "ADDED", "raw_object": child("llm-0", "llm", "11")},
        {"type": "ADDED", "raw_object": child("llm-1", "llm", "12")},
        {"type": "ADDED", "raw_object": child("other-0", "other", "13")},
        {"type": "MODIFIED", "raw_object": child("llm-1", "other", "14")},  # relabelled
        {"type": "DELETED", "raw_object": child("other-0", "other", "15")},
    ]
    dyn = FakeDynamic([events], informer._stop)
    run(informer, dyn)
    assert [o["metadata"]["name"] for o in informer.of_order("team-a", "llm")] == ["llm-0"]
    assert [o["metadata"]["name"] for o in informer.of_order("team-a", "other")] == ["llm-1"]
    assert informer.of_order("team-b", "llm") == []


def test_discovery_is_asked_once_per_kind_and_a_kind_not_served_not_on_every_pass() -> None:
    """Issue 15: each pass asked whether cert-manager is served; every miss rebuilt the dynamic client's
    discovery cache while other threads searched it (KeyError 'resources') — a full rediscovery per pass."""
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    class Resources:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def get(self, api_version: str, kind: str) -> str:
            self.asked.append(kind)
            if kind == "Certificate":
                raise ResourceNotFoundError("not served")
            return f"resource {kind}"

    dyn = type("Dyn", (), {})()
    dyn.resources = Resources()
    discovery = Discovery(dyn)
    for _ in range(5):
        assert discovery.resource("v1", "Pod") == "resource Pod"
        try:
            discovery.resource("cert-manager.io/v1", "Certificate")
            raise AssertionError("a kind not served was found")
        except ResourceNotFoundError:
            pass
    assert dyn.resources.asked == ["Pod", "Certificate"]


def test_a_kind_not_served_is_asked_again_by_its_group_version_alone_until_listed() -> None:
    """At 2,000 orders, the catalog's two kinds (not installed) cost a full rediscovery every ten seconds."""
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

    class Resources:
        served = False
        asked = 0

        def get(self, api_version: str, kind: str) -> str:
            self.asked += 1
            if not self.served:
                raise ResourceNotFoundError("not served")
            return f"resource {kind}"

    class Dyn:
        def __init__(self) -> None:
            self.resources = Resources()
            self.paths: list[str] = []

        def request(self, method: str, path: str, serialize: bool = True) -> Any:
            self.paths.append(path)
            if not self.resources.served:
                raise NotFoundError(ApiException(status=404))
            kinds = [{"name": "models", "kind": "Model"}, {"name": "models/status", "kind": "Model"}]
            return type("Answer", (), {"data": json.dumps({"resources": kinds}).encode()})()

    dyn = Dyn()
    discovery = Discovery(dyn)  # type: ignore[arg-type]
    gv = "ai.deckhouse.io/v1alpha1"
    with pytest.raises(ResourceNotFoundError):
        discovery.resource(gv, "Model")
    for served in (False, True):
        dyn.resources.served = served
        discovery._missing.pop((gv, "Model"), None)  # ten seconds later
        if served:
            assert discovery.resource(gv, "Model") == "resource Model"
        else:
            with pytest.raises(ResourceNotFoundError):
                discovery.resource(gv, "Model")
    assert dyn.paths == ["/apis/ai.deckhouse.io/v1alpha1"] * 2
    assert dyn.resources.asked == 2  # the first miss, then once listed: never a rediscovery meanwhile


def test_cached_objects_share_their_keys_and_short_strings() -> None:
    """At 2,000 orders the cache's own copies of "metadata", "Ready", label values… were half its size."""
    from isvc_operator._kube.compact import compact

    first = compact(json.loads(json.dumps(_pod("a", "1") | {"status": {"phase": "Running"}})))
    second = compact(json.loads(json.dumps(_pod("b", "2") | {"status": {"phase": "Running"}})))
    assert first == _pod("a", "1") | {"status": {"phase": "Running"}}
    key_1 = next(k for k in first if k == "metadata")
    key_2 = next(k for k in second if k == "metadata")
    assert key_1 is key_2
    assert first["status"]["phase"] is second["status"]["phase"]
    long = "x" * 500
    assert compact({"a": long})["a"] is long  # a long value is kept as it is, not interned


def test_a_cached_pod_keeps_of_its_spec_only_what_passes_read() -> None:
    from isvc_operator._kube.compact import POD_SPEC_READ, compact_pod

    pod = _pod("a", "1") | {
        "spec": {
            "nodeName": "gpu-0",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "runtime", "env": [{"name": "X", "value": "y"}]}],
            "volumes": [{"name": "model"}],
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "runtime", "restartCount": 2}]},
    }
    cached = compact_pod(json.loads(json.dumps(pod)))
    assert cached["spec"] == {
        "nodeName": "gpu-0",
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
    }
    assert set(cached["spec"]) <= set(POD_SPEC_READ)
    assert cached["status"] == pod["status"] and cached["metadata"] == pod["metadata"]


def test_a_cached_pod_keeps_its_start_gate_whatever_a_user_puts_beside_it_issue_44() -> None:
    """The gate's volume says the pod waits for a sealed permit; its permit and seal stay in the cache even when
    a user crowds the pod with annotations of the module's prefix (the cache keeps 16 of those)."""
    from isvc_operator._kube.compact import compact_pod
    from isvc_workload import START_GATE_ANNOTATIONS, gate_pod_spec, sealed_gate

    _, volumes = gate_pod_spec({"name": "server", "command": ["vllm"]}, 600)
    crowd = {f"ai.deckhouse.io/a{i:02d}": "x" for i in range(40)}
    gate = dict(zip(START_GATE_ANNOTATIONS, ("2", "2026-12-06T00:00:00.000000Z", "f" * 32), strict=True))
    pod = _pod("a", "1")
    pod["metadata"]["annotations"] = crowd | gate
    pod["spec"] = {"nodeName": "n", "volumes": [{"name": "model"}, *volumes]}
    cached = compact_pod(json.loads(json.dumps(pod)))
    assert sealed_gate(cached) and [v["name"] for v in cached["spec"]["volumes"]] == ["start-gate"]
    assert {k: cached["metadata"]["annotations"][k] for k in START_GATE_ANNOTATIONS} == gate


class MetadataDynamic(FakeDynamic):
    """Records the Accept header of each list and watch its resource is asked for."""

    def __init__(self, streams: list[list[dict[str, Any]]], informer_stop: threading.Event) -> None:
        super().__init__(streams, informer_stop)
        self.accepts: list[tuple[bool, str | None]] = []

    def get(self, api_version: str | None = None, kind: str | None = None, **kwargs: Any) -> Any:
        if kind is None:
            self.accepts.append((bool(kwargs.get("watch")), kwargs.get("header_params", {}).get("Accept")))
        return super().get(api_version, kind, **kwargs)


def test_a_metadata_informer_asks_for_metadata_only_and_keeps_nothing() -> None:
    from isvc_operator._kube.informer import METADATA_LIST, METADATA_WATCH

    informer = Informer(None, "v1", "Secret", metadata_only=True, store=False)  # type: ignore[arg-type]
    informer._stop.wait = lambda timeout=None: informer._stop.is_set()  # type: ignore[method-assign]
    relists: list[int] = []
    informer.add_relist_handler(lambda: relists.append(1))
    secret = {
        "kind": "PartialObjectMetadata",
        "metadata": {"name": "hf", "namespace": "team-a", "resourceVersion": "11"},
    }
    gone = {"type": "ERROR", "raw_object": {"code": 410, "message": "too old resource version"}}
    dyn = MetadataDynamic([[{"type": "ADDED", "raw_object": secret}, gone], []], informer._stop)
    seen = run(informer, dyn)
    assert seen == [("ADDED", "hf")]  # no SYNC of a list, no DELETED guessed
    assert dyn.accepts == [
        (False, METADATA_LIST),
        (True, METADATA_WATCH),
        (False, METADATA_LIST),
        (True, METADATA_WATCH),
        (True, METADATA_WATCH),
    ]  # the 410 relisted once
    assert relists == [1]  # after the second list only: before the first nothing was watched
    assert informer.get("team-a", "hf") is None and informer.list() == []


def test_a_child_is_cached_small_and_its_seal_still_judged_against_the_whole_object_issue_29() -> None:
    from isvc_operator import SEAL, Sealer
    from isvc_operator._kube.compact import compact_child

    sealer = Sealer(b"0123456789abcdef")
    owner = {"kind": "InferenceService", "name": "o", "uid": "u", "controller": True}
    raw = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "o", "namespace": "team-a", "ownerReferences": [owner], "annotations": {}},
        "spec": {"template": {"spec": {"containers": [{"name": "server", "image": "i"}]}}},
    }
    raw["metadata"]["annotations"][SEAL] = sealer.seal(raw)
    edited = {
        **raw,
        "metadata": {**raw["metadata"], "annotations": {**raw["metadata"]["annotations"], "u": "x"}},
    }

    assert sealer.holds(compact_child(copy.deepcopy(raw)))
    assert not sealer.holds(compact_child(copy.deepcopy(edited)))  # the dropped annotation still counted
    assert "u" not in compact_child(copy.deepcopy(edited))["metadata"]["annotations"]


def test_an_object_labelled_as_an_orders_that_no_order_controls_keeps_its_metadata_only_issue_29() -> None:
    from isvc_operator._kube.compact import compact_child

    users = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "x",
            "namespace": "team-a",
            "labels": {"ai.deckhouse.io/inference-service": "o"},
        },
        "spec": {"template": {"metadata": {"annotations": {"pad": "x" * 100_000}}}},
        "status": {"readyReplicas": 9},
    }
    assert set(compact_child(users)) == {"apiVersion", "kind", "metadata"}


def test_a_claim_keeps_its_status_and_the_device_class_of_each_request_issue_29() -> None:
    from isvc_operator._kube.compact import compact_claim

    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": "x" * 9000}]},
    }
    claim = {
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [request] * 40}},
    }
    claim["status"] = {"allocation": {"devices": {"results": []}}}
    kept = compact_claim(claim)
    assert (
        kept["spec"]["devices"]["requests"]
        == [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}] * 32
    )
    assert kept["status"] == {"allocation": {"devices": {"results": []}}}


class PagedDynamic(FakeDynamic):
    """Lists 250 pods in pages of the limit asked, as the API server does with `continue` tokens."""

    def __init__(self, informer_stop: threading.Event) -> None:
        super().__init__([], informer_stop)
        self.pages: list[tuple[int, str | None]] = []

    def get(self, api_version: str | None = None, kind: str | None = None, **kwargs: Any) -> Any:
        if kind is not None or kwargs.get("watch"):
            return super().get(api_version, kind, **kwargs)
        self.pages.append((kwargs["limit"], kwargs.get("_continue")))
        start = int(kwargs.get("_continue") or 0)
        items = [_pod(f"p{i}", "1") for i in range(start, min(start + kwargs["limit"], 250))]
        more = {"continue": str(start + kwargs["limit"])} if start + kwargs["limit"] < 250 else {}
        return _Response({"items": items, "metadata": {"resourceVersion": "10", **more}})


def test_a_list_is_read_page_by_page_issue_29() -> None:
    """Issue 29: thousands of orders with 256 KiB of annotations each were one answer, parsed whole."""
    informer = Informer(None, "v1", "Pod")  # type: ignore[arg-type]
    dyn = PagedDynamic(informer._stop)
    run(informer, dyn)  # type: ignore[arg-type]
    assert dyn.pages == [(100, None), (100, "100"), (100, "200")]
    assert len(informer.list()) == 250


class _KindThatGoesAway:
    """A dynamic client whose kind is served, then deleted as its first watch ends (404 on every read),
    then back after the informer's fifth wait while absent."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.resources = self
        self.served = True
        self.lists = 0
        self.absent_waits = 0

    def get(self, api_version: str | None = None, kind: str | None = None, **kwargs: Any) -> Any:
        from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

        if kind is not None:  # discovery: resources.get(api_version, kind)
            if not self.served:
                raise ResourceNotFoundError("not served")
            return self
        if not self.served:  # the CRD is gone: its list answers 404
            raise NotFoundError(ApiException(status=404, reason="Not Found"))
        if not kwargs.get("watch"):
            self.lists += 1
            return _Response({"items": [_pod("m", "1")], "metadata": {"resourceVersion": "10"}})
        if self.lists == 1:
            self.served = False  # the first watch ends as the CRD is deleted
        else:
            self.informer._stop.set()  # watching again after it came back: enough
        return _Response(events=[])

    def request(self, method: str, path: str, serialize: bool = True) -> Any:  # discovery of one version
        from kubernetes.dynamic.exceptions import NotFoundError

        if not self.served:
            raise NotFoundError(ApiException(status=404))
        listed = {"resources": [{"name": "models", "kind": "Model"}]}
        return type("Answer", (), {"data": json.dumps(listed).encode()})()

    def wait(self, timeout: float | None = None) -> bool:
        """The informer's stop event's wait, counted: the CRD comes back at the fifth."""
        self.absent_waits += 1
        if self.absent_waits == 5:  # the CRD is back; discovery's memory of the miss has expired
            self.served = True
            self.informer._discovery._missing.clear()
        if self.absent_waits > 20:  # whatever happens, the test ends
            self.informer._stop.set()
        return self.informer._stop.is_set()


def test_a_kind_that_goes_away_is_said_once_and_once_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 31: after the catalog's CRDs were removed, every informer of theirs logged "watch of Model broke
    (404 ...)" with the API server's headers and body every 30 s, for ever."""
    informer = Informer(None, "ai.deckhouse.io/v1alpha1", "Model")  # type: ignore[arg-type]
    dyn = _KindThatGoesAway(informer)
    informer._stop.wait = dyn.wait  # type: ignore[method-assign]
    caplog.set_level("INFO", logger="isvc_operator._kube")
    appeared: list[int] = []
    informer.add_served_handler(lambda: appeared.append(len(informer.list())))
    seen = run(informer, dyn)  # type: ignore[arg-type]
    said = [r.getMessage() for r in caplog.records]
    assert [line for line in said if "not served" in line] == [
        "Model (ai.deckhouse.io/v1alpha1) is not served (the API server answers 404); watched again once it is"
    ]
    assert [line for line in said if "served again" in line] == [
        "Model (ai.deckhouse.io/v1alpha1) is served again; watching it"
    ]
    assert not [line for line in said if "broke" in line or "\n" in line]
    assert seen[:2] == [("SYNC", "m"), ("DELETED", "m")]  # what it held went with it
    assert seen[-1] == ("SYNC", "m") and dyn.lists == 2
    assert appeared == [1]  # once, when it came back (not at the first list), with its list in the cache


def test_events_are_named_so_that_listing_them_by_name_keeps_the_order_they_were_made_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31: generated names put `Ready: Serving` before `WorkloadReady: ResourceClaimPending` in
    `kubectl describe` when both fell in one second (it sorts the server's by-name list by lastTimestamp)."""
    import time as clock

    from isvc_operator._kube.records import Records

    made: list[Any] = []

    class Core:
        def create_namespaced_event(self, namespace: str, body: Any, **kwargs: Any) -> None:
            made.append(body)

    cluster = Records(Core())  # type: ignore[arg-type]
    stamps = iter([1_764_590_400_000_000_000] * 3 + [1_764_590_400_000_000_900] * 3)
    monkeypatch.setattr(clock, "time_ns", lambda: next(stamps))
    order = {"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceService"}
    order["metadata"] = {"name": "support-llm", "namespace": "team-a", "uid": "u"}  # type: ignore[assignment]
    reasons = ["Resolved", "Planned", "ResourceClaimPending", "WorkloadAvailable", "Serving", "ScalingOK"]
    for reason in reasons:
        cluster.event(order, "Normal", reason, f"{reason}.")
    names = [e.metadata.name for e in made]
    assert [e.reason for e in sorted(made, key=lambda e: e.metadata.name)] == reasons
    assert len(set(names)) == len(names) and all(n.startswith("support-llm.") for n in names)
    assert [e.last_timestamp for e in made] == sorted(e.last_timestamp for e in made)


def test_a_listed_child_is_digested_as_a_watched_one_so_its_seal_holds_after_a_relist() -> None:
    """The API server leaves kind and apiVersion out of a built-in kind's list items: a child listed after the
    controller started, or after a watch expired, was digested without its kind, its seal read as broken, and
    each relist restored every child; under the chaos suite's restarts three restores in five minutes read as
    a child someone keeps changing (WorkloadError)."""
    from isvc_operator._kube.compact import compact_child
    from isvc_operator._seal import DIGEST, view_digest

    ingress = {
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "resourceVersion": "1",
            "labels": {"ai.deckhouse.io/inference-service": "chat"},
            "ownerReferences": [{"kind": "InferenceService", "name": "chat", "uid": "u", "controller": True}],
        },
        "spec": {"rules": [{"host": "chat--team-a.example.com"}]},
    }
    watched = copy.deepcopy(ingress) | {"kind": "Ingress", "apiVersion": "networking.k8s.io/v1"}

    class Dyn(FakeDynamic):
        def get(self, api_version: str | None = None, kind: str | None = None, **kwargs: Any) -> Any:
            if kind is None and not kwargs.get("watch"):
                self.lists += 1
                return _Response({"items": [copy.deepcopy(ingress)], "metadata": {"resourceVersion": "10"}})
            return super().get(api_version, kind, **kwargs)

    informer = Informer(None, "networking.k8s.io/v1", "Ingress", transform=compact_child)  # type: ignore[arg-type]
    run(informer, Dyn([], informer._stop))
    listed = informer.get("team-a", "chat")
    assert listed is not None
    assert listed["metadata"][DIGEST] == view_digest(copy.deepcopy(watched))


def test_every_request_is_counted_by_verb_and_answer_and_given_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counted client is the one way to the API server: a watch, a read and a refused write each counted,
    each with its timeout."""
    from isvc_operator._kube.discovery import REQUEST_TIMEOUT, WATCH_TIMEOUT, CountedClient
    from kubernetes.dynamic import DynamicClient

    timeouts: list[Any] = []

    def request(self: Any, method: str, path: str, **kwargs: Any) -> str:
        timeouts.append(kwargs["_request_timeout"])
        if method == "patch":
            raise ApiException(status=422)
        return "answer"

    monkeypatch.setattr(DynamicClient, "__init__", lambda self, api: None)
    monkeypatch.setattr(DynamicClient, "request", request)
    counted: list[tuple[str, str]] = []
    client = CountedClient(None, lambda verb, code: counted.append((verb, code)))
    assert client.request("get", "/api/v1/pods", watch=True) == "answer"
    assert client.request("GET", "/api/v1/pods") == "answer"
    with pytest.raises(ApiException):
        client.request("patch", "/api/v1/pods/p")
    assert counted == [("watch", "2xx"), ("get", "2xx"), ("patch", "422")]
    assert timeouts == [WATCH_TIMEOUT, REQUEST_TIMEOUT, REQUEST_TIMEOUT]
