"""Command line: `isvc-model-cache serve --data-dir D [--hub-endpoint URL] [--max-bytes N] [--host H]
[--port P] [--metrics-port M]`.

The module chart starts `isvc-model-cache serve --host=0.0.0.0 --port=8080 --data-dir=/var/lib/isvc-model-cache
--max-bytes=<nine tenths of the volume> --hub-endpoint=<huggingFace.endpoint> --metrics-port=9090`
(module/templates/model-cache/deployment.yaml); a test parses the rendered arguments with `parser()`.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, start_http_server

from isvc_model_cache._app import ModelCache, create_app
from isvc_model_cache._hub import Hub
from isvc_model_cache._metrics import CacheMetrics
from isvc_model_cache._store import Store

__all__ = ["main", "parser"]

_LOG_LEVELS = ("debug", "info", "warn", "error")
# Nine tenths of the volume when no bound is given: the file system's own blocks and the share ext4 keeps for
# root (5 % by default; the cache runs as another user) are not the cache's to fill.
_SHARE = 0.9


def _log_level(text: str) -> str:
    level = text.lower()
    if level not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(_LOG_LEVELS)}")
    return level


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of bytes")
    return int(text)


def parser() -> argparse.ArgumentParser:
    """The command line; the module chart passes `serve` and its flags."""
    p = argparse.ArgumentParser(prog="isvc-model-cache", description="isvc model cache")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve model files from the store, filled from the Hub")
    serve.add_argument("--data-dir", type=Path, required=True, help="where the files are kept (the volume)")
    serve.add_argument(
        "--hub-endpoint", default="https://huggingface.co", help="the Hub, or a mirror that speaks its API"
    )
    serve.add_argument(
        "--max-bytes",
        type=_positive,
        default=None,
        help="the store's bound; default nine tenths of the data directory's file system",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address of the API; the chart binds the pod's")
    serve.add_argument("--port", type=int, default=8080, help="the API, /healthz and /readyz")
    serve.add_argument(
        "--metrics-port", type=int, default=9090, help="Prometheus /metrics on its own port; 0 turns it off"
    )
    serve.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        help="address of /metrics; 127.0.0.1 when kube-rbac-proxy fronts it",
    )
    serve.add_argument(
        "--check-seconds",
        type=float,
        default=30.0,
        help="how long the Hub's yes to one token for one file is remembered (a download's GET follows its HEAD)",
    )
    serve.add_argument("--log-level", type=_log_level, default="info", help="debug, info, warn or error")
    return p


def _bound(args: argparse.Namespace) -> int:
    if args.max_bytes is not None:
        return int(args.max_bytes)
    stat = os.statvfs(args.data_dir)
    return int(stat.f_blocks * stat.f_frsize * _SHARE)


def main(argv: list[str] | None = None) -> int:
    """Serve until stopped."""
    args = parser().parse_args(argv)
    level = {"warn": "warning"}.get(args.log_level, args.log_level)
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store(args.data_dir, _bound(args))
    registry = CollectorRegistry()
    metrics = CacheMetrics(registry, store)
    # a stalled Hub ends a fill after a minute without bytes; the readers are then cut off and go to the Hub
    client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0))
    cache = ModelCache(Hub(args.hub_endpoint, client, args.check_seconds), store, metrics)
    if args.metrics_port:
        start_http_server(args.metrics_port, args.metrics_host, registry)
    usage = store.usage()
    logging.getLogger(__name__).info(
        "model cache on %s:%d: %d files, %d of %d bytes, from %s",
        args.host,
        args.port,
        usage.files,
        usage.used,
        usage.capacity,
        args.hub_endpoint,
    )
    import uvicorn

    uvicorn.run(create_app(cache), host=args.host, port=args.port, log_level=level, access_log=False)
    return 0
