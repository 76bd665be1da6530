"""The most orders placed together, as a mixed-integer program solved by HiGHS within a time budget.

The planner writes the problem from its ledger (`_program.program`): orders, and bins they may go to. A
bin is one device that holds several orders by consumable capacity, or a stock of alike devices each
taken whole by one order. What an order takes of a bin, per capacity, is what the ledger counts for its
claim (`Inventory.share_take`: the shares and the memory each share claims as kube-scheduler rounds
them); what is left of each capacity is what the ledger has left beside every holding.

    maximise   Σ x[i,b]                            x[i,b] ∈ {0, 1}: order i in bin b (where it fits)
    subject to Σ_b x[i,b] ≤ 1                       each order at most once
               Σ_i take[i,b,c] x[i,b] ≤ left[b,c]   every capacity c of a device shared by capacity
               Σ_i x[i,b] ≤ count[b]                a stock of devices taken whole
               x[i,b] ≤ y[b]                         a device not held yet, drawing on counters, is taken
               Σ_b draw[b,k] y[b] ≤ free[k]          every shared counter k of a pool (MIG partitions)

then    minimise   Σ cost[i,b] x[i,b]  subject to the same and Σ x[i,b] ≥ the count found

Constraints: capacity, whole devices, counters, each order once. Objective: the number of orders
placed; then, with that count held, `cost` (the order's class rank, then the one-order policy's loss of
free memory there) breaks ties. Priorities are not in the program: each priority is solved apart,
highest first, on what the higher ones left (a constraint by construction); preemption is not either:
an order the program leaves out gets the one-order answer, which may preempt as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import attrs
import highspy
import numpy as np

__all__ = ["Bin", "Option", "Problem", "Solution", "solve"]


@attrs.frozen
class Bin:
    """Where orders may go: one device shared by capacity, or `count` alike devices each taken whole."""

    count: int = 1
    left: tuple[Fraction, ...] = ()  # per capacity, for a shared device; () for whole devices
    draws: tuple[tuple[int, int], ...] = ()  # (counter, amount) it draws once taken, when nobody holds it


@attrs.frozen
class Option:
    """Order `order` in bin `bin`: what it takes of each capacity, and its tie-breaking cost in [0, 1)."""

    order: int
    bin: int
    take: tuple[Fraction, ...] = ()
    cost: float = 0.0


@attrs.frozen
class Problem:
    """Orders, the bins they may go to, the options that fit, and what is left of each counter."""

    orders: int
    bins: tuple[Bin, ...]
    options: tuple[Option, ...]
    counters: tuple[int, ...] = ()


@attrs.frozen
class Solution:
    """The bin per order (None: left out), and what the solver said about it."""

    bins: list[int | None]
    status: str  # optimal (the count is proven), limit (the budget ran out), failed
    bound: int  # the proven most orders any packing places (the orders' count when none was proven)
    seconds: float
    detail: str = ""

    @property
    def placed(self) -> int:
        return sum(b is not None for b in self.bins)


def _binding(left: Sequence[Fraction], takes: Sequence[Sequence[Fraction]]) -> list[int]:
    """The capacities of a shared device that need a row: not one these orders cannot run out of
    together, nor one that runs out no sooner than another row kept (every order takes of it at most its
    part of what is left, relative to that other: a share's memory, floored, beside its shares)."""
    needed = [d for d, room in enumerate(left) if sum(t[d] for t in takes) > room]
    needed.sort(key=lambda d: -sum(t[d] for t in takes) / left[d])  # the most binding first
    kept: list[int] = []
    for d in needed:
        if not any(all(t[d] * left[e] <= t[e] * left[d] for t in takes) for e in kept):
            kept.append(d)
    return kept


def _scaled(row: Sequence[Fraction], rhs: Fraction) -> tuple[list[float], float]:
    """A row of exact amounts as integers (one common denominator), so the solver compares whole numbers."""
    scale = 1
    for value in (*row, rhs):
        scale = math.lcm(scale, value.denominator)
    return [float(v * scale) for v in row], float(rhs * scale)


def solve(problem: Problem, seconds: float, start: Sequence[int | None] | None = None) -> Solution:
    """Solve with HiGHS for at most `seconds`; `start` (a bin per order) is offered as a first packing.

    First the count alone (its objective is whole, which lets HiGHS prune by whole orders: on the large
    instances of `nox -s bench` it proves most optima in a second, against a few when ties weighed in
    it); then, with the count held, the ties for as long as the first part took (at least 0.2 s), within
    `seconds` in all.
    """
    began = time.monotonic()
    options = problem.options
    n = len(options)
    if n == 0:
        return Solution([None] * problem.orders, "optimal", 0, 0.0)
    h = _highs()
    # Columns: one per option, then one per counter-drawing shared device ("taken").
    drawn = [b for b, bin_ in enumerate(problem.bins) if bin_.draws and bin_.left]
    taken = {b: n + j for j, b in enumerate(drawn)}
    columns = n + len(drawn)
    h.addCols(columns, [1.0] * n + [0.0] * len(drawn), [0.0] * columns, [1.0] * columns, 0, [], [], [])
    h.changeColsIntegrality(
        columns,
        np.arange(columns, dtype=np.int32),
        np.full(columns, highspy.HighsVarType.kInteger.value, dtype=np.uint8),
    )
    _add_rows(h, *_rows(problem, taken))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    if start is not None:
        chosen = {(i, b) for i, b in enumerate(start) if b is not None}
        values = [1.0 if (o.order, o.bin) in chosen else 0.0 for o in options]
        used = {b for _, b in chosen}
        _offer(h, values + [1.0 if b in used else 0.0 for b in drawn])
    h.setOptionValue("time_limit", max(0.01, seconds - (time.monotonic() - began)))  # writing it counts too
    try:
        h.run()
    except Exception as error:  # the native solver raised: the caller keeps its own packing
        return Solution(
            [None] * problem.orders, "failed", problem.orders, time.monotonic() - began, str(error)
        )
    return _read(h, problem, began, seconds)


def _highs() -> Any:
    """A quiet, single-threaded, reproducible HiGHS that stops within one order of the bound."""
    h = highspy.Highs()  # type: ignore[no-untyped-call]  # its __init__ carries no annotations
    for option, value in (
        ("output_flag", False),
        ("log_to_console", False),
        ("threads", 1),
        ("random_seed", 0),
        ("mip_rel_gap", 0.0),
        ("mip_abs_gap", 0.99),  # the count is whole: within one order of the bound is the optimum
    ):
        h.setOptionValue(option, value)
    return h


_Rows = tuple[list[tuple[float, list[int], list[float]]], list[tuple[list[int], list[float]]]]


def _rows(problem: Problem, taken: dict[int, int]) -> _Rows:
    """The program's rows: `Σ ≤ upper` ones (each order once, each bin's capacities or count, each counter)
    as (upper, columns, coefficients), and `Σ ≥ 0` ones (an option only on a device taken)."""
    options = problem.options
    rows: list[tuple[float, list[int], list[float]]] = []  # (upper, columns, coefficients); lower −∞
    lower_rows: list[tuple[list[int], list[float]]] = []  # Σ ≥ 0
    by_order: dict[int, list[int]] = {}
    by_bin: dict[int, list[int]] = {}
    for c, o in enumerate(options):
        by_order.setdefault(o.order, []).append(c)
        by_bin.setdefault(o.bin, []).append(c)
    for cols in by_order.values():
        rows.append((1.0, cols, [1.0] * len(cols)))
    for b, bin_ in enumerate(problem.bins):
        cols = by_bin.get(b, [])
        if not cols:
            continue
        if not bin_.left:
            rows.append((float(bin_.count), cols, [1.0] * len(cols)))
            continue
        for d in _binding(bin_.left, [options[c].take for c in cols]):
            coefficients, upper = _scaled([options[c].take[d] for c in cols], bin_.left[d])
            rows.append((upper, cols, coefficients))
        if b in taken:
            for c in cols:
                lower_rows.append(([taken[b], c], [1.0, -1.0]))
    counter_rows: dict[int, tuple[list[int], list[float]]] = {}
    for b, bin_ in enumerate(problem.bins):
        if not bin_.draws or b not in by_bin:
            continue
        cols = [taken[b]] if b in taken else by_bin[b]
        for k, amount in bin_.draws:
            row = counter_rows.setdefault(k, ([], []))
            row[0].extend(cols)
            row[1].extend([float(amount)] * len(cols))
    for k, (cols, coefficients) in counter_rows.items():
        rows.append((float(problem.counters[k]), cols, coefficients))
    return rows, lower_rows


def _read(h: Any, problem: Problem, began: float, seconds: float) -> Solution:
    """The solution HiGHS ran to, its ties settled within what is left of `seconds`."""
    options = problem.options
    n = len(options)
    status = h.getModelStatus()
    info = h.getInfo()
    if status == highspy.HighsModelStatus.kOptimal:
        verdict = "optimal"
    elif status == highspy.HighsModelStatus.kTimeLimit:
        verdict = "limit"
    else:
        return Solution(
            [None] * problem.orders,
            "failed",
            problem.orders,
            time.monotonic() - began,
            h.modelStatusToString(status),
        )
    if not info.primal_solution_status:
        spent = time.monotonic() - began
        return Solution([None] * problem.orders, verdict, problem.orders, spent, "no packing found in time")
    x = list(h.getSolution().col_value)
    dual = info.mip_dual_bound
    count = sum(x[c] > 0.5 for c in range(n))
    bound = problem.orders if not math.isfinite(dual) else min(problem.orders, math.floor(dual + 1e-6))
    first_part = time.monotonic() - began
    left = seconds - first_part
    if count and left > 0.05 and any(o.cost > 0 for o in options):
        x = _ties(h, problem, x, count, min(left, max(0.2, first_part)))
    bins: list[int | None] = [None] * problem.orders
    for c, o in enumerate(options):
        if x[c] > 0.5:
            bins[o.order] = o.bin
    return Solution(bins, verdict, max(bound, count), time.monotonic() - began)


def _offer(h: Any, values: list[float]) -> None:
    """A first packing for HiGHS to start from (ignored by it if it breaks a row)."""
    first = highspy.HighsSolution()
    first.col_value = values
    first.value_valid = True
    h.setSolution(first)


def _ties(h: Any, problem: Problem, x: list[float], count: int, seconds: float) -> list[float]:
    """The packing of `count` orders whose ties cost least, found within `seconds`; `x` if none is."""
    n = len(problem.options)
    h.addRow(float(count), highspy.kHighsInf, n, np.arange(n, dtype=np.int32), np.ones(n))
    h.changeColsCost(
        n, np.arange(n, dtype=np.int32), np.array([min(max(o.cost, 0.0), 1.0) for o in problem.options])
    )
    h.changeObjectiveSense(highspy.ObjSense.kMinimize)
    h.setOptionValue("time_limit", max(0.01, seconds))
    h.setOptionValue("mip_abs_gap", 1e-6)
    h.setOptionValue("mip_rel_gap", 1e-3)
    _offer(h, x)
    try:
        h.run()
    except Exception:  # the count is what matters: the first packing stands
        return x
    if not h.getInfo().primal_solution_status:
        return x
    better = list(h.getSolution().col_value)
    return better if sum(better[c] > 0.5 for c in range(n)) >= count else x


def _add_rows(
    h: Any, rows: list[tuple[float, list[int], list[float]]], lower_rows: list[tuple[list[int], list[float]]]
) -> None:
    """Add `Σ ≤ upper` and `Σ ≥ 0` rows in one call each (compressed row form)."""
    for lowers, uppers, batch in (
        ([-highspy.kHighsInf] * len(rows), [r[0] for r in rows], [(r[1], r[2]) for r in rows]),
        ([0.0] * len(lower_rows), [highspy.kHighsInf] * len(lower_rows), lower_rows),
    ):
        if not batch:
            continue
        starts: list[int] = []
        indices: list[int] = []
        values: list[float] = []
        for cols, coefficients in batch:
            starts.append(len(indices))
            indices.extend(cols)
            values.extend(coefficients)
        h.addRows(len(batch), lowers, uppers, len(indices), starts, indices, values)
