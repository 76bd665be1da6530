"""The bench's packing sized to serve beside sized to start (issue 42): the planner places the same orders both
ways, and what a card carries is counted, not assumed."""

from __future__ import annotations

from isvc_testing._serving_bench import MODELS, SERVES, STARTS, packed


def test_sized_to_serve_places_no_more_orders_and_carries_more_kv_per_gib() -> None:
    start = packed(MODELS["Llama-3.1-8B"], "H100-80GB", STARTS, cards=2)
    serve = packed(MODELS["Llama-3.1-8B"], "H100-80GB", SERVES, cards=2)
    assert serve[0] <= start[0] and serve[1] > start[1]
    # every order placed carries the target's 16 requests of 2,048 tokens: 32,768 tokens of KV at least
    assert serve[1] >= serve[0] * 32_768 / (81559 / 1024)
