"""Command line: `python -m isvc_planner serve --port P [--kubeconfig K]` and `openapi`."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from isvc_planner._app import create_app
from isvc_planner._inventory import Inventory
from isvc_planner._planner import Planner

__all__ = ["main", "openapi_document"]


def openapi_document() -> str:
    """The OpenAPI description of the service, as written to openapi.json."""
    app = create_app(Planner(Inventory()))
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the service, or print its OpenAPI description."""
    parser = argparse.ArgumentParser(prog="isvc-planner", description="isvc resource planner")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="watch the cluster and serve the planner API")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--kubeconfig", default=None, help="kubeconfig file; in-cluster config if absent")
    serve.add_argument("--reservation-ttl", type=float, default=120.0,
                       help="seconds a plan holds its devices before a claim shows them")
    sub.add_parser("openapi", help="print the OpenAPI description")
    args = parser.parse_args(argv)
    if args.command == "openapi":
        sys.stdout.write(openapi_document())
        return 0
    import uvicorn

    from isvc_planner._kube import KubeSync, load_api

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    inventory = Inventory()
    sync = KubeSync(inventory, load_api(args.kubeconfig))
    sync.start()
    app = create_app(Planner(inventory, reservation_ttl=args.reservation_ttl))
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    finally:
        sync.stop()
    return 0
