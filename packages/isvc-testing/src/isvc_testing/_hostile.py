"""Hostile Hub repositories at every read limit of isvc_catalog.HubLimits: each just under it (resolves)
and just over it (refused, naming the limit), for the stand-in Hub (issue 14, finding 2; issue 29)."""

from __future__ import annotations

import json
from typing import Any

from isvc_catalog import HubLimits

from isvc_testing._repos import FixtureModel

__all__ = ["HOSTILE_CONFIG", "HOSTILE_PARAMETERS", "gguf_repository", "hostile_repositories", "json_values"]

_MIB = 1024 * 1024
HOSTILE_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
HOSTILE_PARAMETERS = 1_235_814_400
# bytes of one record of a safetensors header the stand-in writes with many records per shard
_RECORD = len(
    '"model.layers.0.packed_bf16.00000":{"dtype":"BF16","shape":[12345],"data_offsets":[1234567890,1234567890]},'
)


def gguf_repository(repo: str, files: int = 1, **spec: Any) -> FixtureModel:
    """A GGUF repository whose one variant is split into `files` files (`spec`: padding, tensors)."""
    names = (
        {"m-q4_k_m.gguf": 4_000_000_000}
        if files == 1
        else {f"m-q4_k_m-{i:05d}-of-{files:05d}.gguf": 4_000_000_000 for i in range(1, files + 1)}
    )
    gguf = {"architecture": "llama", "context_length": 4096, "block_count": 16, "files": names, **spec}
    return FixtureModel(repo=repo, parameters=HOSTILE_PARAMETERS, format="gguf", gguf=gguf)


def json_values(count: int) -> str:
    """config.json holding exactly `count` JSON values as the limit counts them (commas and brackets)."""
    doc = json.dumps({**HOSTILE_CONFIG, "_pad": []})
    base = doc.count(",") + doc.count("{") + doc.count("[")
    return json.dumps({**HOSTILE_CONFIG, "_pad": [0] * (count - base + 1)})


def _model(repo: str, **fields: Any) -> FixtureModel:
    return FixtureModel(repo=repo, parameters=HOSTILE_PARAMETERS, config=HOSTILE_CONFIG, **fields)


def hostile_repositories(limits: HubLimits | None = None, prefix: str = "") -> list[FixtureModel]:
    """One repository just under and one just over each limit; `fine/…` resolve, `evil/…` are refused."""
    lim = limits or HubLimits()
    pad = lim.gguf_header_bytes - 2 * _MIB  # a GGUF header read whole as the cap (reads double up to it)
    budget = lim.headers_bytes // lim.gguf_header_bytes  # such headers the budget of one resolution holds
    records = (lim.header_bytes - 128 * 1024) // _RECORD
    repos = [
        _model("fine/sixty-four-shards", info_safetensors=False, shards=lim.shards),
        _model("evil/sixty-five-shards", info_safetensors=False, shards=lim.shards + 1),
        gguf_repository("fine/gguf-64-files", files=lim.shards),
        gguf_repository("evil/gguf-65-files", files=lim.shards + 1),
        gguf_repository("fine/gguf-big-header", padding=lim.gguf_header_bytes - _MIB),
        gguf_repository("evil/gguf-huge-header", padding=lim.gguf_header_bytes + 1),
        gguf_repository("fine/gguf-headers-at-budget", files=budget, padding=pad),
        gguf_repository("evil/gguf-headers-past-budget", files=budget + 1, padding=pad),
        gguf_repository("fine/gguf-many-tensors", tensors=16_384),
        gguf_repository("evil/gguf-too-many-tensors", tensors=16_385),
        # + .gitattributes, config.json and the weights
        _model("fine/many-files", extra_files={f"extra/{i}.txt": 1 for i in range(lim.files - 3)}),
        _model("evil/too-many-files", extra_files={f"extra/{i}.txt": 1 for i in range(lim.files - 2)}),
        _model("fine/json-values", raw_files={"config.json": json_values(lim.json_values)}),
        _model("evil/json-values", raw_files={"config.json": json_values(lim.json_values + 1)}),
        _model("fine/big-safetensors-header", info_safetensors=False, tensors_per_shard=records),
        _model(
            "evil/safetensors-header-past-cap", info_safetensors=False, header_length=lim.header_bytes + 1
        ),
        _model("fine/config-at-cap", padded_files={"config.json": lim.json_bytes}),
        _model("evil/config-past-cap", padded_files={"config.json": lim.json_bytes + 1}),
        # the costliest JSON per byte (an empty object in three bytes: two values as counted), at the value cap
        _model(
            "evil/object-bomb",
            raw_files={"config.json": "[" + ",".join(["{}"] * (lim.json_values // 2)) + "]"},
        ),
        # issue 29's own: a split variant of eight files, each header carrying a 60 MiB string
        gguf_repository("evil/gguf-eight-60-mib-strings", files=8, padding=60 * _MIB),
    ]
    return [r.model_copy(update={"repo": prefix + r.repo}) for r in repos]
