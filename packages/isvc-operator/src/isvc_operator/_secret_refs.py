"""Which orders name which Secrets: the index a Secret's watch event is answered from (no Secret is kept)."""

from __future__ import annotations

import threading

from isvc_api import Obj, OrderKey
from isvc_workload import auth_secret_name

__all__ = ["SecretRefs", "secrets_named"]

SecretKey = tuple[str, str]  # (namespace, name)


def secrets_named(order: Obj) -> set[SecretKey]:
    """The Secrets a pass of the order reads: the model source's token Secret (spec.model.authSecretRef)
    and the endpoint token Secret the module makes for it (`{order}-auth`), both in its namespace."""
    meta = order.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    named = {(namespace, auth_secret_name(name))} if name else set()
    ref = ((order.get("spec") or {}).get("model") or {}).get("authSecretRef") or {}
    if isinstance(ref, dict) and isinstance(ref.get("name"), str) and ref["name"]:
        named.add((namespace, ref["name"]))
    return named


class SecretRefs:
    """Orders by the Secrets they name, kept current from the orders informer's events (`on_order`).

    A Secret added, changed or deleted is answered with exactly the orders that name it; a Secret no order
    names is answered with none. Nothing of a Secret is held here but its namespace and name.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._orders: dict[SecretKey, set[OrderKey]] = {}
        self._secrets: dict[OrderKey, set[SecretKey]] = {}

    def on_order(self, event: str, order: Obj) -> None:
        """An order's event: what it names now replaces what it named (nothing, once it is deleted)."""
        meta = order.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        named = set() if event == "DELETED" else secrets_named(order)
        with self._lock:
            for secret in self._secrets.pop(key, set()) - named:
                orders = self._orders.get(secret)
                if orders is not None:
                    orders.discard(key)
                    if not orders:
                        del self._orders[secret]
            if named:
                self._secrets[key] = named
                for secret in named:
                    self._orders.setdefault(secret, set()).add(key)

    def orders(self, namespace: str, name: str) -> set[OrderKey]:
        """The orders that name the Secret namespace/name."""
        with self._lock:
            return set(self._orders.get((namespace, name), ()))

    def all(self) -> set[OrderKey]:
        """Every order that names a Secret (after a relist of Secrets: any of them may have changed)."""
        with self._lock:
            return set(self._secrets)
