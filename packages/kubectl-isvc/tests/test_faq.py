"""The shipped FAQ data is the FAQ: generated from module/docs/FAQ.md and FAQ.ru.md, checked for drift."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest
from isvc_api import Reason, StatusReason
from kubectl_isvc import Lang, Who, build_faq, load_faq
from kubectl_isvc._faq import dump

DOCS = Path(__file__).resolve().parents[3] / "module" / "docs"


def test_the_shipped_data_is_what_the_faq_says_now() -> None:
    """Drift check, like the CRDs': regenerate with `python -m kubectl_isvc._faqgen` from the root."""
    shipped = resources.files("kubectl_isvc").joinpath("faq.json").read_text(encoding="utf-8")
    assert dump(build_faq(DOCS)) == shipped


@pytest.mark.parametrize("reason", list(Reason), ids=str)
@pytest.mark.parametrize("lang", list(Lang), ids=str)
def test_every_reason_has_whose_fix_and_what_to_do_in_both_languages(reason: Reason, lang: Lang) -> None:
    entry = load_faq().entry(reason.value)
    assert entry is not None
    advice = entry.advice[lang]
    assert reason.value in advice.title
    assert advice.paragraphs and all(p.strip() for p in advice.paragraphs)
    assert entry.whose[lang] and entry.passes[lang]
    if lang == Lang.RU:
        assert re.search("[а-яА-Я]", advice.paragraphs[0]), advice.paragraphs[0]


@pytest.mark.parametrize("reason", list(StatusReason), ids=str)
def test_every_reason_that_is_not_a_refusal_has_its_meaning(reason: StatusReason) -> None:
    entry = load_faq().status_reasons[reason.value]
    assert entry.meaning[Lang.EN] and entry.meaning[Lang.RU]


@pytest.mark.parametrize(
    ("reason", "who"),
    [
        (Reason.CLASS_NOT_FOUND, Who.USER),
        (Reason.AUTH_SECRET_NOT_FOUND, Who.USER),
        (Reason.NAMESPACE_NOT_ALLOWED, Who.ADMINISTRATOR),
        (Reason.QUANTIZATION_MISMATCH, Who.ADMINISTRATOR),  # the platform's: a recipe an administrator adds
        (Reason.NO_CAPACITY, Who.WAIT),
        (Reason.RESOURCE_CLAIM_PENDING, Who.WAIT),
        (Reason.NO_COMPATIBLE_PLACEMENT, Who.DEPENDS),
        (Reason.WORKLOAD_ERROR, Who.DEPENDS),
    ],
)
def test_whose_fix_in_one_word_follows_the_faq_table(reason: Reason, who: Who) -> None:
    entry = load_faq().entry(reason.value)
    assert entry is not None and entry.who == who


def test_markdown_becomes_terminal_text() -> None:
    entry = load_faq().entry(Reason.CLASS_NOT_FOUND.value)
    assert entry is not None
    text = "\n".join(entry.advice[Lang.EN].paragraphs)
    assert "](" not in text and "**" not in text
    assert "    kubectl get infsvc <name> -n <namespace>" in text  # code blocks stay, indented
    assert entry.advice[Lang.EN].anchor == "my-order-says-classnotfound"


def test_a_faq_without_a_reasons_section_is_refused_naming_it(tmp_path: Path) -> None:
    for name in ("FAQ.md", "FAQ.ru.md"):
        (tmp_path / name).write_text((DOCS / name).read_text(encoding="utf-8"), encoding="utf-8")
    text = (tmp_path / "FAQ.md").read_text(encoding="utf-8")
    (tmp_path / "FAQ.md").write_text(
        text.replace("### My order says CatalogKindNotServed", "### Gone"), encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"FAQ\.md: section for CatalogKindNotServed"):
        build_faq(tmp_path)
