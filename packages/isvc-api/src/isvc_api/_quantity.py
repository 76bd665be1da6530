"""Kubernetes resource quantities, parsed without the client library: the one parser of the packages,
and the one GiB."""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation

__all__ = ["GIB", "QuantityError", "format_gib", "gib", "parse_quantity", "quantity_bytes"]

GIB = 1 << 30


class QuantityError(ValueError):
    """A string is not a Kubernetes resource quantity (permanent)."""


_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """The value of a quantity such as '80Gi', '100', '1.5e3' or '500m'."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    """A quantity's text, remembered: a fleet's claims and devices repeat a few dozen of them."""
    match = _RE.match(value.strip())
    if match is None:
        raise QuantityError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
        if exponent:
            return base * Decimal(10) ** int(exponent[1:])
        return base * _SUFFIX[suffix or ""]
    except (InvalidOperation, KeyError) as error:
        raise QuantityError(f"not a quantity: {value!r}") from error


def quantity_bytes(value: str | int | float) -> int:
    """A quantity rounded up to a whole number of base units (bytes for memory)."""
    return math.ceil(parse_quantity(value))


def gib(amount: int | float) -> float:
    """Bytes as GiB, rounded to two decimals for messages and wire fields."""
    return round(amount / GIB, 2)


def format_gib(amount: int) -> str:
    """Bytes as a Kubernetes quantity in whole Gi, rounded up."""
    return f"{max(1, math.ceil(amount / GIB))}Gi"
