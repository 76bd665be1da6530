"""The benchmark's models and fleets: a model of a given size, the memory it asks, fleets of nodes × 8 GPUs,
and an independent tally of what plans took."""

from __future__ import annotations

import random
from typing import Any

from isvc_api import GIB, ModelFacts, ModelSource, PlacementMode
from isvc_planner import memory_need
from isvc_planner_client import PlanResponse

from isvc_testing._fleet import fleet_gpu, fleet_slice

__all__ = ["PRODUCTS", "Tally", "bench_fleet", "bench_model", "required_bytes", "sized_facts"]

PRODUCTS = {80: "NVIDIA H100 80GB HBM3", 40: "NVIDIA A100-SXM4-40GB", 24: "NVIDIA L4", 141: "NVIDIA H200"}


def bench_model(weights_gib: float, name: str) -> ModelFacts:
    return ModelFacts(
        source=ModelSource.HUGGING_FACE,
        name=name,
        parameter_count=int(weights_gib * GIB / 2),
        dtype="bfloat16",
    )


def _runtime_overhead() -> float:
    """GiB the memory model adds to 1.1 × weights for a model without geometry (KV: 10 % of weights)."""
    probe = memory_need(bench_model(1.0, "bench/probe"))
    assert probe is not None
    return probe.required / GIB - 1.1


_OVERHEAD = _runtime_overhead()


def sized_facts(need_gib: float, rng: random.Random) -> ModelFacts:
    """A model of about `need_gib` GiB in total (KV unknown: 10 % of weights, plus the runtime's own)."""
    weights = max(0.5, (need_gib - _OVERHEAD) / 1.1)
    return bench_model(weights, f"bench/{rng.randrange(10**6)}")


def required_bytes(facts: ModelFacts) -> int:
    """Bytes the planner's memory model asks for the model on one device."""
    need = memory_need(facts)
    assert need is not None
    return need.required


def bench_fleet(nodes: int, rng: random.Random) -> list[dict[str, Any]]:
    slices = []
    for n in range(nodes):
        mem = rng.choice([80, 80, 40, 141])
        shares = rng.random() < 0.75
        slices.append(
            fleet_slice(
                f"node-{n:04d}",
                [
                    fleet_gpu(f"node-{n:04d}", i, memory_gi=mem, product=PRODUCTS[mem], shares=shares)
                    for i in range(8)
                ],
            )
        )
    return slices


class Tally:
    """An independent count of what plans took, to catch over-commit."""

    def __init__(self) -> None:
        self.units: dict[tuple[str, str], int] = {}
        self.overcommits = 0

    def take(self, response: PlanResponse) -> None:
        p = response.placement
        if p is None or not p.devices or p.pool is None:
            return
        units = p.share_percent if p.placement_mode == PlacementMode.SHARED and p.share_percent else 100
        for d in p.devices:
            key = (p.pool, d)
            self.units[key] = self.units.get(key, 0) + units
            if self.units[key] > 100:
                self.overcommits += 1
