"""Selectors judged once per distinct part of a device they can read (issue 32: 10,000 nodes × 8 devices
took 7.2 s to list, most of it judging every device class's selector on every device)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from isvc_ledger import SelectorMemo, reads
from isvc_planner_client import CelJudge, SelectorError, device_activation

D = "gpu.nvidia.com"


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        (f"device.driver == '{D}' && device.attributes['{D}'].type == 'gpu'", {"type", "gpu", D}),
        (f"device.capacity['{D}'].memory.compareTo(quantity('40Gi')) >= 0", {"memory", D, "40Gi"}),
        (f"device.attributes['{D}'].?productName.orValue('') == 'x'", {"productName", D}),
        (f"device.attributes['{D}']['uuid'] == 'GPU-1'", {"uuid", D, "GPU-1"}),
        (f"'profile' in device.attributes['{D}']", {"profile", D}),
        (f"has(device.attributes['{D}'].profile) // a comment 'uuid'", {"profile", D}),
        ("device.allowMultipleAllocations", {"allowMultipleAllocations"}),
    ],
)
def test_a_selector_reading_devices_by_explicit_keys_names_what_it_can_read(
    expression: str, names: set[str]
) -> None:
    found = reads(expression)
    assert found is not None and names <= found
    assert "uuid" not in found or "uuid" in names


@pytest.mark.parametrize(
    "expression",
    [
        f"size(device.attributes['{D}']) > 3",
        f"device.attributes['{D}'].exists(k, k.startsWith('u'))",
        f"cel.bind(a, device.attributes['{D}'], a.type == 'gpu')",
        f"device.attributes['{D}'] == device.attributes['other']",
        f"device.attributes['{D}']['ty' + 'pe'] == 'gpu'",
        f"device.attributes['{D}'].`type` == 'gpu'",
        f"device.attributes['{D}']['t\\x79pe'] == 'gpu'",
        "'x' + 'y' in device.attributes['d']",
        "[device].size() == 1",
        f"device.attributes[?'{D}'].hasValue()",
    ],
)
def test_a_selector_that_may_read_any_key_is_judged_on_every_device(expression: str) -> None:
    assert reads(expression) is None


SELECTORS = [
    f"device.driver == '{D}' && device.attributes['{D}'].type == 'gpu'",
    f"device.attributes['{D}'].type == 'mig'",
    f"device.capacity['{D}'].memory.compareTo(quantity('40Gi')) >= 0",
    f"device.attributes['{D}'].productName.startsWith('NVIDIA H')",
    f"'profile' in device.attributes['{D}'] && device.attributes['{D}'].profile == '1g.10gb'",
    f"device.attributes['{D}'].uuid.endsWith('1')",
    f"size(device.attributes['{D}']) > 4",
    f"device.attributes['{D}'].nope == 1",  # an error on every device: cannot be judged
    f"device.attributes['{D}'].cudaComputeCapability.isGreaterThan('8.5.0') || "
    "device.allowMultipleAllocations",
]


def _device(rng: random.Random, i: int) -> dict[str, object]:
    attrs: dict[str, object] = {
        "type": {"string": rng.choice(["gpu", "mig"])},
        "uuid": {"string": f"GPU-{i}"},
        "productName": {"string": rng.choice(["NVIDIA H100", "NVIDIA A100", "NVIDIA L4"])},
        "cudaComputeCapability": {"version": rng.choice(["8.0.0", "8.9.0", "9.0.0"])},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{i % 256:02x}:00.0"},
    }
    if rng.random() < 0.4:
        attrs[f"{D}/profile"] = {"string": rng.choice(["1g.10gb", "3g.40gb"])}
    capacity: dict[str, object] = {"memory": {"value": rng.choice(["24Gi", "40Gi", "80Gi", "81559Mi"])}}
    if rng.random() < 0.5:
        capacity["shares"] = {"value": "100", "requestPolicy": {"default": "1"}}
    return {
        "name": f"gpu-{i}",
        "attributes": attrs,
        "capacity": capacity,
        "allowMultipleAllocations": rng.random() < 0.5,
    }


def _same(a: bool | SelectorError, b: bool | SelectorError) -> bool:
    if isinstance(a, SelectorError) or isinstance(b, SelectorError):
        return isinstance(a, SelectorError) and isinstance(b, SelectorError) and str(a) == str(b)
    return a == b


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), chosen=st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=4))
def test_remembered_answers_are_the_answers_on_the_whole_device(seed: int, chosen: list[str]) -> None:
    judge = CelJudge()
    memo = SelectorMemo(judge)
    rng = random.Random(seed)
    expressions = tuple(dict.fromkeys(chosen))
    for i in range(40):
        device = _device(rng, i)
        whole = device_activation(D, device)
        answers = memo.judge_all(expressions, D, device, lambda whole=whole: whole)  # type: ignore[misc]
        for expression in expressions:
            try:
                expected: bool | SelectorError = judge.matches(expression, whole)
            except SelectorError as error:
                expected = error
            assert _same(answers[expression], expected), (expression, device)


def test_devices_alike_but_for_their_names_are_judged_once() -> None:
    judge = CelJudge()
    calls = 0
    matches = judge.matches

    def counted(expression: str, activation: dict[str, object]) -> bool:
        nonlocal calls
        calls += 1
        return matches(expression, activation)

    judge.matches = counted  # type: ignore[method-assign]
    memo = SelectorMemo(judge)
    rng = random.Random(0)
    expression = SELECTORS[0]
    for i in range(100):
        device = _device(random.Random(1), i)  # the same draws: alike but for uuid, name and bus
        device["name"] = f"gpu-{rng.random()}"
        memo.judge_all((expression,), D, device, lambda device=device: device_activation(D, device))  # type: ignore[misc]
    assert calls == 1
