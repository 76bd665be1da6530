"""ARCHITECTURE.md's table of where each fact lives names modules that exist, and the names it gives in them
are defined there (issue 43): a room moved or renamed fails here until the table follows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"^\| (?P<fact>[^|]+) \| (?P<lives>[^|]+) \|", re.MULTILINE)
PLACE = re.compile(r"`(?P<package>isvc-[a-z-]+|kubectl-isvc)` \((?P<names>[^)]*)\)")
MODULE = re.compile(r"`(?P<module>_[a-z_]+)(?P<slash>/)?(?:\.(?P<attr>[A-Za-z_]+))?`")


def _rows() -> list[tuple[str, str]]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Where each fact lives", 1)[1].split("\n## ", 1)[0]
    return [
        (m["fact"].strip(), m["lives"])
        for m in TABLE.finditer(section)
        if m["fact"].strip() not in ("fact", "---")
    ]


def _named() -> list[tuple[str, Path, str | None, bool]]:
    """(fact, the module or folder named, the attribute named in it, whether it is a folder)."""
    out = []
    for fact, lives in _rows():
        for place in PLACE.finditer(lives):
            src = ROOT / "packages" / place["package"] / "src" / place["package"].replace("-", "_")
            for name in MODULE.finditer(place["names"]):
                folder = bool(name["slash"])
                path = src / name["module"] if folder else src / f"{name['module']}.py"
                out.append((fact, path, name["attr"], folder))
    return out


def test_the_table_names_modules() -> None:
    named = _named()
    assert len(named) >= 25, "the table's module names were not read"
    assert {"_ledger", "_books", "_inventory", "_planner"} <= {p.stem for _, p, _, _ in named}


def test_every_module_the_table_names_exists_and_defines_what_it_names() -> None:
    missing = []
    for fact, path, attr, folder in _named():
        if not (path.is_dir() if folder else path.is_file()):
            missing.append(f"{fact}: {path.relative_to(ROOT)}")
        elif attr is not None and not re.search(
            rf"^(?:class|def) {attr}\b|^{attr}\b.*=|^    {attr} = ", path.read_text(), re.MULTILINE
        ):
            missing.append(f"{fact}: {attr} in {path.relative_to(ROOT)}")
    assert missing == []
