"""The flags of `isvc-controller`, in groups: the ones the module chart passes
(module/templates/controller/deployment.yaml)."""

from __future__ import annotations

import argparse
from pathlib import Path

import isvc_catalog
import isvc_planner_client

__all__ = ["parser"]


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def _period(text: str) -> float:
    seconds = float(text)
    if seconds < 1:
        raise argparse.ArgumentTypeError("at least 1 (probe times are kept in whole seconds)")
    return seconds


def _cluster(p: argparse.ArgumentParser) -> None:
    """The cluster and the module: where the API server and the planner are, how this process runs."""
    g = p.add_argument_group("cluster")
    g.add_argument("--kubeconfig", help="out-of-cluster credentials; absent: the pod's service account")
    g.add_argument("--namespace", default="d8-isvc", help="the module's own namespace")
    g.add_argument("--planner-url", default="https://isvc-planner.d8-isvc.svc:8080")
    g.add_argument(
        "--planner-ca-file",
        type=Path,
        default=None,
        help="the authority the planner's serving certificate is checked against (the chart's Secret "
        "isvc-planner-tls, ca.crt); default: the system's trust store",
    )
    g.add_argument(
        "--planner-token-file",
        type=Path,
        default=isvc_planner_client.SERVICE_ACCOUNT_TOKEN,
        help="bearer token the planner checks (TokenReview), re-read when it rotates; "
        "default: the pod's ServiceAccount token",
    )
    g.add_argument("--leader-elect", type=_bool, default=False)
    g.add_argument("--log-level", default="Info")


def _models(p: argparse.ArgumentParser) -> None:
    """Where models come from."""
    g = p.add_argument_group("models")
    g.add_argument("--catalog-mode", default="AIModels", choices=["AIModels", "None"])
    g.add_argument("--huggingface-endpoint", default=isvc_catalog.DEFAULT_ENDPOINT)
    g.add_argument(
        "--hub-deadline-seconds",
        type=float,
        default=isvc_catalog.HubLimits().deadline,
        help="longest one model resolution may read from the Hub, every request together; past it "
        "the order is InvalidModelSource",
    )
    g.add_argument(
        "--runtime-recipes",
        type=Path,
        default=None,
        help="YAML list of administrator recipes that add to or override the shipped ones",
    )


def _workload(p: argparse.ArgumentParser) -> None:
    """What the children of an order are made with."""
    g = p.add_argument_group("workload")
    g.add_argument(
        "--public-domain-template",
        default=None,
        help="e.g. %%s.example.com: External endpoints are <order>--<namespace>.example.com",
    )
    g.add_argument("--cluster-issuer", default=None)
    g.add_argument(
        "--autoscaling-prometheus-url",
        default=None,
        help="Prometheus that KEDA's triggers query, where KEDA (and not Deckhouse's adapter) is served",
    )
    g.add_argument(
        "--cert-manager",
        type=_bool,
        default=None,
        help="whether cert-manager is installed; absent: ask the API server",
    )
    g.add_argument(
        "--model-fetch-image",
        default=None,
        help="image with the `hf` CLI; when set, an init container downloads Hugging Face models "
        "onto the model volume before the runtime starts",
    )
    g.add_argument(
        "--meter-image",
        default=None,
        help="image whose isvc-meter counts each runtime's own answers in front of its API port (the "
        "controller's image); absent: no meter, the runtime's failed requests go uncounted",
    )
    g.add_argument(
        "--model-cache-endpoint",
        default=None,
        help="the module's model cache (its Service URL): the download step asks it first and the Hub "
        "for whatever it does not serve; absent: the Hub alone",
    )
    g.add_argument(
        "--model-volume-storage-class",
        default=None,
        help="StorageClass of the model volumes of new sets; absent: the cluster's default class",
    )
    g.add_argument(
        "--seal-key-file",
        type=Path,
        default=None,
        help="the key children are sealed with (the chart's Secret): a child whose seal does not hold was "
        "changed by someone else and is restored; absent: a key of this process, so a restart writes "
        "every child again once",
    )


def _network(p: argparse.ArgumentParser) -> None:
    """Who may reach a runtime's ports besides the controller (its NetworkPolicy)."""
    g = p.add_argument_group("network")
    g.add_argument(
        "--ingress-controller-namespace",
        action="append",
        default=None,
        help="namespace of the ingress controller, admitted to External runtimes' API port (repeatable); "
        "default: d8-ingress-nginx",
    )
    g.add_argument(
        "--monitoring-namespace",
        action="append",
        default=None,
        help="namespace admitted to every runtime's metrics port (repeatable); default: d8-monitoring",
    )


