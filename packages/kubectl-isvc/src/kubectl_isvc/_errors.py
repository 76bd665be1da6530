"""The errors of kubectl-isvc."""

from __future__ import annotations

__all__ = ["Forbidden", "KubectlIsvcError", "NotFound", "ReadFailed", "Unreachable"]


class KubectlIsvcError(Exception):
    """Base of every error this package raises.

    KubectlIsvcError
    └── ReadFailed        the API server did not give what was asked (`what`), and `why` says so
        ├── NotFound      404: the object is not there
        ├── Forbidden     403: the caller's own permissions do not cover the read
        └── Unreachable   no answer, or one that is not Kubernetes' (connection, timeout, 5xx)

    Nothing is retried: a command reads once and says what it could not read.
    """


class ReadFailed(KubectlIsvcError):
    """A request to the API server that did not give what was asked."""

    def __init__(self, what: str, why: str, status: int | None = None) -> None:
        super().__init__(f"{what}: {why}")
        self.what, self.why, self.status = what, why, status


class NotFound(ReadFailed):
    """The object is not there (404)."""


class Forbidden(ReadFailed):
    """The caller may not read it (403): the API server's own words say which verb and resource."""


class Unreachable(ReadFailed):
    """The API server did not answer, or answered with a server error."""
