"""The work queue: deduplicated keys, urgent ones first in the order they came."""

from __future__ import annotations

from isvc_operator import WorkQueue


def drain(queue: WorkQueue[str]) -> list[str]:
    out = []
    while (key := queue.get(timeout=0.01)) is not None:
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
    assert drain(queue) == ["new-1", "new-2", "c", "a", "b"]
