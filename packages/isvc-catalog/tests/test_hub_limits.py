"""Issue 14, finding 2: a user's Hub repository cannot make the controller read without bound.

config.json, checkpoint indexes and safetensors headers used to be read whole (headers up to the format's
100 MiB), every shard's header was read, and a Hub dripping bytes held a worker as long as it liked. Each
read is now capped, the shards counted and one resolution has one deadline; going past any ends in
InvalidModelSource whose message names the limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_api import ModelFacts, Reason, Refusal
from isvc_catalog import HubClient, HubLimits
from isvc_testing.standin_hub import FixtureModel, StandinHub

MIB = 1024 * 1024
CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
PARAMS = 1_235_814_400
HOSTILE = [
    FixtureModel(
        repo="evil/huge-config", parameters=PARAMS, config=CONFIG, padded_files={"config.json": 6 * MIB}
    ),
    FixtureModel(
        repo="evil/huge-index",
        parameters=PARAMS,
        config=CONFIG,
        shards=2,
        padded_files={"model.safetensors.index.json": 6 * MIB},
    ),
    FixtureModel(
        repo="evil/huge-header",
        parameters=PARAMS,
        config=CONFIG,
        info_safetensors=False,
        header_length=50 * MIB,
    ),
    FixtureModel(
        repo="evil/many-shards", parameters=PARAMS, config=CONFIG, info_safetensors=False, shards=100
    ),
    FixtureModel(
        repo="evil/slow",
        parameters=PARAMS,
        config=CONFIG,
        drip=0.05,
        padded_files={"config.json": 200 * 1024},
    ),
    FixtureModel(
        repo="evil/malformed-config",
        parameters=PARAMS,
        config=CONFIG,
        raw_files={"config.json": '{"architectures": ['},
    ),
    FixtureModel(
        repo="evil/malformed-index",
        parameters=PARAMS,
        config=CONFIG,
        shards=2,
        raw_files={"model.safetensors.index.json": '{"weight_map": 7}'},
    ),
    FixtureModel(
        repo="evil/malformed-header",
        parameters=PARAMS,
        config=CONFIG,
        info_safetensors=False,
        header_length=64,
    ),
    FixtureModel(
        repo="fine/sixty-four-shards", parameters=PARAMS, config=CONFIG, info_safetensors=False, shards=64
    ),
    FixtureModel(
        repo="fine/big-config", parameters=PARAMS, config=CONFIG, padded_files={"config.json": 3 * MIB}
    ),
]


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    standin = StandinHub(HOSTILE)
    url = standin.start()
    yield url
    standin.stop()


def _refusal(answer: ModelFacts | Refusal) -> Refusal:
    assert isinstance(answer, Refusal), answer
    return answer


@pytest.mark.parametrize(
    ("repo", "limit"),
    [
        ("evil/huge-config", "config.json of evil/huge-config is larger than 4 MiB"),
        ("evil/huge-index", "model.safetensors.index.json of evil/huge-index is larger than 4 MiB"),
        (
            "evil/huge-header",
            "The safetensors header of model.safetensors of evil/huge-header is larger than 16 MiB",
        ),
        ("evil/many-shards", "split into 100 safetensors files, more than 64"),
    ],
)
def test_a_repository_past_a_read_limit_is_refused_naming_the_limit(hub: str, repo: str, limit: str) -> None:
    with HubClient(hub, timeout=5) as client:
        refusal = _refusal(client.resolve(repo))

    assert (refusal.reason, limit in refusal.message) == (Reason.INVALID_MODEL_SOURCE, True), refusal.message


def test_a_hub_dripping_bytes_is_given_up_on_at_the_deadline(hub: str) -> None:
    started = time.monotonic()
    with HubClient(hub, timeout=5, limits=HubLimits(deadline=1.0)) as client:
        refusal = _refusal(client.resolve("evil/slow"))
    took = time.monotonic() - started

    assert (refusal.reason, "longer than 1s" in refusal.message) == (Reason.INVALID_MODEL_SOURCE, True)
    assert took < 3.0


@pytest.mark.parametrize(
    ("repo", "needle"),
    [
        ("evil/malformed-config", "not a JSON object"),
        ("evil/malformed-index", "no weight_map"),
        ("evil/malformed-header", "not a valid safetensors file"),
    ],
)
def test_malformed_metadata_is_refused(hub: str, repo: str, needle: str) -> None:
    with HubClient(hub, timeout=5) as client:
        refusal = _refusal(client.resolve(repo))

    assert (refusal.reason, needle in refusal.message) == (Reason.INVALID_MODEL_SOURCE, True), refusal.message


@pytest.mark.parametrize("repo", ["fine/sixty-four-shards", "fine/big-config"])
def test_repositories_within_the_limits_resolve(hub: str, repo: str) -> None:
    with HubClient(hub, timeout=5) as client:
        answer = client.resolve(repo)

    assert isinstance(answer, ModelFacts) and answer.parameter_count == PARAMS


def test_the_limits_are_settings_of_the_client(hub: str) -> None:
    limits = HubLimits(json_bytes=1 * MIB)
    with HubClient(hub, timeout=5, limits=limits) as client:
        refusal = _refusal(client.resolve("fine/big-config"))

    assert "larger than 1 MiB" in refusal.message
