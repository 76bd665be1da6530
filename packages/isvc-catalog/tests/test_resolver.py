from __future__ import annotations

from typing import Any

import pytest
from isvc_api import CatalogKind, ModelFacts, ModelSource, ModelSpec, Reason, Refusal
from isvc_catalog import (
    Absent,
    CatalogReader,
    HubClient,
    Resolver,
    SourceUnavailableError,
    auth_secret_not_found,
)
from isvc_testing.standin_hub import StandinHub


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[tuple[CatalogKind, str, str | None]] = []

    def get(self, kind: CatalogKind, name: str, namespace: str | None) -> dict[str, Any] | Absent:
        self.calls.append((kind, name, namespace))
        return Absent.OBJECT


def hf(name: str) -> ModelSpec:
    return ModelSpec.model_validate({"src": "HuggingFace", "ref": {"name": name}})


def catalog(name: str, kind: str) -> ModelSpec:
    return ModelSpec.model_validate({"src": "AIModels", "ref": {"name": name, "kind": kind}})


def test_a_hugging_face_order_resolves_through_the_hub_with_its_token(client: HubClient) -> None:
    got = Resolver(client).resolve(hf("meta-llama/Llama-3.1-8B-Instruct"), "team", "hf_test_token")
    assert isinstance(got, ModelFacts)
    assert got.source == ModelSource.HUGGING_FACE


def test_a_hugging_face_order_without_its_token_is_refused(client: HubClient) -> None:
    got = Resolver(client).resolve(hf("meta-llama/Llama-3.1-8B-Instruct"), "team", None)
    assert isinstance(got, Refusal)
    assert got.reason == Reason.MODEL_NOT_FOUND


@pytest.mark.parametrize("kind", ["Model", "ClusterModel"])
def test_a_catalog_order_with_the_catalog_off_is_catalog_disabled(client: HubClient, kind: str) -> None:
    got = Resolver(client, catalog=None).resolve(catalog("qwen", kind), "team", None)
    assert isinstance(got, Refusal)
    assert got.reason == Reason.CATALOG_DISABLED
    assert "catalog.mode: None" in got.message


def test_a_catalog_order_reads_the_catalog_in_the_order_namespace(client: HubClient) -> None:
    api = FakeApi()
    got = Resolver(client, CatalogReader(api)).resolve(catalog("qwen", "Model"), "team", "hf_unused")
    assert isinstance(got, Refusal)
    assert got.reason == Reason.MODEL_NOT_FOUND
    assert api.calls == [(CatalogKind.MODEL, "qwen", "team")]


def test_a_hub_outage_reaches_the_caller_as_a_temporary_error(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    standin[0].fail_with = 502
    with pytest.raises(SourceUnavailableError):
        Resolver(client).resolve(hf("Qwen/Qwen2.5-7B-Instruct"), "team", None)


def test_a_missing_auth_secret_is_named_with_its_key() -> None:
    spec = ModelSpec.model_validate(
        {
            "src": "HuggingFace",
            "ref": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
            "authSecretRef": {"name": "hf-token", "key": "hf"},
        }
    )
    got = auth_secret_not_found(spec, "team")
    assert got.reason == Reason.AUTH_SECRET_NOT_FOUND
    assert "team/hf-token" in got.message and "'hf'" in got.message
