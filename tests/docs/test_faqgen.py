"""tools/faqgen.py: kubectl-isvc's shipped FAQ data is what module/docs/FAQ*.md say now, and a FAQ that leaves
a reason out is refused naming it."""

from __future__ import annotations

import importlib.util
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "module" / "docs"


def _faqgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("faqgen", ROOT / "tools" / "faqgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_data_is_what_the_faq_says_now() -> None:
    """Drift check, like the CRDs': regenerate with `python tools/faqgen.py` from the root."""
    faqgen = _faqgen()
    shipped = resources.files("kubectl_isvc").joinpath("faq.json").read_text(encoding="utf-8")
    assert faqgen.dump(faqgen.build_faq(DOCS)) == shipped


def test_a_faq_without_a_reasons_section_is_refused_naming_it(tmp_path: Path) -> None:
    for name in ("FAQ.md", "FAQ.ru.md"):
        (tmp_path / name).write_text((DOCS / name).read_text(encoding="utf-8"), encoding="utf-8")
    text = (tmp_path / "FAQ.md").read_text(encoding="utf-8")
    (tmp_path / "FAQ.md").write_text(
        text.replace("### My order says CatalogKindNotServed", "### Gone"), encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"FAQ\.md: section for CatalogKindNotServed"):
        _faqgen().build_faq(tmp_path)
