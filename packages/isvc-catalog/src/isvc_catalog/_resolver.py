"""One entry point for an order's model: the Hub or the catalog, by spec.model.src."""

from __future__ import annotations

from typing import Protocol

from isvc_api import ModelFacts, ModelSource, ModelSpec, Reason, Refusal

from isvc_catalog._catalog import CatalogReader

__all__ = ["ModelHub", "Resolver", "auth_secret_not_found"]


def auth_secret_not_found(spec: ModelSpec, namespace: str) -> Refusal:
    """The refusal for an order whose authSecretRef names a Secret (or key) that is not there."""
    ref = spec.auth_secret_ref
    name, key = (ref.name, ref.key) if ref is not None else ("", "token")
    return Refusal(
        reason=Reason.AUTH_SECRET_NOT_FOUND,
        message=(
            f"The Secret {namespace}/{name} named in spec.model.authSecretRef, with a token under key "
            f"{key!r}, is not there. Create it in the order's namespace, or correct the name in "
            "spec.model.authSecretRef; the order resumes by itself once it exists."
        ),
    )


class ModelHub(Protocol):
    """A Hugging Face source: HubClient, or a stand-in in tests of callers."""

    def resolve(self, ref: str, token: str | None = None) -> ModelFacts | Refusal:
        """Facts or a refusal; raises a TemporaryError when the source does not answer."""
        ...


class Resolver:
    """Resolves spec.model; with catalog=None (catalog.mode: None) catalog orders are refused."""

    def __init__(self, hub: ModelHub, catalog: CatalogReader | None = None) -> None:
        self._hub = hub
        self._catalog = catalog

    def __repr__(self) -> str:
        return f"Resolver(hub={self._hub!r}, catalog={self._catalog!r})"

    def resolve(self, spec: ModelSpec, namespace: str, token: str | None) -> ModelFacts | Refusal:
        """ModelFacts, or a Refusal; raises TemporaryError subclasses for the operator to retry.

        `token` is the value of the order's authSecretRef Secret, read by the operator; only the
        Hugging Face source uses it.
        """
        if spec.src == ModelSource.HUGGING_FACE:
            return self._hub.resolve(spec.ref.name, token)
        if self._catalog is None:
            return Refusal(
                reason=Reason.CATALOG_DISABLED,
                message=(
                    "The order names an ai-models catalog model, and catalog integration is off in "
                    "the module settings (catalog.mode: None). Name a Hugging Face source in "
                    "spec.model, or ask an administrator to enable the catalog."
                ),
            )
        return self._catalog.read(spec.ref, namespace)
