"""Selectors judged once per distinct part of a device they can read, not once per device.

A fleet publishes thousands of devices alike but for their names, UUIDs and bus addresses; a device
class's selector (`device.driver == ... && device.attributes[...].type == 'gpu'`) reads none of those.
`reads` finds, from the expression's text, the attribute and capacity names it can reach: every
identifier and string literal in it, provided `device` is only ever used by explicit keys
(`device.driver`, `device.allowMultipleAllocations`, `device.attributes['domain'].name`,
`device.capacity['domain']['name']`, `'name' in device.attributes['domain']`). Any other use of
`device` or of a domain's map (iterated, measured with `size`, bound to a variable, compared whole,
indexed by a computed key) may read every key, and such a selector is judged on each device as before.

The judgment is then a function of the device's driver, `allowMultipleAllocations` and the attributes
and capacities whose names the selector can reach: `SelectorMemo` keys its answers by exactly those,
and judges a miss on the device reduced to them (CEL on a reduced device reads what it would read on
the whole one, since every key it can name is kept).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from isvc_planner_client import CelJudge, SelectorError, device_activation

__all__ = ["SelectorMemo", "reads"]

# CEL's lexical grammar (cel-spec, syntax.md): strings with an optional r/b prefix in any of four quotes,
# identifiers, numbers, punctuation; `//` comments. A backtick (quoted field names) ends the analysis.
_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<str>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>\d[\w.]*)
  | (?P<punct>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)
_QUOTES = re.compile(r"^[rRbB]{0,2}('''|\"\"\"|'|\")(.*)\1$", re.DOTALL)
_MAPS = ("attributes", "capacity")
_SCALARS = ("driver", "allowMultipleAllocations")
# Tokens after which `'name' in device.attributes[...]` starts an operand of its own (nothing binds tighter).
_OPEN = {None, "(", ",", "[", "&&", "||", "?", ":", "!"}

_PLAIN = {str, int, bool, float}  # hashable as they are
Token = tuple[str, str]  # (kind, text): kind is str (its contents), ident, num or punct


def _tokens(expression: str) -> list[Token] | None:
    out: list[Token] = []
    pos = 0
    while pos < len(expression):
        m = _TOKEN.match(expression, pos)
        if m is None:
            return None  # a character this reading does not know (a backtick): judged device by device
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "space":
            continue
        text = m.group()
        if kind == "str":
            quoted = _QUOTES.match(text)
            if quoted is None or "\\" in quoted.group(2):
                return None  # escapes: the key it spells is not its text
            text = quoted.group(2)
        out.append((kind, text))
    return out


def _at(tokens: list[Token], i: int) -> Token | None:
    return tokens[i] if 0 <= i < len(tokens) else None


def _punct(token: Token | None, text: str) -> bool:
    return token == ("punct", text)


def _kind(token: Token | None, kind: str) -> bool:
    return token is not None and token[0] == kind


def _keyed(tokens: list[Token], i: int) -> bool:
    """Whether `device` at `i` is used through explicit keys only."""
    if not _punct(_at(tokens, i + 1), ".") or not _kind(_at(tokens, i + 2), "ident"):
        return False
    field = tokens[i + 2][1]
    if field not in _MAPS:
        return not _punct(_at(tokens, i + 3), "(")  # a scalar (or an unknown field, an error alike)
    j = i + 3
    if not (
        _punct(_at(tokens, j), "[") and _kind(_at(tokens, j + 1), "str") and _punct(_at(tokens, j + 2), "]")
    ):
        return False
    j += 3
    after = _at(tokens, j)
    if _punct(after, "."):
        j += 1
        if _punct(_at(tokens, j), "?"):
            j += 1
        return _kind(_at(tokens, j), "ident") and not _punct(_at(tokens, j + 1), "(")
    if _punct(after, "["):
        j += 1
        if _punct(_at(tokens, j), "?"):
            j += 1
        return _kind(_at(tokens, j), "str") and _punct(_at(tokens, j + 1), "]")
    # 'name' in device.attributes['domain']: a key's presence
    before = _at(tokens, i - 3)
    return (
        _kind(_at(tokens, i - 2), "str")
        and _at(tokens, i - 1) == ("ident", "in")
        and (before is None or (before[0] == "punct" and before[1] in _OPEN))
    )


def reads(expression: str) -> frozenset[str] | None:
    """The attribute and capacity names a selector can read (a superset); None when it may read any."""
    tokens = _tokens(expression)
    if tokens is None:
        return None
    for i, (kind, text) in enumerate(tokens):
        bare = kind == "ident" and text == "device" and not _punct(_at(tokens, i - 1), ".")
        if bare and not _keyed(tokens, i):
            return None
    return frozenset(text for kind, text in tokens if kind in ("str", "ident"))


def _value(value: Any) -> Any:
    """An attribute's value ({"string": "gpu"}) as something hashable."""
    if type(value) is dict and len(value) == 1:  # as DRA publishes one: {"string": "gpu"}
        ((k, v),) = value.items()
        if type(k) is str and type(v) in _PLAIN:
            return ((k, v),)
    if isinstance(value, (dict, Mapping)):  # dicts first: ABCs check slowly
        return tuple((str(k), v if type(v) in _PLAIN else repr(v)) for k, v in value.items())
    return repr(value)


