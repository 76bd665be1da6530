"""Joint placement of orders that wait together: the most orders placed, found by bounded search.

Devices are seen as kinds (devices every order of the batch sees alike) with a stock of free units
per kind. Orders are taken largest first; each tries its options best first (the one-order policy's
ranking), and may also be left out. A branch stops when even the smallest remaining orders could not
all fit in the free memory left, so the first descent is best fit decreasing and the search only goes
on while more orders might be placed. It stops after `budget` nodes with the best found so far.

Before the search, the same orders are placed greedily smallest first (each on its best option): on a
large batch the budget runs out long before the search could beat that, and counting orders favours
the small ones, so the search starts from it and never answers with fewer orders placed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = ["Joint", "Kind", "loss", "most_placed"]

UNITS = 100


@attrs.frozen
class Kind:
    """Devices the batch's orders see alike: memory, sharing, and each order's (class rank, units)."""

    memory: int
    shareable: bool
    fits: tuple[tuple[int, int] | None, ...]  # per order: (index of its device class, units), or None


Choice = tuple[int, int]  # (kind, free units of the device taken, before taking)


@attrs.frozen
class Joint:
    """A choice per order (None: left out), and the order to take them in: "free units before taking"
    holds only when the choices are taken in that order."""

    choices: list[Choice | None]
    order: list[int]
    complete: bool = False  # the search ran to its end: no packing places more orders

    @property
    def placed(self) -> int:
        return sum(c is not None for c in self.choices)


def most_placed(
    needs: Sequence[int], kinds: Sequence[Kind], stock: Sequence[dict[int, int]], budget: int = 20_000
) -> Joint:
    """A choice per order (None: left out) placing the most orders; ties go to the first found.

    needs: bytes per order, a lower bound of what any placement of it takes. stock[k]: free units ->
    number of devices of kind k with that many free.
    """
    n = len(needs)
    seq = sorted(range(n), key=lambda i: (-needs[i], i))
    # Smallest remaining needs first, for the bound: reversed suffixes of the largest-first sequence.
    tails = [sorted(needs[i] for i in seq[pos:]) for pos in range(n + 1)]
    stock = [dict(s) for s in stock]
    free_bytes = sum(_bytes(kinds[k], f) * c for k, s in enumerate(stock) for f, c in s.items())
    current: list[Choice | None] = [None] * n
    best: list[Choice | None] = [None] * n
    best_count = -1
    nodes = 0

    def bound(pos: int, room: int) -> int:
        count = 0
        for need in tails[pos]:
            if need > room:
                break
            room -= need
            count += 1
        return count

    def go(pos: int, placed: int, room: int) -> None:
        nonlocal best_count, best, nodes
        nodes += 1
        if placed > best_count:
            best_count, best = placed, list(current)
        if pos == n or nodes > budget or placed + bound(pos, room) <= best_count:
            return
        i = seq[pos]
        for _, k, f, units in sorted(_options(kinds, stock, i)):
            taken = _bytes(kinds[k], f) - _bytes(kinds[k], f - units)
            _move(stock[k], f, f - units)
            current[i] = (k, f)
            go(pos + 1, placed + 1, room - taken)
            current[i] = None
            _move(stock[k], f - units, f)
            if nodes > budget:
                return
        go(pos + 1, placed, room)

    floor = _smallest_first(needs, kinds, stock)
    best_count = floor.placed
    if floor.placed == n:
        return Joint(floor.choices, floor.order, complete=True)
    go(0, 0, free_bytes)
    complete = nodes <= budget
    if best_count > floor.placed:
        return Joint(best, seq, complete)
    return Joint(floor.choices, floor.order, complete)


def _smallest_first(needs: Sequence[int], kinds: Sequence[Kind], stock: Sequence[dict[int, int]]) -> Joint:
    """Orders smallest first, each on its best option while one is free: a floor for the search."""
    stock = [dict(s) for s in stock]
    chosen: list[Choice | None] = [None] * len(needs)
    order = sorted(range(len(needs)), key=lambda i: (needs[i], i))
    for i in order:
        options = _options(kinds, stock, i)
        if options:
            _, k, f, units = min(options)
            _move(stock[k], f, f - units)
            chosen[i] = (k, f)
    return Joint(chosen, order)


def _options(
    kinds: Sequence[Kind], stock: Sequence[dict[int, int]], i: int
) -> list[tuple[tuple[int, int, int, int], int, int, int]]:
    """Where order `i` could go now: (its rank there, kind, free units of the device, units it takes)."""
    return [
        (_rank(kind, fit[0], f, fit[1]), k, f, fit[1])
        for k, kind in enumerate(kinds)
        if (fit := kind.fits[i]) is not None
        for f, count in stock[k].items()
        if count and f >= fit[1]
    ]


def _bytes(kind: Kind, free: int) -> int:
    """Free memory of one device of `kind` with `free` units left (a whole device is all or nothing)."""
    if kind.shareable:
        return free * kind.memory // UNITS
    return kind.memory if free >= UNITS else 0


def loss(kind: Kind, free: int, units: int) -> int:
    """What taking `units` of a device of `kind` with `free` units free costs in squared free pieces."""
    before, after = _bytes(kind, free), _bytes(kind, free - units)
    return before * before - after * after


def _rank(kind: Kind, class_rank: int, free: int, units: int) -> tuple[int, int, int, int]:
    """The one-order policy's order: class, loss in squared free pieces, used devices, smaller ones."""
    return class_rank, loss(kind, free, units), 0 if free < UNITS else 1, kind.memory


def _move(stock: dict[int, int], old: int, new: int) -> None:
    stock[old] -= 1
    if not stock[old]:
        del stock[old]
    stock[new] = stock.get(new, 0) + 1
