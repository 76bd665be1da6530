"""`estimate`: a server-side dry run of the order as the caller, and the estimate webhook's warnings read
back into a plan or a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_api import CatalogKind
from kubectl_isvc import Exit, Lang, NotFound, ReadFailed, Who, estimate, load_faq, order_body, parse_warnings
from kubectl_isvc._errors import Forbidden
from kubectl_isvc._estimate import NO_WEBHOOK, read_warnings
from kubectl_isvc._render import Style, render_estimate

P = "isvc-estimate: "
PLANNED = [
    P + w
    for w in (
        "version=1",
        "verdict=Planned",
        "class=default-llm",
        "endpointType=Chat",
        "deviceClassName=gpu.nvidia.com",
        "acceleratorProductName=NVIDIA H100 80GB HBM3",
        "acceleratorMemoryGiB=79.65",
        "placementMode=Shared",
        "sharingMode=Shares",
        "sharePercent=30",
        "deviceCount=1",
        "requiredMemoryGiB=23.1",
        "weightsGiB=14.19",
        "kvCacheGiB=1.75",
        "overheadGiB=2.9",
        "kvBytesPerToken=57344",
        "contextLength=32768",
        "cpu=4",
        "memory=24Gi",
        "modelVolume=20Gi",
        "runtime=vllm-chat",
        "servedName=qwen2-5-7b-instruct",
        "arg=--gpu-memory-utilization",
        "arg=0.29",
        "arg=--max-model-len",
        "arg=32768",
        "arg=--max-num-seqs",
        "arg=256",
        "arg=--port",
        "arg=8000",
    )
]
REFUSED = [
    P + w
    for w in (
        "version=1",
        "verdict=Refused",
        "condition=Planned",
        "reason=NoAcceleratorWithEnoughMemory",
        "message=The model needs 812.4 GiB of accelerator memory; ",
        "message=the largest accelerator found has 80 GiB.",
        "endpointType=Chat",
    )
]


def test_the_dry_run_creates_the_order_as_the_caller_and_stores_nothing(recorded: Any) -> None:
    reader = recorded(warnings=PLANNED)
    estimate(reader, "team-a", "Qwen/Qwen2.5-7B-Instruct", "default-llm", load_faq(), Lang.EN)
    [(verb, path, call)] = reader.calls
    assert (verb, path) == ("create", "/apis/ai.deckhouse.io/v1alpha1/namespaces/team-a/inferenceservices")
    assert call["query"] == {"dryRun": "All", "fieldValidation": "Strict"}
    assert call["body"] == {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"generateName": "isvc-estimate-", "namespace": "team-a"},
        "spec": {
            "model": {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"}},
            "inferenceServiceClassName": "default-llm",
        },
    }


def test_a_catalog_model_and_a_token_secret_go_into_the_order() -> None:
    body = order_body("team-a", "qwen", None, CatalogKind.CLUSTER_MODEL, "hf-token")
    assert body["spec"] == {
        "model": {
            "src": "AIModels",
            "ref": {"name": "qwen", "kind": "ClusterModel"},
            "authSecretRef": {"name": "hf-token"},
        }
    }


def test_a_plan_comes_back_as_endpoint_type_memory_accelerator_share_runtime_and_flags(recorded: Any) -> None:
    e = estimate(recorded(warnings=PLANNED), "team-a", "Qwen/Qwen2.5-7B-Instruct", None, load_faq(), Lang.EN)
    assert (e.verdict, e.exit_code, e.endpoint_type, e.class_name) == (
        "Planned",
        Exit.SERVING,
        "Chat",
        "default-llm",
    )
    assert e.plan is not None
    assert (e.plan.accelerator, e.plan.share_percent, e.plan.required_memory_gi_b, e.plan.context_length) == (
        "NVIDIA H100 80GB HBM3",
        30,
        23.1,
        32768,
    )
    assert (e.plan.runtime, e.plan.served_name) == ("vllm-chat", "qwen2-5-7b-instruct")
    assert e.plan.flags == ["--gpu-memory-utilization 0.29", "--max-model-len 32768", "--max-num-seqs 256"]
    text = render_estimate(e, Style(False), 110)
    assert "Accelerator: NVIDIA H100 80GB HBM3 (gpu.nvidia.com), 30% of one card" in text
    assert (
        "Memory: needs 23.1 GiB per card, weights 14.2, KV cache 1.8, overhead 2.9, context 32768 tokens, "
        "57344 B/token, card 79.7 GiB"
    ) in text
    assert "Key flags: --gpu-memory-utilization 0.29  --max-model-len 32768  --max-num-seqs 256" in text


def test_a_refusal_comes_back_with_its_reason_and_the_faqs_answer(recorded: Any) -> None:
    e = estimate(
        recorded(warnings=REFUSED), "team-a", "meta-llama/Llama-3.1-405B-Instruct", None, load_faq(), Lang.RU
    )
    assert (e.verdict, e.exit_code, e.condition, e.reason) == (
        "Refused",
        Exit.REFUSED,
        "Planned",
        "NoAcceleratorWithEnoughMemory",
    )
    assert (
        e.message
        == "The model needs 812.4 GiB of accelerator memory; the largest accelerator found has 80 GiB."
    )
    assert (
        e.faq is not None
        and e.faq.who == Who.WAIT
        and e.faq.title == "Заказ сообщает NoAcceleratorWithEnoughMemory"
    )
    assert e.plan is None


def test_no_estimate_warnings_means_the_webhook_did_not_answer_and_is_could_not_tell(recorded: Any) -> None:
    e = estimate(
        recorded(warnings=["something else the API server said"]), "team-a", "m/x", None, load_faq(), Lang.EN
    )
    assert (e.verdict, e.exit_code, e.notes, e.warnings) == (
        "Unknown",
        Exit.UNKNOWN,
        [NO_WEBHOOK],
        ["something else the API server said"],
    )


def test_an_order_the_schema_refuses_is_refused_with_the_api_servers_words(recorded: Any) -> None:
    error = ReadFailed(
        "a dry run",
        'InferenceService.ai.deckhouse.io "" is invalid: spec.model: a HuggingFace '
        "source takes a repository id in ref.name, without ref.kind or ref.namespace",
        422,
    )
    e = estimate(recorded(create_error=error), "team-a", "m/x", None, load_faq(), Lang.EN)
    assert (e.verdict, e.exit_code, e.condition, e.reason) == (
        "Refused",
        Exit.REFUSED,
        "APIServer",
        "Invalid",
    )
    assert "without ref.kind" in (e.message or "")


@pytest.mark.parametrize(
    "error",
    [
        Forbidden("a dry run", 'User "bob" cannot create resource', 403),
        NotFound("a dry run", "the server could not find the requested resource", 404),
    ],
)
def test_a_dry_run_that_is_not_allowed_or_not_served_cannot_tell(recorded: Any, error: Exception) -> None:
    e = estimate(recorded(create_error=error), "team-a", "m/x", None, load_faq(), Lang.EN)
    assert (e.verdict, e.exit_code) == ("Unknown", Exit.UNKNOWN)
    assert e.unread[0].what == "a dry run"


def test_warning_headers_are_read_as_the_api_server_writes_them() -> None:
    values = [
        '299 - "isvc-estimate: verdict=Planned"',
        '299 - "isvc-estimate: message=a \\"quoted\\" word, and a comma", 299 - "second"',
    ]
    assert parse_warnings(values) == [
        "isvc-estimate: verdict=Planned",
        'isvc-estimate: message=a "quoted" word, and a comma',
        "second",
    ]


def test_repeated_text_keys_join_and_unknown_keys_are_kept_as_facts(recorded: Any) -> None:
    keys, args, others = read_warnings(
        [P + "message=one ", P + "message=two", P + "arg=--x", P + "bad", "other"]
    )
    assert (keys, args, others) == ({"message": "one two"}, ["--x"], [P + "bad", "other"])
    e = estimate(
        recorded(warnings=[*PLANNED, P + "quantization=AWQ", P + "version=2"]),
        "team-a",
        "m/x",
        None,
        load_faq(),
        Lang.EN,
    )
    assert e.facts == {"quantization": "AWQ"}
    assert "contract version 2" in e.notes[0]


def test_an_estimate_says_what_the_order_would_serve_issue_42(recorded: Any) -> None:
    """The requests of a typical length the launch serves at once, its KV cache in tokens, and the longest request."""
    served = [P + w for w in ("kvCacheTokens=34389", "concurrentRequests=16", "requestTokens=2048")]
    warnings = [w.replace("arg=256", "arg=16") for w in PLANNED] + served
    for lang, line in (
        (
            Lang.EN,
            "Serves: 16 requests of 2,048 tokens at once, a KV cache of 34,389 tokens, requests of up to "
            "32,768 tokens",
        ),
        (
            Lang.RU,
            "Обслуживает: 16 запросов по 2\u00a0048 токенов одновременно, KV-кэш на 34\u00a0389 токенов, "
            "запросы до 32\u00a0768 токенов",
        ),
    ):
        e = estimate(
            recorded(warnings=warnings), "team-a", "Qwen/Qwen2.5-7B-Instruct", None, load_faq(), lang
        )
        assert e.plan is not None
        assert (e.plan.kv_cache_tokens, e.plan.concurrent_requests, e.plan.request_tokens) == (
            34389,
            16,
            2048,
        )
        assert line in render_estimate(e, Style(False), 140)
