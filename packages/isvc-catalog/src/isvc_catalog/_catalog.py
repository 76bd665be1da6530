"""Facts about a model from the ai-models catalog: `Model` (namespaced) and `ClusterModel`.

The Kubernetes call sits behind `CatalogApi` (see `_kube.py`); everything here is plain data.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Protocol

from isvc_api import (
    CatalogKind,
    EndpointType,
    ModelFacts,
    ModelFormat,
    ModelRef,
    ModelSource,
    QuantityError,
    Quantization,
    Reason,
    Refusal,
    conditions_of,
    quantity_bytes,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "CATALOG_GROUP",
    "CATALOG_VERSION",
    "PLURALS",
    "Absent",
    "CatalogApi",
    "CatalogReader",
    "parse_catalog_object",
]

CATALOG_GROUP = "ai-models.deckhouse.io"
CATALOG_VERSION = "v1alpha1"
PLURALS = {CatalogKind.MODEL: "models", CatalogKind.CLUSTER_MODEL: "clustermodels"}


class Absent(enum.Enum):
    """Why a catalog read found nothing."""

    OBJECT = "object"  # the kind is served, the named object does not exist
    KIND = "kind"  # the API server does not serve the kind at all (its CRD is absent)


class CatalogApi(Protocol):
    """Reads one catalog object; raises CatalogLookupError when the request itself fails."""

    def get(self, kind: CatalogKind, name: str, namespace: str | None) -> dict[str, Any] | Absent:
        """The object as the API server returns it, or why there is none."""
        ...

    def namespace_may_read(self, reader: str, kind: CatalogKind, name: str, namespace: str) -> bool:
        """Whether the ServiceAccounts of namespace `reader` may get that object (an access review)."""
        ...


class _Shape(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class _Source(_Shape):
    type: str | None = None  # {type: HuggingFace, repo: owner/name}
    repo: str | None = None
    url: str | None = None  # or {url: hf://owner/name}
    revision: str | None = None

    def hub_repo(self) -> str | None:
        """The Hugging Face repository (owner/name) this source names, or None for any other source."""
        if self.repo and (self.type or "").lower() == ModelSource.HUGGING_FACE.value.lower():
            repo = self.repo
        elif self.url and self.url.startswith(_HF_URL):
            repo = self.url.removeprefix(_HF_URL)
        else:
            return None
        repo = repo.strip().strip("/")
        return repo if _HUB_REPO.match(repo) else None


_HF_URL = "hf://"
_HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _bytes(value: object) -> object:
    """A size as an integer of bytes, from an integer or a Kubernetes quantity like 15Gi."""
    if isinstance(value, str):
        try:
            return quantity_bytes(value)
        except QuantityError as error:
            raise ValueError(f"{value!r} is not a quantity of bytes such as 15Gi") from error
    return value


def _enum_ci(value: object, enum_type: type[enum.StrEnum]) -> object:
    """Accept enum values in any letter case: the catalog is another module's output."""
    if isinstance(value, str):
        for member in enum_type:
            if member.value.lower() == value.lower():
                return member
    return value


class _Spec(_Shape):
    source: _Source | None = None
    format: ModelFormat
    parameter_count: int = Field(gt=0)
    quantization: Quantization = Quantization.NONE
    endpoint_types: list[EndpointType] = Field(min_length=1)
    architecture: str | None = None
    family: str | None = None
    context_length: int | None = Field(default=None, gt=0)
    num_layers: int | None = Field(default=None, gt=0)
    num_attention_heads: int | None = Field(default=None, gt=0)
    num_kv_heads: int | None = Field(default=None, alias="numKVHeads", gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    hidden_size: int | None = Field(default=None, gt=0)
    size_bytes: int | None = Field(default=None, ge=0)
    size: int | None = Field(default=None, ge=0)  # int or quantity; sizeBytes is the older spelling
    dtype: str | None = None
    quantization_bits: int | None = Field(default=None, gt=0)

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: object) -> object:
        return _bytes(v)

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, v: object) -> object:
        return _enum_ci(v, ModelFormat)

    @field_validator("quantization", mode="before")
    @classmethod
    def _quantization(cls, v: object) -> object:
        return Quantization.NONE if v is None else _enum_ci(v, Quantization)

    @field_validator("endpoint_types", mode="before")
    @classmethod
    def _endpoint_types(cls, v: object) -> object:
        return [_enum_ci(x, EndpointType) for x in v] if isinstance(v, list) else v


def _title(kind: CatalogKind, name: str, namespace: str | None) -> str:
    return f"{kind.value} {namespace}/{name}" if namespace else f"{kind.value} {name}"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in ("spec", *err["loc"]))
    return f"{field}: {err['msg']}"


