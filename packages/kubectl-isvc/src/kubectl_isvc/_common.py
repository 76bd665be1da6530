"""What every command shares: output records, exit codes, and what could not be read."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from kubectl_isvc._errors import Forbidden, ReadFailed

__all__ = ["Exit", "Out", "Unread", "unread"]


class Exit(IntEnum):
    """Exit codes every command shares, for scripts."""

    SERVING = 0  # why: the order serves; estimate: it would be planned; capacity: everything was read
    REFUSED = 1  # why: a condition names why it does not serve; estimate: it would be refused
    UNKNOWN = 2  # could not tell: not judged yet, not found, not readable, no answer


class Out(BaseModel):
    """An output record: camelCase in JSON and YAML, like the objects it describes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_wire(self) -> dict[str, Any]:
        """The record as -o json / -o yaml print it."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Unread(Out):
    """Something a command tried to read and could not, and the API server's reason."""

    what: str
    why: str
    status: int | None = None


def unread(e: ReadFailed, forbidden_hint: str) -> Unread:
    """The record of a failed read; a refusal of the caller's permissions gets `forbidden_hint` added."""
    why = e.why + (f" — {forbidden_hint}" if isinstance(e, Forbidden) else "")
    return Unread(what=e.what, why=why, status=e.status)
