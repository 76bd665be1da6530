"""DRA CEL selectors judged in Python, in the environment kube-scheduler gives them.

`device.driver`, `device.attributes[domain][name]`, `device.capacity[domain][name]` (quantities,
modelled as integers of base units), `device.allowMultipleAllocations`; `quantity()`, `semver()`,
`compareTo`, `isGreaterThan`, `isLessThan`, strings, bindings and optionals. An unknown domain is an
empty map and an unknown key an error, as in the cluster. Anything that does not compile or errors on
a device cannot be judged: the caller reports PlacementUndecidable, never "no match".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import (  # type: ignore[import-untyped]
    ext_bindings,
    ext_optional,
    ext_strings,
)
from isvc_api import quantity_bytes

__all__ = ["CelJudge", "SelectorError", "attribute_is", "cel_literal", "one_of"]

_DOMAIN = re.compile(r"device\s*\.\s*(?:attributes|capacity)\s*\[\s*['\"]([^'\"]+)['\"]\s*\]")
_MISSING_KEY = re.compile(r'(?:NOT_FOUND:\s*)?key not found in map\s*:\s*"?([^"]*)"?', re.IGNORECASE)


def cel_literal(value: str) -> str:
    """A CEL string literal of `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def attribute_is(driver: str, name: str, value: str) -> str:
    """CEL true for a device whose `driver` attribute `name` is `value`, false for one without it (guarded:
    a selector meets devices of every kind on the node, and reading a missing key is an error that stops
    scheduling)."""
    attrs = f"device.attributes[{cel_literal(driver)}]"
    read = f"{attrs}.{name}" if name.isidentifier() else f"{attrs}[{cel_literal(name)}]"
    return f"({cel_literal(name)} in {attrs} && {read} == {cel_literal(value)})"


def one_of(driver: str, pins: list[dict[str, str]]) -> str:
    """CEL admitting exactly the devices of `driver` each pin names by attribute values (all of a pin's
    attributes must match: a uuid, or a partition's parent uuid and profile)."""
    terms = [" && ".join(attribute_is(driver, k, v) for k, v in sorted(pin.items())) for pin in pins]
    joined = " || ".join(f"({t})" if len(pins) > 1 else t for t in terms)
    return f"device.driver == {cel_literal(driver)} && ({joined})"


def _as_cluster_says(detail: str) -> str:
    """The engine's runtime error in the words kube-scheduler (cel-go) uses, so both read alike."""
    return _MISSING_KEY.sub(lambda m: f"no such key: {m.group(1)}", detail)


class SelectorError(Exception):
    """A selector that cannot be judged: it does not compile, or it errors on a device."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(f"CEL {stage} error: {detail}")
        self.stage = stage
        self.detail = detail


def _semver_key(text: str) -> tuple[int, int, int]:
    core = str(text).lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = [int(p) if p.isdigit() else 0 for p in core.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def _cmp(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _vcmp(a: str, b: str) -> int:
    return _cmp(_semver_key(a), _semver_key(b))


def _quantity(text: str) -> int:
    return quantity_bytes(text)


def _semver(text: str) -> str:
    _semver_key(text)
    return str(text)


def _env() -> Any:
    i, s, b, d = cel.Type.INT, cel.Type.STRING, cel.Type.BOOL, cel.Type.DOUBLE

    def member(name: str, ret: Any, params: list[Any], impl: Any, oid: str) -> Any:
        return cel.Overload(oid, ret, params, is_member=True, impl=impl)

    functions = [
        cel.FunctionDecl("quantity", [cel.Overload("quantity_string", i, [s], impl=_quantity)]),
        cel.FunctionDecl("semver", [cel.Overload("semver_string", s, [s], impl=_semver)]),
        cel.FunctionDecl(
            "compareTo",
            [
                member("compareTo", i, [i, i], _cmp, "int_compareTo_int"),
                member("compareTo", i, [s, s], _vcmp, "string_compareTo_string"),
            ],
        ),
        cel.FunctionDecl(
            "isGreaterThan",
            [
                member("isGreaterThan", b, [i, i], lambda x, y: x > y, "int_gt_int"),
                member("isGreaterThan", b, [s, s], lambda x, y: _vcmp(x, y) > 0, "string_gt_string"),
            ],
        ),
        cel.FunctionDecl(
            "isLessThan",
            [
                member("isLessThan", b, [i, i], lambda x, y: x < y, "int_lt_int"),
                member("isLessThan", b, [s, s], lambda x, y: _vcmp(x, y) < 0, "string_lt_string"),
            ],
        ),
        cel.FunctionDecl("asInteger", [member("asInteger", i, [i], lambda x: x, "int_asInteger")]),
        cel.FunctionDecl(
            "asApproximateFloat",
            [
                member("asApproximateFloat", d, [i], float, "int_asApproximateFloat"),
            ],
        ),
        cel.FunctionDecl("major", [member("major", i, [s], lambda x: _semver_key(x)[0], "sv_major")]),
        cel.FunctionDecl("minor", [member("minor", i, [s], lambda x: _semver_key(x)[1], "sv_minor")]),
        cel.FunctionDecl("patch", [member("patch", i, [s], lambda x: _semver_key(x)[2], "sv_patch")]),
    ]
    return cel.NewEnv(
        variables={"device": cel.Type.DYN},
        extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings()],
        functions=functions,
    )


def device_activation(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The `device` variable of a DRA selector for one v1 device (bare names: driver's domain)."""
    attrs: dict[str, dict[str, Any]] = {}
    caps: dict[str, dict[str, Any]] = {}
    for qualified, value in (device.get("attributes") or {}).items():
        domain, _, name = qualified.rpartition("/")
        if isinstance(value, Mapping) and value:
            attrs.setdefault(domain or driver, {})[name] = next(iter(value.values()))
    for qualified, cap in (device.get("capacity") or {}).items():
        domain, _, name = qualified.rpartition("/")
        try:
            caps.setdefault(domain or driver, {})[name] = quantity_bytes(str(cap.get("value")))
        except ValueError:
            continue
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
    }


class CelJudge:
    """Compiles selectors once and judges them against devices."""

    def __init__(self) -> None:
        self._env = _env()
        self._programs: dict[str, tuple[Any, tuple[str, ...]] | SelectorError] = {}

    def check(self, expression: str) -> None:
        """Raise SelectorError when the expression does not compile."""
        self._program(expression)

    def _program(self, expression: str) -> tuple[Any, tuple[str, ...]]:
        cached = self._programs.get(expression)
        if cached is None:
            try:
                program = self._env.compile(expression)
                if program.return_type() not in (cel.Type.BOOL, cel.Type.DYN):
                    kind = program.return_type().name()
                    raise SelectorError("compile", f"must evaluate to bool, not {kind}")
                cached = (program, tuple(sorted(set(_DOMAIN.findall(expression)))))
            except SelectorError as error:
                cached = error
            except Exception as error:  # the engine raises plain RuntimeError/ValueError on syntax
                cached = SelectorError("compile", str(error).strip().splitlines()[0] if str(error) else "")
            self._programs[expression] = cached
        if isinstance(cached, SelectorError):
            raise cached
        return cached

    def matches(self, expression: str, activation: dict[str, Any]) -> bool:
        """Whether the device matches; SelectorError when the expression cannot be judged on it."""
        program, domains = self._program(expression)
        missing = [d for d in domains if d not in activation["attributes"] or d not in activation["capacity"]]
        if missing:
            activation = dict(activation)
            activation["attributes"] = {**{d: {} for d in missing}, **activation["attributes"]}
            activation["capacity"] = {**{d: {} for d in missing}, **activation["capacity"]}
        value = program.eval(data={"device": activation})
        kind = value.type()
        if kind == cel.Type.ERROR:
            raise SelectorError("runtime", _as_cluster_says(str(value.value())))
        if kind != cel.Type.BOOL:
            raise SelectorError("runtime", f"must evaluate to bool, not {kind.name()}")
        return bool(value.value())
