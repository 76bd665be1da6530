"""Where the prober dials an order: an explicit seam, so tests never dial simulated addresses."""

from __future__ import annotations

import string
from typing import Protocol, runtime_checkable

from isvc_health._errors import TemplateInvalid

__all__ = ["EndpointResolver", "ServiceDNSResolver", "TemplateResolver"]

_FIELDS = frozenset({"namespace", "name", "service", "port"})


@runtime_checkable
class EndpointResolver(Protocol):
    """Turns an order's Service into the base URL its inference API answers on."""

    def base_url(self, namespace: str, name: str, service: str, port: int) -> str:
        """Base URL without a trailing slash; the prober appends /v1/models."""
        ...


class ServiceDNSResolver:
    """The in-cluster default: http://{service}.{namespace}.svc:{port}."""

    def __init__(self, cluster_domain: str | None = None) -> None:
        self._suffix = f"svc.{cluster_domain}" if cluster_domain else "svc"

    def base_url(self, namespace: str, name: str, service: str, port: int) -> str:
        """The Service's cluster DNS name."""
        return f"http://{service}.{namespace}.{self._suffix}:{port}"


class TemplateResolver:
    """A URL template over {namespace}, {name}, {service}, {port}, e.g. http://127.0.0.1:18080/{namespace}/{name}.

    For tests and demos that reach stand-ins on loopback instead of simulated pod or Service IPs.
    """

    def __init__(self, template: str) -> None:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        unknown = fields - _FIELDS
        if unknown:
            raise TemplateInvalid(
                f"endpoint template {template!r} names {sorted(unknown)}; it may use {sorted(_FIELDS)}"
            )
        self.template = template

    def base_url(self, namespace: str, name: str, service: str, port: int) -> str:
        """The template filled in."""
        url = self.template.format(namespace=namespace, name=name, service=service, port=port)
        return url.rstrip("/")
