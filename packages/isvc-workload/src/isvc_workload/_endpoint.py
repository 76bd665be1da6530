"""The published endpoint: its URL and the Ingress of External ones."""

from __future__ import annotations

import hashlib
from typing import Any

from isvc_api import ExposureType

from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._errors import SettingsIncomplete
from isvc_workload._ports import SERVICE_PORT
from isvc_workload._settings import WorkloadSettings
from isvc_workload._tls import cluster_issuer, tls_secret_name

__all__ = ["API_PATH", "ISSUER_ANNOTATION", "endpoint_url", "external_host", "ingress"]

ISSUER_ANNOTATION = "cert-manager.io/cluster-issuer"
# The OpenAI API the runtimes guard with the endpoint's token. Nothing else is published: a runtime also
# answers /metrics, /invocations, /pooling, /score or /tokenize, without asking for a token.
API_PATH = "/v1/"
RERANK_PATH = "/rerank"
_LABEL = 63  # the longest DNS label


def external_host(order: str, namespace: str, settings: WorkloadSettings) -> str:
    """Host name of an External endpoint: the template with %s replaced by `<order>--<namespace>`.

    An order's name holds no `--` (checked at write time), so the label splits at its first `--`: no two
    orders of different namespaces share a host. A pair too long for one DNS label keeps the order's name
    and a digest of the namespace.
    """
    template = settings.public_domain_template
    if not template or "%s" not in template:
        raise SettingsIncomplete(
            "External exposure needs publicDomainTemplate (e.g. %s.example.com) in the module settings"
        )
    label = f"{order}--{namespace}"
    if len(label) > _LABEL:
        label = f"{order}--{hashlib.sha256(namespace.encode()).hexdigest()[: _LABEL - len(order) - 2]}"
    return template.replace("%s", label, 1)


def endpoint_url(order: str, namespace: str, exposure: ExposureType, settings: WorkloadSettings) -> str:
    """The URL published in status.endpoint.url: what really listens there.

    External: `https://` the Ingress host, TLS terminated at the ingress controller with the certificate
    cert-manager issues for it. ClusterLocal: `http://` the Service's DNS name and port, inside the cluster.
    """
    if exposure == ExposureType.EXTERNAL:
        return f"https://{external_host(order, namespace, settings)}"
    return f"http://{order}.{namespace}.svc:{SERVICE_PORT}"


def ingress(inputs: WorkloadInputs, settings: WorkloadSettings, cert_manager: bool = True) -> dict[str, Any]:
    """Ingress `{order}` of an External endpoint. With cert-manager installed and an issuer configured, its
    ingress integration issues the certificate into `{order}-tls` (no Certificate object of ours)."""
    host = external_host(inputs.name, inputs.namespace, settings)
    annotations = dict(settings.ingress_annotations)
    issuer = cluster_issuer(inputs.exposure, settings)
    if issuer and cert_manager:
        annotations[ISSUER_ANNOTATION] = issuer
    backend = {"service": {"name": inputs.name, "port": {"name": "http"}}}
    paths = [{"path": API_PATH, "pathType": "Prefix", "backend": backend}]
    if (inputs.runtime.model_extra or {}).get("endpoint_type") == "Rerank":
        # TEI reranks at /rerank, behind the same token as the rest of its API.
        paths.append({"path": RERANK_PATH, "pathType": "Exact", "backend": backend})
    spec: dict[str, Any] = {
        "tls": [{"hosts": [host], "secretName": tls_secret_name(inputs.name)}],
        "rules": [{"host": host, "http": {"paths": paths}}],
    }
    if settings.ingress_class_name:
        spec = {"ingressClassName": settings.ingress_class_name, **spec}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": child_metadata(inputs.order, inputs.name, annotations),
        "spec": spec,
    }