def parse_catalog_object(
    obj: dict[str, Any], kind: CatalogKind, name: str, namespace: str | None
) -> ModelFacts | Refusal:
    """ModelFacts from a catalog object, ModelNotReady before it is Ready, or InvalidModelSource."""
    title = _title(kind, name, namespace)
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    if status.get("phase") != "Ready":
        return _not_ready(title, status)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problem = "it has no spec"
    else:
        try:
            parsed = _Spec.model_validate(spec)
        except ValidationError as exc:
            problem = _first_error(exc)
        else:
            return _facts(name, parsed)
    return Refusal(
        reason=Reason.INVALID_MODEL_SOURCE,
        message=(
            f"{title} in the ai-models catalog does not carry the facts a model needs ({problem}). "
            "Name another catalog model or a Hugging Face source in spec.model; the catalog's owner "
            "can correct the object."
        ),
    )


def _not_ready(title: str, status: dict[str, Any]) -> Refusal:
    """ModelNotReady, with the first condition that does not hold and whether waiting helps."""
    phase = status.get("phase")
    why = ""
    for cond in conditions_of({"status": status}):
        if cond.get("status") != "True" and cond.get("message"):
            why = f" ({cond.get('reason', '')}: {cond['message']})"
            break
    wait = (
        "It failed in the catalog: ask the catalog's owner, or name another model."
        if phase == "Failed"
        else "Wait: this passes on its own once the catalog has the model ready."
    )
    return Refusal(
        reason=Reason.MODEL_NOT_READY,
        message=f"{title} is not ready in the ai-models catalog (phase {phase or 'unset'}{why}). {wait}",
    )


def _facts(name: str, parsed: _Spec) -> ModelFacts:
    """The facts of a Ready catalog object whose spec validated."""
    revision = parsed.source.revision if parsed.source else None
    repo = parsed.source.hub_repo() if parsed.source else None
    return ModelFacts(
        source=ModelSource.AI_MODELS,
        name=name,
        revision=revision,
        # The revision the catalog object pins is what the workload downloads from its repository.
        commit=revision if repo else None,
        download_repo=repo,
        ready=True,
        format=parsed.format,
        architecture=parsed.architecture,
        family=parsed.family,
        parameter_count=parsed.parameter_count,
        dtype=parsed.dtype,
        quantization=parsed.quantization,
        quantization_bits=parsed.quantization_bits,
        context_length=parsed.context_length,
        num_layers=parsed.num_layers,
        num_attention_heads=parsed.num_attention_heads,
        num_kv_heads=parsed.num_kv_heads,
        head_dim=parsed.head_dim,
        hidden_size=parsed.hidden_size,
        weight_bytes=parsed.size if parsed.size is not None else parsed.size_bytes,
        endpoint_types=list(dict.fromkeys(parsed.endpoint_types)),
    )


class CatalogReader:
    """Resolves a catalog reference of an order through a CatalogApi."""

    def __init__(self, api: CatalogApi) -> None:
        self._api = api

    def __repr__(self) -> str:
        return f"CatalogReader({self._api!r})"

    def read(self, ref: ModelRef, namespace: str) -> ModelFacts | Refusal:
        """Facts, or a refusal; raises CatalogLookupError (temporary) when the request fails."""
        if ref.kind is None:
            return Refusal(
                reason=Reason.INVALID_MODEL_SOURCE,
                message="An ai-models source needs spec.model.ref.kind: Model or ClusterModel. Add it.",
            )
        ns = (ref.namespace or namespace) if ref.kind == CatalogKind.MODEL else None
        title = _title(ref.kind, ref.name, ns)
        if (
            ns is not None
            and ns != namespace
            and not self._api.namespace_may_read(namespace, ref.kind, ref.name, ns)
        ):
            # Read with the controller's rights only what the order's namespace could read itself; the
            # refusal does not tell a Model that exists from one that does not.
            return Refusal(
                reason=Reason.MODEL_NOT_FOUND,
                message=(
                    f"{title} cannot be read from namespace {namespace!r}: a Model of another namespace is used "
                    f"only when the ServiceAccounts of {namespace!r} may get it (an administrator grants that "
                    f"with a RoleBinding in {ns!r}). Check spec.model.ref, or ask for that grant."
                ),
            )
        answer = self._api.get(ref.kind, ref.name, ns)
        if answer is Absent.KIND:
            return Refusal(
                reason=Reason.CATALOG_KIND_NOT_SERVED,
                message=(
                    f"The cluster does not serve the catalog kind {ref.kind.value} "
                    f"({PLURALS[ref.kind]}.{CATALOG_GROUP}/{CATALOG_VERSION}). Correct "
                    "spec.model.ref.kind, or name a Hugging Face source."
                ),
            )
        if answer is Absent.OBJECT:
            return Refusal(
                reason=Reason.MODEL_NOT_FOUND,
                message=(
                    f"{title} does not exist in the ai-models catalog. Check spec.model.ref.name "
                    "and spec.model.ref.kind (Model is namespaced, ClusterModel is not)."
                ),
            )
        return parse_catalog_object(answer, ref.kind, ref.name, ns)
