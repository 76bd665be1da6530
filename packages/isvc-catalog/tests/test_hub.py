from __future__ import annotations

import json
import logging
import re
import socket

import httpx
import pytest
from isvc_api import (
    Fit,
    MemoryRuntime,
    ModelFacts,
    ModelFormat,
    ModelSource,
    Quantization,
    Reason,
    Refusal,
    fit_launch,
)
from isvc_catalog import HubClient, SettingsError, SourceUnavailableError
from isvc_testing.standin_hub import StandinHub

GATED = "meta-llama/Llama-3.1-8B-Instruct"
PRIVATE = "acme/private-llm"
PRIVATE_TOKEN = "hf_secret_private_token"


def facts(result: ModelFacts | Refusal) -> ModelFacts:
    assert isinstance(result, ModelFacts), result
    return result


def refusal(result: ModelFacts | Refusal) -> Refusal:
    assert isinstance(result, Refusal), result
    return result


# repo, token, format, architecture, family, params, dtype, quant, bits,
# context, layers, heads, kv heads, head dim, hidden size
SHIPPED = [
    (
        "Qwen/Qwen2.5-7B-Instruct",
        None,
        ModelFormat.SAFETENSORS,
        "Qwen2ForCausalLM",
        "qwen2",
        7_615_616_512,
        "bfloat16",
        Quantization.NONE,
        None,
        32768,
        28,
        28,
        4,
        128,
        3584,
    ),
    (
        "Qwen/Qwen2.5-32B-Instruct-AWQ",
        None,
        ModelFormat.SAFETENSORS,
        "Qwen2ForCausalLM",
        "qwen2",
        32_763_876_352,
        "float16",
        Quantization.AWQ,
        4,
        32768,
        64,
        40,
        8,
        128,
        5120,
    ),
    (
        GATED,
        "hf_test_token",
        ModelFormat.SAFETENSORS,
        "LlamaForCausalLM",
        "llama",
        8_030_261_248,
        "bfloat16",
        Quantization.NONE,
        None,
        131072,
        32,
        32,
        8,
        128,
        4096,
    ),
    (
        "BAAI/bge-m3",
        None,
        ModelFormat.SAFETENSORS,
        "XLMRobertaModel",
        "xlm-roberta",
        567_754_752,
        "float32",
        Quantization.NONE,
        None,
        8192,  # 8194 positions, from pad_token_id + 1 (issue 31)
        24,
        16,
        16,
        64,
        1024,
    ),
    (
        "Qwen/Qwen2.5-7B-Instruct-GGUF",
        None,
        ModelFormat.GGUF,
        None,
        "qwen2",
        7_615_616_512,
        None,
        Quantization.GGUF,
        4,
        32768,
        28,
        28,
        4,
        128,
        3584,
    ),  # geometry: the header
    (
        "meta-llama/Llama-3.1-405B-Instruct",
        "hf_test_token",
        ModelFormat.SAFETENSORS,
        "LlamaForCausalLM",
        "llama",
        405_853_388_800,
        "bfloat16",
        Quantization.NONE,
        None,
        131072,
        126,
        128,
        8,
        128,
        16384,
    ),
]


@pytest.mark.parametrize("row", SHIPPED, ids=[r[0] for r in SHIPPED])
def test_the_hub_api_yields_the_facts_the_planner_needs(client: HubClient, row: tuple[object, ...]) -> None:
    repo, token, fmt, arch, family, params, dtype, quant, bits, ctx, layers, heads, kv, head_dim, hidden = row
    got = facts(client.resolve(str(repo), token if isinstance(token, str) else None))
    assert (ModelSource.HUGGING_FACE, repo, fmt, arch, family, params, dtype, quant, bits) == (
        got.source,
        got.name,
        got.format,
        got.architecture,
        got.family,
        got.parameter_count,
        got.dtype,
        got.quantization,
        got.quantization_bits,
    )
    assert (ctx, layers, heads, kv, head_dim, hidden) == (
        got.context_length,
        got.num_layers,
        got.num_attention_heads,
        got.num_kv_heads,
        got.head_dim,
        got.hidden_size,
    )


