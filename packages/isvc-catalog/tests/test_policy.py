from __future__ import annotations

from typing import Any

import pytest
from isvc_api import (
    EndpointType,
    InferenceServiceClassSpec,
    ModelFacts,
    ModelFormat,
    ModelSource,
    Reason,
    Refusal,
)
from isvc_catalog import admit

CHAT, EMB, RERANK = EndpointType.CHAT, EndpointType.EMBEDDINGS, EndpointType.RERANK


def facts(**kw: Any) -> ModelFacts:
    base: dict[str, Any] = {
        "source": ModelSource.HUGGING_FACE,
        "name": "org/model",
        "format": ModelFormat.SAFETENSORS,
        "parameter_count": 7_615_616_512,
    }
    return ModelFacts(**{**base, **kw})


def klass(types: list[EndpointType], **policy: Any) -> InferenceServiceClassSpec:
    return InferenceServiceClassSpec(model_policy={"allowed_endpoint_types": types, **policy})


@pytest.mark.parametrize(
    ("served", "allowed", "expected"),
    [
        (None, [CHAT, EMB], CHAT),  # no facts: the whole list stands, first wins
        (None, [EMB, CHAT], EMB),
        ([EMB], [CHAT, EMB], EMB),  # a catalog embedding model gets the embedding contract
        ([EMB, CHAT], [CHAT, EMB], CHAT),  # the class's order wins, not the model's
        ([RERANK, EMB], [EMB, RERANK], EMB),
        ([RERANK], [CHAT, EMB, RERANK], RERANK),
    ],
)
def test_the_first_class_endpoint_type_the_model_serves_wins(
    served: list[EndpointType] | None, allowed: list[EndpointType], expected: EndpointType
) -> None:
    assert expected == admit(facts(endpoint_types=served), klass(allowed))


@pytest.mark.parametrize(
    ("served", "allowed"),
    [([EMB], [CHAT]), ([CHAT], [EMB, RERANK]), (None, [])],
)
def test_disjoint_endpoint_types_are_a_policy_conflict(
    served: list[EndpointType] | None, allowed: list[EndpointType]
) -> None:
    got = admit(facts(endpoint_types=served), klass(allowed))
    assert isinstance(got, Refusal)
    assert got.reason == Reason.ENDPOINT_TYPE_POLICY_CONFLICT
    assert "different class" in got.message
    for t in allowed:
        assert t.value in got.message


@pytest.mark.parametrize(
    ("model_format", "allowed", "admitted"),
    [
        (ModelFormat.SAFETENSORS, [ModelFormat.SAFETENSORS], True),
        (ModelFormat.GGUF, [ModelFormat.SAFETENSORS], False),
        (ModelFormat.GGUF, [ModelFormat.SAFETENSORS, ModelFormat.GGUF], True),
        (None, [ModelFormat.SAFETENSORS], False),
        (ModelFormat.PYTORCH, None, True),
    ],
)
def test_allowed_formats_admit_only_their_formats(
    model_format: ModelFormat | None, allowed: list[ModelFormat] | None, admitted: bool
) -> None:
    got = admit(facts(format=model_format), klass([CHAT], allowed_formats=allowed))
    if admitted:
        assert got == CHAT
    else:
        assert isinstance(got, Refusal)
        assert got.reason == Reason.FORMAT_NOT_ALLOWED
        assert "Safetensors" in got.message


@pytest.mark.parametrize(
    ("count", "limit", "admitted"),
    [
        (7_615_616_512, 8_000_000_000, True),
        (8_000_000_000, 8_000_000_000, True),
        (405_853_388_800, 8_000_000_000, False),
        (None, 8_000_000_000, False),
        (405_853_388_800, None, True),
    ],
)
def test_max_parameter_count_admits_models_up_to_the_limit(
    count: int | None, limit: int | None, admitted: bool
) -> None:
    got = admit(facts(parameter_count=count), klass([CHAT], max_parameter_count=limit))
    if admitted:
        assert got == CHAT
    else:
        assert isinstance(got, Refusal)
        assert got.reason == Reason.PARAMETER_COUNT_NOT_ALLOWED
        assert "8,000,000,000" in got.message


def test_the_parameter_refusal_gives_the_count_and_the_limit() -> None:
    got = admit(facts(parameter_count=405_853_388_800), klass([CHAT], max_parameter_count=70_000_000_000))
    assert isinstance(got, Refusal)
    assert "405,853,388,800" in got.message and "70,000,000,000" in got.message


@pytest.mark.parametrize("served", [None, [EMB], [RERANK]])
def test_a_class_less_order_gets_no_endpoint_type_and_no_model_policy(
    served: list[EndpointType] | None,
) -> None:
    assert admit(facts(endpoint_types=served, format=None, parameter_count=10**13), None) is None


def test_the_endpoint_type_is_judged_before_the_format() -> None:
    got = admit(
        facts(endpoint_types=[EMB], format=ModelFormat.GGUF),
        klass([CHAT], allowed_formats=[ModelFormat.SAFETENSORS]),
    )
    assert isinstance(got, Refusal)
    assert got.reason == Reason.ENDPOINT_TYPE_POLICY_CONFLICT
