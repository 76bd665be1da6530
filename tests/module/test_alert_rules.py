"""The alert rules as the chart renders them, checked by Prometheus's own code (issue 11, item 5).

Each PrometheusRule's `spec.groups` is written to a rule file, as prometheus-operator hands it to Prometheus,
and `isvc-rulecheck` (tools/rulecheck, built from Prometheus's packages by e2e/tools/build-bins.sh) loads
the files with model/rulefmt and evaluates the alerts with the rules manager and the PromQL engine over the
series of its cases (tools/rulecheck/cases.go). The deliberate breaks below show the check fails when a rule
is wrong.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

MODULE = Path(__file__).resolve().parents[2] / "module"
PROMETHEUS_RULE = "monitoring.coreos.com/v1/PrometheusRule"


Render = Callable[..., list[dict[str, Any]]]


def _rule_objects(render: Render) -> list[dict[str, Any]]:
    return [d for d in render(api_versions=(PROMETHEUS_RULE,)) if d["kind"] == "PrometheusRule"]


def _write(objects: list[dict[str, Any]], into: Path) -> Path:
    into.mkdir()
    for obj in objects:
        groups = {"groups": obj["spec"]["groups"]}  # what prometheus-operator writes for Prometheus to load
        (into / f"{obj['metadata']['name']}.yaml").write_text(yaml.safe_dump(groups, sort_keys=False))
    return into


def _check(rulecheck: str, rules: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([rulecheck, "-rules", str(rules)], capture_output=True, text=True, timeout=300)


def _rule(objects: list[dict[str, Any]], alert: str) -> dict[str, Any]:
    for obj in objects:
        for group in obj["spec"]["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == alert:
                    return rule  # type: ignore[no-any-return]
    raise AssertionError(f"no alert {alert} rendered")


def test_every_rule_file_renders_one_prometheus_rule(render: Render) -> None:
    files = sorted(p.name.split(".")[0] for p in (MODULE / "monitoring" / "prometheus-rules").iterdir())
    assert [f"isvc-{f}" for f in files] == sorted(o["metadata"]["name"] for o in _rule_objects(render))


def test_the_rendered_rules_load_in_prometheus_and_pass_every_case(
    render: Render, rulecheck: str, tmp_path: Path
) -> None:
    result = _check(rulecheck, _write(_rule_objects(render), tmp_path / "rules"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok   parse: 4 files, 9 alerting rules" in result.stdout
    assert "FAIL" not in result.stdout


# (alert, field, text in it, replacement, a line the check must print)
BREAKS = [
    (
        "D8IsvcOrdersNotReady",
        "for",
        "30m",
        "25m",
        "FAIL D8IsvcOrdersNotReady: an order Pending with NoCapacity for 29 minutes, then Ready, stays quiet: "
        "fires at 25m0s",
    ),
    (
        "D8IsvcOrdersNotReady",
        "for",
        "30m",
        "35m",
        "FAIL D8IsvcOrdersNotReady: an order Pending with NoCapacity for 31 minutes fires: at 31m0s expected",
    ),
    (
        "D8IsvcControllerTargetDown",
        "expr",
        "== 0",
        "== 1",
        "FAIL D8IsvcControllerTargetDown: the controller down for 6 minutes fires",
    ),
    (
        "D8IsvcReconcileErrors",
        "expr",
        "> 0.2",
        "> 0.4",
        "FAIL D8IsvcReconcileErrors: 3 failed order passes in 10 for 16 minutes fire",
    ),
    (
        "D8IsvcPlannerRefusingMostRequests",
        "expr",
        ">= 10",
        ">= 1",
        "FAIL D8IsvcPlannerRefusingMostRequests: every plan refused, but fewer than 10 in 15 minutes",
    ),
    (
        "D8IsvcModelCacheFull",
        "for",
        "5m",
        "3m",
        "FAIL D8IsvcModelCacheFull: a file refused for room 4 minutes ago stays quiet: fires at 9m0s",
    ),
    (
        "D8IsvcModelCacheFull",
        "expr",
        'result="Full"',
        'result="Miss"',
        "FAIL D8IsvcModelCacheFull: an hour of hits and misses and no refusal stays quiet: fires at",
    ),
    ("D8IsvcOrdersNotReady", "expr", "> 0", "> 0)", "could not parse expression"),
    (
        "D8IsvcPlannerTargetDown",
        "alert",
        "D8IsvcPlannerTargetDown",
        "D8IsvcPlannerUnreachable",
        "FAIL coverage: alert D8IsvcPlannerUnreachable: no case makes it fire",
    ),
]


@pytest.mark.parametrize(
    ("alert", "field", "old", "new", "expected"), BREAKS, ids=[f"{b[0]}-{b[1]}-{b[3]}" for b in BREAKS]
)
def test_a_broken_rule_fails_the_check(
    render: Render, rulecheck: str, tmp_path: Path, alert: str, field: str, old: str, new: str, expected: str
) -> None:
    objects = _rule_objects(render)
    rule = _rule(objects, alert)
    assert old in str(rule[field])
    rule[field] = str(rule[field]).replace(old, new)
    result = _check(rulecheck, _write(objects, tmp_path / "rules"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