def _shared_cards(p: argparse.ArgumentParser) -> None:
    """One start at a time on a shared card."""
    g = p.add_argument_group("shared cards")
    g.add_argument(
        "--start-turn-seconds",
        type=int,
        default=600,
        help="how long one runtime's start may keep the others sharing its card waiting; then the next starts",
    )
    g.add_argument(
        "--start-gate-wait-seconds",
        type=int,
        default=3600,
        help="how long a runtime on a shared card waits for its turn when no controller hands one out, then "
        "starts without one (written into the pods)",
    )


def _health(p: argparse.ArgumentParser) -> None:
    """How served orders are probed."""
    g = p.add_argument_group("health")
    g.add_argument(
        "--health-period-seconds",
        type=_period,
        default=30.0,
        help="how often each served order's inference API is probed, apart from its passes",
    )
    g.add_argument(
        "--probe-workers",
        type=int,
        default=4,
        help="threads that probe served orders (a probe that hangs holds one for its timeout)",
    )
    g.add_argument("--health-failure-threshold", type=int, default=3)
    g.add_argument(
        "--probe-url-template",
        default=None,
        help="endpoint-resolution seam: where the probe dials, e.g. "
        "http://127.0.0.1:18080/{namespace}/{name}; absent: the order's Service DNS name",
    )


def _serving(p: argparse.ArgumentParser) -> None:
    """What this process serves: metrics, its own health, the estimate webhook."""
    g = p.add_argument_group("serving")
    g.add_argument("--metrics-port", type=int, default=9090)
    g.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        help="address /metrics binds to; 127.0.0.1 behind kube-rbac-proxy in the same pod",
    )
    g.add_argument("--health-port", type=int, default=8081)
    g.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="HTTPS port of the estimate webhook (POST /estimate); 0: not served",
    )
    g.add_argument("--webhook-host", default="0.0.0.0")
    g.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=Path("/etc/isvc/webhook"),
        help="directory with tls.crt and tls.key the estimate webhook serves",
    )
    g.add_argument(
        "--webhook-client-ca",
        type=Path,
        default=None,
        help="PEM authority of the client certificate the API server presents to admission webhooks: every "
        "caller must then present one it signed, with a name of --webhook-client-name, and only such reviews "
        "are believed (their namespace and user: the token Secret an order names is read for an estimate only "
        "then); absent: no caller is asked for a certificate and no review is believed",
    )
    g.add_argument(
        "--webhook-client-name",
        action="append",
        default=[],
        help="the common name of the API server's client certificate (repeatable); with --webhook-client-ca",
    )
    g.add_argument(
        "--webhook-max-connections",
        type=int,
        default=64,
        help="connections the estimate webhook holds at once (each a thread); more are closed at once",
    )


def _pace(p: argparse.ArgumentParser) -> None:
    """How often and how many orders are passed."""
    g = p.add_argument_group("pace")
    g.add_argument(
        "--workers",
        type=int,
        default=4,
        help="orders passed at once; a pass mostly waits on the API server and the planner, "
        "so more workers than cores keep a burst or a restart moving (an order is never passed "
        "twice at once)",
    )
    g.add_argument(
        "--waiting-room-seconds",
        type=float,
        default=300.0,
        help="orders waiting for room are planned again together at least this often; otherwise only when "
        "the planner's ledger may have made room (a safety net, not the way waiting orders move)",
    )
    g.add_argument(
        "--resync-seconds",
        type=float,
        default=3600.0,
        help="every order gets a pass this often even when nothing changed, its plan judged again "
        "by the planner (replayed from the cache: no API call); a safety net only — changes "
        "arrive by watch and each wait names its own timer; 0: never",
    )


def parser() -> argparse.ArgumentParser:
    """The controller's flags, in groups (as `--help` shows them)."""
    p = argparse.ArgumentParser(
        prog="isvc-controller",
        description="Run the controller out of the cluster (kubeconfig) or in it (service account).",
    )
    _cluster(p)
    _models(p)
    _workload(p)
    _network(p)
    _shared_cards(p)
    _health(p)
    _serving(p)
    _pace(p)
    return p
