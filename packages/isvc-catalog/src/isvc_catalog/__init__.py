"""isvc-catalog: model facts from Hugging Face or the ai-models catalog, and the class model policy."""

from isvc_catalog._catalog import (
    CATALOG_GROUP,
    CATALOG_VERSION,
    PLURALS,
    Absent,
    CatalogApi,
    CatalogReader,
    parse_catalog_object,
)
from isvc_catalog._errors import (
    CatalogError,
    CatalogLookupError,
    PermanentError,
    SettingsError,
    SourceUnavailableError,
    TemporaryError,
)
from isvc_catalog._hub import DEFAULT_ENDPOINT, HubClient, HubLimits
from isvc_catalog._kube import KubeCatalogApi
from isvc_catalog._policy import admit
from isvc_catalog._refs import RepoRef, parse_repo_ref
from isvc_catalog._resolver import ModelHub, Resolver, auth_secret_not_found
from isvc_catalog._safetensors import DTYPE_BYTES, TORCH_DTYPES, build_header

__all__ = [
    "CATALOG_GROUP",
    "CATALOG_VERSION",
    "DEFAULT_ENDPOINT",
    "DTYPE_BYTES",
    "PLURALS",
    "TORCH_DTYPES",
    "Absent",
    "CatalogApi",
    "CatalogError",
    "CatalogLookupError",
    "CatalogReader",
    "HubClient",
    "HubLimits",
    "KubeCatalogApi",
    "ModelHub",
    "PermanentError",
    "RepoRef",
    "Resolver",
    "SettingsError",
    "SourceUnavailableError",
    "TemporaryError",
    "admit",
    "auth_secret_not_found",
    "build_header",
    "parse_catalog_object",
    "parse_repo_ref",
]
