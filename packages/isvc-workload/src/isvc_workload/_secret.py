"""Secret `{order}-auth`: the token clients present to the endpoint."""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from isvc_api import InferenceService

from isvc_workload._common import child_metadata

__all__ = ["AUTH_SECRET_KEY", "auth_secret", "auth_secret_name", "read_token"]

AUTH_SECRET_KEY = "token"


def auth_secret_name(order_name: str) -> str:
    """Name of the order's token Secret."""
    return f"{order_name}-auth"


def auth_secret(order: InferenceService) -> dict[str, Any]:
    """A Secret with a NEW random token: create it only when missing, never re-apply it on a pass."""
    token = secrets.token_urlsafe(32)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(order, auth_secret_name(order.metadata.name)),
        "type": "Opaque",
        "data": {AUTH_SECRET_KEY: base64.b64encode(token.encode()).decode()},
    }


def read_token(secret: dict[str, Any] | None) -> str | None:
    """The token a Secret read from the API holds, or None when it holds none."""
    if not secret:
        return None
    plain = (secret.get("stringData") or {}).get(AUTH_SECRET_KEY)
    if plain:
        return str(plain)
    encoded = (secret.get("data") or {}).get(AUTH_SECRET_KEY)
    if not encoded:
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode() or None
    except (binascii.Error, UnicodeDecodeError):
        return None
