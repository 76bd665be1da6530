"""Leader election over a coordination.k8s.io Lease, so a rollout never runs two controllers at once."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

__all__ = ["LeaderElector", "may_take"]

log = logging.getLogger(__name__)


def may_take(holder: str | None, renewed: datetime | None, duration: float, me: str, now: datetime) -> bool:
    """Whether `me` may hold the lease: it is free, ours, or its holder stopped renewing it."""
    if not holder or holder == me:
        return True
    return renewed is None or renewed + timedelta(seconds=duration) < now


class LeaderElector:
    """Acquire the lease, then renew it; losing it calls `on_lost` (the process exits and restarts)."""

    def __init__(self, api: k8s.ApiClient, namespace: str, name: str = "isvc-controller",
                 duration: float = 15.0, renew: float = 5.0) -> None:
        self.api = k8s.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.duration = duration
        self.renew = renew
        self.identity = f"{socket.gethostname()}_{os.getpid()}"
        self._stop = threading.Event()

    def _try(self) -> bool:
        now = datetime.now(UTC)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=k8s.V1LeaseSpec(holder_identity=self.identity, acquire_time=now, renew_time=now,
                                     lease_duration_seconds=int(self.duration)))
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as conflict:
                if conflict.status == 409:
                    return False
                raise
        if lease.spec is None:
            lease.spec = k8s.V1LeaseSpec()
        spec = lease.spec
        duration = float(spec.lease_duration_seconds or self.duration)
        if not may_take(spec.holder_identity, spec.renew_time, duration, self.identity, now):
            return False
        if spec.holder_identity != self.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = int(self.duration)
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)  # resourceVersion guards it
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    def acquire(self) -> None:
        """Block until this process holds the lease."""
        while not self._stop.is_set():
            try:
                if self._try():
                    log.info("leading as %s", self.identity)
                    return
            except ApiException as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc.reason)
            self._stop.wait(self.renew)

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background; call `on_lost` when a renewal fails for longer than the lease."""

        def run() -> None:
            last_ok = datetime.now(UTC)
            while not self._stop.wait(self.renew):
                try:
                    if self._try():
                        last_ok = datetime.now(UTC)
                        continue
                except ApiException as exc:
                    log.warning("renewing lease: %s", exc.reason)
                if datetime.now(UTC) - last_ok > timedelta(seconds=self.duration):
                    log.error("lost the lease %s/%s", self.namespace, self.name)
                    on_lost()
                    return

        thread = threading.Thread(target=run, name="leader", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop renewing and hand the lease back, so a successor need not wait for it to expire."""
        self._stop.set()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, exc.reason)
