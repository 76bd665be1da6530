"""Where an order's replicas run is said one way everywhere (issue 40): the first on its plan's devices, every
further one on any free device of the plan's shape; never that replicas share the plan's devices or node."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "module" / "docs"
SAID = {
    "en": "any free device of the plan's shape",
    "ru": "любое свободное устройство той же формы, что в плане",
}
NOT_SAID = {
    "en": [
        "runs on the devices of its plan",
        "pinned to the devices of its plan",
        "all replicas of an order run on one node",
        "Every replica takes a device of the same device class",
    ],
    "ru": [
        "работают на устройствах его плана",
        "привязанного к устройствам его плана",
        "все реплики заказа работают на одном узле",
        "Каждая копия берёт устройство того же класса",
    ],
}
PAGES = ["USER_GUIDE", "FAQ", "CONFIGURATION", "RELEASE_NOTES"]


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", ["en", "ru"])
def test_each_page_says_where_replicas_run_one_way(page: str, lang: str) -> None:
    text = re.sub(r"\s+", " ", (DOCS / f"{page}{'' if lang == 'en' else '.ru'}.md").read_text())
    assert SAID[lang] in text
    assert [old for old in NOT_SAID[lang] if old in text] == []
