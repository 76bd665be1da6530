"""Text for people (aligned tables, colour only on a terminal) and JSON or YAML for machines."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from datetime import datetime

import yaml

from kubectl_isvc._common import Out, Unread
from kubectl_isvc._estimate import Estimate
from kubectl_isvc._plan import PlanSummary
from kubectl_isvc._why import Diagnosis, FaqAdvice, Verdict, age
from kubectl_isvc._words import WORDS as _L

__all__ = ["Style", "gib", "machine", "render_estimate", "render_unread", "render_why", "table"]


class Style:
    """ANSI colour, or none at all (not a terminal, NO_COLOR, --color never)."""

    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def _sgr(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour and text else text

    def bold(self, text: str) -> str:
        return self._sgr("1", text)

    def red(self, text: str) -> str:
        return self._sgr("31", text)

    def green(self, text: str) -> str:
        return self._sgr("32", text)

    def yellow(self, text: str) -> str:
        return self._sgr("33", text)

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def status(self, text: str) -> str:
        return {"True": self.green, "False": self.red}.get(text, self.yellow)(text)


def machine(record: Out, fmt: str, escaped: bool = False) -> str:
    """-o json or -o yaml; `escaped`: every character beyond ASCII as an escape (a terminal that cannot show
    them reads the same record)."""
    wire = record.to_wire()
    if fmt == "json":
        return json.dumps(wire, indent=2, ensure_ascii=escaped) + "\n"
    return str(yaml.safe_dump(wire, allow_unicode=not escaped, sort_keys=False))


# The typography of the FAQ and of the module's messages, as a terminal that cannot show it reads it.
_PLAIN = str.maketrans(
    {
        "×": "x",
        "—": "-",
        "–": "-",
        "→": "->",
        "←": "<-",
        "…": "...",
        "≈": "~",
        "≤": "<=",
        "≥": ">=",
        "«": '"',
        "»": '"',
        "“": '"',
        "”": '"',
        "‘": "'",
        "’": "'",
        "·": ".",
        "•": "-",
        "\u00a0": " ",
    }
)


def shown(text: str, encoding: str | None) -> str:
    """`text` as a terminal of `encoding` shows it: as it is when the encoding holds every character, else
    with its typography made plain and any other character it cannot hold as `?` (never an error)."""
    try:
        text.encode(encoding or "utf-8")
        return text
    except UnicodeEncodeError:
        pass
    except LookupError:
        return text
    assert encoding is not None
    return text.translate(_PLAIN).encode(encoding, errors="replace").decode(encoding)


def holds(text: str, encoding: str | None) -> bool:
    """Whether a terminal of `encoding` shows every character of `text`."""
    return shown(text, encoding) == text


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    style: Style,
    colour: dict[int, object] | None = None,
    indent: str = "",
) -> list[str]:
    """Aligned columns two spaces apart; the last column is cut to the width with an ellipsis."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    out = []
    for n, row in enumerate([headers, *rows]):
        cells = []
        for i, cell in enumerate(row[:-1]):
            text = str(cell).ljust(widths[i])
            if n == 0:
                text = style.bold(text)
            elif colour and i in colour:
                text = str(colour[i](str(cell))) + " " * (widths[i] - len(str(cell)))  # type: ignore[operator]
            cells.append(text)
        used = len(indent) + sum(w + 2 for w in widths)
        last = " ".join(str(row[-1]).split())
        room = max(20, width - used)
        if len(last) > room:
            last = last[: room - 1] + "…"
        cells.append(style.bold(last) if n == 0 else last)
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def _wrap(text: str, width: int, indent: str) -> list[str]:
    lines: list[str] = []
    for block in text.split("\n"):
        if block.startswith("    "):
            lines.append(indent + block)
        elif block.startswith("- "):
            lines += textwrap.wrap(block, width, initial_indent=indent, subsequent_indent=indent + "  ") or [
                ""
            ]
        else:
            lines += textwrap.wrap(block, width, initial_indent=indent, subsequent_indent=indent) or [""]
    return lines


def _advice(lines: list[str], advice: FaqAdvice, t: dict[str, str], style: Style, width: int) -> None:
    lines.append(
        f"{style.bold(t['whose'] + ':')} {advice.whose}"
    )  # the FAQ's own words (its `who` in -o json)
    lines.append(f"{style.bold(t['passes'] + ':')} {advice.passes}")
    lines.append(f"{style.bold(t['todo'] + ':')} {style.dim(advice.title + ' — ' + advice.link)}")
    for paragraph in advice.paragraphs:
        lines += _wrap(paragraph, width, "  ")
        lines.append("")


