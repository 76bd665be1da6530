"""Check one installed isvc distribution: every module imports, and every import is declared.

Run with the interpreter of a clean venv that holds only that distribution and what it declares
(`nox -s build` makes one per package from the wheel directory). Two checks:

1. every module of the import package imports (an undeclared dependency that is absent fails here);
2. every top-level name any of its modules imports, at any depth (`import uvicorn` inside a function
   too), is the standard library, the package itself, or provided by a distribution the package
   declares in `Requires-Dist` (an undeclared dependency that happens to be present through another
   one, as urllib3 through kubernetes, fails here).

Usage: python tools/check_installed.py isvc-catalog
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import pkgutil
import re
import sys
from pathlib import Path

__all__ = ["main"]


def _declared(dist: str) -> set[str]:
    """Normalised names of the distributions `dist` requires without extras."""
    names = set()
    for req in md.requires(dist) or []:
        if "extra ==" in req:
            continue
        match = re.match(r"[A-Za-z0-9._-]+", req)
        if match:
            names.add(_norm(match.group(0)))
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported(root: Path) -> set[str]:
    """Top-level module names imported anywhere under root (absolute imports only)."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def main(argv: list[str] | None = None) -> int:
    """Return 0 when the distribution imports cleanly and declares what it imports."""
    args = argv if argv is not None else sys.argv[1:]
    dist = args[0]
    package = dist.replace("-", "_")
    module = importlib.import_module(package)
    problems: list[str] = []
    for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
        if info.name.endswith(".__main__"):  # runs the program on import
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            problems.append(f"{info.name} does not import: {exc}")
    providers = md.packages_distributions()
    declared = _declared(dist) | {_norm(dist)}
    for name in sorted(_imported(Path(module.__file__ or "").parent)):
        if name in sys.stdlib_module_names or name == "__future__":
            continue
        owners = {_norm(d) for d in providers.get(name, [])}
        if not owners & declared:
            problems.append(
                f"imports {name} (from {', '.join(sorted(owners)) or 'nowhere'}) but does not declare it"
            )
    for problem in problems:
        print(f"{dist}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{dist}: imports cleanly, every import declared")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
