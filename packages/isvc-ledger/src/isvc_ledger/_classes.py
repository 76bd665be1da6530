"""DeviceClasses and which of them admit each device, judged as kube-scheduler judges their selectors.

The classes admitting a device are judged once per distinct part of a device their selectors can read
(`SelectorMemo`): a fleet's devices alike are judged once.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from isvc_api import DeviceKey
from isvc_planner_client import CelJudge, SelectorError

from isvc_ledger._device import Device
from isvc_ledger._selectors import SelectorMemo

__all__ = ["DeviceClasses", "SelectorFault"]

_JUDGED = 65536  # devices' class judgements kept by what the selectors read (cleared when full)


@dataclass(frozen=True)
class SelectorFault:
    """A selector that cannot be judged on a device: enough words for PlacementUndecidable."""

    owner: str  # "class gpu.nvidia.com" or "accelerator policy"
    index: int
    device: str
    error: str

    def message(self) -> str:
        """The fault in the scheduler's own wording."""
        return f"{self.owner}: selector #{self.index} on device {self.device}: {self.error}"


class DeviceClasses:
    """The DeviceClasses' CEL selectors, which classes admit each device, and the faults met judging."""

    def __init__(self, judge: CelJudge | None = None) -> None:
        self.judge = judge or CelJudge()
        self.memo = SelectorMemo(self.judge)
        self.selectors: dict[str, list[str]] = {}  # class -> its CEL selectors
        self.faults: dict[str, dict[DeviceKey, SelectorFault]] = {}  # class -> devices it cannot judge
        self._every: tuple[str, ...] | None = None  # every class's selectors, judged together per device
        self._class_sets: dict[frozenset[str], frozenset[str]] = {}
        self._judged: dict[Hashable, tuple[frozenset[str], tuple[tuple[str, int, str], ...]]] = {}

    def put(self, dc: Mapping[str, Any]) -> bool:
        """Add or change a DeviceClass; whether its selectors changed (devices must be judged again)."""
        name = dc["metadata"]["name"]
        before = self.selectors.get(name)
        self.selectors[name] = [
            s["cel"]["expression"] for s in (dc.get("spec") or {}).get("selectors") or [] if s.get("cel")
        ]
        self._every = None
        return before != self.selectors[name]

    def drop(self, name: str) -> None:
        """Forget a DeviceClass."""
        self.selectors.pop(name, None)
        self._every = None

    def forget(self, key: DeviceKey) -> None:
        """A device no longer published: its faults go with it."""
        for faults in self.faults.values():
            faults.pop(key, None)

    def clear_faults(self) -> None:
        """Every device is about to be judged again."""
        for faults in self.faults.values():
            faults.clear()

    def selects(self, expression: str, device: Device) -> bool | SelectorError:
        """Whether a selector admits a device, or why it cannot be judged there (remembered per device)."""
        if device.selector_cache is None:
            device.selector_cache = {}
        cached = device.selector_cache.get(expression)
        if cached is None:
            answers = self.memo.judge_all((expression,), device.driver, device.raw, lambda: device.activation)
            cached = device.selector_cache[expression] = answers[expression]
        return cached

    def admit(self, device: Device) -> None:
        """Set which classes admit the device (and note those that cannot judge it), remembered by what
        their selectors can read of a device: a fleet's devices alike are judged once."""
        if self._every is None:
            self._every = tuple(dict.fromkeys(e for sel in self.selectors.values() for e in sel))
            self._judged.clear()
        signature = self.memo.signature(self._every, device.driver, device.raw)
        judged = self._judged.get(signature) if signature is not None else None
        if judged is None:
            judged = self._judge_anew(device)
            if signature is not None:
                if len(self._judged) >= _JUDGED:
                    self._judged.clear()
                self._judged[signature] = judged
        classes, unjudged = judged
        for name, index, error in unjudged:
            self.faults.setdefault(name, {})[device.key] = SelectorFault(
                f"class {name}", index, device.ident, error
            )
        device.classes = classes

    def _judge_anew(self, device: Device) -> tuple[frozenset[str], tuple[tuple[str, int, str], ...]]:
        """(classes admitting the device, (class, selector, error) of each that cannot judge it)."""
        assert self._every is not None
        results = self.memo.judge_all(self._every, device.driver, device.raw, lambda: device.activation)
        admitted = set()
        faults: list[tuple[str, int, str]] = []
        for name, selectors in self.selectors.items():
            ok = True
            for i, expr in enumerate(selectors):
                result = results[expr]
                if isinstance(result, SelectorError):
                    faults.append((name, i, str(result)))
                    ok = False
                    break
                if not result:
                    ok = False
                    break
            if ok:
                admitted.add(name)
        classes = frozenset(admitted)
        return self._class_sets.setdefault(classes, classes), tuple(faults)  # one set shared by devices alike
