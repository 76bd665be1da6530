"""The names every package gives the API's objects as they travel: plain JSON, and the keys that name them."""

from __future__ import annotations

from typing import Any

__all__ = ["DeviceKey", "Obj", "OrderKey", "request_device_class"]

Obj = dict[str, Any]  # an object as the API server sends it: JSON, camelCase
OrderKey = tuple[str, str]  # an order: (namespace, name)
DeviceKey = tuple[str, str, str]  # a device a ResourceSlice publishes: (driver, pool, device)


def request_device_class(request: Any) -> str | None:
    """The device class one request of a ResourceClaim asks for: its `exactly`'s, or, for a prioritized list
    (`firstAvailable`), its first choice's (every choice of the module's claims names the same class)."""
    if not isinstance(request, dict):
        return None
    exactly = request.get("exactly")
    if isinstance(exactly, dict) and exactly.get("deviceClassName"):
        return str(exactly["deviceClassName"])
    for choice in request.get("firstAvailable") or []:
        if isinstance(choice, dict) and choice.get("deviceClassName"):
            return str(choice["deviceClassName"])
    return None
