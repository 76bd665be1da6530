"""The FAQ's answer for each reason — whose fix it is and what to do — as shipped data.

`faq.json` in this package is generated from `module/docs/FAQ.md` and `module/docs/FAQ.ru.md` by
`python tools/faqgen.py` (`--check` fails on drift, as `nox -s lint` runs it), so the plugin says the
FAQ's own words in either language without the docs being installed.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

__all__ = ["DATA", "Advice", "Faq", "FaqEntry", "Lang", "StatusEntry", "Who", "load_faq"]

DATA = "faq.json"


class Lang(StrEnum):
    """The languages the FAQ is written in."""

    EN = "en"
    RU = "ru"


class Who(StrEnum):
    """Whose fix a reason is, in one word (the FAQ's own words are kept beside it)."""

    USER = "user"  # yours: edit the order, create the Secret
    ADMINISTRATOR = "administrator"  # the class, the module settings, a recipe (the platform's)
    WAIT = "wait"  # nobody's: it passes on its own
    DEPENDS = "depends"  # the message says whose


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Advice(_Frozen):
    """One FAQ section: its heading, the italic summary line under it, and its paragraphs."""

    title: str
    anchor: str
    summary: str
    paragraphs: list[str]


class FaqEntry(_Frozen):
    """What the FAQ says about one refusal reason, in each language."""

    reason: str
    condition: str
    who: Who
    whose: dict[Lang, str]
    passes: dict[Lang, str]
    advice: dict[Lang, Advice]


class StatusEntry(_Frozen):
    """A reason that is not a refusal (a condition that holds, or cannot tell yet)."""

    reason: str
    condition: dict[Lang, str]
    meaning: dict[Lang, str]


class Faq(_Frozen):
    """Every reason's entry; `docs` names the pages they were generated from."""

    docs: dict[Lang, str]
    reasons: dict[str, FaqEntry]
    status_reasons: dict[str, StatusEntry]

    def entry(self, reason: str) -> FaqEntry | None:
        """The entry of a refusal reason, None for any other word."""
        return self.reasons.get(reason)


@cache
def load_faq() -> Faq:
    """The FAQ data shipped in the package."""
    text = resources.files("kubectl_isvc").joinpath(DATA).read_text(encoding="utf-8")
    return Faq.model_validate_json(text)
