from __future__ import annotations

import copy
from typing import Any

import pytest
from isvc_api import (
    CatalogKind,
    EndpointType,
    ModelFacts,
    ModelFormat,
    ModelRef,
    ModelSource,
    Quantization,
    Reason,
    Refusal,
)
from isvc_catalog import Absent, CatalogLookupError, CatalogReader, parse_catalog_object

READY: dict[str, Any] = {
    "apiVersion": "ai-models.deckhouse.io/v1alpha1",
    "kind": "ClusterModel",
    "metadata": {"name": "bge-m3"},
    "spec": {
        "source": {"type": "HuggingFace", "repo": "BAAI/bge-m3"},
        "format": "Safetensors",
        "parameterCount": 567754752,
        "quantization": "None",
        "endpointTypes": ["Embeddings"],
        "architecture": "XLMRobertaModel",
        "family": "xlm-roberta",
        "contextLength": 8192,
        "numLayers": 24,
        "numKVHeads": 16,
        "headDim": 64,
        "sizeBytes": 2271019144,
    },
    "status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]},
}


def with_(path: str, value: object) -> dict[str, Any]:
    obj = copy.deepcopy(READY)
    *parents, leaf = path.split(".")
    node = obj
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return obj


_DELETE = object()


def test_a_ready_catalog_object_gives_its_facts() -> None:
    got = parse_catalog_object(READY, CatalogKind.CLUSTER_MODEL, "bge-m3", None)
    assert isinstance(got, ModelFacts)
    assert (
        got.source,
        got.name,
        got.format,
        got.parameter_count,
        got.endpoint_types,
    ) == (ModelSource.AI_MODELS, "bge-m3", ModelFormat.SAFETENSORS, 567754752, [EndpointType.EMBEDDINGS])
    assert (
        got.architecture,
        got.family,
        got.context_length,
        got.num_layers,
        got.num_kv_heads,
        got.head_dim,
        got.weight_bytes,
        got.quantization,
    ) == ("XLMRobertaModel", "xlm-roberta", 8192, 24, 16, 64, 2271019144, Quantization.NONE)


@pytest.mark.parametrize(
    ("source", "repo", "commit"),
    [
        ({"type": "HuggingFace", "repo": "BAAI/bge-m3"}, "BAAI/bge-m3", None),
        ({"type": "huggingface", "repo": "BAAI/bge-m3", "revision": "5617a9f"}, "BAAI/bge-m3", "5617a9f"),
        ({"url": "hf://Qwen/Qwen2.5-7B-Instruct/", "revision": "main"}, "Qwen/Qwen2.5-7B-Instruct", "main"),
        ({"url": "s3://bucket/bge-m3", "revision": "v1"}, None, None),
        ({"type": "HuggingFace", "repo": "no-owner"}, None, None),
        ({"type": "Ollama", "repo": "BAAI/bge-m3"}, None, None),
        (_DELETE, None, None),
    ],
)
def test_the_hugging_face_repository_a_catalog_object_names_is_what_gets_downloaded(
    source: object, repo: str | None, commit: str | None
) -> None:
    """The workload downloads the repository (at the pinned revision) the object's source names; an object
    with no Hugging Face source gives no repository, and nothing is downloaded for it."""
    got = parse_catalog_object(with_("spec.source", source), CatalogKind.CLUSTER_MODEL, "bge-m3", None)
    assert isinstance(got, ModelFacts)
    assert (got.download_repo, got.commit) == (repo, commit)


@pytest.mark.parametrize(
    ("size", "expected"),
    [(15 * 2**30, 15 * 2**30), ("15Gi", 15 * 2**30), ("1.5Gi", 3 * 2**29), ("20G", 20 * 10**9), ("512", 512)],
)
def test_the_size_is_read_as_bytes_or_a_quantity(size: int | str, expected: int) -> None:
    obj = with_("spec.sizeBytes", _DELETE)
    obj["spec"]["size"] = size
    obj["spec"]["source"] = {"url": "hf://BAAI/bge-m3", "revision": "main"}
    got = parse_catalog_object(obj, CatalogKind.MODEL, "m", "team")
    assert isinstance(got, ModelFacts)
    assert (got.weight_bytes, got.revision) == (expected, "main")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (with_("spec.quantization", "awq"), Quantization.AWQ),
        (with_("spec.quantization", "GPTQ"), Quantization.GPTQ),
        (with_("spec.quantization", None), Quantization.NONE),
        (with_("spec.quantization", _DELETE), Quantization.NONE),
    ],
)
def test_quantization_is_read_in_any_letter_case(obj: dict[str, Any], expected: Quantization) -> None:
    got = parse_catalog_object(obj, CatalogKind.MODEL, "m", "team")
    assert isinstance(got, ModelFacts)
    assert expected == got.quantization


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        (with_("status.phase", "Pending"), "phase Pending"),
        (with_("status", _DELETE), "phase unset"),
        (
            with_(
                "status",
                {
                    "phase": "Failed",
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "False",
                            "reason": "DownloadFailed",
                            "message": "403 from the Hub",
                        }
                    ],
                },
            ),
            "DownloadFailed: 403 from the Hub",
        ),
    ],
)
def test_a_catalog_object_that_is_not_ready_says_model_not_ready(obj: dict[str, Any], needle: str) -> None:
    got = parse_catalog_object(obj, CatalogKind.MODEL, "m", "team")
    assert isinstance(got, Refusal)
    assert got.reason == Reason.MODEL_NOT_READY
    assert needle in got.message
    assert "Model team/m" in got.message


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        (with_("spec", _DELETE), "no spec"),
        (with_("spec.format", _DELETE), "spec.format"),
        (with_("spec.format", "ONNX"), "spec.format"),
        (with_("spec.parameterCount", _DELETE), "spec.parameterCount"),
        (with_("spec.parameterCount", 0), "spec.parameterCount"),
        (with_("spec.parameterCount", "7B"), "spec.parameterCount"),
        (with_("spec.endpointTypes", []), "spec.endpointTypes"),
        (with_("spec.endpointTypes", ["Completion"]), "spec.endpointTypes"),
        (with_("spec.quantization", "HQQ"), "spec.quantization"),
        (with_("spec.numKVHeads", -1), "spec.numKVHeads"),
        (with_("spec.size", "15 gigabytes"), "spec.size"),
    ],
)
def test_a_catalog_object_of_the_wrong_shape_is_an_invalid_model_source(
    obj: dict[str, Any], needle: str
) -> None:
    got = parse_catalog_object(obj, CatalogKind.CLUSTER_MODEL, "bge-m3", None)
    assert isinstance(got, Refusal)
    assert got.reason == Reason.INVALID_MODEL_SOURCE
    assert needle in got.message


