"""The command line the module chart uses (issue 11); module/tests parse the rendered chart with it."""

from __future__ import annotations

import pytest
from isvc_planner._cli import parser


def test_serve_accepts_the_flags_the_chart_passes() -> None:
    args = parser().parse_args(
        [
            "serve",
            "--host=0.0.0.0",
            "--port=8080",
            "--metrics-port=9090",
            "--metrics-host=127.0.0.1",
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