def render_unread(
    lines: list[str], unread: list[Unread], t: dict[str, str], style: Style, width: int
) -> None:
    """What could not be read, and the API server's reason, appended to `lines`."""
    if not unread:
        return
    lines.append(style.yellow(style.bold(t["unread"])))
    for u in unread:
        lines += _wrap(f"- {u.what}: {u.why}", width, "  ")


def gib(value: float | None) -> str:
    """GiB to one decimal; `-` for none."""
    return "-" if value is None else f"{value:.1f}"


def _serves(plan: PlanSummary, t: dict[str, str]) -> str:
    """What the launch serves (issue 42): requests of a typical length at once, its KV cache in tokens, and the
    longest request it accepts."""

    def n(value: int) -> str:
        return f"{value:,}".replace(",", t["thousands"])  # 2,048 / 2 048

    parts = []
    if plan.concurrent_requests and plan.request_tokens:
        parts.append(t["at_once"].format(n=n(plan.concurrent_requests), t=n(plan.request_tokens)))
    if plan.kv_cache_tokens:
        parts.append(t["kv_tokens"].format(k=n(plan.kv_cache_tokens)))
    if parts and plan.context_length:
        parts.append(t["longest"].format(c=n(plan.context_length)))
    return ", ".join(parts)


def _plan_lines(plan: PlanSummary, t: dict[str, str], width: int) -> list[str]:
    out = []
    where = " ".join(
        x for x in (plan.accelerator or "", f"({plan.device_class})" if plan.device_class else "") if x
    )
    share = (
        f"{plan.share_percent}% of one card"
        if plan.share_percent is not None and plan.placement_mode == "Shared"
        else f"{plan.device_count or 1} card(s), {plan.placement_mode or ''}".strip(", ")
    )
    node = f" on {plan.node}" if plan.node else ""
    devices = f" [{', '.join(plan.devices)}]" if plan.devices else ""
    if where or plan.placement_mode:
        out.append(f"{t['accelerator']}: {where or '-'}, {share}{node}{devices}")
    if plan.required_memory_gi_b is not None:
        parts = [
            f"needs {gib(plan.required_memory_gi_b)} GiB per card",
            f"weights {gib(plan.weights_gi_b)}",
            f"KV cache {gib(plan.kv_cache_gi_b)}",
            f"overhead {gib(plan.overhead_gi_b)}",
        ]
        if plan.context_length is not None:
            parts.append(f"context {plan.context_length} tokens")
        if plan.kv_bytes_per_token is not None:
            parts.append(f"{plan.kv_bytes_per_token} B/token")
        if plan.accelerator_memory_gi_b is not None:
            parts.append(f"card {gib(plan.accelerator_memory_gi_b)} GiB")
        out.append(f"{t['memory']}: " + ", ".join(parts))
    serves = _serves(plan, t)
    if serves:
        out.append(f"{t['serves']}: {serves}")
    if plan.cpu or plan.memory or plan.model_volume:
        out.append(
            f"{t['resources']}: cpu {plan.cpu or '-'}, memory {plan.memory or '-'}, "
            f"model volume {plan.model_volume or '-'}"
        )
    if plan.runtime:
        served = f", serves {plan.served_name}" if plan.served_name else ""
        out.append(f"{t['runtime']}: {plan.runtime}{served}" + (f" ({plan.image})" if plan.image else ""))
    if plan.flags:
        out += _wrap(f"{t['flags']}: " + "  ".join(plan.flags), width, "")
    if plan.explanation:
        out += _wrap(plan.explanation, width, "  ")
    return out


def _claim_and_pod_lines(d: Diagnosis, t: dict[str, str], style: Style, width: int) -> list[str]:
    lines = [f"  {t['claims']}:" + ("" if d.claims else f" {t['none']}")]
    for c in d.claims:
        state = t["allocated"] if c.allocated else t["pending"]
        lines.append(
            f"    {c.name} ({c.device_class or '-'}): {state}"
            + (f" {', '.join(c.devices)}" if c.devices else "")
            + (f" → {', '.join(c.reserved_for)}" if c.reserved_for else "")
        )
    lines.append(f"  {t['pods']}:" + ("" if d.pods else f" {t['none']}"))
    for p in d.pods:
        lines.append(f"    {p.name}: {p.phase}" + (f" on {p.node}" if p.node else ""))
        if p.scheduler_message:
            lines += _wrap(f"{t['scheduler']}: {p.scheduler_message}", width, "      ")
        for k in p.containers:
            detail = " ".join(
                x for x in (k.reason or "", f"restarts {k.restart_count}" if k.restart_count else "") if x
            )
            lines.append(f"      {k.name}: {k.state}" + (f" ({detail})" if detail else ""))
            if k.message:
                lines += _wrap(k.message, width, "        ")
            if k.output:
                lines.append(f"        {t['output']}:")
                lines += [style.dim("        | " + line) for line in k.output]
    return lines


