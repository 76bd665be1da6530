"""Command line: `isvc-planner serve --allowed-caller SA [--host H] [--port P] [--tls-cert-dir D]
[--metrics-port M]`, `openapi`.

The module chart starts `isvc-planner serve --host=0.0.0.0 --port=8080 --tls-cert-dir=/etc/isvc/planner-tls
--metrics-port=9090 --allowed-caller=system:serviceaccount:d8-isvc:controller --log-level=info`
(module/templates/planner/deployment.yaml); a test parses the rendered arguments with `parser()`.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from isvc_planner._app import create_app
from isvc_planner._auth import CallerCheck, service_account_name
from isvc_planner._inventory import Inventory
from isvc_planner._planner import FIFO_AFTER, SOLVER_SECONDS, Planner

__all__ = ["main", "openapi_document", "parser"]

_LOG_LEVELS = ("debug", "info", "warn", "error")


def openapi_document() -> str:
    """The OpenAPI description of the service, as written to openapi.json."""
    app = create_app(Planner(Inventory()), caller=CallerCheck(lambda token: None, ()))
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


def _log_level(text: str) -> str:
    """Debug|Info|Warn|Error in any case (the module setting is capitalised, the chart lowers it)."""
    level = text.lower()
    if level not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(_LOG_LEVELS)}")
    return level


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from error
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(
            f"{text!r}: between 0 and 60 (the controller waits 10 s for an answer)"
        )
    return value


def _caller(text: str) -> str:
    try:
        return service_account_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _tls_files(args: argparse.Namespace) -> tuple[str, str] | tuple[None, None]:
    """The serving certificate and key of `--tls-cert-dir`; plain HTTP only on a loopback address, since the
    controller's bearer token travels in every request."""
    if args.tls_cert_dir is None:
        if not _loopback(args.host):
            raise SystemExit(
                f"isvc-planner: serving on {args.host} needs --tls-cert-dir (tls.crt and tls.key): the "
                "controller's token must not cross the network in plain HTTP"
            )
        return None, None
    cert, key = args.tls_cert_dir / "tls.crt", args.tls_cert_dir / "tls.key"
    for path in (cert, key):
        if not path.is_file():
            raise SystemExit(f"isvc-planner: {path} is missing (--tls-cert-dir holds tls.crt and tls.key)")
    return str(cert), str(key)


def parser() -> argparse.ArgumentParser:
    """The command line; the module chart passes `serve` and its flags."""
    p = argparse.ArgumentParser(prog="isvc-planner", description="isvc resource planner")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="watch the cluster and serve the planner API")
    serve.add_argument("--port", type=int, default=8080, help="planner API, /healthz and /readyz")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address of the planner API; the chart binds the pod's (0.0.0.0)"
    )
    serve.add_argument(
        "--tls-cert-dir",
        type=Path,
        default=None,
        help="directory with tls.crt and tls.key: the API over HTTPS (the chart's Secret isvc-planner-tls); "
        "required unless --host is a loopback address",
    )
    serve.add_argument(
        "--allowed-caller",
        dest="allowed_callers",
        action="append",
        type=_caller,
        required=True,
        metavar="system:serviceaccount:NS:NAME",
        help="the ServiceAccount that may call /v1/* (its token is checked by TokenReview); repeatable",
    )
    serve.add_argument(
        "--token-review-ttl", type=float, default=60.0, help="seconds a token's review is remembered"
    )
    serve.add_argument(
        "--metrics-port", type=int, default=9090, help="Prometheus /metrics on its own port; 0 turns it off"
    )
    serve.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        help="address of /metrics; 127.0.0.1 when kube-rbac-proxy fronts it",
    )
    serve.add_argument("--log-level", type=_log_level, default="info", help="debug, info, warn or error")
    serve.add_argument("--kubeconfig", default=None, help="kubeconfig file; in-cluster config if absent")
    serve.add_argument(
        "--reservation-ttl",
        type=float,
        default=120.0,
        help="seconds a plan holds its devices before a claim shows them",
    )
    serve.add_argument(
        "--solver-seconds",
        type=_seconds,
        default=SOLVER_SECONDS,
        help="seconds the solver may take to place orders waiting together (0: the bounded search only)",
    )
    serve.add_argument(
        "--fifo-after",
        type=_seconds,
        default=FIFO_AFTER,
        help="seconds an order waits for room before it is placed oldest first, ahead of orders packed together",
    )
    sub.add_parser("openapi", help="print the OpenAPI description")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the service, or print its OpenAPI description."""
    args = parser().parse_args(argv)
    if args.command == "openapi":
        sys.stdout.write(openapi_document())
        return 0
    certfile, keyfile = _tls_files(args)
    import uvicorn

    from isvc_planner._kube import KubeSync, load_api, token_reviewer

    level = "warning" if args.log_level == "warn" else args.log_level
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    registry = CollectorRegistry()
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=registry)
    inventory = Inventory()
    api = load_api(args.kubeconfig)
    sync = KubeSync(inventory, api)
    sync.start()
    caller = CallerCheck(token_reviewer(api), args.allowed_callers, ttl=args.token_review_ttl)
    app = create_app(
        Planner(
            inventory,
            reservation_ttl=args.reservation_ttl,
            solver_seconds=args.solver_seconds,
            fifo_after=args.fifo_after,
        ),
        registry=registry,
        caller=caller,
    )
    try:
        uvicorn.run(
            app, host=args.host, port=args.port, log_level=level, ssl_certfile=certfile, ssl_keyfile=keyfile
        )
    finally:
        sync.stop()
    return 0
