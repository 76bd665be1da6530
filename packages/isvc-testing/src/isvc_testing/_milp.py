"""The packing yardstick for large instances: the most orders placed, by a MILP solved with HiGHS.

Written apart from the planner, from the planner's validity rules only (as `_bench.units_for`): an
order on a shareable device takes ⌈need × 100 / memory⌉ of its 100 units, a whole device (or a MIG
partition) holds one order whose need it covers, and nothing holds more than 100 units.

    maximise   Σ x[i,d]                     x[i,d] ∈ {0, 1}: order i on device d (only where it fits)
    subject to Σ_d x[i,d] ≤ 1               each order at most once
               Σ_i units[i,d] x[i,d] ≤ 100  each shareable device
               Σ_i y[i,g] ≤ count[g]         whole devices of one size g (alike, so taken as a stock)
               load[d] ≥ load[d+1]          among shareable devices alike (symmetry, not a restriction)

HiGHS stops at a time limit with the best packing found and a proven upper bound (its dual bound); the
optimum lies between them, so a planner scored against the bound is never flattered.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import highspy
import numpy as np

__all__ = ["Solved", "milp_optimum"]

UNITS = 100
_EPS = 1e-6


@dataclass(frozen=True)
class Solved:
    """What the solver found: a packing, the bound it proved, and whether the two meet."""

    best: int  # orders placed by the best packing found (checked feasible here)
    bound: int  # proven upper bound on the orders any packing places
    assignment: list[int | None]  # device index per order, None when left out
    seconds: float

    @property
    def optimal(self) -> bool:
        """Whether the bound is met: `best` is the optimum."""
        return self.best == self.bound

    @property
    def gap(self) -> float:
        """(bound − best) ÷ bound: how far the optimum may lie above the packing found."""
        return 0.0 if self.bound == 0 else (self.bound - self.best) / self.bound


def milp_optimum(
    devices: Sequence[tuple[int, bool]],
    needs: Sequence[int],
    units_for: Callable[[int, int, bool], int | None],
    *,
    time_limit: float = 10.0,
) -> Solved:
    """Solve the packing of `needs` (bytes) on `devices` ((memory bytes, shareable) each) with HiGHS.

    units_for(need, memory, shareable): the units one order takes on one device, or None if it does not
    fit. The packing returned is checked against these rules before it is believed.
    """
    shared = [d for d, (_, s) in enumerate(devices) if s]
    whole: dict[int, list[int]] = {}
    for d, (memory, s) in enumerate(devices):
        if not s:
            whole.setdefault(memory, []).append(d)
    sizes = sorted(whole)
    cols = _columns(devices, needs, units_for, shared, sizes)
    if not cols:
        return Solved(0, 0, [None] * len(needs), 0.0)
    h = _highs(len(cols), _rows(devices, cols, shared, whole, sizes), time_limit)
    info = h.getInfo()
    seconds = h.getRunTime()
    values_x = list(h.getSolution().col_value) if info.primal_solution_status else [0.0] * len(cols)
    assignment = _assign(devices, needs, cols, values_x, whole, sizes)
    best = sum(a is not None for a in assignment)
    _check(devices, needs, assignment, units_for)
    # A count of orders is whole, so a bound of 41.7 proves 41; no more than the orders can be placed.
    dual = info.mip_dual_bound
    bound = len(needs) if not math.isfinite(dual) else min(len(needs), math.floor(dual + _EPS))
    return Solved(best, max(bound, best), assignment, seconds)


# A column: (order, target, units); target is a shareable device's index, or −1−g for whole devices of size g.
_Column = tuple[int, int, int]
# A row: (lower, upper, [(column, coefficient)]).
_Row = tuple[float, float, list[tuple[int, float]]]


def _columns(
    devices: Sequence[tuple[int, bool]],
    needs: Sequence[int],
    units_for: Callable[[int, int, bool], int | None],
    shared: list[int],
    sizes: list[int],
) -> list[_Column]:
    """(order, shareable device) pairs that fit, then (order, whole-device size) pairs."""
    cols: list[_Column] = []
    for i, need in enumerate(needs):
        for d in shared:
            units = units_for(need, *devices[d])
            if units is not None:
                cols.append((i, d, units))
        for g, memory in enumerate(sizes):
            if units_for(need, memory, False) is not None:
                cols.append((i, -1 - g, UNITS))
    return cols


def _rows(
    devices: Sequence[tuple[int, bool]],
    cols: list[_Column],
    shared: list[int],
    whole: dict[int, list[int]],
    sizes: list[int],
) -> list[_Row]:
    """Each order at most once, each shareable device within its units, each whole size within its count,
    and alike shareable neighbours loaded in non-increasing order."""
    rows: list[_Row] = []
    by_order: dict[int, list[int]] = {}
    by_target: dict[int, list[int]] = {}
    for c, (i, target, _) in enumerate(cols):
        by_order.setdefault(i, []).append(c)
        by_target.setdefault(target, []).append(c)
    for members in by_order.values():
        rows.append((-math.inf, 1.0, [(c, 1.0) for c in members]))
    for d in shared:
        if d in by_target:
            rows.append((-math.inf, float(UNITS), [(c, float(cols[c][2])) for c in by_target[d]]))
    for g, memory in enumerate(sizes):
        if -1 - g in by_target:
            rows.append((-math.inf, float(len(whole[memory])), [(c, 1.0) for c in by_target[-1 - g]]))
    for a, b in itertools.pairwise(shared):  # alike neighbours: loads non-increasing
        if devices[a] == devices[b] and a in by_target:
            terms = [(c, float(cols[c][2])) for c in by_target[a]]
            terms += [(c, -float(cols[c][2])) for c in by_target.get(b, [])]
            rows.append((0.0, math.inf, terms))
    return rows


def _highs(n: int, rows: list[_Row], time_limit: float) -> highspy.Highs:
    """HiGHS run on `n` binary columns maximising their sum under `rows`, to optimality or the time limit."""
    h = highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ carries no annotations
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.addCols(n, [1.0] * n, [0.0] * n, [1.0] * n, 0, [0] * n, [], [])
    h.changeColsIntegrality(
        n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger.value, dtype=np.uint8)
    )
    starts: list[int] = []
    indices: list[int] = []
    values: list[float] = []
    for _, _, terms in rows:
        starts.append(len(indices))
        for c, v in terms:
            indices.append(c)
            values.append(v)
    h.addRows(len(rows), [r[0] for r in rows], [r[1] for r in rows], len(indices), starts, indices, values)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    h.run()
    status = h.getModelStatus()
    if status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
        raise RuntimeError(f"HiGHS ended with {h.modelStatusToString(status)}")
    return h


def _assign(
    devices: Sequence[tuple[int, bool]],
    needs: Sequence[int],
    cols: list[_Column],
    x: list[float],
    whole: dict[int, list[int]],
    sizes: list[int],
) -> list[int | None]:
    """A device per order from the solution: whole-device sizes handed out one device each."""
    assignment: list[int | None] = [None] * len(needs)
    left = {memory: list(ds) for memory, ds in whole.items()}
    for c, (i, target, _) in enumerate(cols):
        if x[c] < 0.5:
            continue
        if target >= 0:
            assignment[i] = target
        else:
            assignment[i] = left[sizes[-1 - target]].pop()
    return assignment


def _check(
    devices: Sequence[tuple[int, bool]],
    needs: Sequence[int],
    assignment: list[int | None],
    units_for: Callable[[int, int, bool], int | None],
) -> None:
    """Refuse to believe a packing that breaks the rules: the yardstick must not over-commit."""
    used = [0] * len(devices)
    for need, d in zip(needs, assignment, strict=True):
        if d is None:
            continue
        units = units_for(need, *devices[d])
        if units is None:
            raise AssertionError(f"the solver put {need} bytes on device {d}, which cannot hold it")
        used[d] += units
        if used[d] > UNITS:
            raise AssertionError(f"the solver over-committed device {d}")