def _capacity(value: Any) -> Any:
    """A capacity's value ({"value": "80Gi", ...}: only the value is in the selector's variable)."""
    amount = value.get("value") if isinstance(value, (dict, Mapping)) else value
    return amount if type(amount) in _PLAIN else repr(amount)


class SelectorMemo:
    """Answers of selectors on devices, remembered by what the selectors can read of a device."""

    def __init__(self, judge: CelJudge, maxsize: int = 200_000) -> None:
        self.judge = judge
        self._reads: dict[tuple[str, ...], tuple[frozenset[str], tuple[str, ...]]] = {}
        self.maxsize = maxsize
        self._answers: dict[tuple[object, ...], dict[str, bool | SelectorError]] = {}
        self._keys: dict[tuple[frozenset[str], tuple[str, ...]], tuple[str, ...]] = {}

    def _plan(self, expressions: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
        """The names the remembered ones can read together, and the expressions judged on every device."""
        known = self._reads.get(expressions)
        if known is None:
            names: set[str] = set()
            each: list[str] = []
            for expression in expressions:
                found = reads(expression)
                if found is None:
                    each.append(expression)
                else:
                    names |= found
            known = self._reads[expressions] = (frozenset(names), tuple(each))
        return known

    def _reachable(self, names: frozenset[str], published: Mapping[str, Any]) -> tuple[str, ...]:
        """The keys of `published` (attributes or capacities) whose name the selectors can reach,
        remembered per set of keys: a driver's devices publish the same keys."""
        keys = tuple(published)
        found = self._keys.get((names, keys))
        if found is None:
            if len(self._keys) >= 4096:
                self._keys.clear()
            found = self._keys[(names, keys)] = tuple(q for q in keys if q.rpartition("/")[2] in names)
        return found

    def signature(self, expressions: tuple[str, ...], driver: str, raw: Mapping[str, Any]) -> Hashable | None:
        """What of the device the expressions can read, as a key their answers are a function of; None
        when one of them may read all of it."""
        names, each = self._plan(expressions)
        if each:
            return None
        return (names, *self._part(names, driver, raw))

    def _part(
        self, names: frozenset[str], driver: str, raw: Mapping[str, Any]
    ) -> tuple[str, bool, tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]]:
        attributes = raw.get("attributes") or {}
        capacity = raw.get("capacity") or {}
        reached = self._reachable(names, attributes)
        counted = self._reachable(names, capacity)
        return (
            driver,
            bool(raw.get("allowMultipleAllocations", False)),
            tuple([(q, _value(attributes[q])) for q in reached]) if reached else (),
            tuple([(q, _capacity(capacity[q])) for q in counted]) if counted else (),
        )

    def judge_all(
        self,
        expressions: tuple[str, ...],
        driver: str,
        raw: Mapping[str, Any],
        activation: Callable[[], dict[str, Any]],
    ) -> dict[str, bool | SelectorError]:
        """Whether the device matches each expression, or why it cannot be judged there; `activation()`
        builds the whole device's CEL variable for the selectors that may read all of it."""
        names, each = self._plan(expressions)
        out = {e: self._judge(e, activation()) for e in each}
        if len(out) == len(expressions):
            return out
        part = self._part(names, driver, raw)
        key = (names, part)
        known = self._answers.get(key)
        if known is None:
            if len(self._answers) >= self.maxsize:  # selectors reading what every device has of its own
                self._answers.clear()
            known = self._answers[key] = {}
        reduced: dict[str, Any] | None = None
        for expression in expressions:
            if expression in out:
                continue
            answer = known.get(expression)
            if answer is None:
                if reduced is None:  # the device with only what the selectors can read of it
                    device = {
                        "attributes": {q: (raw.get("attributes") or {})[q] for q, _ in part[2]},
                        "capacity": {q: {"value": v} for q, v in part[3]},
                        "allowMultipleAllocations": part[1],
                    }
                    reduced = device_activation(driver, device)
                answer = known[expression] = self._judge(expression, reduced)
            out[expression] = answer
        return out

    def _judge(self, expression: str, activation: dict[str, Any]) -> bool | SelectorError:
        try:
            return self.judge.matches(expression, activation)
        except SelectorError as error:
            return error
