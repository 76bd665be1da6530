"""The user documentation keeps its promises: every refusal reason has its FAQ entry, in both languages.

Runs without a cluster: `python -m pytest tests/docs -q` from the repository root.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_api import ClassReason, Reason, StatusReason
from isvc_runtime_recipes import load_recipes

DOCS = Path(__file__).resolve().parents[2] / "module" / "docs"
FAQS = ("FAQ.md", "FAQ.ru.md")
PAGES = (
    "README",
    "USER_GUIDE",
    "FAQ",
    "CONFIGURATION",
    "RECIPES",
    "EXAMPLES",
    "SCENARIO",
    "RELEASE_NOTES",
    "SECURITY",
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def headings(markdown: str) -> list[str]:
    """ATX headings of a Markdown text, skipping fenced code (where `#` starts a comment)."""
    found: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        match = _HEADING.match(line)
        if match:
            found.append(match.group(2))
    return found


def names_in(text: str, name: str) -> bool:
    """Whether `name` occurs in `text` as a whole word (ClassNotReady is not ClassNotReadyYet)."""
    return re.search(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", text) is not None


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rules) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor of a page, numbering repeated headings as renderers do."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in headings(markdown):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def fragment_links(markdown: str) -> list[tuple[str, str]]:
    """(page, fragment) pairs of relative links that point into a page; page is "" for this one."""
    pairs: list[tuple[str, str]] = []
    for target in _LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        page, fragment = target.split("#", 1)
        pairs.append((page, fragment))
    return pairs


def local_links(markdown: str) -> list[str]:
    """Relative link targets of a Markdown text, without their #fragment."""
    targets: list[str] = []
    for target in _LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def _read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- the helpers themselves


def test_headings_skip_comments_inside_fenced_code() -> None:
    text = "# Title\n\n```yaml\n# ClassNotFound is a comment here\nkey: v\n```\n## Real ## \n"
    assert headings(text) == ["Title", "Real"]


def test_a_reason_name_inside_a_longer_word_does_not_count() -> None:
    assert not names_in("ModelNotReadyYet", "ModelNotReady")
    assert names_in("My order says `ModelNotReady`.", "ModelNotReady")


def test_local_links_ignore_urls_and_fragments() -> None:
    text = "[a](FAQ.md#x) [b](https://example.com/y.md) [c](#top) [d](../packages/p/README.md)"
    assert local_links(text) == ["FAQ.md", "../packages/p/README.md"]


def test_slugs_follow_the_renderer() -> None:
    assert slug("Which layer answers what: the API server or the order status?") == (
        "which-layer-answers-what-the-api-server-or-the-order-status"
    )
    assert slug("`catalog.mode`") == "catalogmode"
    assert slug("Если заказ перерос свой том модели") == "если-заказ-перерос-свой-том-модели"
    assert anchors("## A\n## A\n") == {"a", "a-1"}


# ---------------------------------------------------------------- the pages


@pytest.mark.parametrize("faq", FAQS)
@pytest.mark.parametrize("reason", list(Reason), ids=str)
def test_every_reason_has_a_faq_heading(faq: str, reason: Reason) -> None:
    assert any(names_in(h, reason.value) for h in headings(_read(faq))), (
        f"{faq} has no heading naming {reason.value}"
    )


@pytest.mark.parametrize("faq", FAQS)
@pytest.mark.parametrize("reason", [*StatusReason, *ClassReason], ids=str)
def test_every_non_refusal_and_class_reason_is_explained(faq: str, reason: str) -> None:
    assert names_in(_read(faq), reason), f"{faq} never mentions {reason}"


@pytest.mark.parametrize("faq", FAQS)
@pytest.mark.parametrize(
    "event", ["SettledRegionTooSmall", "GrowthClaimUnplaced", "Moved", "OutOfService", "RuntimeErrors"]
)
def test_every_event_has_a_faq_heading(faq: str, event: str) -> None:
    assert any(names_in(h, event) for h in headings(_read(faq)))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_exists_in_english(page: str) -> None:
    assert (DOCS / f"{page}.md").is_file()


