"""Issue 14, finding 2, and issue 29: a user's Hub repository cannot make the controller read without bound.

config.json, checkpoint indexes and safetensors headers used to be read whole (headers up to the format's
100 MiB), every shard's header was read, and a Hub dripping bytes held a worker as long as it liked. Each
read is now capped, the shards counted and one resolution has one deadline; going past any ends in
InvalidModelSource whose message names the limit.

Issue 29: GGUF variants had no shard cap (a 2,000-file variant cost 2,001 requests), each GGUF header was
read up to 64 MiB and every one kept until the resolution ended (eight files with 60 MiB strings took the
controller from 424 to 1,019 MiB). Each cap is now shown just under (the repository resolves) and just over
(refused, naming the cap); memory under concurrency is test_hub_concurrency.py's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from isvc_api import ModelFacts, Reason, Refusal
from isvc_catalog import HubClient, HubLimits
from isvc_testing.standin_hub import (
    HOSTILE_CONFIG,
    HOSTILE_PARAMETERS,
    FixtureModel,
    StandinHub,
    gguf_repository,
    hostile_repositories,
)

MIB = 1024 * 1024
CONFIG = HOSTILE_CONFIG
PARAMS = HOSTILE_PARAMETERS
LIMITS = HubLimits()
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
        repo="fine/big-config", parameters=PARAMS, config=CONFIG, padded_files={"config.json": 3 * MIB}
    ),
]


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    standin = StandinHub([*HOSTILE, *hostile_repositories()])
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
            "The safetensors header of model.safetensors of evil/huge-header is larger than 8 MiB",
        ),
        ("evil/many-shards", "split into 100 safetensors files, more than 64"),
        ("evil/sixty-five-shards", "split into 65 safetensors files, more than 64"),
        ("evil/gguf-65-files", "split into 65 GGUF files, more than 64"),
        (
            "evil/gguf-huge-header",
            "The GGUF header of m-q4_k_m.gguf of evil/gguf-huge-header is larger than 32 MiB",
        ),
        (
            "evil/gguf-headers-past-budget",
            "headers of evil/gguf-headers-past-budget add up to more than 64 MiB",
        ),
        ("evil/gguf-too-many-tensors", "it declares 16385 tensors, more than 16384"),
        ("evil/too-many-files", "holds more than 20000 files"),
        ("evil/json-values", "config.json of evil/json-values holds more than 500000 JSON values"),
        (
            "evil/safetensors-header-past-cap",
            "The safetensors header of model.safetensors of evil/safetensors-header-past-cap is larger than 8 MiB",
        ),
        ("evil/config-past-cap", "config.json of evil/config-past-cap is larger than 4 MiB"),
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


@pytest.mark.parametrize(
    "repo",
    [
        "fine/sixty-four-shards",
        "fine/big-config",
        "fine/gguf-64-files",
        "fine/gguf-big-header",
        "fine/gguf-headers-at-budget",
        "fine/gguf-many-tensors",
        "fine/many-files",
        "fine/json-values",
        "fine/config-at-cap",
    ],
)
def test_repositories_just_within_the_limits_resolve(hub: str, repo: str) -> None:
    with HubClient(hub, timeout=5) as client:
        answer = client.resolve(repo)

    assert isinstance(answer, ModelFacts), answer
    assert answer.parameter_count == PARAMS


def test_a_safetensors_header_just_under_its_cap_is_read_whole(hub: str) -> None:
    with HubClient(hub, timeout=5) as client:
        answer = client.resolve("fine/big-safetensors-header")
        header = client._http.get(
            f"{hub}/fine/big-safetensors-header/resolve/main/model.safetensors",
            headers={"Range": "bytes=0-7"},
        ).content

    assert isinstance(answer, ModelFacts), answer
    assert (answer.parameter_count, answer.dtype_counts) == (PARAMS, {"BF16": PARAMS})
    assert LIMITS.header_bytes - MIB < int.from_bytes(header, "little") <= LIMITS.header_bytes


def test_a_two_thousand_file_gguf_variant_costs_one_request_issue_29() -> None:
    standin = StandinHub([gguf_repository("evil/gguf-2000-files", files=2000)])
    url = standin.start()
    try:
        with HubClient(url, timeout=5) as client:
            refusal = _refusal(client.resolve("evil/gguf-2000-files"))
    finally:
        standin.stop()

    assert "split into 2000 GGUF files, more than 64" in refusal.message
    assert [path for _, path, _ in standin.requests] == ["/api/models/evil/gguf-2000-files"]


def test_the_limits_are_settings_of_the_client(hub: str) -> None:
    limits = HubLimits(json_bytes=1 * MIB)
    with HubClient(hub, timeout=5, limits=limits) as client:
        refusal = _refusal(client.resolve("fine/big-config"))

    assert "larger than 1 MiB" in refusal.message
