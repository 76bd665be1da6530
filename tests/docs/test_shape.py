"""The size bounds ARCHITECTURE.md states: no module of any package over 600 lines (the controller's: 400), no
function in `packages/` over 60.

A function's length runs from its `def` (decorators excluded) to its last line, as `ast` reads it. The test
bed (`e2e/isvc_testbed`) is outside the bound: its orchestration reads better in one piece (e2e/README.md
names where).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
OPERATOR = PACKAGES / "isvc-operator" / "src"
MODULE_LINES = 400  # the controller's
PACKAGE_MODULE_LINES = 600  # every other package's
FUNCTION_LINES = 60


def _sources(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if ".nox" not in p.parts and "build" not in p.parts)


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """Each function of the file over the bound, as `file:line name (n lines)`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > FUNCTION_LINES
    ]


def test_no_controller_module_is_over_400_lines() -> None:
    sizes = {p: len(p.read_text().splitlines()) for p in _sources(OPERATOR)}
    assert sizes, "no controller sources found"
    assert [f"{p.relative_to(ROOT)} ({n} lines)" for p, n in sizes.items() if n > MODULE_LINES] == []


def test_no_module_of_any_package_is_over_600_lines() -> None:
    sizes = {p: len(p.read_text().splitlines()) for p in _sources(PACKAGES) if "/src/" in str(p)}
    assert len(sizes) > 100, "the packages' sources were not found"
    assert [f"{p.relative_to(ROOT)} ({n} lines)" for p, n in sizes.items() if n > PACKAGE_MODULE_LINES] == []


def test_no_function_in_the_packages_is_over_60_lines() -> None:
    sources = _sources(PACKAGES)
    assert len(sources) > 100, "the packages' sources were not found"
    assert [line for p in sources for line in _long_functions(p)] == []


def test_the_measure_sees_a_long_function(tmp_path: Path) -> None:
    """The check can fail: a 61-line function is named, a 60-line one is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n    return 0\n")
    (tmp_path / "short.py").write_text(f"def short():\n{body}\n")
    long, short = (_long_functions(tmp_path / name, tmp_path) for name in ("long.py", "short.py"))
    assert long == ["long.py:1 long (61 lines)"] and short == []