class FakeApi:
    def __init__(self, answer: dict[str, Any] | Absent | Exception) -> None:
        self.answer = answer
        self.calls: list[tuple[CatalogKind, str, str | None]] = []
        self.reviews: list[tuple[str, str]] = []
        self.readable: set[str] = {"shared"}

    def namespace_may_read(self, reader: str, kind: CatalogKind, name: str, namespace: str) -> bool:
        self.reviews.append((reader, namespace))
        return namespace in self.readable

    def get(self, kind: CatalogKind, name: str, namespace: str | None) -> dict[str, Any] | Absent:
        self.calls.append((kind, name, namespace))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("ref", "expected_call"),
    [
        (ModelRef(name="m", kind=CatalogKind.MODEL), (CatalogKind.MODEL, "m", "orders")),
        (ModelRef(name="m", kind=CatalogKind.MODEL, namespace="shared"), (CatalogKind.MODEL, "m", "shared")),
        (ModelRef(name="m", kind=CatalogKind.CLUSTER_MODEL), (CatalogKind.CLUSTER_MODEL, "m", None)),
    ],
)
def test_a_model_is_looked_up_in_its_namespace_and_a_cluster_model_in_none(
    ref: ModelRef, expected_call: tuple[CatalogKind, str, str | None]
) -> None:
    api = FakeApi(READY)
    assert isinstance(CatalogReader(api).read(ref, "orders"), ModelFacts)
    assert [expected_call] == api.calls


def test_a_model_of_another_namespace_is_read_only_where_the_orders_namespace_may_read_it() -> None:
    """Issue 14: cross-namespace Models were read with the controller's rights and echoed into status."""
    api = FakeApi(READY)
    private = ModelRef(name="m", kind=CatalogKind.MODEL, namespace="private")
    refused = CatalogReader(api).read(private, "orders")
    assert isinstance(refused, Refusal) and refused.reason == Reason.MODEL_NOT_FOUND
    assert "ServiceAccounts of 'orders' may get it" in refused.message
    assert api.calls == []  # not even read
    assert api.reviews == [("orders", "private")]
    own = CatalogReader(api).read(ModelRef(name="m", kind=CatalogKind.MODEL), "orders")
    assert isinstance(own, ModelFacts) and api.reviews == [("orders", "private")]  # no review at home


@pytest.mark.parametrize(
    ("answer", "reason", "needle"),
    [
        (Absent.OBJECT, Reason.MODEL_NOT_FOUND, "does not exist"),
        (Absent.KIND, Reason.CATALOG_KIND_NOT_SERVED, "clustermodels.ai-models.deckhouse.io"),
        (with_("status.phase", "Pending"), Reason.MODEL_NOT_READY, "Wait"),
    ],
)
def test_what_the_catalog_lacks_becomes_a_refusal(
    answer: dict[str, Any] | Absent, reason: Reason, needle: str
) -> None:
    got = CatalogReader(FakeApi(answer)).read(ModelRef(name="m", kind=CatalogKind.CLUSTER_MODEL), "orders")
    assert isinstance(got, Refusal)
    assert (reason, True) == (got.reason, needle in got.message)


def test_a_failed_catalog_request_is_raised_for_a_retry() -> None:
    api = FakeApi(CatalogLookupError("Reading models failed (HTTP 503)"))
    with pytest.raises(CatalogLookupError) as info:
        CatalogReader(api).read(ModelRef(name="m", kind=CatalogKind.MODEL), "orders")
    assert info.value.reason == Reason.CATALOG_LOOKUP_FAILED
