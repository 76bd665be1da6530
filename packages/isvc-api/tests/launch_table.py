"""The validation table of vLLM launches: `python packages/isvc-api/tests/launch_table.py` prints it as markdown.

For every vLLM model of models.yaml on every card, at the smallest share the planner would size for the chat
default serving target (16 requests of 2,048 tokens at once, the longest 8,192; or the TP size it would use):
the launch the memory model compiles (utilization, KV budget, what it serves, context, margin), and the
"starts" check of test_memory.py, which judges it with published figures instead (what torch sees, the
published weights, vLLM's measured non-KV memory, the CUDA context and graphs): what that leaves of the share.
"""

from __future__ import annotations

from isvc_api import (
    SERVING_DEFAULTS,
    EndpointType,
    Fit,
    MemoryRuntime,
    fit_launch,
    need_per_device,
    visible_bytes,
)
from test_memory import CARDS, GIB, MODELS, _measured_overhead, _starts, facts, quantity

CHAT = SERVING_DEFAULTS[EndpointType.CHAT]


def rows() -> list[str]:
    out = [
        "| model | card | share × TP | util | KV budget GiB | KV tokens | requests of 2,048 at once | context | "
        "margin GiB | measured non-KV GiB | left by published figures GiB | starts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(k for k, m in MODELS.items() if m["runtime"] == "vllm"):
        model, row = facts(key), MODELS[key]
        for card in sorted(CARDS):
            published = quantity(CARDS[card]["published"])
            for tp in (1, 2, 4, 8):
                need = need_per_device(model, MemoryRuntime.VLLM, tp, load=CHAT)
                assert need is not None
                share = -(-need[0] * 100 // visible_bytes(published)) + 2
                if share <= 100:
                    break
            else:
                continue

            fit = fit_launch(model, MemoryRuntime.VLLM, published, share, tp, load=CHAT)
            if not isinstance(fit, Fit):
                out.append(
                    f"| {key} | {card} | {share}% × {tp} | – | – | – | – | – | – | – | – | no: {fit} |"
                )
                continue
            try:
                left, starts = _starts(row, fit, CARDS[card], share) / GIB, "yes"
            except AssertionError:
                left, starts = float("nan"), "NO"
            measured = _measured_overhead(row, fit.batch, fit.tp) / GIB
            out.append(
                f"| {key} | {card} | {share}% × {tp} | {fit.utilization} | {fit.kv_bytes / GIB:.2f} | "
                f"{fit.kv_tokens:,} | {fit.sequences} | {fit.context:,} | {fit.margin / GIB:.2f} | {measured:.2f} | "
                f"{left:.2f} | {starts} |"
            )
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