@pytest.mark.parametrize("repo", ["Qwen/Qwen2.5-7B-Instruct", "BAAI/bge-m3", "Qwen/Qwen2.5-7B-Instruct-GGUF"])
def test_a_bare_hugging_face_reference_carries_no_endpoint_types(client: HubClient, repo: str) -> None:
    assert facts(client.resolve(repo)).endpoint_types is None


def test_weight_bytes_sum_the_weight_files_and_nothing_else(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    files = standin[0].repos[GATED].files
    expected = sum(f.size for name, f in files.items() if name.endswith(".safetensors"))
    got = facts(client.resolve(GATED, "hf_test_token"))
    assert expected == got.weight_bytes
    # the original/ folder holds a 16 GB .pth that a runtime does not load: not counted
    assert got.weight_bytes is not None and got.weight_bytes < 8_030_261_248 * 2 + 10**6


def test_a_gguf_repository_is_sized_by_one_variant_preferring_q4_k_m(client: HubClient) -> None:
    """The tensors of both Q4_K_M files, as their headers list them (the stand-in writes them as Q4_K:
    144 bytes per 256 weights), not the other variants."""
    got = facts(client.resolve("Qwen/Qwen2.5-7B-Instruct-GGUF"))
    assert got.weight_bytes == 7_615_616_512 * 144 // 256
    # what the runtime loads and the workload downloads: that variant's shards in order, no other
    assert got.gguf_files == [
        "qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf",
        "qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf",
    ]


def test_a_gguf_file_whose_name_reads_as_an_option_is_never_chosen(client: HubClient) -> None:
    """The chosen files go on the download's command line: `--local-dir=…` would be taken for an option."""
    assert facts(client.resolve("acme/option-named-gguf")).gguf_files == ["m-q8_0.gguf"]


def test_a_safetensors_repository_names_no_gguf_file(client: HubClient) -> None:
    assert facts(client.resolve("Qwen/Qwen2.5-7B-Instruct")).gguf_files is None


def test_the_gguf_header_gives_geometry_vocabulary_and_template_issue_10(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    got = facts(client.resolve("Qwen/Qwen2.5-7B-Instruct-GGUF"))
    assert (got.intermediate_size, got.vocab_size, got.chat_template_tools) == (18944, 152064, True)
    # the header of the first Q4_K_M file is past the first MiB (its vocabulary): read in two steps
    reads = [r for r in standin[0].requests if r[1].endswith("q4_k_m-00001-of-00002.gguf")]
    assert [r[2] for r in reads][:2] == ["bytes=0-1048575", "bytes=1048576-2097151"]


def test_a_file_named_gguf_that_is_not_gguf_is_refused(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    standin[0].repos["acme/not-gguf"].files["m.gguf"].prefix = b"PK\x03\x04 not a gguf file"
    got = refusal(client.resolve("acme/not-gguf"))
    assert got.reason == Reason.INVALID_MODEL_SOURCE and "not a valid GGUF file" in got.message


def test_a_pytorch_only_repository_estimates_parameters_from_bytes(client: HubClient) -> None:
    got = facts(client.resolve("acme/bin-only"))
    assert (
        got.format,
        got.weight_bytes,
        got.parameter_count,
    ) == (ModelFormat.PYTORCH, 2_000_000_000, 1_000_000_000)


def test_a_nested_text_config_supplies_the_architecture_numbers(client: HubClient) -> None:
    got = facts(client.resolve("acme/vlm"))
    assert (
        got.num_layers,
        got.num_attention_heads,
        got.num_kv_heads,
        got.head_dim,
        got.hidden_size,
        got.context_length,
    ) == (34, 8, 4, 256, 2560, 131072)


@pytest.mark.parametrize(
    ("repo", "quant", "bits", "params"),
    [
        ("acme/gptq-int4", Quantization.GPTQ, 4, 800_000_000 * 8 + 600_000_000),
        ("acme/fp8", Quantization.FP8, 8, 8_030_261_248),
    ],
)
def test_quantization_config_names_the_scheme_and_bits(
    client: HubClient, repo: str, quant: Quantization, bits: int, params: int
) -> None:
    got = facts(client.resolve(repo))
    assert (quant, bits, params) == (got.quantization, got.quantization_bits, got.parameter_count)


@pytest.mark.parametrize("repo", ["acme/headers-only", "acme/single-file"])
def test_without_the_hub_summary_the_safetensors_headers_are_read_by_range(
    client: HubClient, standin: tuple[StandinHub, str], repo: str
) -> None:
    hub = standin[0]
    got = facts(client.resolve(repo))
    assert got.parameter_count == 1_235_814_400
    assert got.dtype == "bfloat16"
    weight_reads = [r for r in hub.requests if "/resolve/" in r[1] and r[1].endswith(".safetensors")]
    assert weight_reads, "the headers were not read"
    assert all(rng is not None and rng.startswith("bytes=0-") for _, _, rng in weight_reads)
    assert all(int(rng.split("-")[1]) < 64 * 1024 for _, _, rng in weight_reads if rng)


def test_file_sizes_come_from_the_paged_tree_api_when_model_info_lacks_them(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    hub = standin[0]
    hub.sizes_in_info = False
    hub.tree_page_size = 3
    got = facts(client.resolve("Qwen/Qwen2.5-7B-Instruct"))
    expected = sum(
        f.size for n, f in hub.repos["Qwen/Qwen2.5-7B-Instruct"].files.items() if n.endswith(".safetensors")
    )
    assert expected == got.weight_bytes
    assert sum("/tree/" in path for _, path, _ in hub.requests) > 1


@pytest.mark.parametrize(
    ("repo", "token", "reason", "needle"),
    [
        (GATED, None, Reason.MODEL_NOT_FOUND, "spec.model.authSecretRef"),
        (GATED, "hf_someone_else", Reason.MODEL_NOT_FOUND, "gives no access"),
        (PRIVATE, None, Reason.MODEL_NOT_FOUND, "spec.model.authSecretRef"),
        (PRIVATE, "hf_someone_else", Reason.MODEL_NOT_FOUND, "does not exist"),
        ("acme/missing", None, Reason.MODEL_NOT_FOUND, "does not exist"),
        ("Qwen/Qwen2.5-7B-Instruct@v999", None, Reason.MODEL_NOT_FOUND, "Revision v999"),
        ("acme/no-weights", None, Reason.INVALID_MODEL_SOURCE, "no model weights"),
        ("acme/lora", None, Reason.INVALID_MODEL_SOURCE, "LoRA adapter"),
        ("acme/hqq", None, Reason.INVALID_MODEL_SOURCE, "'hqq'"),
        ("not-a-repo-id", None, Reason.INVALID_MODEL_SOURCE, "owner/name"),
    ],
)
def test_refusals_name_the_reason_and_the_fix(
    client: HubClient, repo: str, token: str | None, reason: Reason, needle: str
) -> None:
    got = refusal(client.resolve(repo, token))
    assert reason == got.reason
    assert needle in got.message


def test_a_private_repository_resolves_with_its_token(client: HubClient) -> None:
    assert facts(client.resolve(PRIVATE, PRIVATE_TOKEN)).parameter_count == 1_235_814_400


def test_a_revision_pinned_to_a_commit_is_kept(client: HubClient) -> None:
    sha = "a09a35458c702b33eeacc393d103063234e8bc28"
    got = facts(client.resolve(f"Qwen/Qwen2.5-7B-Instruct@{sha}"))
    assert sha == got.revision


def test_an_invalid_reference_costs_no_request(client: HubClient, standin: tuple[StandinHub, str]) -> None:
    client.resolve("owner/--bad")
    assert standin[0].requests == []


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_failing_hub_is_a_temporary_error(
    client: HubClient, standin: tuple[StandinHub, str], status: int
) -> None:
    standin[0].fail_with = status
    with pytest.raises(SourceUnavailableError, match=f"HTTP {status}"):
        client.resolve("Qwen/Qwen2.5-7B-Instruct")


def test_a_rate_limited_hub_is_retried_after_its_delay(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    standin[0].fail_with = 429
    with pytest.raises(SourceUnavailableError) as info:
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
    assert info.value.delay == 30.0


def test_an_unreachable_hub_is_a_temporary_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with HubClient(f"http://127.0.0.1:{port}", timeout=2.0) as client, pytest.raises(SourceUnavailableError):
        client.resolve("Qwen/Qwen2.5-7B-Instruct")


def test_temporary_errors_are_not_cached(client: HubClient, standin: tuple[StandinHub, str]) -> None:
    standin[0].fail_with = 503
    with pytest.raises(SourceUnavailableError):
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
    standin[0].fail_with = None
    assert isinstance(client.resolve("Qwen/Qwen2.5-7B-Instruct"), ModelFacts)


def test_the_endpoint_setting_must_be_an_http_url() -> None:
    with pytest.raises(SettingsError):
        HubClient("huggingface.co")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_answers_are_cached_ten_minutes_and_refusals_thirty_seconds(standin: tuple[StandinHub, str]) -> None:
    hub, url = standin
    clock = Clock()
    with HubClient(url, timer=clock) as client:
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
        client.resolve("acme/missing")
        asked = len(hub.requests)
        clock.now = 29
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
        client.resolve("acme/missing")
        assert asked == len(hub.requests)
        clock.now = 31
        client.resolve("acme/missing")
        assert asked + 1 == len(hub.requests)
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
        assert asked + 1 == len(hub.requests)
        clock.now = 601
        client.resolve("Qwen/Qwen2.5-7B-Instruct")
        assert asked + 1 < len(hub.requests)


def test_an_answer_for_one_token_is_not_served_to_another(client: HubClient) -> None:
    assert isinstance(client.resolve(GATED, "hf_test_token"), ModelFacts)
    assert isinstance(client.resolve(GATED, None), Refusal)
    assert isinstance(client.resolve(GATED, "hf_someone_else"), Refusal)


def test_a_cached_answer_cannot_be_changed_by_its_caller(client: HubClient) -> None:
    first = facts(client.resolve("BAAI/bge-m3"))
    first.parameter_count = 1
    assert facts(client.resolve("BAAI/bge-m3")).parameter_count == 567_754_752


def test_the_token_is_never_shown(
    client: HubClient, standin: tuple[StandinHub, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "hf_secret_never_shown"
    shown = [repr(client), refusal(client.resolve(GATED, secret)).message]
    shown.append(refusal(client.resolve(PRIVATE, secret)).message)
    standin[0].fail_with = 500
    with pytest.raises(SourceUnavailableError) as info:
        client.resolve("BAAI/bge-m3", secret)
    shown += [str(info.value), repr(info.value)]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with HubClient(f"http://127.0.0.1:{port}") as down, pytest.raises(SourceUnavailableError) as lost:
        down.resolve("BAAI/bge-m3", secret)
    assert lost.value.__cause__ is None and lost.value.__suppress_context__  # no httpx request chained
    shown += [str(lost.value), repr(lost.value), caplog.text]
    assert not [text for text in shown if secret in text]


@pytest.mark.parametrize(
    ("repo", "token", "tools"),
    [
        (GATED, "hf_test_token", True),  # tokenizer_config.json chat_template names tools
        ("Qwen/Qwen2.5-7B-Instruct", None, True),
        ("acme/template-file", None, False),  # chat_template.jinja wins over tokenizer_config.json
        ("acme/template-list", None, False),  # the `default` of named templates
        ("acme/single-file", None, None),  # no template: not read
    ],
)
def test_tool_calling_is_read_from_the_chat_template_issue_10(
    client: HubClient, repo: str, token: str | None, tools: bool | None
) -> None:
    assert facts(client.resolve(repo, token)).chat_template_tools is tools


def test_a_repository_in_mistral_format_says_so_issue_10(client: HubClient) -> None:
    native = facts(client.resolve("acme/mistral-native"))
    assert (native.mistral_format, native.chat_template_tools) == (True, True)
    assert facts(client.resolve("Qwen/Qwen2.5-7B-Instruct")).mistral_format is False


def test_llama_cpp_context_follows_the_gguf_header_geometry_issue_10(client: HubClient) -> None:
    """Layers, KV heads and head size from the header give llama.cpp's KV bytes per token (f16 cache:
    2 × 28 × 4 × 128 × 2 B), so -c is what the card holds after the header's tensors."""
    got = facts(client.resolve("Qwen/Qwen2.5-7B-Instruct-GGUF"))
    whole_l4 = fit_launch(got, MemoryRuntime.LLAMACPP, 23034 * 1024**2)
    assert isinstance(whole_l4, Fit)
    assert whole_l4.kv.per_token == 2 * 28 * 4 * 128 * 2
    assert whole_l4.weights == got.weight_bytes
    assert whole_l4.context == min(32768, whole_l4.kv_room // whole_l4.kv.per_token // 256 * 256)


class _Redirecting:
    """huggingface.co as an httpx transport: the API answered from the stand-in Hub, every file redirected to
    `target` (the host and path the stand-in serves it under there); which hosts were asked, with what token."""

    def __init__(self, standin: str, target: str) -> None:
        self._standin = httpx.Client(base_url=standin)
        self.target = target
        self.asked: list[tuple[str, str | None]] = []

    def __enter__(self) -> _Redirecting:
        return self

    def __exit__(self, *exc: object) -> None:
        self._standin.close()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append((request.url.host, request.headers.get("Authorization")))
        if request.url.host == "huggingface.co" and "/resolve/" in request.url.path:
            return httpx.Response(302, headers={"Location": f"https://{self.target}{request.url.path}"})
        answer = self._standin.get(request.url.path, params=request.url.params, headers=dict(request.headers))
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def test_the_token_follows_a_redirect_to_the_hubs_file_hosts_only_to_the_hub_issue_29(
    standin: tuple[StandinHub, str],
) -> None:
    hub = _Redirecting(standin[1], "cdn-lfs-us-1.hf.co")
    with hub, HubClient("https://huggingface.co", transport=httpx.MockTransport(hub)) as client:
        got = facts(
            client.resolve("acme/headers-only", "hf_a_token")
        )  # its safetensors headers read by Range

    assert got.parameter_count == 1_235_814_400
    assert {host for host, token in hub.asked if token} == {"huggingface.co"}
    assert "cdn-lfs-us-1.hf.co" in {host for host, _ in hub.asked}


@pytest.mark.parametrize("target", ["evil.example", "huggingface.co.evil.example", "hf.co.evil.example"])
def test_a_redirect_to_another_host_is_not_followed_issue_29(
    standin: tuple[StandinHub, str], target: str
) -> None:
    hub = _Redirecting(standin[1], target)
    with (
        hub,
        HubClient("https://huggingface.co", transport=httpx.MockTransport(hub)) as client,
        pytest.raises(
            SourceUnavailableError,
            match=re.escape(f"a redirect to '{target}', which is not a host of the Hub"),
        ),
    ):
        client.resolve(PRIVATE, PRIVATE_TOKEN)

    assert target not in {host for host, _ in hub.asked}


def test_a_mirrors_redirects_stay_on_its_own_hosts_issue_29(standin: tuple[StandinHub, str]) -> None:
    hub = _Redirecting(standin[1], "cdn-lfs.hf.co")  # huggingface.co's file host, not the mirror's
    mirror = httpx.MockTransport(
        lambda r: hub(httpx.Request(r.method, r.url.copy_with(host="huggingface.co"), headers=r.headers))
    )
    with (
        hub,
        HubClient("https://hf-mirror.example", transport=mirror) as client,
        pytest.raises(SourceUnavailableError, match=re.escape("a redirect to 'cdn-lfs.hf.co'")),
    ):
        client.resolve(PRIVATE, PRIVATE_TOKEN)


def test_a_repositorys_own_text_is_cut_in_a_status_message_issue_29(
    client: HubClient, standin: tuple[StandinHub, str]
) -> None:
    quant = {"quant_method": "x" * 100_000}
    repo = standin[0].repos["acme/hqq"]
    raw = json.dumps({**repo.model.config, "quantization_config": quant}).encode()  # type: ignore[dict-item]
    old = repo.files["config.json"]
    repo.files["config.json"] = type(old)(len(raw), raw)
    try:
        message = refusal(client.resolve("acme/hqq")).message
    finally:
        repo.files["config.json"] = old

    assert "quantized with 'xxxxx" in message and len(message) < 400
