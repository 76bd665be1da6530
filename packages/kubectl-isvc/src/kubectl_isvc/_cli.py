"""The `kubectl-isvc` entry point: `kubectl isvc why|estimate|capacity`.

Exit codes: 0 serving (estimate: would be planned; capacity: everything read), 1 refused (not serving,
or would be refused), 2 could not tell (not judged yet, not found, not readable, no answer, bad usage).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from isvc_api import CatalogKind

from kubectl_isvc._capacity import Capacity, capacity, render_capacity
from kubectl_isvc._common import Exit
from kubectl_isvc._errors import ReadFailed
from kubectl_isvc._estimate import Estimate, estimate
from kubectl_isvc._faq import Lang, load_faq
from kubectl_isvc._read import Reader
from kubectl_isvc._render import (
    Style,
    holds,
    machine,
    render_estimate,
    render_why,
    shown,
)
from kubectl_isvc._why import Diagnosis, why

__all__ = ["locale_lang", "main", "run"]

EXIT_CODES = """exit codes:
  0  serving (estimate: would be planned; capacity: everything was read)
  1  refused (why: not serving, a condition names the reason; estimate: would be refused)
  2  could not tell (not judged yet, not found, not readable, no answer, bad usage)"""
ReaderFactory = Callable[[argparse.Namespace], Reader]


def locale_lang(environ: dict[str, str] | os._Environ[str]) -> Lang:
    """Russian when the locale in force (LC_ALL, then LC_MESSAGES, then LANG) is Russian; else English."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name)
        if value:
            return Lang.RU if value.lower().startswith("ru") else Lang.EN
    return Lang.EN


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", help="the namespace (default: the current context's)")
    common.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    common.add_argument("--context", help="the kubeconfig context")
    common.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml"),
        default="text",
        help="text for people (default), json or yaml for scripts",
    )
    common.add_argument(
        "--lang",
        choices=[x.value for x in Lang],
        help="language of the FAQ's answers (default: from the locale)",
    )
    common.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text (auto: only on a terminal, never with NO_COLOR set)",
    )
    common.add_argument(
        "--request-timeout", type=float, default=10.0, help="seconds per request (default 10)"
    )
    parser = argparse.ArgumentParser(
        prog="kubectl isvc",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Orders for LLM inference, explained where you work, with your own permissions.",
        epilog=EXIT_CODES,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser(
        "why", parents=[common], help="why an order is not serving, whose fix it is, what to do"
    )
    w.add_argument("name", help="the InferenceService")
    e = sub.add_parser(
        "estimate",
        parents=[common],
        help="what a model would get on a class, asked of the API server (a dry run)",
    )
    e.add_argument(
        "model",
        help="a Hugging Face repository id (owner/name[@revision]), or a catalog object name with --kind",
    )
    e.add_argument("--class", dest="class_name", help="the InferenceServiceClass (default: none)")
    e.add_argument("--kind", choices=[k.value for k in CatalogKind], help="a catalog Model or ClusterModel")
    e.add_argument("--auth-secret", help="a Secret with a Hugging Face token, for gated models")
    sub.add_parser(
        "capacity",
        parents=[common],
        help="administrators: shares and memory held per device class and card, and who waits",
    )
    return parser


def _default_reader(args: argparse.Namespace) -> Reader:
    from kubectl_isvc._kube import KubeReader

    return KubeReader(args.kubeconfig, args.context, args.request_timeout)


def run(
    argv: list[str],
    reader_factory: ReaderFactory = _default_reader,
    stdout: TextIO | None = None,
    environ: dict[str, str] | None = None,
    now: datetime | None = None,
) -> int:
    """Parse `argv`, run the command, print its answer, and return the exit code."""
    out = stdout if stdout is not None else sys.stdout
    env = dict(os.environ) if environ is None else environ
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) and Exit.UNKNOWN
    lang = Lang(args.lang) if args.lang else locale_lang(env)
    colour = args.color == "always" or (args.color == "auto" and out.isatty() and not env.get("NO_COLOR"))
    style = Style(colour and args.output == "text")
    width = shutil.get_terminal_size((110, 24)).columns if out.isatty() else 110
    when = now or datetime.now(UTC)
    try:
        reader = reader_factory(args)
    except ReadFailed as e:
        print(f"kubectl isvc: {e}", file=sys.stderr)
        return Exit.UNKNOWN
    namespace = args.namespace or reader.namespace
    faq = load_faq()
    record: Diagnosis | Estimate | Capacity
    if args.command == "why":
        record = why(reader, namespace, args.name, faq, lang)
        text = (
            render_why(record, style, width, when) if args.output == "text" else machine(record, args.output)
        )
    elif args.command == "estimate":
        kind = CatalogKind(args.kind) if args.kind else None
        record = estimate(reader, namespace, args.model, args.class_name, faq, lang, kind, args.auth_secret)
        text = (
            render_estimate(record, style, width) if args.output == "text" else machine(record, args.output)
        )
    else:
        record = capacity(reader)
        text = (
            render_capacity(record, style, width, when)
            if args.output == "text"
            else machine(record, args.output)
        )
    encoding = getattr(out, "encoding", None)
    if args.output != "text" and not holds(text, encoding):  # escapes keep a record whole
        text = machine(record, args.output, escaped=True)
    out.write(shown(text, encoding))
    out.flush()
    return int(record.exit_code)


def main() -> None:
    """The console script kubectl finds on PATH as a plugin (`kubectl isvc ...`)."""
    sys.exit(run(sys.argv[1:]))
