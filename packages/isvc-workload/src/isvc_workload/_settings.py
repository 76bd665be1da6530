"""Module settings the manifests depend on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["WorkloadSettings"]


def _default_ingress_annotations() -> dict[str, str]:
    # Completions stream for minutes and prompts can be large: ingress-nginx defaults cut both.
    return {
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-body-size": "64m",
    }


class WorkloadSettings(BaseModel):
    """What the module settings say about publishing and running workloads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    public_domain_template: str | None = Field(
        default=None,
        description="DNS name template of External endpoints, Deckhouse style: %s becomes "
        "<order>--<namespace> (one label, so a wildcard certificate of the domain covers every order).",
    )
    cluster_issuer_name: str | None = Field(
        default=None, description="cert-manager ClusterIssuer used when the class names none."
    )
    ingress_class_name: str | None = Field(default=None, description="IngressClass of External endpoints.")
    ingress_annotations: dict[str, str] = Field(
        default_factory=_default_ingress_annotations, description="Extra annotations on every Ingress."
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of the server container."
    )
    model_fetch_image: str | None = Field(
        default=None,
        description="Image with the `hf` CLI; when set, an init container downloads Hugging Face "
        "models onto the model volume before the server starts.",
    )
    meter_image: str | None = Field(
        default=None,
        description="Image whose `isvc-meter` counts the runtime's own answers in front of its API port (the "
        "controller's image); None: the Service reaches the runtime directly and nothing counts its answers.",
    )
    image_pull_secrets: tuple[str, ...] = Field(
        default=(), description="Secrets in the order's namespace used to pull runtime images."
    )
    model_volume_storage_class: str | None = Field(
        default=None,
        description="StorageClass of the model volumes of new sets; None: the cluster's default.",
    )
    start_gate_wait_seconds: int = Field(
        default=3600,
        ge=1,
        description="How long a runtime sharing its device waits for its turn to start before it starts "
        "without one (the controller hands turns out; this bounds a wait while it is away).",
    )
    huggingface_endpoint: str | None = Field(
        default=None,
        description="Hub endpoint the fetch container downloads from (HF_ENDPOINT); None: the "
        "Hugging Face Hub.",
    )
    model_cache_endpoint: str | None = Field(
        default=None,
        description="The module's model cache, which the fetch container asks first (HF_ENDPOINT for that "
        "try); anything it does not serve comes from the Hub. None: the Hub alone.",
    )
    controller_namespace: str = Field(
        default="d8-isvc", description="The module's namespace, whose controller pods probe the runtimes."
    )
    ingress_controller_namespaces: tuple[str, ...] = Field(
        default=("d8-ingress-nginx",),
        description="Namespaces of the ingress controller, admitted to the API port of External endpoints.",
    )
    monitoring_namespaces: tuple[str, ...] = Field(
        default=("d8-monitoring",), description="Namespaces admitted to the runtimes' metrics port."
    )
