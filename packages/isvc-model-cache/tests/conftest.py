"""The cache on loopback in front of isvc-testing's stand-in Hub, and the Hub's own client (`hf`) to ask it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from isvc_model_cache import CacheMetrics, Hub, ModelCache, Store, create_app
from prometheus_client import CollectorRegistry


@dataclass
class Cache:
    url: str
    store: Store
    cache: ModelCache
    registry: CollectorRegistry

    def count(self, result: str) -> float:
        value = self.registry.get_sample_value("isvc_model_cache_downloads_total", {"result": result})
        return value or 0.0

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(name) or 0.0


def serve(app: object) -> tuple[uvicorn.Server, threading.Thread, str]:
    """Uvicorn serving `app` on a free loopback port, in a thread."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("the cache did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture
def start_cache(tmp_path: Path) -> Iterator[Callable[..., Cache]]:
    """start_cache(hub_url, max_bytes=64 MiB) → a cache serving on loopback until the test ends."""
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(hub_url: str, max_bytes: int = 64 << 20) -> Cache:
        store = Store(tmp_path / f"store-{len(running)}", max_bytes)
        registry = CollectorRegistry()
        cache = ModelCache(Hub(hub_url, httpx.AsyncClient(timeout=30)), store, CacheMetrics(registry, store))
        server, thread, url = serve(create_app(cache))
        running.append((server, thread))
        return Cache(url, store, cache, registry)

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def hf() -> Callable[..., subprocess.CompletedProcess[str]]:
    """hf(endpoint, repo, into, *files, token=None, revision=None): `hf download` as the download step runs it."""
    return hf_download


def hf_download(
    endpoint: str, repo: str, into: Path, *files: str, token: str | None = None, revision: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`hf download` as the download step runs it (the CLI of huggingface_hub, a process of its own)."""
    env = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(into.parent / f"{into.name}-hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HF_TOKEN", None)
    if token is not None:
        env["HF_TOKEN"] = token
    command = [str(Path(sys.executable).parent / "hf"), "download", repo, *files, "--local-dir", str(into)]
    if revision:
        command += ["--revision", revision]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
