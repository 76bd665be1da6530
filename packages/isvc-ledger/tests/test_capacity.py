"""The ledger counts consumable capacity as kube-scheduler does (issue 26).

The rules are those of k8s.io/dynamic-resource-allocation v0.36.3 (Kubernetes 1.36.3's scheduler),
`structured/internal/incubating/consumable_capacity.go`: `calculateConsumedCapacity` (unrequested:
the default, or the whole value without a policy; requested: rounded up by the range's min and step, or to
the next valid value), `violatesPolicy` (above max, off the step, not a valid value) and
`CmpRequestOverCapacity` (every published capacity: consumed + request ≤ value). The table below restates
the cases of that file's `consumable_capacity_test.go`; the planner's `test_capacity_planned.py` checks the
ledger's free room and every placement against a separate transliteration of those functions in integers.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from isvc_ledger import Capacity, Policy, consumed, consumption, fits, share_request, violates

MI, GI = 1 << 20, 1 << 30
D = Decimal


def cap(value: int, default: int | None = None, **policy: Any) -> Capacity:
    if default is None and not policy:
        return Capacity(D(value))
    values = tuple(D(v) for v in policy.pop("valid_values", ()))
    bounds = {k: D(v) for k, v in policy.items()}
    return Capacity(
        D(value), Policy(D(default) if default is not None else None, values, ranged=bool(bounds), **bounds)
    )


@pytest.mark.parametrize(
    ("requested", "capacity", "expected"),
    [
        (None, Capacity(D(1), Policy()), 1),  # empty policy: the whole value
        (None, cap(2, 1, min=1), 1),  # unrequested: the default
        (None, cap(2, 1, valid_values=[1]), 1),
        (2, cap(2, 1, min=1), 2),  # above min, no step: as asked
        (1, cap(2, 1, min=2), 2),  # below min: min
        (2, cap(3, 1, min=1, step=2), 3),  # min + n·step, rounded up
        (2, cap(2, 1, min=1, step=1), 2),
        (2, cap(3, 1, valid_values=[1, 2, 3]), 2),
        (2, cap(3, 1, valid_values=[1, 3]), 3),  # the next valid value
        (3, cap(3, 1, valid_values=[1, 2]), 3),  # above every valid value: as asked (then it violates)
        (5, cap(9), 5),  # no policy: as asked
    ],
)
def test_consumed_capacity_is_the_schedulers(
    requested: int | None, capacity: Capacity, expected: int
) -> None:
    assert consumed(None if requested is None else D(requested), capacity) == expected


@pytest.mark.parametrize(
    ("amount", "capacity", "expected"),
    [
        (1, Capacity(D(9)), False),
        (1, cap(9, 1, min=1, max=2), False),
        (2, cap(9, 1, min=1, max=1), True),
        (1, cap(9, 1, valid_values=[1]), False),
        (2, cap(9, 1, valid_values=[1]), True),
        (4, cap(9, 0, min=0, step=3), True),
    ],
)
def test_violating_the_request_policy_is_the_schedulers(
    amount: int, capacity: Capacity, expected: bool
) -> None:
    assert violates(D(amount), capacity.policy) is expected


H100 = {  # the NVIDIA driver's ConsumableShares shape (isvc_testing.fleet_gpu): 100 shares, memory by the Mi
    "shares": cap(100, 1, min=1, max=100, step=1),
    "memory": cap(80 * GI, 0, min=0, step=MI),
}


def test_the_reported_h100_rounding_surplus_is_counted_and_no_longer_made_issue_26() -> None:
    """2 × 23 % and 5 × 9 % claimed with the memory rounded up to whole Mi each: 74,549 of 81,920 MiB. The
    shares leave 9, the memory 7,371 MiB; a 9 % claim asking 7,373 MiB never fit, and the ledger said it did."""
    old = {"shares": D(0), "memory": D(0)}
    for share, mib in [(23, 18842)] * 2 + [(9, 7373)] * 5:
        taken = consumption({"shares": D(share), "memory": D(mib * MI)}, H100)
        assert taken is not None
        old = {n: old[n] + taken[n] for n in old}
    assert old == {"shares": 91, "memory": 74549 * MI}
    ask = consumption(share_request(9, H100), H100)
    assert ask is not None and ask["memory"] == 7372 * MI  # floored to a whole Mi, never rounded up
    assert not fits(old, ask, H100)  # 7,371 MiB left: the ledger must see no room for 9 %
    assert fits(old, consumption(share_request(8, H100), H100) or {}, H100)
    new = {"shares": D(0), "memory": D(0)}  # the same shares asked as the planner now asks them
    for share in [23, 23, 9, 9, 9, 9, 9, 9]:
        taken = consumption(share_request(share, H100), H100)
        assert taken is not None and fits(new, taken, H100)
        new = {n: new[n] + taken[n] for n in new}
    assert new["shares"] == 100 and new["memory"] <= 80 * GI
