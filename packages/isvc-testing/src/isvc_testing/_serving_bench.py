"""Packing sized to serve beside packing sized to start (issue 42): the planner places the same orders both ways.

Before issue 42 a share held the weights, the runtime's need, the margin and the KV cache of one context of 4,096
tokens (`STARTS`); now it holds the class's serving target, the chat default by default (`SERVES`: 16 requests of
2,048 tokens at once, the longest 8,192). For each model and card, orders of that model are planned together
(`Planner.plan_many`) on four empty shareable cards until they no longer fit: orders placed per card, and tokens of
KV cache per GiB of card (what every placed launch's budget holds, over the cards' memory), both ways.
"""

from __future__ import annotations

import statistics
from typing import Any

from isvc_api import SERVING_DEFAULTS, EndpointType, Load, ModelFacts, RuntimeRequirements, ServingTarget
from isvc_planner import Inventory, Planner
from isvc_planner_client import OrderRef, PlanRequest

from isvc_testing._fleet import fleet_device_classes, fleet_gpu, fleet_slice

__all__ = ["CARDS", "MODELS", "STARTS", "packed", "serving_section"]

STARTS = Load(
    requests=1, typical=4096, longest=4096
)  # one context of 4,096 tokens: what a launch needed to start
SERVES = SERVING_DEFAULTS[EndpointType.CHAT]
CARD_COUNT = 4
# The vLLM chat recipe's margin (recipes/vllm-chat.yaml memory.margin 0.01) and its placements, as the controller
# sends them (RecipeBook.requirements).
REQUIREMENTS = RuntimeRequirements(runtimes=["vllm"], memory_margin_percent=1, max_devices=8)


def _chat(
    name: str, params: int, layers: int, heads: int, kv_heads: int, hidden: int, **more: Any
) -> ModelFacts:
    return ModelFacts(
        source="HuggingFace",
        name=name,
        architecture=more.pop("architecture", "LlamaForCausalLM"),
        parameter_count=params,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        hidden_size=hidden,
        **more,
    )


# Each model's config.json on the Hub (num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size,
# intermediate_size, vocab_size, max_position_embeddings) and its parameter count as the Hub lists it.
MODELS: dict[str, ModelFacts] = {
    "Qwen2.5-7B": _chat(
        "Qwen/Qwen2.5-7B-Instruct", 7_615_616_512, 28, 28, 4, 3584, intermediate_size=18944,
        vocab_size=152064, context_length=32768, dtype="bfloat16", architecture="Qwen2ForCausalLM",
    ),
    "Llama-3.1-8B": _chat(
        "meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248, 32, 32, 8, 4096, intermediate_size=14336,
        vocab_size=128256, context_length=131072, dtype="bfloat16",
    ),
    "Llama-3.2-3B": _chat(
        "meta-llama/Llama-3.2-3B-Instruct", 3_212_749_824, 28, 24, 8, 3072, intermediate_size=8192,
        vocab_size=128256, context_length=131072, dtype="bfloat16", tie_word_embeddings=True,
    ),
    "Qwen2.5-32B-AWQ": _chat(
        "Qwen/Qwen2.5-32B-Instruct-AWQ", 32_763_876_352, 64, 40, 8, 5120, intermediate_size=27648,
        vocab_size=152064, context_length=32768, quantization="AWQ", quantization_bits=4,
        architecture="Qwen2ForCausalLM",
    ),
}  # fmt: skip
# As the NVIDIA DRA driver publishes them (NVML memory.total; modal-labs/modal-client PR #2797).
CARDS = {
    "H100-80GB": ("81559Mi", "NVIDIA H100 80GB HBM3", 81559 / 1024),
    "A100-40GB": ("40Gi", "NVIDIA A100-SXM4-40GB", 40.0),
    "L4": ("23034Mi", "NVIDIA L4", 23034 / 1024),
}


def packed(model: ModelFacts, card: str, load: Load, cards: int = CARD_COUNT) -> tuple[float, float]:
    """Orders of `model` placed per card of `card` when sized for `load`, and tokens of KV cache per GiB of card."""
    memory, product, gib = CARDS[card]
    devices = [
        fleet_gpu("n0", i, memory_gi=memory, product=product, compute_capability="8.9.0")
        for i in range(cards)
    ]
    planner = Planner(Inventory.from_objects(fleet_device_classes(), [fleet_slice("n0", devices)], [], []))
    target = ServingTarget.of(load)
    placed, tokens = 0, 0
    for batch in range(1, 200):
        answers = planner.plan_many(
            [
                PlanRequest(
                    order=OrderRef(namespace="bench", name=f"o-{batch}-{i}"),
                    facts=model,
                    requirements=REQUIREMENTS,
                    serving=target,
                )
                for i in range(cards)
            ]
        )
        fitted = 0
        for answer in answers:
            if answer.placement is not None and answer.estimates is not None:
                fitted += 1
                tokens += (answer.estimates.kv_cache_tokens or 0) * answer.placement.device_count
        placed += fitted
        if fitted < cards:
            break
    return placed / cards, tokens / (cards * gib)


def serving_section(result: dict[str, Any], rows: list[tuple[str, ...]]) -> None:
    """Orders per card and KV tokens per GiB of card, sized to start and sized to serve, model by model."""
    figures: dict[str, dict[str, list[float]]] = {}
    before, after = [], []
    for card in CARDS:
        for name, model in MODELS.items():
            old, new = packed(model, card, STARTS), packed(model, card, SERVES)
            figures[f"{name} on {card}"] = {"starts": list(old), "serves": list(new)}
            before.append(old)
            after.append(new)
            rows.append(
                (
                    f"packing sized to serve, {name} on {card}: orders per card; KV tokens per GiB of card",
                    f"to start {old[0]:.2f}; {old[1]:,.0f}",
                    f"to serve {new[0]:.2f}; {new[1]:,.0f}",
                )
            )
    mean = {
        key: [statistics.fmean(x[i] for x in pairs) for i in (0, 1)]
        for key, pairs in (("starts", before), ("serves", after))
    }
    rows.append(
        (
            "packing sized to serve, mean over models and cards: orders per card; KV tokens per GiB",
            f"to start {mean['starts'][0]:.2f}; {mean['starts'][1]:,.0f}",
            f"to serve {mean['serves'][0]:.2f}; {mean['serves'][1]:,.0f}",
        )
    )
    result["serving_packing"] = {"by_model_and_card": figures, "mean": mean}
