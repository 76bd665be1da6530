"""Prometheus metrics of the prober: latency and outcome of every probe."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

__all__ = ["ProbeMetrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ProbeMetrics:
    """The probe metrics, registered once in `registry` (the process-wide one by default)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.duration = Histogram(
            "isvc_health_probe_duration_seconds",
            "Time one health probe of an order's inference API took, by outcome.",
            ["outcome"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.probes = Counter(
            "isvc_health_probes",
            "Health probes of an order's inference API, by order and outcome.",
            ["namespace", "name", "outcome"],
            registry=registry,
        )

    def observe(self, namespace: str, name: str, outcome: str, seconds: float) -> None:
        """Record one probe."""
        self.duration.labels(outcome=outcome).observe(seconds)
        self.probes.labels(namespace=namespace, name=name, outcome=outcome).inc()

    def forget(self, namespace: str, name: str, outcomes: list[str]) -> None:
        """Drop the series of a deleted order."""
        for outcome in outcomes:
            try:
                self.probes.remove(namespace, name, outcome)
            except KeyError:
                continue
