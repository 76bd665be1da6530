"""The alert rules and the dashboard read metrics the code exports (issue 11, item 5).

Each name in monitoring/ (less the `_total`/`_bucket`/`_sum`/`_count` a client adds) must be registered by
a `Counter(`, `Gauge(` or `Histogram(` call in packages/*/src, except the names still to be exported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "module" / "monitoring"

_REGISTERED = re.compile(
    r"""(?:Counter|Gauge|Histogram|GaugeMetricFamily|CounterMetricFamily)\(\s*["'](isvc_[a-z_]+)["']"""
)
_USED = re.compile(r"\b(isvc_[a-z_]+)\b")
_SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def _registered() -> set[str]:
    names: set[str] = set()
    for source in ROOT.glob("packages/*/src/**/*.py"):
        names.update(_REGISTERED.findall(source.read_text(encoding="utf-8")))
    return names


def _base(name: str, known: set[str]) -> str:
    if name in known:
        return name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in known:
            return name.removesuffix(suffix)
    return name


def _exprs() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((MONITORING / "prometheus-rules").iterdir())]
    for dashboard in sorted((MONITORING / "grafana-dashboards").rglob("*.json")):
        for panel in json.loads(dashboard.read_text(encoding="utf-8"))["panels"]:
            texts += [t["expr"] for t in panel.get("targets", [])]
    return texts


def test_every_metric_in_the_rules_and_the_dashboard_is_exported() -> None:
    known = _registered()
    used = {_base(name, known) for text in _exprs() for name in _USED.findall(text)}
    # names in prose and commands (isvc-controller, isvc_namespace) are not metrics
    used -= {"isvc_namespace"}
    assert set() == used - known


def test_the_metrics_the_rules_were_written_for_are_registered() -> None:
    expected = {
        "isvc_reconcile_total",
        "isvc_reconcile_duration_seconds",
        "isvc_orders_waiting_for_room",
        "isvc_health_probe_duration_seconds",
        "isvc_health_probes",
        "isvc_planner_plans",
        "isvc_planner_plan_duration_seconds",
        "isvc_planner_inventory_synced",
        "isvc_orders",
    }
    assert set() == expected - _registered()


def test_every_dashboard_panel_reads_the_deckhouse_prometheus_datasource_and_has_its_own_id() -> None:
    datasource = {"type": "prometheus", "uid": "${ds_prometheus}"}
    for dashboard in sorted((MONITORING / "grafana-dashboards").rglob("*.json")):
        panels = json.loads(dashboard.read_text(encoding="utf-8"))["panels"]
        ids = [p["id"] for p in panels]
        assert len(ids) == len(set(ids)), dashboard
        for panel in panels:
            if panel["type"] != "row":
                assert datasource == panel["datasource"], panel["title"]
