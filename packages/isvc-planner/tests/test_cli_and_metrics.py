"""The command line the module chart uses (issue 11); module/tests parse the rendered chart with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from isvc_planner import SOLVER_SECONDS, CallerCheck, Inventory, Planner, create_app
from isvc_planner._cli import _tls_files, parser
from prometheus_client import CollectorRegistry

CALLER = "system:serviceaccount:d8-isvc:controller"


def test_serve_accepts_the_flags_the_chart_passes() -> None:
    args = parser().parse_args(
        [
            "serve",
            "--host=0.0.0.0",
            "--port=8080",
            "--metrics-port=9090",
            "--metrics-host=127.0.0.1",
            "--tls-cert-dir=/etc/isvc/planner-tls",
            "--log-level=info",
            "--allowed-caller=system:serviceaccount:d8-isvc:controller",
        ]
    )

    actual = (args.command, args.port, args.metrics_port, args.metrics_host, args.log_level)
    assert actual == ("serve", 8080, 9090, "127.0.0.1", "info")


def test_log_level_takes_the_module_setting_in_any_case() -> None:
    args = parser().parse_args(["serve", "--log-level=Warn", "--allowed-caller=system:serviceaccount:a:b"])
    assert args.log_level == "warn"


def test_an_unknown_log_level_is_refused() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--log-level=trace", "--allowed-caller=system:serviceaccount:a:b"])


def test_the_solvers_budget_is_a_flag_between_zero_and_a_minute() -> None:
    args = parser().parse_args(["serve", "--allowed-caller", CALLER, "--solver-seconds", "0.5"])
    assert args.solver_seconds == 0.5
    assert parser().parse_args(["serve", "--allowed-caller", CALLER]).solver_seconds == SOLVER_SECONDS
    for bad in ("-1", "61", "soon"):
        with pytest.raises(SystemExit):
            parser().parse_args(["serve", "--allowed-caller", CALLER, "--solver-seconds", bad])


def test_each_solver_run_is_counted_by_its_outcome() -> None:
    registry = CollectorRegistry()
    planner = Planner(Inventory())
    create_app(planner, registry, caller=CallerCheck(lambda token: None, ()))
    assert planner.on_solver is not None
    planner.on_solver("limit")
    planner.on_solver("limit")
    planner.on_solver("optimal")
    assert registry.get_sample_value("isvc_planner_solver_runs_total", {"outcome": "limit"}) == 2
    assert registry.get_sample_value("isvc_planner_solver_runs_total", {"outcome": "optimal"}) == 1


def test_the_planner_serves_plain_http_on_loopback_alone_issue_29(tmp_path: Path) -> None:
    """The controller's bearer token goes with every call: off loopback the API needs a certificate."""
    on_pod = parser().parse_args(["serve", "--host=0.0.0.0", "--allowed-caller", CALLER])
    with pytest.raises(SystemExit, match="needs --tls-cert-dir"):
        _tls_files(on_pod)
    assert _tls_files(parser().parse_args(["serve", "--allowed-caller", CALLER])) == (None, None)

    with_dir = parser().parse_args(
        ["serve", "--host=0.0.0.0", f"--tls-cert-dir={tmp_path}", "--allowed-caller", CALLER]
    )
    with pytest.raises(SystemExit, match=r"tls\.crt is missing"):
        _tls_files(with_dir)
    (tmp_path / "tls.crt").write_text("cert")
    (tmp_path / "tls.key").write_text("key")
    assert _tls_files(with_dir) == (str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
