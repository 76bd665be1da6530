"""The work queue: deduplicated keys, urgent ones first in the order they came."""

from __future__ import annotations

from isvc_operator import WorkQueue


def drain(queue: WorkQueue[str], timeout: float = 0.01) -> list[str]:
    out = []
    while (key := queue.get(timeout=timeout)) is not None:
        out.append(key)
        queue.done(key)
    return out


def test_urgent_keys_go_first_in_arrival_order_and_a_waiting_key_made_urgent_moves_up() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("new-1", urgent=True)
    queue.add("new-2", urgent=True)
    queue.add("c", urgent=True)  # an edit of an order already waiting
    queue.add("a")  # waits once, however often it is added
    assert drain(queue) == ["new-1", "new-2", "a", "c", "b"]  # after two urgent ones, one that waited


def test_a_burst_of_new_keys_does_not_starve_the_others() -> None:
    """Issue 15: 2,000 orders created faster than they were passed kept the ones whose pods became ready
    waiting until the burst ended (median order→Ready 638 s); now every third key is one that waited."""
    queue: WorkQueue[str] = WorkQueue()
    for key in ("ready-1", "ready-2", "ready-3"):
        queue.add(key)
    for i in range(8):
        queue.add(f"new-{i}", urgent=True)
    assert drain(queue) == [
        "new-0",
        "new-1",
        "ready-1",
        "new-2",
        "new-3",
        "ready-2",
        "new-4",
        "new-5",
        "ready-3",
        "new-6",
        "new-7",
    ]


def test_one_timer_per_key_the_earliest_so_passes_at_rest_are_one_per_delay() -> None:
    now = [0.0]
    queue: WorkQueue[str] = WorkQueue(clock=lambda: now[0])
    queue.add_after("b", 30.0)
    queue.add_after("b", 3.0)  # an earlier timer wins
    for second in range(5):  # every pass an event caused asked to come back after the health period
        now[0] = float(second)
        queue.add_after("a", 30.0)
    now[0] = 3.0
    assert drain(queue, 0) == ["b"]
    seen = []
    for second in range(30, 36):
        now[0] = float(second)
        seen += drain(queue, 0)
    assert seen == ["a"]  # once, not once for each of the five passes
    now[0] = 60.0
    assert drain(queue, 0) == []  # the dropped later timers of b and a never fire
    queue.add_after("b", 1.0)
    now[0] = 61.0
    assert drain(queue, 0) == ["b"]  # a key may be timed again once its timer fired
