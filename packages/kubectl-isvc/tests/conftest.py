"""A Reader over recorded objects: what the API server would answer, and what it would refuse."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_isvc import Forbidden, NotFound, Obj, Unreachable

DATA = Path(__file__).parent / "data"


class Recorded:
    """Objects by API path (a dict for `get`, a list for `items`); paths in `denied` answer 403 with the API
    server's words, paths in `down` do not answer; every call is kept in `calls`."""

    def __init__(
        self,
        objects: dict[str, Any] | None = None,
        denied: dict[str, str] | None = None,
        logs: dict[str, str] | None = None,
        namespace: str = "team-a",
        warnings: list[str] | None = None,
        create_error: Exception | None = None,
    ) -> None:
        self.objects = copy.deepcopy(objects or {})
        self.denied = denied or {}
        self.logs = logs or {}
        self.down: set[str] = set()
        self._namespace = namespace
        self.warnings = warnings or []
        self.create_error = create_error
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    @property
    def namespace(self) -> str:
        return self._namespace

    def _guard(self, path: str, what: str) -> None:
        if path in self.denied:
            raise Forbidden(what, self.denied[path], 403)
        if path in self.down:
            raise Unreachable(what, "the API server did not answer (MaxRetryError: connection refused)")

    def get(self, path: str, what: str) -> Obj:
        self.calls.append(("get", path, {}))
        self._guard(path, what)
        if path not in self.objects:
            raise NotFound(what, f"{path} not found", 404)
        return copy.deepcopy(dict(self.objects[path]))

    def items(self, path: str, what: str, labels: str | None = None, fields: str | None = None) -> list[Obj]:
        self.calls.append(("list", path, {"labels": labels, "fields": fields}))
        self._guard(path, what)
        found = copy.deepcopy(list(self.objects.get(path, [])))
        if labels:
            key, _, value = labels.partition("=")
            found = [o for o in found if ((o.get("metadata") or {}).get("labels") or {}).get(key) == value]
        return found

    def text(self, path: str, what: str, query: dict[str, str]) -> str:
        self.calls.append(("text", path, dict(query)))
        self._guard(path, what)
        return self.logs.get(f"{path}?{query.get('container')}", "")

    def create(self, path: str, what: str, body: Obj, query: dict[str, str]) -> tuple[Obj, list[str]]:
        self.calls.append(("create", path, {"body": body, "query": query}))
        self._guard(path, what)
        if self.create_error is not None:
            raise self.create_error
        return body, list(self.warnings)


@pytest.fixture
def recorded() -> type[Recorded]:
    return Recorded


@pytest.fixture
def data() -> Any:
    """Read a data file of recorded objects."""
    return lambda name: yaml.safe_load((DATA / name).read_text(encoding="utf-8"))


@pytest.fixture
def fleet() -> list[Obj]:
    """The default test-bed fleet as its fake DRA driver publishes it (DeviceClasses and ResourceSlices), and
    the dynamic-MIG fleet's H100 node beside it (whole cards and MIG placements drawing on counters)."""
    return [
        *yaml.safe_load_all((DATA / "fleet.yaml").read_text(encoding="utf-8")),
        *yaml.safe_load_all((DATA / "fleet-partitioned.yaml").read_text(encoding="utf-8")),
    ]
