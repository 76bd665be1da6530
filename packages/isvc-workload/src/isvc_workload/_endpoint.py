"""The published endpoint: its URL, the Ingress of External ones, the Certificate of ClusterLocal ones."""

from __future__ import annotations

from typing import Any

from isvc_api import ExposureType

from isvc_workload._common import WorkloadInputs, child_metadata
from isvc_workload._errors import SettingsIncomplete
from isvc_workload._settings import WorkloadSettings
from isvc_workload._tls import cluster_issuer, tls_secret_name

__all__ = ["ISSUER_ANNOTATION", "certificate", "endpoint_url", "external_host", "ingress"]

ISSUER_ANNOTATION = "cert-manager.io/cluster-issuer"


def external_host(order: str, namespace: str, settings: WorkloadSettings) -> str:
    """Host name of an External endpoint: the template with %s replaced by <order>-<namespace>."""
    template = settings.public_domain_template
    if not template or "%s" not in template:
        raise SettingsIncomplete(
            "External exposure needs publicDomainTemplate (e.g. %s.example.com) in the module settings")
    return template.replace("%s", f"{order}-{namespace}", 1)


def endpoint_url(order: str, namespace: str, exposure: ExposureType, settings: WorkloadSettings) -> str:
    """The HTTPS URL published in status.endpoint.url.

    External: the Ingress host, TLS terminated at the ingress controller.
    ClusterLocal: the Service's DNS name; TLS is the `{order}-tls` serving cert that cert-manager
    issues for that name, which runtimes with an `https` port terminate themselves.
    """
    if exposure == ExposureType.EXTERNAL:
        return f"https://{external_host(order, namespace, settings)}"
    return f"https://{order}.{namespace}.svc"


def ingress(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any]:
    """Ingress `{order}` of an External endpoint; cert-manager issues its certificate when configured."""
    host = external_host(inputs.name, inputs.namespace, settings)
    annotations = dict(settings.ingress_annotations)
    issuer = cluster_issuer(inputs.exposure, settings)
    if issuer:
        annotations[ISSUER_ANNOTATION] = issuer
    spec: dict[str, Any] = {
        "tls": [{"hosts": [host], "secretName": tls_secret_name(inputs.name)}],
        "rules": [
            {
                "host": host,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": inputs.name, "port": {"name": "http"}}},
                        }
                    ]
                },
            }
        ],
    }
    if settings.ingress_class_name:
        spec = {"ingressClassName": settings.ingress_class_name, **spec}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": child_metadata(inputs.order, inputs.name, annotations),
        "spec": spec,
    }


def certificate(inputs: WorkloadInputs, settings: WorkloadSettings) -> dict[str, Any] | None:
    """cert-manager Certificate `{order}-tls` for the Service's names; None when no issuer is configured.

    Apply it only when the cert-manager.io/v1 API is served.
    """
    issuer = cluster_issuer(inputs.exposure, settings)
    if not issuer:
        return None
    name, namespace = inputs.name, inputs.namespace
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": child_metadata(inputs.order, tls_secret_name(name)),
        "spec": {
            "secretName": tls_secret_name(name),
            "dnsNames": [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"],
            "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": issuer},
            "privateKey": {"rotationPolicy": "Always"},
        },
    }
