"""CONFIGURATION (EN, RU) says what each mode of the GPU driver needs and gives: one row per mode, the same
modes in both languages (issue 41)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "module" / "docs"
MODES = ["Whole", "StaticMIG", "DynamicMIG", "Shares=N", "Shares=memory", "Shares=unlimited"]
HEADINGS = {
    "CONFIGURATION.md": "## What the GPU driver must publish",
    "CONFIGURATION.ru.md": "## Что должен публиковать драйвер GPU",
}


def _modes(name: str) -> list[str]:
    text = (DOCS / name).read_text()
    section = text.split(HEADINGS[name], 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE)


@pytest.mark.parametrize("name", sorted(HEADINGS))
def test_the_driver_table_names_every_mode_once(name: str) -> None:
    assert _modes(name) == MODES


@pytest.mark.parametrize("name", sorted(HEADINGS))
def test_each_mode_says_its_driver_values_and_kubernetes_features(name: str) -> None:
    text = (DOCS / name).read_text().split(HEADINGS[name], 1)[1].split("\n## ", 1)[0]
    for gate in (
        "DynamicMIG",
        "ConsumableShares",
        "DRAPartitionableDevices",
        "DRAConsumableCapacity",
        "DRAPrioritizedList",
    ):
        assert gate in text, gate
    assert "v0.4.1" in text and "consumableShares" in text
