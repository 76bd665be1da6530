"""The module's docs as the Deckhouse module linter (dmt) reads them: markdownlint with dmt's rule settings.

dmt runs go-markdownlint over module/docs with every rule on but those `deckhouseMarkdownlintConfig` turns off
or tunes (deckhouse/dmt at 3599840, `pkg/linters/docs/rules/markdown.go`); the same settings are given to
PyMarkdown, which implements markdownlint's rules. One reading of go-markdownlint's PyMarkdown lacks: a code
span broken over two lines counts as "spaces inside code span elements" (MD038), so that is checked here too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pymarkdown.api import PyMarkdownApi

DOCS = Path(__file__).resolve().parents[2] / "module" / "docs"
# dmt's overrides: rules it turns off, and the settings it gives the rest.
SETTINGS = {
    "plugins": {
        "md004": {"enabled": False},
        "md032": {"enabled": False},
        "md033": {"enabled": False},
        "md051": {"enabled": False},
        "md013": {"line_length": 1000, "heading_line_length": 128, "code_block_line_length": 400},
        "md024": {"siblings_only": True},
        "md026": {"punctuation": ".,;:!。，；：！"},
        "md029": {"style": "one_or_ordered"},
        "md041": {"level": 1},
    }
}
FENCE = re.compile(r"^\s*(```|~~~)")


def test_the_docs_pass_markdownlint_with_dmts_settings(tmp_path: Path) -> None:
    config = tmp_path / "pymarkdown.json"
    config.write_text(json.dumps(SETTINGS))
    result = PyMarkdownApi().configuration_file_path(str(config)).scan_path(str(DOCS))
    found = [
        f"{Path(f.scan_file).name}:{f.line_number}: {f.rule_id} {f.rule_description}{f.extra_error_information}"
        for f in result.scan_failures
    ]
    assert found == [], "\n".join(found)


def _prose(text: str) -> list[str]:
    """The paragraphs of a Markdown file outside fenced code blocks, each joined into one line with `\\n`."""
    paragraphs, current, fenced = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            current = []
            continue
        if fenced:
            continue
        if line.strip() == "" or line.lstrip().startswith("|"):
            if current:
                paragraphs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


@pytest.mark.parametrize("doc", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_no_code_span_is_broken_over_two_lines(doc: Path) -> None:
    """go-markdownlint's MD038 (spaces inside code span elements) flags a span whose text wraps."""
    broken = []
    for paragraph in _prose(doc.read_text()):
        for span in re.finditer(r"(`+)(.+?)\1", paragraph, re.S):
            if "\n" in span.group(2):
                broken.append(span.group(0).replace("\n", "⏎"))
    assert broken == []
