"""The names every package gives the API's objects as they travel: plain JSON, and the keys that name them."""

from __future__ import annotations

from typing import Any

__all__ = ["DeviceKey", "Obj", "OrderKey"]

Obj = dict[str, Any]  # an object as the API server sends it: JSON, camelCase
OrderKey = tuple[str, str]  # an order: (namespace, name)
DeviceKey = tuple[str, str, str]  # a device a ResourceSlice publishes: (driver, pool, device)
