"""The entry point: output formats, colour only on a terminal, the locale, and exit codes for scripts."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from importlib.metadata import entry_points
from typing import Any

import pytest
import yaml
from kubectl_isvc import run

NOW = datetime(2026, 5, 1, 10, 5, tzinfo=UTC)
CRD = "/apis/ai.deckhouse.io/v1alpha1/namespaces/team-a"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cluster(recorded: Any, data: Any) -> Any:
    orders = data("orders.yaml")
    objects: dict[str, Any] = {
        f"{CRD}/inferenceservices/{c['order']['metadata']['name']}": c["order"] for c in orders.values()
    }
    objects[f"{CRD}/launchplans/support-llm"] = orders["serving"]["plan"]
    return recorded(objects)


def _run(
    cluster: Any, *argv: str, out: io.StringIO | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    stream = out if out is not None else io.StringIO()
    code = run(list(argv), lambda args: cluster, stream, env or {"LANG": "C.UTF-8"}, NOW)
    return code, stream.getvalue()


@pytest.mark.parametrize(("name", "code"), [("support-llm", 0), ("nocap-3", 1), ("fresh", 2), ("missing", 2)])
def test_why_exits_0_serving_1_refused_2_could_not_tell(cluster: Any, name: str, code: int) -> None:
    assert _run(cluster, "why", name)[0] == code


def test_json_and_yaml_carry_the_same_record(cluster: Any) -> None:
    code, text = _run(cluster, "why", "nocap-3", "-o", "json")
    record = json.loads(text)
    assert (code, record["exitCode"], record["reason"], record["faq"]["who"]) == (1, 1, "NoCapacity", "wait")
    assert record["conditions"][2] == {
        "type": "Planned",
        "status": "False",
        "reason": "NoCapacity",
        "lastTransitionTime": "2026-05-01T10:00:02Z",
        "message": record["message"],
    }
    assert yaml.safe_load(_run(cluster, "why", "nocap-3", "-o", "yaml")[1]) == record


def test_colour_only_on_a_terminal_and_never_with_no_color(cluster: Any) -> None:
    assert "\033[" not in _run(cluster, "why", "nocap-3")[1]
    assert "\033[31mFalse\033[0m" in _run(cluster, "why", "nocap-3", out=Tty())[1]
    assert "\033[" not in _run(cluster, "why", "nocap-3", out=Tty(), env={"NO_COLOR": "1"})[1]
    assert "\033[" in _run(cluster, "why", "nocap-3", "--color", "always")[1]
    assert "\033[" not in _run(cluster, "why", "nocap-3", "-o", "json", out=Tty())[1]


@pytest.mark.parametrize(
    ("env", "title"),
    [
        ({"LANG": "ru_RU.UTF-8"}, "Заказ сообщает NoCapacity"),
        ({"LC_ALL": "en_US.UTF-8", "LANG": "ru_RU.UTF-8"}, "My order says NoCapacity"),
        ({"LC_MESSAGES": "ru_RU.UTF-8", "LANG": "en_US.UTF-8"}, "Заказ сообщает NoCapacity"),
        ({}, "My order says NoCapacity"),
    ],
)
def test_the_locale_chooses_the_faqs_language(cluster: Any, env: dict[str, str], title: str) -> None:
    record = json.loads(_run(cluster, "why", "nocap-3", "-o", "json", env=env or {"X": "1"})[1])
    assert record["faq"]["title"] == title


def test_lang_overrides_the_locale(cluster: Any) -> None:
    record = json.loads(
        _run(cluster, "why", "nocap-3", "-o", "json", "--lang", "ru", env={"LANG": "en_US"})[1]
    )
    assert record["lang"] == "ru"


def test_the_namespace_defaults_to_the_contexts(cluster: Any) -> None:
    _run(cluster, "why", "nocap-3")
    assert cluster.calls[0] == ("get", f"{CRD}/inferenceservices/nocap-3", {})
    assert _run(cluster, "why", "nocap-3", "-n", "team-b")[0] == 2  # not there


def test_bad_usage_exits_2(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(cluster, "why")[0] == 2
    assert _run(cluster, "nonsense")[0] == 2
    assert _run(cluster, "why", "x", "-o", "table")[0] == 2
    assert "usage: kubectl isvc" in capsys.readouterr().err


def test_help_exits_0(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(cluster, "--help")[0] == 0
    out = capsys.readouterr().out
    assert "  0  serving" in out and "  1  refused" in out and "  2  could not tell" in out


def test_estimate_and_capacity_exit_codes_follow_their_answer(recorded: Any) -> None:
    planned = recorded(warnings=["isvc-estimate: verdict=Planned", "isvc-estimate: endpointType=Chat"])
    assert _run(planned, "estimate", "Qwen/Qwen2.5-7B-Instruct", "--class", "default-llm")[0] == 0
    refused = recorded(
        warnings=[
            "isvc-estimate: verdict=Refused",
            "isvc-estimate: reason=ClassNotFound",
            "isvc-estimate: condition=ClassResolved",
        ]
    )
    code, text = _run(refused, "estimate", "m/x", "--class", "nope")
    assert (
        code == 1
        and "ClassResolved — False: ClassNotFound" not in text
        and "ClassResolved is False: ClassNotFound" in text
    )
    assert _run(recorded(), "estimate", "m/x")[0] == 2
    assert _run(recorded(), "capacity")[0] == 0
    assert _run(recorded(denied={"/apis/resource.k8s.io/v1/resourceslices": "forbidden"}), "capacity")[0] == 2


def test_kubectl_finds_the_plugin_by_its_console_script() -> None:
    [script] = [e for e in entry_points(group="console_scripts") if e.name == "kubectl-isvc"]
    assert script.value == "kubectl_isvc._cli:main"
