"""What a set of NetworkPolicies admits, by the rules of networking.k8s.io/v1 (ingress only), for tests that
judge rendered policies where no CNI enforces them (issue 29).

A pod no policy selects admits everything. A selected pod admits a connection when one ingress rule of one
policy selecting it does: its `from` is empty or one peer matches the source (a `podSelector` alone: pods of
the policy's namespace; a `namespaceSelector` alone: every pod of the namespaces it matches; both: the pods it
matches in those namespaces; an `ipBlock`: the address within `cidr` and no `except`), and its `ports` are
empty or one names the destination port (by number, or by the name of the destination container's port).
Only `matchLabels` selectors are understood; a `matchExpressions` raises, so nothing is judged by a guess.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Endpoint", "admits"]


@dataclass(frozen=True)
class Endpoint:
    """A pod (or a host, with no namespace) as a NetworkPolicy sees it."""

    namespace: str | None
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    ip: str | None = None
    ports: Mapping[str, int] = field(default_factory=dict)  # the destination's named container ports


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    selector = selector or {}
    if selector.get("matchExpressions"):
        raise NotImplementedError("matchExpressions are not judged here")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer(peer: Mapping[str, Any], source: Endpoint, namespace: str) -> bool:
    if "ipBlock" in peer:
        if source.ip is None:
            return False
        address = ipaddress.ip_address(source.ip)
        block = peer["ipBlock"]
        inside = address in ipaddress.ip_network(block["cidr"], strict=False)
        return inside and not any(
            address in ipaddress.ip_network(e, strict=False) for e in block.get("except", [])
        )
    if source.namespace is None:  # a host: no pod or namespace selector matches it
        return False
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], source.namespace_labels):
            return False
    elif source.namespace != namespace:
        return False
    return "podSelector" not in peer or _matches(peer["podSelector"], source.labels)


def _port(ports: Iterable[Mapping[str, Any]] | None, destination: Endpoint, port: int) -> bool:
    listed = list(ports or [])
    if not listed:
        return True
    for p in listed:
        if p.get("protocol", "TCP") != "TCP":
            continue
        wanted = p.get("port")
        if (
            wanted is None
            or wanted == port
            or (isinstance(wanted, str) and destination.ports.get(wanted) == port)
        ):
            return True
    return False


def admits(policies: Iterable[Mapping[str, Any]], source: Endpoint, destination: Endpoint, port: int) -> bool:
    """Whether `policies` let `source` open a TCP connection to `destination` on `port`."""
    selecting = [
        p
        for p in policies
        if p["metadata"].get("namespace") == destination.namespace
        and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])
        and _matches(p["spec"].get("podSelector"), destination.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        namespace = policy["metadata"]["namespace"]
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from") or []
            if (not peers or any(_peer(peer, source, namespace) for peer in peers)) and _port(
                rule.get("ports"), destination, port
            ):
                return True
    return False
