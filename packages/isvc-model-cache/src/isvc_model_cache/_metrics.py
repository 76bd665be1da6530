"""Prometheus metrics of the cache: bytes from the Hub, bytes served, how each file download was served.

The hit ratio over a window is `sum(rate(isvc_model_cache_downloads_total{result=~"Hit|Joined"}[1h])) /
sum(rate(isvc_model_cache_downloads_total[1h]))`, and by bytes `1 - rate(isvc_model_cache_hub_bytes_total[1h]) /
rate(isvc_model_cache_served_bytes_total[1h])` (module/docs/CONFIGURATION.md).
"""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge

from isvc_model_cache._store import Store

__all__ = ["CacheMetrics", "Served"]


class Served(StrEnum):
    """How one file download (a GET) was answered: the label `result` of isvc_model_cache_downloads_total."""

    HIT = "Hit"  # from a file the store held
    JOINED = "Joined"  # from a fill another download had started
    MISS = "Miss"  # a fill started for it
    FULL = "Full"  # 507: no room for the file; the step downloads it from the Hub
    UNVERIFIABLE = "Unverifiable"  # 501: the Hub published no hash the cache can check
    REFUSED = "Refused"  # the Hub refused the download's token or knows no such file (its answer passed on)
    HUB_UNREACHABLE = "HubUnreachable"  # the Hub did not answer the check


class CacheMetrics:
    """The cache's metrics, registered in `registry`; the store's gauges are read at each scrape."""

    def __init__(self, registry: CollectorRegistry, store: Store) -> None:
        self.hub_bytes = Counter(
            "isvc_model_cache_hub_bytes", "Bytes of files downloaded from the Hub.", registry=registry
        )
        self.served_bytes = Counter(
            "isvc_model_cache_served_bytes", "Bytes of files sent to download steps.", registry=registry
        )
        self.downloads = Counter(
            "isvc_model_cache_downloads",
            "File downloads (GET) by how they were answered: Hit, Joined, Miss, Full, Unverifiable, Refused, "
            "HubUnreachable.",
            ["result"],
            registry=registry,
        )
        for served in Served:
            self.downloads.labels(result=served.value)
        self.verify_failures = Counter(
            "isvc_model_cache_verify_failures",
            "Fills whose bytes did not match the hash the Hub published (never served whole, never kept).",
            registry=registry,
        )
        self.evicted_bytes = Counter(
            "isvc_model_cache_evicted_bytes", "Bytes of files evicted to make room.", registry=registry
        )
        store.on_evict = self.evicted_bytes.inc
        used = Gauge(
            "isvc_model_cache_used_bytes",
            "Bytes the store holds, fills under way included.",
            registry=registry,
        )
        used.set_function(lambda: store.usage().used)
        held = Gauge(
            "isvc_model_cache_held_bytes",
            "Bytes of files downloads are reading or fills are writing (never evicted).",
            registry=registry,
        )
        held.set_function(lambda: store.usage().held)
        files = Gauge("isvc_model_cache_files", "Complete files in the store.", registry=registry)
        files.set_function(lambda: store.usage().files)
        capacity = Gauge(
            "isvc_model_cache_capacity_bytes", "The store's bound (--max-bytes).", registry=registry
        )
        capacity.set(store.capacity)

    def served(self, result: Served) -> None:
        self.downloads.labels(result=result.value).inc()
