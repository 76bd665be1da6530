"""The yardstick of the large packing benchmark: the MILP agrees with the exhaustive search it replaces."""

from __future__ import annotations

import random

import pytest
from isvc_api import GIB
from isvc_testing._milp import milp_optimum
from isvc_testing._packing import (
    best_fit_decreasing,
    first_fit,
    instance,
    large_instance,
    need_of,
    optimum,
    pack_large,
    units_for,
)


def flat(layout: list[list[tuple[int, bool]]]) -> list[tuple[int, bool]]:
    return [(m * GIB, s) for devs in layout for m, s in devs]


def placed_legally(devices: list[tuple[int, bool]], needs: list[int], assignment: list[int | None]) -> int:
    """Orders the assignment places, after checking it against the rules independently of the solver."""
    used = [0] * len(devices)
    for need, d in zip(needs, assignment, strict=True):
        if d is not None:
            units = units_for(need, *devices[d])
            assert units is not None
            used[d] += units
    assert all(u <= 100 for u in used)
    return sum(d is not None for d in assignment)


def test_the_milp_finds_the_exhaustive_optimum_on_small_instances() -> None:
    rng = random.Random(11)
    whole_seen = shared_seen = 0
    for _ in range(60):
        layout, sizes = instance(rng)
        devices, needs = flat(layout), [need_of(s) for s in sizes]
        solved = milp_optimum(devices, needs, units_for)
        expected = optimum(devices, needs, in_sequence=False)
        assert (solved.best, solved.bound) == (expected, expected)
        assert placed_legally(devices, needs, solved.assignment) == expected
        whole_seen += any(not s for _, s in devices)
        shared_seen += any(s for _, s in devices)
    assert whole_seen >= 10 and shared_seen >= 10  # both device modes were compared, not just one


def test_the_milp_finds_the_packing_best_fit_decreasing_misses() -> None:
    devices = flat([[(24, True)], [(40, True)]])
    needs = [need_of(s) for s in (17.6, 21.4, 8.7, 14.0)]

    solved = milp_optimum(devices, needs, units_for)

    assert (solved.best, solved.bound, solved.gap) == (4, 4, 0.0)
    assert best_fit_decreasing(devices, needs) == 3
    assert first_fit(devices, needs) == 3


def test_whole_devices_of_one_size_are_handed_out_one_order_each() -> None:
    devices = flat([[(40, False)] * 2, [(24, False)]])
    needs = [need_of(s) for s in (30.0, 30.0, 30.0, 20.0)]

    solved = milp_optimum(devices, needs, units_for)

    assert (solved.best, solved.bound) == (3, 3) == (optimum(devices, needs, in_sequence=False),) * 2
    assert placed_legally(devices, needs, solved.assignment) == 3
    assert solved.assignment[3] == 2  # the 20 GiB order takes the 24 GiB device, leaving 40s to the 30s


def test_an_order_that_fits_nowhere_is_left_out_and_not_counted_in_the_bound() -> None:
    devices = flat([[(24, True)]])
    needs = [need_of(30.0), need_of(5.0)]

    solved = milp_optimum(devices, needs, units_for)

    assert (solved.best, solved.bound, solved.assignment) == (1, 1, [None, 0])


@pytest.mark.parametrize("seed", [3, 4])
def test_large_instances_stay_in_the_documented_support(seed: int) -> None:
    rng = random.Random(seed)
    modes: set[str] = set()
    for _ in range(40):
        nodes, sizes = large_instance(rng)
        devices = [d for node in nodes for d in node.flat()]
        assert 10 <= len(devices) <= 50
        assert 30 <= len(sizes) <= 100
        assert all(4 <= s <= 60 for s in sizes)
        assert all(any(units_for(need_of(s), m, sh) is not None for m, sh in devices) for s in sizes)
        modes |= {node.mode for node in nodes}
        slices = [node.slice(f"n{i}") for i, node in enumerate(nodes)]
        assert sum(len(s["spec"]["devices"]) for s in slices) == len(devices)
    assert modes == {"shares", "whole", "mig"}


def test_a_large_instance_is_scored_against_the_solver_and_never_beats_its_bound() -> None:
    rng = random.Random(5)
    nodes, sizes = large_instance(rng)

    packed, overcommits = pack_large(nodes, sizes, rng, time_limit=5.0)

    assert overcommits == 0
    assert packed.solved.best <= packed.solved.bound
    for placed in (packed.shipped, packed.search, packed.floor, packed.arrival, packed.first_fit, packed.bfd):
        assert 0 < placed <= packed.solved.bound
    assert packed.shipped >= packed.search >= packed.floor
    assert packed.search_nodes > 0  # the profile hook saw the joint search
