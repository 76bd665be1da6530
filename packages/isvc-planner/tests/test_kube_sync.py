"""Issue 29: the planner listed ResourceClaims (which namespace users write, with 256 KiB of annotations each)
in one answer and kept every one whole until the next relist. Lists are read page by page now, and of each
object only its name, namespace and uid are kept, to tell what went at the next relist."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from isvc_planner import Inventory, _kube


def _claim(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"c{i}",
            "namespace": "team-a",
            "uid": f"u{i}",
            "annotations": {"pad": "x" * 1000},
        },
        "spec": {},
    }


class Answer:
    """What the client answers when asked not to read the body itself (`_preload_content=False`)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


class Objects:
    """A CustomObjectsApi answering claims in pages of `limit`."""

    def __init__(self, claims: list[dict[str, Any]]) -> None:
        self.claims = claims
        self.asked: list[tuple[int, str | None]] = []

    def list_cluster_custom_object(
        self, *args: Any, limit: int, _continue: str | None = None, _preload_content: bool = True
    ) -> Answer:
        assert not _preload_content  # the page parsed from its bytes: no decoded copy of it alive
        self.asked.append((limit, _continue))
        start = int(_continue or 0)
        page = self.claims[start : start + limit]
        more = start + limit < len(self.claims)
        return Answer(
            {
                "metadata": {"resourceVersion": "7", **({"continue": str(start + limit)} if more else {})},
                "items": page,
            }
        )


def test_claims_are_listed_page_by_page_and_kept_as_names(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = Objects([_claim(i) for i in range(1201)])
    upserted: list[str] = []
    deleted: list[Any] = []
    lists = [0]

    class Watch:
        def stream(self, *args: Any, **kwargs: Any) -> Any:
            lists[0] += 1
            if lists[0] == 1:
                objects.claims = objects.claims[1:]  # c0 goes while the watch is down
                raise RuntimeError("watch broke")
            sync.stop()
            return iter(())

    monkeypatch.setattr(_kube, "_watch", type("W", (), {"Watch": Watch}))
    sync = _kube.KubeSync(Inventory(), api=None, backoff=0.0, orders=False)  # type: ignore[arg-type]
    sync.objects = objects  # type: ignore[assignment]
    sync._handlers = {_kube.CLAIMS: (lambda o: upserted.append(o["metadata"]["name"]), deleted.append)}
    sync._many = {}  # each listed claim through the handler above

    thread = threading.Thread(target=sync._run, args=(_kube.CLAIMS,), daemon=True)
    thread.start()
    thread.join(10)

    assert [a[0] for a in objects.asked] == [100] * 25  # 1,201 claims in 13 pages, then 1,200 in 12
    assert deleted == [{"metadata": {"name": "c0", "namespace": "team-a", "uid": "u0"}}]
    assert len(upserted) == 1201 + 1200


def test_kinds_are_listed_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hostile-input suite: the watches of every kind expire together, and relists of orders and claims at
    the annotation limit, read at once, took the planner 210 MiB above its start. A listing of one kind is read
    whole before another kind's begins."""
    asked: list[str] = []

    class Kinds:
        def list_cluster_custom_object(
            self,
            group: str,
            version: str,
            plural: str,
            *,
            limit: int,
            _continue: str | None = None,
            _preload_content: bool = True,
        ) -> Answer:
            asked.append(plural)
            time.sleep(0.01)  # a page on the wire: the other kind's thread would ask meanwhile
            start = int(_continue or 0)
            more = start + limit < 5 * limit
            return Answer(
                {
                    "metadata": {
                        "resourceVersion": "7",
                        **({"continue": str(start + limit)} if more else {}),
                    },
                    "items": [_claim(start)],
                }
            )

    class Watch:
        def stream(self, *args: Any, **kwargs: Any) -> Any:
            return iter([{"type": "ERROR", "object": {"code": 410}}])  # expired: each kind lists again

    monkeypatch.setattr(_kube, "_watch", type("W", (), {"Watch": Watch}))
    sync = _kube.KubeSync(Inventory(), api=None, backoff=0.0, orders=False)  # type: ignore[arg-type]
    sync.objects = Kinds()  # type: ignore[assignment]
    sync._handlers = {
        _kube.CLAIMS: (lambda o: None, lambda o: None),
        _kube.ORDERS: (lambda o: None, lambda o: None),
    }
    threads = [threading.Thread(target=sync._run, args=(kind,), daemon=True) for kind in sync._handlers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(asked) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    sync.stop()
    for thread in threads:
        thread.join(10)
    assert {*asked} == {_kube.CLAIMS.plural, _kube.ORDERS.plural}  # both kinds listed, again and again
    # Each listing is five pages in a row: a change of kind only between listings.
    changes = [i for i in range(1, len(asked)) if asked[i] != asked[i - 1]]
    assert changes and all(i % 5 == 0 for i in changes), asked


def test_a_watch_that_ends_is_taken_up_from_its_version_and_a_kind_listed_again_only_when_one_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watch ends every 300 s: it is taken up again from the last version it saw, with no relist (a relist
    of orders or claims at the annotation limit holds a page of 25 MiB); a failed one (410 Gone) lists again."""
    objects = Objects([_claim(i) for i in range(3)])
    versions: list[str | None] = []

    class Watch:
        def __init__(self) -> None:
            self.resource_version: str | None = None

        def stream(self, *args: Any, resource_version: str | None = None, **kwargs: Any) -> Any:
            versions.append(resource_version)
            if len(versions) in (1, 2):  # two watches that end, the second after a bookmark's version
                self.resource_version = "9" if len(versions) == 1 else "11"
                return iter([{"type": "ADDED", "object": _claim(10 + len(versions))}])
            if len(versions) == 3:
                return iter([{"type": "ERROR", "object": {"code": 410}}])
            sync.stop()
            return iter(())

    upserted: list[str] = []
    monkeypatch.setattr(_kube, "_watch", type("W", (), {"Watch": Watch}))
    sync = _kube.KubeSync(Inventory(), api=None, backoff=0.0, orders=False)  # type: ignore[arg-type]
    sync.objects = objects  # type: ignore[assignment]
    sync._handlers = {_kube.CLAIMS: (lambda o: upserted.append(o["metadata"]["name"]), lambda o: None)}
    sync._many = {}  # each listed claim through the handler above
    thread = threading.Thread(target=sync._run, args=(_kube.CLAIMS,), daemon=True)
    thread.start()
    thread.join(10)
    assert versions == ["7", "9", "11", "7"]  # taken up twice from where it was, listed again after the 410
    assert [limit for limit, _ in objects.asked] == [100, 100]  # two listings: the first, and after the 410
    assert upserted[:5] == ["c0", "c1", "c2", "c11", "c12"]
