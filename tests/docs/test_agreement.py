"""The pages a user reads agree with each other and with the code: hosts, the token Secret, the Hub token's
environment, and the phase each reason gives (issue 31: CONFIGURATION said `<order>-<namespace>` where the
module publishes `<order>--<namespace>`, and the user guide put HF_TOKEN in the runtime container).

Runs without a cluster: `python -m pytest tests/docs -q` from the repository root.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from isvc_api import Phase, Reason
from isvc_workload import (
    AUTH_SECRET_KEY,
    CONTAINER_NAME,
    FETCH_CONTAINER_NAME,
    HF_TOKEN_ENV,
    WorkloadSettings,
    auth_secret_name,
    external_host,
)

DOCS = Path(__file__).resolve().parents[2] / "module" / "docs"
PAGES = [f"{page}{lang}.md" for page in ("CONFIGURATION", "USER_GUIDE", "FAQ") for lang in ("", ".ru")]
# What the pages call an order and its namespace in a pattern, in either language.
_ORDER = r"(?:order|заказ)"
_HOST = re.compile(rf"<{_ORDER}>(-+)<namespace>")
_EXAMPLE_HOST = re.compile(r"https://support-llm(-+)support\.")
_SECRET = re.compile(rf"[{{<]{_ORDER}[}}>](-\w+)`")
# Other children named `<order>-<suffix>`: the PodMetrics of the autoscaler (isvc-workload `_autoscaler`).
_NOT_SECRETS = {"-waiting", "-cache"}
# A sentence (up to its full stop) that names the Hub token's variable.
_HF_SENTENCE = re.compile(rf"[^.]*`{HF_TOKEN_ENV}`[^.]*\.", re.S)
# How a page would say the runtime's own container gets it.
_RUNTIME_CONTAINER = re.compile(r"runtime container|контейнере? среды исполнения", re.I)


def _read(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def _separator() -> str:
    """What the module puts between an order's name and its namespace in a published host (the code's)."""
    host = external_host("o", "ns", WorkloadSettings(public_domain_template="%s.example.com"))
    return host.removeprefix("o").removesuffix("ns.example.com")


@pytest.mark.parametrize("page", PAGES)
def test_every_host_a_page_states_is_the_one_the_module_publishes(page: str) -> None:
    text = _read(page)
    stated = _HOST.findall(text) + _EXAMPLE_HOST.findall(text)
    assert all(sep == _separator() for sep in stated), f"{page} states a host with {stated}"


def test_the_pages_that_state_the_host_pattern_are_the_configuration_and_the_guide() -> None:
    stating = {page for page in PAGES if _HOST.search(_read(page))}
    assert {"CONFIGURATION.md", "CONFIGURATION.ru.md", "USER_GUIDE.md", "USER_GUIDE.ru.md"} <= stating


@pytest.mark.parametrize("page", PAGES)
def test_every_token_secret_a_page_names_is_the_modules(page: str) -> None:
    suffix = auth_secret_name("o").removeprefix("o")
    found = [f for f in _SECRET.findall(_read(page)) if f not in _NOT_SECRETS]
    assert all(f == suffix for f in found), f"{page}: {found}"
    assert AUTH_SECRET_KEY == "token"  # what the pages' `{.data.token}` reads


@pytest.mark.parametrize("page", PAGES)
def test_no_page_puts_the_hub_token_in_the_runtime_container(page: str) -> None:
    """The workload gives HF_TOKEN to its download step only (isvc-workload `_fetch_container`); the
    runtime reads the model offline from the volume."""
    for sentence in _HF_SENTENCE.findall(_read(page)):
        assert not _RUNTIME_CONTAINER.search(sentence), f"{page}: {sentence.strip()}"
    assert (CONTAINER_NAME, FETCH_CONTAINER_NAME) == ("server", "fetch-model")


def test_the_guide_and_the_configuration_say_where_the_hub_token_goes_in_both_languages() -> None:
    for page in ("CONFIGURATION.md", "CONFIGURATION.ru.md", "USER_GUIDE.md", "USER_GUIDE.ru.md"):
        assert _HF_SENTENCE.search(_read(page)), f"{page} says nothing of {HF_TOKEN_ENV}"


# ---------------------------------------------------------------- the phase each reason gives

_PHASES = "|".join(p.value for p in Phase)


def _phase_table(page: str) -> dict[str, tuple[list[str], list[str]]]:
    """The FAQ's phase table: reason → (phases before it first served, phases while it serves)."""
    text = _read(page)
    heading = (
        "### Which phase each reason gives" if page == "FAQ.md" else "### Какое состояние даёт каждая причина"
    )
    section = text[text.index(heading) : text.index("\n### ", text.index(heading) + 1)]
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in section.splitlines():
        match = re.match(r"^\|\s*`(\w+)`\s*\|(.*)\|(.*)\|\s*$", line)
        if match:
            before, serving = (
                re.findall(rf"`({_PHASES})`", cell) for cell in (match.group(2), match.group(3))
            )
            rows[match.group(1)] = (before, serving)
    return rows


@pytest.mark.parametrize("page", ["FAQ.md", "FAQ.ru.md"])
def test_the_faqs_phase_table_lists_every_reason_once(page: str) -> None:
    table = _phase_table(page)
    assert sorted(table) == sorted(r.value for r in Reason)


def test_the_phase_tables_agree_in_both_languages_and_with_the_rule() -> None:
    """Before an order first served every refusal is Pending; while its workload answers it is Ready or
    Degraded (it serves), and Failed only when it stopped answering."""
    english, russian = _phase_table("FAQ.md"), _phase_table("FAQ.ru.md")
    assert english == russian
    for reason, (before, serving) in english.items():
        assert before in ([], ["Pending"]), reason
        assert serving and serving[0] in ("Ready", "Degraded", "Failed"), reason
    assert english["ServiceUnhealthy"] == ([], ["Failed"])
    assert english["ClassNotFound"] == (["Pending"], ["Degraded"])
    assert english["LaunchPlanInForce"] == ([], ["Ready"])
