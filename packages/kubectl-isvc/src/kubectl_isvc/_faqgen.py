"""Regenerate `faq.json` from module/docs/FAQ.md and FAQ.ru.md: `python -m kubectl_isvc._faqgen [--check]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubectl_isvc._faq import DATA, build_faq, dump

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Regenerate faq.json from the FAQ pages, or with --check say whether it has drifted."""
    parser = argparse.ArgumentParser(prog="python -m kubectl_isvc._faqgen", description=main.__doc__)
    parser.add_argument(
        "--docs", type=Path, default=Path("module/docs"), help="the docs directory (default: ./module/docs)"
    )
    parser.add_argument("--check", action="store_true", help="fail if faq.json differs from the FAQ")
    args = parser.parse_args(argv)
    target = Path(__file__).with_name(DATA)
    text = dump(build_faq(args.docs))
    if args.check:
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            print(
                f"{target} has drifted from {args.docs}/FAQ*.md: run python -m kubectl_isvc._faqgen",
                file=sys.stderr,
            )
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