def test_every_english_page_has_a_russian_twin() -> None:
    english = {p.name for p in DOCS.glob("*.md") if not p.name.endswith(".ru.md")}
    missing = sorted(n for n in english if not (DOCS / n.replace(".md", ".ru.md")).is_file())
    assert missing == []


def test_every_russian_page_has_an_english_twin() -> None:
    russian = {p.name for p in DOCS.glob("*.ru.md")}
    orphans = sorted(n for n in russian if not (DOCS / n.replace(".ru.md", ".md")).is_file())
    assert orphans == []


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")), ids=str)
def test_relative_links_resolve(page: str) -> None:
    broken = [t for t in local_links(_read(page)) if t and not (DOCS / t).exists()]
    assert broken == []


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")), ids=str)
def test_links_to_sections_land_on_a_heading(page: str) -> None:
    broken = [
        f"{target}#{fragment}"
        for target, fragment in fragment_links(_read(page))
        if (target == "" or target.endswith(".md")) and fragment not in anchors(_read(target or page))
    ]
    assert broken == []


@pytest.mark.parametrize("index", ["README.md", "README.ru.md"])
def test_the_index_links_every_page(index: str) -> None:
    suffix = ".ru.md" if index.endswith(".ru.md") else ".md"
    linked = set(local_links(_read(index)))
    missing = [f"{p}{suffix}" for p in (*PAGES, "CR") if p != "README" and f"{p}{suffix}" not in linked]
    assert missing == []


@pytest.mark.parametrize("page", PAGES)
def test_russian_twins_link_russian_pages(page: str) -> None:
    english_links = [
        t
        for t in local_links(_read(f"{page}.ru.md"))
        if Path(t).parent == Path(".") and t.endswith(".md") and not t.endswith(".ru.md")
    ]
    assert english_links == []


@pytest.mark.parametrize(
    ("notes", "phrase"),
    [("RELEASE_NOTES.md", r"(\d+) refusal reasons"), ("RELEASE_NOTES.ru.md", r"(\d+) причин отказа")],
)
def test_release_notes_count_the_reasons_there_are(notes: str, phrase: str) -> None:
    counts = [int(n) for n in re.findall(phrase, _read(notes))]
    assert [len(Reason)] == counts


# ---------------------------------------------------------------- recipes the pages show


def _yaml_blocks(page: str) -> list[Any]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", _read(page), flags=re.S)]


def _settings_recipes(block: Any) -> list[dict[str, Any]] | None:
    """The runtimeRecipes of a ModuleConfig or of a bare settings fragment, if the block has any."""
    if not isinstance(block, dict):
        return None
    settings = block.get("spec", {}).get("settings", block) if block.get("kind") == "ModuleConfig" else block
    recipes = settings.get("runtimeRecipes")
    return recipes if isinstance(recipes, list) and recipes else None


@pytest.mark.parametrize("page", ["RECIPES.md", "RECIPES.ru.md", "CONFIGURATION.md", "CONFIGURATION.ru.md"])
def test_every_recipe_a_page_shows_loads(page: str) -> None:
    loaded = 0
    for block in _yaml_blocks(page):
        recipes = _settings_recipes(block)
        if recipes is None and isinstance(block, dict) and "runtime" in block and "args" in block:
            recipes = [block]
        if recipes is not None:
            load_recipes(recipes)
            loaded += 1
    assert loaded > 0


@pytest.mark.parametrize("page", ["RECIPES.md", "RECIPES.ru.md"])
def test_the_worked_example_adds_a_recipe_and_switches_a_shipped_one_off(page: str) -> None:
    examples = [r for b in _yaml_blocks(page) if (r := _settings_recipes(b)) is not None]
    assert len(examples) == 1
    shipped = {recipe.name for recipe in load_recipes()}
    book = {recipe.name for recipe in load_recipes(examples[0])}
    assert (book - shipped, shipped - book) == ({"vllm-chat-bnb"}, {"llamacpp-chat"})
