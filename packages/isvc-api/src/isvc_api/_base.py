"""The wire convention shared by every type: camelCase JSON, snake_case Python."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["Wire"]


class Wire(BaseModel):
    """A model that reads and writes camelCase and refuses fields it does not know."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase, unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
