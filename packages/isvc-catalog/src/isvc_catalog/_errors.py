"""Errors raised by isvc-catalog. Refusals are returned as values; only retries are raised.

CatalogError
├── TemporaryError             retry after `delay` seconds; the condition passes on its own
│   ├── SourceUnavailableError     the Hugging Face Hub (or its mirror) did not answer usefully
│   └── CatalogLookupError         the Kubernetes API did not answer about a catalog object
└── PermanentError             a defect or a setting; retrying does not help
    └── SettingsError              a setting of the module is not usable (e.g. the Hub endpoint)
"""

from __future__ import annotations

from isvc_api import Reason

__all__ = [
    "CatalogError",
    "CatalogLookupError",
    "PermanentError",
    "SettingsError",
    "SourceUnavailableError",
    "TemporaryError",
]


class CatalogError(Exception):
    """Base class of every error this package raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TemporaryError(CatalogError):
    """The answer could not be had now; ask again after `delay` seconds."""

    reason: Reason | None = None  # the reason the operator may show while retrying, if one fits

    def __init__(self, message: str, *, delay: float = 10.0) -> None:
        super().__init__(message)
        self.delay = delay


class SourceUnavailableError(TemporaryError):
    """The Hub did not answer: network error, timeout, 429 or 5xx. The operator picks the condition."""


class CatalogLookupError(TemporaryError):
    """The Kubernetes API request for a catalog object failed; shown as CatalogLookupFailed."""

    reason = Reason.CATALOG_LOOKUP_FAILED


class PermanentError(CatalogError):
    """Retrying does not help: a setting or a defect needs a person."""


class SettingsError(PermanentError):
    """A module setting this package was given cannot be used."""
