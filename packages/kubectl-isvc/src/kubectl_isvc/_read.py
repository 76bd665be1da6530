"""What the commands ask of the API server: the Reader port, the paths of the objects, and warnings.

Everything else in the package works on the plain JSON objects a Reader returns, so it is tested with
recorded objects; `_kube.KubeReader` is the one implementation that talks to a cluster.
"""

from __future__ import annotations

import re
from typing import Protocol
from urllib.parse import quote

from isvc_api import GROUP, LABEL_ORDER, VERSION, Obj

__all__ = [
    "Obj",
    "Reader",
    "claims_path",
    "class_path",
    "classes_path",
    "device_classes_path",
    "events_path",
    "log_path",
    "nodes_path",
    "order_path",
    "orders_path",
    "parse_warnings",
    "plan_path",
    "plans_path",
    "pods_path",
    "priority_classes_path",
    "selector_of_order",
    "slices_path",
]

_CRD = f"/apis/{GROUP}/{VERSION}"
_DRA = "/apis/resource.k8s.io/v1"


class Reader(Protocol):
    """The API server as the caller's own credentials see it. Every call raises a `ReadFailed` (NotFound,
    Forbidden, Unreachable) naming `what` instead of returning something partial."""

    @property
    def namespace(self) -> str:
        """The namespace of the current context (kubectl's default for -n)."""
        ...

    def get(self, path: str, what: str) -> Obj:
        """One object."""
        ...

    def items(self, path: str, what: str, labels: str | None = None, fields: str | None = None) -> list[Obj]:
        """The items of a list, filtered on the server by label and field selectors."""
        ...

    def text(self, path: str, what: str, query: dict[str, str]) -> str:
        """A plain-text subresource (a container's log)."""
        ...

    def create(self, path: str, what: str, body: Obj, query: dict[str, str]) -> tuple[Obj, list[str]]:
        """POST an object; the answer and the warnings the API server sent with it (admission webhooks')."""
        ...


def _ns(namespace: str | None) -> str:
    return f"/namespaces/{quote(namespace)}" if namespace else ""


def order_path(namespace: str, name: str) -> str:
    """An InferenceService."""
    return f"{_CRD}/namespaces/{quote(namespace)}/inferenceservices/{quote(name)}"


def orders_path(namespace: str | None = None) -> str:
    """InferenceServices of a namespace, or of every namespace."""
    return f"{_CRD}{_ns(namespace)}/inferenceservices"


def plan_path(namespace: str, name: str) -> str:
    """A LaunchPlan."""
    return f"{_CRD}/namespaces/{quote(namespace)}/launchplans/{quote(name)}"


def plans_path(namespace: str | None = None) -> str:
    """LaunchPlans of a namespace, or of every namespace."""
    return f"{_CRD}{_ns(namespace)}/launchplans"


def class_path(name: str) -> str:
    """An InferenceServiceClass."""
    return f"{_CRD}/inferenceserviceclasses/{quote(name)}"


def classes_path() -> str:
    """Every InferenceServiceClass."""
    return f"{_CRD}/inferenceserviceclasses"


def events_path(namespace: str) -> str:
    """Core events of a namespace (filter with a field selector)."""
    return f"/api/v1/namespaces/{quote(namespace)}/events"


def pods_path(namespace: str) -> str:
    """Pods of a namespace."""
    return f"/api/v1/namespaces/{quote(namespace)}/pods"


def log_path(namespace: str, pod: str) -> str:
    """The log of a pod's container (container, tailLines, previous go in the query)."""
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/log"


def claims_path(namespace: str | None = None) -> str:
    """ResourceClaims of a namespace, or of every namespace."""
    return f"{_DRA}{_ns(namespace)}/resourceclaims"


def slices_path() -> str:
    """Every ResourceSlice."""
    return f"{_DRA}/resourceslices"


def device_classes_path() -> str:
    """Every DeviceClass."""
    return f"{_DRA}/deviceclasses"


def nodes_path() -> str:
    """Every Node."""
    return "/api/v1/nodes"


def priority_classes_path() -> str:
    """Every PriorityClass."""
    return "/apis/scheduling.k8s.io/v1/priorityclasses"


def selector_of_order(name: str) -> str:
    """The label selector of every object the module makes for order `name` (pods, claims)."""
    return f"{LABEL_ORDER}={name}"


_WARNING = re.compile(r'(\d{3}) (\S+) "((?:[^"\\]|\\.)*)"')


def parse_warnings(values: list[str]) -> list[str]:
    """The texts of HTTP `Warning` header values (RFC 7234: `299 - "text"`), in order; one value may hold
    several, comma-separated."""
    out: list[str] = []
    for value in values:
        for match in _WARNING.finditer(value):
            out.append(re.sub(r"\\(.)", r"\1", match.group(3)))
    return out