def _evidence(d: Diagnosis, t: dict[str, str], style: Style, width: int, now: datetime) -> list[str]:
    """The evidence section of `why`: events, the plan, claims, pods and their output."""
    lines = [f"  {t['events']}:" + ("" if d.events else f" {t['none']}")]
    if d.events:
        lines += table(
            t["events_h"].split(","),
            [(e.type, e.reason, str(e.count), age(e.last_seen, now), e.message) for e in d.events[-8:]],
            width,
            style,
            indent="    ",
        )
    if d.plan is not None:
        lines.append(f"  {t['plan']} {d.plan.name}:")
        lines += ["    " + line for line in _plan_lines(d.plan, t, width - 4)]
    lines += _claim_and_pod_lines(d, t, style, width)
    if d.startup_output:
        lines.append(f"  {t['startup']}:")
        lines += [style.dim("    | " + line) for line in d.startup_output]
    return lines


def render_why(d: Diagnosis, style: Style, width: int, now: datetime) -> str:
    """The one screen of `why`."""
    t = _L[d.lang]
    verdict = {
        Verdict.SERVING: style.green(t["serving"]),
        Verdict.NOT_SERVING: style.red(t["not_serving"]),
        Verdict.UNKNOWN: style.yellow(t["unknown"]),
    }[d.verdict]
    lines = [
        f"{style.bold(t['order'] + ' ' + d.namespace + '/' + d.name)} · {t['phase']} {d.phase or '-'} · "
        f"{verdict} (exit {d.exit_code})",
        "",
    ]
    if d.conditions:
        lines += table(
            t["conditions"].split(","),
            [(c.type, c.status, c.reason, age(c.last_transition_time, now), c.message) for c in d.conditions],
            width,
            style,
            colour={1: style.status},
        )
        lines.append("")
    if d.condition and d.reason and not (d.verdict == Verdict.SERVING and d.status == "True"):
        lines.append(style.bold(f"{d.condition} {t['is']} {d.status}: {d.reason}"))
        if d.message:
            lines += _wrap(d.message, width, "  ")
        lines.append("")
    if d.faq is not None:
        _advice(lines, d.faq, t, style, width)
    if d.meaning is not None:
        lines.append(f"{style.bold(t['meaning'] + ':')} {style.dim(d.meaning.link)}")
        lines += _wrap(d.meaning.meaning, width, "  ")
        lines.append("")
    if d.notes:
        lines.append(style.bold(t["notes"]))
        for note in d.notes:
            lines += _wrap(f"- {note}", width, "  ")
        lines.append("")
    if d.conditions or d.events or d.plan or d.claims or d.pods:
        lines.append(style.bold(t["evidence"]))
        lines += _evidence(d, t, style, width, now)
        lines.append("")
    render_unread(lines, d.unread, t, style, width)
    return "\n".join(lines).rstrip() + "\n"


def render_estimate(e: Estimate, style: Style, width: int) -> str:
    """The answer of `estimate`."""
    t = _L[e.lang]
    verdict = {"Planned": style.green(t["would_plan"]), "Refused": style.red(t["would_refuse"])}.get(
        e.verdict, style.yellow(t["unknown"])
    )
    klass = f"{t['class']} {e.class_name}" if e.class_name else t["default_class"]
    lines = [
        f"{style.bold(t['estimate'] + ': ' + e.model)} · {klass} · {e.namespace} · {verdict} "
        f"(exit {e.exit_code})",
        "",
    ]
    if e.endpoint_type:
        lines.append(f"{t['endpoint']}: {e.endpoint_type}")
    for key, value in sorted(e.facts.items()):
        lines.append(f"{key}: {value}")
    if e.plan is not None:
        lines += _plan_lines(e.plan, t, width)
    if e.reason:
        lines += ["", style.bold(f"{e.condition or ''} {t['is']} False: {e.reason}".strip())]
    if e.message:
        lines += _wrap(e.message, width, "  ")
    lines.append("")
    if e.faq is not None:
        _advice(lines, e.faq, t, style, width)
    if e.notes:
        for note in e.notes:
            lines += _wrap(note, width, "")
        lines.append("")
    if e.warnings:
        lines.append(style.bold(t["warnings"]))
        lines += [f"  {w}" for w in e.warnings]
        lines.append("")
    render_unread(lines, e.unread, t, style, width)
    return "\n".join(lines).rstrip() + "\n"
