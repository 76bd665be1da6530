"""Leader election over a coordination.k8s.io Lease, so a rollout never runs two controllers at once."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

__all__ = ["LeaderElector", "keep_leading", "may_take"]

log = logging.getLogger(__name__)


def may_take(holder: str | None, renewed: datetime | None, duration: float, me: str, now: datetime) -> bool:
    """Whether `me` may hold the lease: it is free, ours, or its holder stopped renewing it."""
    if not holder or holder == me:
        return True
    return renewed is None or renewed + timedelta(seconds=duration) < now


def keep_leading(last_ok: float, now: float, renew_deadline: float) -> bool:
    """Whether a leader whose last successful renewal was at `last_ok` may go on leading at `now`.

    The deadline is shorter than the lease, so a leader that cannot renew stops before a standby may
    take the lease: two leaders never overlap.
    """
    return now - last_ok < renew_deadline


class LeaderElector:
    """Acquire the lease, then renew it; losing it calls `on_lost` (the process exits and restarts).

    Every request carries a timeout; any failure to renew (an API refusal, a transport error, a timeout)
    counts, and leading stops once no renewal succeeded within `renew_deadline` (< `duration`).
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        name: str = "isvc-controller",
        duration: float = 10.0,
        renew: float = 2.0,
        renew_deadline: float = 7.0,
        timeout: float = 5.0,
    ) -> None:
        if not renew < renew_deadline < duration:
            raise ValueError("leader election needs renew < renew_deadline < duration")
        self.api = k8s.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.duration = duration
        self.renew = renew
        self.renew_deadline = renew_deadline
        self.timeout = timeout
        self.identity = f"{socket.gethostname()}_{os.getpid()}"
        self._stop = threading.Event()

    def _try(self) -> bool:
        now = datetime.now(UTC)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=k8s.V1LeaseSpec(
                    holder_identity=self.identity,
                    acquire_time=now,
                    renew_time=now,
                    lease_duration_seconds=int(self.duration),
                ),
            )
            try:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout)
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
            self.api.replace_namespaced_lease(
                self.name,
                self.namespace,
                lease,  # resourceVersion guards it
                _request_timeout=self.timeout,
            )
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
            except Exception as exc:  # keep trying: the API server may be restarting
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            self._stop.wait(self.renew)

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew in the background; call `on_lost` when a renewal fails for longer than the lease."""

        def run() -> None:
            last_ok = time.monotonic()
            while not self._stop.wait(self.renew):
                try:
                    if self._try():
                        last_ok = time.monotonic()
                        continue
                except Exception as exc:  # a transport error or a timeout counts as much as a refusal
                    log.warning("renewing lease %s/%s failed: %s", self.namespace, self.name, exc)
                if not keep_leading(last_ok, time.monotonic(), self.renew_deadline):
                    log.error(
                        "lost the lease %s/%s: no renewal for %.0fs",
                        self.namespace,
                        self.name,
                        self.renew_deadline,
                    )
                    on_lost()
                    return

        thread = threading.Thread(target=run, name="leader", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop renewing and hand the lease back, so a successor need not wait for it to expire."""
        self._stop.set()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, lease, _request_timeout=self.timeout
                )
        except Exception as exc:  # an API server that is down too: the lease simply expires
            log.warning(
                "releasing lease %s/%s: %s",
                self.namespace,
                self.name,
                exc.reason if isinstance(exc, ApiException) else type(exc).__name__,
            )
