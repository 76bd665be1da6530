"""TLS of an endpoint: the secret name and the issuer in force."""

from __future__ import annotations

from isvc_api import Exposure

from isvc_workload._settings import WorkloadSettings

__all__ = ["cluster_issuer", "tls_secret_name"]


def tls_secret_name(order_name: str) -> str:
    """Name of the Secret holding the endpoint's certificate."""
    return f"{order_name}-tls"


def cluster_issuer(exposure: Exposure, settings: WorkloadSettings) -> str | None:
    """The ClusterIssuer in force: the class's, else the module's, else none."""
    if exposure.tls is not None and exposure.tls.cluster_issuer_name:
        return exposure.tls.cluster_issuer_name
    return settings.cluster_issuer_name
