"""Generate kubectl-isvc's `faq.json` from module/docs/FAQ.md and FAQ.ru.md (the reasons table and the section
of each reason): `python tools/faqgen.py` from the repository root, `--check` to fail on drift (`nox -s lint`).

Build-time only: the plugin ships the data (`kubectl_isvc._faq`), not this Markdown reader.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from isvc_api import Reason, StatusReason
from kubectl_isvc._faq import DATA, Advice, Faq, FaqEntry, Lang, StatusEntry, Who

__all__ = ["build_faq", "dump", "main"]

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "packages" / "kubectl-isvc" / "src" / "kubectl_isvc" / DATA
FAQS = {"en": "FAQ.md", "ru": "FAQ.ru.md"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]+\)")
_ROW = re.compile(r"^\|\s*`(\w+)`\s*\|(.*)\|\s*$")


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rules) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _plain(text: str) -> str:
    """Inline Markdown made terminal text: links become their words, emphasis marks go."""
    text = _LINK.sub(r"\1", text)
    text = text.replace("**", "")
    return re.sub(r"(?<![\w*`])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", text)


def _named(text: str, names: list[str]) -> str | None:
    """The first of `names` that occurs in `text` as a whole word."""
    found = [
        (m.start(), n)
        for n in names
        if (m := re.search(rf"(?<![A-Za-z]){re.escape(n)}(?![A-Za-z])", text)) is not None
    ]
    return min(found)[1] if found else None


def _rows(markdown: str) -> dict[str, list[str]]:
    """Table rows that start with a `Reason` in backticks: the reason → its other cells (first table wins)."""
    rows: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        match = _ROW.match(line)
        if match and match.group(1) not in rows:
            rows[match.group(1)] = [_plain(c.strip()) for c in match.group(2).split("|")]
    return rows


def _blocks(lines: list[str]) -> list[str]:
    """Paragraphs of a section: prose joined into one line, list items one per line, code kept indented."""
    blocks: list[str] = []
    current: list[str] = []
    fenced = False

    def flush() -> None:
        if current:
            blocks.append("\n".join(current))
            current.clear()

    for raw in lines:
        if _FENCE.match(raw):
            flush()
            fenced = not fenced
            continue
        if fenced:
            current.append("    " + raw.strip())
            continue
        line = raw.strip()
        if not line:
            flush()
        elif line.startswith(("- ", "* ")):
            current.append("- " + _plain(line[2:].strip()))
        elif current and not current[-1].startswith("    "):
            current[-1] += " " + _plain(line)
        else:
            current.append(_plain(line))
    flush()
    return blocks


def _sections(markdown: str) -> dict[str, Advice]:
    """FAQ sections about one reason: a heading naming it, then an italic line (condition, whose, passes)."""
    names = [r.value for r in Reason]
    out: dict[str, Advice] = {}
    heading: str | None = None
    body: list[str] = []
    fenced = False

    def close() -> None:
        if heading is None:
            return
        reason = _named(heading, names)
        text = list(body)
        while text and not text[0].strip():
            text.pop(0)
        if reason is None or reason in out or not text or not re.match(r"^\*[^*].*\*$", text[0].strip()):
            return
        out[reason] = Advice(
            title=_plain(heading),
            anchor=_slug(heading),
            summary=_plain(text[0].strip()),
            paragraphs=_blocks(text[1:]),
        )

    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            close()
            heading, body = match.group(2), []
        else:
            body.append(line)
    close()
    return out


def _who(whose: str) -> Who:
    """The one word for the FAQ's 'whose fix' cell (English)."""
    first = whose.lower()
    if "message says" in first:
        return Who.DEPENDS
    if first.startswith("yours"):
        return Who.USER
    if first.startswith(("administrator", "platform")):
        return Who.ADMINISTRATOR
    if first.startswith(("nobody", "usually nobody", "wait")):
        return Who.WAIT
    return Who.DEPENDS


def build_faq(docs: Path) -> Faq:
    """Read the English and Russian FAQ pages under `docs` into the shipped data; a reason missing from
    either page's table or sections is an error naming it."""
    texts = {lang: (docs / FAQS[lang]).read_text(encoding="utf-8") for lang in Lang}
    rows = {lang: _rows(texts[lang]) for lang in Lang}
    sections = {lang: _sections(texts[lang]) for lang in Lang}
    missing = [
        f"{FAQS[lang]}: {what} for {r.value}"
        for lang in Lang
        for r in Reason
        for what, table in (("table row", rows[lang]), ("section", sections[lang]))
        if r.value not in table
    ]
    missing += [
        f"{FAQS[lang]}: table row for {r.value}"
        for lang in Lang
        for r in StatusReason
        if r.value not in rows[lang]
    ]
    if missing:
        raise ValueError("the FAQ does not cover every reason: " + "; ".join(missing))
    reasons = {
        r.value: FaqEntry(
            reason=r.value,
            condition=rows[Lang.EN][r.value][0],
            who=_who(rows[Lang.EN][r.value][1]),
            whose={lang: rows[lang][r.value][1] for lang in Lang},
            passes={lang: rows[lang][r.value][2] for lang in Lang},
            advice={lang: sections[lang][r.value] for lang in Lang},
        )
        for r in Reason
    }
    status_reasons = {
        r.value: StatusEntry(
            reason=r.value,
            condition={lang: rows[lang][r.value][0] for lang in Lang},
            meaning={lang: rows[lang][r.value][1] for lang in Lang},
        )
        for r in StatusReason
    }
    return Faq(
        docs={lang: f"module/docs/{FAQS[lang]}" for lang in Lang},
        reasons=reasons,
        status_reasons=status_reasons,
    )


def dump(faq: Faq) -> str:
    """The data file's text: stable, so a regenerated file differs only where the FAQ did."""
    return json.dumps(faq.model_dump(mode="json"), ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Regenerate faq.json from the FAQ pages, or with --check say whether it has drifted."""
    parser = argparse.ArgumentParser(prog="python tools/faqgen.py", description=main.__doc__)
    parser.add_argument("--docs", type=Path, default=ROOT / "module" / "docs", help="the docs directory")
    parser.add_argument("--check", action="store_true", help="fail if faq.json differs from the FAQ")
    args = parser.parse_args(argv)
    text = dump(build_faq(args.docs))
    if args.check:
        if not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text:
            print(
                f"{TARGET} has drifted from {args.docs}/FAQ*.md: run python tools/faqgen.py", file=sys.stderr
            )
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
