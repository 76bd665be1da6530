"""Compiling: derived parameters, tool calling, refusals and the content hash."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    Estimates,
    ModelFacts,
    Placement,
    Quantization,
    Reason,
    Refusal,
    RuntimeRequirements,
)
from isvc_runtime_recipes import AcceleratorFacts, RecipeBook, content_hash, load_recipes

Facts = Callable[[str], ModelFacts]
Hardware = Callable[[str], tuple[Placement, AcceleratorFacts]]


def compiled(
    book: RecipeBook,
    facts: ModelFacts,
    hw: tuple[Placement, AcceleratorFacts],
    estimates: Estimates,
    endpoint: EndpointType | None = None,
) -> CompiledRuntime:
    result = book.compile(facts, endpoint, hw[0], estimates, facts.name, hw[1])
    assert isinstance(result, CompiledRuntime), result
    return result


def arg(runtime: CompiledRuntime, flag: str) -> str:
    return runtime.args[runtime.args.index(flag) + 1]


def test_half_a_card_claims_half_less_what_the_runtime_keeps_beside_its_budget(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct")
    result = compiled(book, model, hardware("a100-80gb-share-50"), estimates(model))
    # 80 GiB published, 79.5 seen; half is 39.75, less 0.5 CUDA context and 1.25 graphs = 38.0 -> 0.47
    assert arg(result, "--gpu-memory-utilization") == "0.47"
    assert arg(result, "--max-num-seqs") == "256" and "--enforce-eager" not in result.args


def test_tensor_parallel_size_is_the_device_count(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-70b-instruct-fp8")
    result = compiled(book, model, hardware("h100-80gb-x2"), estimates(model))
    assert arg(result, "--tensor-parallel-size") == "2"


def test_context_shrinks_to_what_fits_after_the_weights(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct")  # 128 KiB of KV per token, 15 GiB of weights
    result = compiled(book, model, hardware("l4-24gb-whole"), estimates(model))
    # L4 publishes 23034Mi = 22.49 GiB, vLLM sees 21.99; less 1.75 GiB beside its budget (CUDA context,
    # graphs) that is 0.92; 20.23 GiB less 14.96 weights, 1.85 GiB vLLM's own non-KV memory at 256
    # sequences (vocabulary unknown: 152064) and the 0.33 GiB margin (150 MiB + a tenth of 1.85 GiB) leaves a
    # KV budget of 3.09 GiB; less two 16-token blocks, 25,2xx tokens -> 25088
    assert arg(result, "--gpu-memory-utilization") == "0.92"
    assert arg(result, "--max-model-len") == "25088"
    budget = int(arg(result, "--kv-cache-memory-bytes"))
    assert budget == result.kv_cache_bytes
    assert 25088 * 131072 < budget < 25600 * 131072
    assert result.margin_gi_b is not None and result.margin_gi_b >= 0.33
    roomy = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert arg(roomy, "--max-model-len") == "131072"  # the model's own limit


def test_served_name_model_path_and_api_key_come_from_the_order(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("qwen2.5-7b-instruct-awq").model_copy(update={"name": "Qwen/Qwen2.5-7B-Instruct-AWQ@main"})
    placement, card = hardware("a100-80gb-whole")
    result = book.compile(model, EndpointType.CHAT, placement, estimates(model), "my-order-model", card)
    assert isinstance(result, CompiledRuntime)
    assert arg(result, "--served-model-name") == "my-order-model"
    assert result.args[0] == "/models/Qwen/Qwen2.5-7B-Instruct-AWQ" == result.model_path
    assert result.api_key_env == "VLLM_API_KEY"
    assert "--api-key" not in result.args  # the key comes from the auth Secret, never the args
    assert arg(result, "--quantization") == "awq_marlin"


def test_turing_cards_get_the_plain_awq_kernel(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("qwen2.5-7b-instruct-awq")
    result = compiled(book, model, hardware("t4-16gb-whole"), estimates(model))
    assert (result.recipe, arg(result, "--quantization")) == ("vllm-chat-turing", "awq")


@pytest.mark.parametrize(
    ("model_key", "parser"),
    [
        ("llama-3.1-8b-instruct", "llama3_json"),
        ("qwen2.5-7b-instruct-awq", "hermes"),
        ("mistral-7b-instruct-v0.3", "mistral"),
    ],
)
def test_a_known_family_gets_the_tool_call_flags(
    book: RecipeBook,
    facts: Facts,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
    model_key: str,
    parser: str,
) -> None:
    model = facts(model_key)
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.tool_calling_supported is True
    assert "--enable-auto-tool-choice" in result.args
    assert arg(result, "--tool-call-parser") == parser


def test_a_family_without_a_parser_has_no_tool_calling(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-2-7b-chat")
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.tool_calling_supported is False
    assert "--enable-auto-tool-choice" not in result.args
    assert "--tool-call-parser" not in result.args


def test_gguf_tool_calling_is_the_jinja_flag(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("qwen2.5-7b-instruct-gguf")
    result = compiled(book, model, hardware("l4-24gb-whole"), estimates(model))
    assert (result.recipe, result.tool_calling_supported) == ("llamacpp-chat", True)
    assert "--jinja" in result.args
    first_shard = "qwen2.5-7b-instruct-q5_k_m-00001-of-00002.gguf"  # llama.cpp finds the second beside it
    assert arg(result, "-m") == f"/models/Qwen/Qwen2.5-7B-Instruct-GGUF/{first_shard}"
    plain = model.model_copy(update={"family": "gemma"})
    untooled = compiled(book, plain, hardware("l4-24gb-whole"), estimates(plain))
    assert (untooled.tool_calling_supported, "--jinja" in untooled.args) == (False, False)


def test_a_one_file_runtime_loads_the_file_the_source_chose(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("qwen2.5-7b-instruct-gguf").model_copy(update={"gguf_files": ["q8_0.gguf"]})
    result = compiled(book, model, hardware("l4-24gb-whole"), estimates(model))
    assert arg(result, "-m") == "/models/Qwen/Qwen2.5-7B-Instruct-GGUF/q8_0.gguf"
    # a source that names no file (a catalog model): the recipe's modelFile
    unnamed = model.model_copy(update={"gguf_files": None})
    fallback = compiled(book, unnamed, hardware("l4-24gb-whole"), estimates(unnamed))
    assert arg(fallback, "-m") == "/models/Qwen/Qwen2.5-7B-Instruct-GGUF/model.gguf"
    # a runtime that loads a directory is not handed a file
    vllm = facts("llama-3.1-8b-instruct").model_copy(update={"gguf_files": ["stray.gguf"]})
    directory = compiled(book, vllm, hardware("a100-80gb-whole"), estimates(vllm))
    assert directory.args[0] == "/models/meta-llama/Llama-3.1-8B-Instruct"


def test_embeddings_never_claim_tool_calling(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("qwen3-embedding-0.6b")  # a qwen3 family, which has a chat parser
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert (result.recipe, result.tool_calling_supported) == ("vllm-embed", False)
    assert result.args[result.args.index("--runner") :][:2] == ["--runner", "pooling"]


def test_tei_image_follows_the_compute_capability(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("bge-m3")
    images = {
        key: compiled(book, model, hardware(key), estimates(model)).image
        for key in ("a100-80gb-whole", "l4-24gb-whole", "t4-16gb-whole")
    }
    assert images == {
        "a100-80gb-whole": "ghcr.io/huggingface/text-embeddings-inference:1.8",
        "l4-24gb-whole": "ghcr.io/huggingface/text-embeddings-inference:89-1.8",
        "t4-16gb-whole": "ghcr.io/huggingface/text-embeddings-inference:turing-1.8",
    }


def test_ports_are_named_http_and_metrics(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("bge-reranker-v2-m3")
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert [(p.name, p.container_port) for p in result.ports] == [("http", 8080), ("metrics", 9000)]
    assert (result.health_path, result.api_key_env) == ("/health", "API_KEY")


@pytest.mark.parametrize(
    ("model_key", "expected"),
    [
        ("llama-3.1-8b-instruct", EndpointType.CHAT),
        ("bge-m3", EndpointType.EMBEDDINGS),
        ("bge-reranker-v2-m3", EndpointType.RERANK),
        ("qwen3-embedding-0.6b", EndpointType.EMBEDDINGS),  # the source says so
    ],
)
def test_an_order_without_a_class_is_served_as_what_the_model_is(
    book: RecipeBook,
    facts: Facts,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
    model_key: str,
    expected: EndpointType,
) -> None:
    model = facts(model_key)
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.model_extra is not None
    assert result.model_extra["endpoint_type"] == expected


# ---------------------------------------------------------------- refusals


def test_a_quantization_no_recipe_loads_is_a_quantization_mismatch(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct-bnb")
    placement, card = hardware("a100-80gb-whole")
    result = book.compile(model, EndpointType.CHAT, placement, estimates(model), model.name, card)
    assert isinstance(result, Refusal)
    assert result.reason == Reason.QUANTIZATION_MISMATCH
    assert "vllm-chat fails quantization: it loads None, AWQ, GPTQ, FP8, not BitsAndBytes" in result.message
    assert "llamacpp-chat fails format" in result.message
    before = book.requirements(model, EndpointType.CHAT)
    assert isinstance(before, Refusal) and before.reason == Reason.QUANTIZATION_MISMATCH


def test_no_recipe_for_the_hardware_is_no_compatible_runtime(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-70b-instruct-fp8")
    result = book.compile(
        model,
        None,
        *hardware("t4-16gb-whole")[:1],
        estimates(model),
        model.name,
        hardware("t4-16gb-whole")[1],
    )
    assert isinstance(result, Refusal)
    assert result.reason == Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE
    assert "vllm-chat fails compute capability: it needs 8.0 or higher, the card has 7.5" in result.message
    assert "vllm-chat-turing fails quantization" in result.message
    assert "Tesla T4" in result.message


def test_an_endpoint_type_no_recipe_serves_is_no_compatible_runtime(book: RecipeBook, facts: Facts) -> None:
    model = facts("qwen2.5-7b-instruct-gguf")
    result = book.requirements(model, EndpointType.RERANK)
    assert isinstance(result, Refusal)
    assert result.reason == Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE
    for recipe in book:
        assert f"{recipe.name} fails " in result.message


def test_a_placement_too_small_for_any_context_is_refused_with_the_numbers(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct")
    placement, card = hardware("a100-80gb-share-50")
    small = placement.model_copy(update={"share_percent": 20})
    result = book.compile(model, None, small, estimates(model), model.name, card)
    assert isinstance(result, Refusal)
    assert result.reason == Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE
    assert "vllm-chat fails memory: 20% of 80.0 GiB (79.5 GiB seen)" in result.message
    assert "14.96 GiB weights" in result.message and "fewer than 4,096" in result.message


def test_a_share_outside_1_to_100_is_not_a_placement(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct")
    placement, card = hardware("a100-80gb-share-50")
    result = book.compile(
        model, None, placement.model_copy(update={"share_percent": 150}), estimates(model), model.name, card
    )
    assert isinstance(result, Refusal)
    assert result.reason == Reason.LAUNCH_PLAN_NOT_A_PLACEMENT
    assert "sharePercent is 150" in result.message


# ---------------------------------------------------------------- requirements


def test_requirements_name_the_candidates_and_the_lowest_compute_capability(
    book: RecipeBook, facts: Facts
) -> None:
    result = book.requirements(facts("qwen2.5-7b-instruct-awq"), EndpointType.CHAT)
    assert isinstance(result, RuntimeRequirements)
    assert result.recipes == ["vllm-chat", "vllm-chat-turing"]
    assert (result.min_compute_capability, result.max_devices) == ("7.5", 8)
    fp8 = book.requirements(
        facts("qwen2.5-7b-instruct-awq").model_copy(update={"quantization": Quantization.FP8}), None
    )
    assert isinstance(fp8, RuntimeRequirements)
    assert (fp8.recipes, fp8.min_compute_capability) == (["vllm-chat"], "8.0")


def test_requirements_of_an_embedding_model_exclude_multi_device(book: RecipeBook, facts: Facts) -> None:
    result = book.requirements(facts("bge-m3"), EndpointType.EMBEDDINGS)
    assert isinstance(result, RuntimeRequirements)
    assert [str(m) for m in result.placement_modes] == ["Shared", "WholeDevice"]
    assert result.max_devices == 1


# ---------------------------------------------------------------- content hash


def test_the_hash_changes_with_the_plan_and_the_recipe(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    model = facts("llama-3.1-8b-instruct")
    placement, card = hardware("a100-80gb-share-50")
    base = compiled(book, model, (placement, card), estimates(model))
    same = compiled(
        load_recipes(), model, (placement.model_copy(update={"node_name": "n1"}), card), estimates(model)
    )
    assert same.content_hash == base.content_hash  # nothing that rolls the workload moved
    other_share = compiled(
        book, model, (placement.model_copy(update={"share_percent": 60}), card), estimates(model)
    )
    assert other_share.content_hash != base.content_hash
    recipe = book.get("vllm-chat")
    assert recipe is not None
    bumped = recipe.model_dump(by_alias=True, mode="json") | {"image": "vllm/vllm-openai:v0.11.1"}
    rebooked = load_recipes([bumped])
    assert compiled(rebooked, model, (placement, card), estimates(model)).content_hash != base.content_hash


@pytest.mark.parametrize(
    ("name", "family", "template_tools", "parser"),
    [
        ("Qwen/Qwen3-30B-A3B", "qwen3_moe", True, "hermes"),  # a MoE Qwen3 gets its parser (issue 10)
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2", True, None),  # a reasoning distill: none
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2", False, None),  # a template without tools: none
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2", None, None),  # a template not read: none (issue 10)
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2", True, "hermes"),
    ],
)
def test_tool_calling_follows_the_model_not_the_family_name(
    book: RecipeBook,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
    name: str,
    family: str,
    template_tools: bool | None,
    parser: str | None,
) -> None:
    model = ModelFacts(
        source="HuggingFace",
        name=name,
        architecture="Qwen2ForCausalLM",
        family=family,
        parameter_count=7_615_616_512,
        num_layers=28,
        num_attention_heads=28,
        num_kv_heads=4,
        hidden_size=3584,
        context_length=32768,
        chat_template_tools=template_tools,
    )
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.tool_calling_supported == (parser is not None)
    assert (arg(result, "--tool-call-parser") if parser else None) == parser
    assert result.tool_call_parser == parser


@pytest.mark.parametrize(
    ("name", "family", "parser"),
    [
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2", "deepseek_r1"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama", "deepseek_r1"),
        ("Qwen/QwQ-32B", "qwen2", "deepseek_r1"),
        ("Qwen/Qwen3-8B", "qwen3", "qwen3"),
        ("Qwen/Qwen3-30B-A3B", "qwen3_moe", "qwen3"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3_moe", None),  # non-thinking only
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2", None),
    ],
)
def test_a_reasoning_model_gets_the_parser_vllm_documents_for_it_issue_10(
    book: RecipeBook,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
    name: str,
    family: str,
    parser: str | None,
) -> None:
    model = ModelFacts(
        source="HuggingFace",
        name=name,
        architecture="Qwen2ForCausalLM",
        family=family,
        parameter_count=7_615_616_512,
        num_layers=28,
        num_attention_heads=28,
        num_kv_heads=4,
        hidden_size=3584,
        context_length=32768,
        chat_template_tools=True,
    )
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.reasoning_parser == parser
    assert (arg(result, "--reasoning-parser") if parser else None) == parser
    assert ("--reasoning-parser" in result.args) == (parser is not None)


@pytest.mark.parametrize("mistral_format", [True, False, None])
def test_the_mistral_parser_comes_with_mistral_tokenizer_config_and_load_format_issue_10(
    book: RecipeBook,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
    mistral_format: bool | None,
) -> None:
    """vLLM's mistral tool parser expects Mistral's own tokenizer and format (docs/features/tool_calling.md);
    a repository without params.json and consolidated weights cannot load that way, so it gets no parser."""
    model = ModelFacts(
        source="HuggingFace",
        name="mistralai/Mistral-7B-Instruct-v0.3",
        architecture="MistralForCausalLM",
        family="mistral",
        parameter_count=7_248_023_552,
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=4096,
        context_length=32768,
        chat_template_tools=True,
        mistral_format=mistral_format,
    )
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    if mistral_format:
        assert result.tool_call_parser == "mistral"
        assert [arg(result, f) for f in ("--tokenizer-mode", "--config-format", "--load-format")] == [
            "mistral"
        ] * 3
    else:
        assert result.tool_call_parser is None and not result.tool_calling_supported
        assert "--tokenizer-mode" not in result.args


def test_echoing_the_parsers_leaves_the_content_hash_alone(
    book: RecipeBook,
    hardware: Hardware,
    estimates: Callable[..., Estimates],
) -> None:
    """The parsers are in args already: naming them beside does not roll a running workload."""
    model = ModelFacts(
        source="HuggingFace",
        name="Qwen/Qwen3-8B",
        architecture="Qwen3ForCausalLM",
        family="qwen3",
        parameter_count=8_190_735_360,
        num_layers=36,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        hidden_size=4096,
        context_length=40960,
        chat_template_tools=True,
    )
    result = compiled(book, model, hardware("a100-80gb-whole"), estimates(model))
    assert result.reasoning_parser == "qwen3" and result.tool_call_parser == "hermes"
    bare = result.model_copy(update={"reasoning_parser": None, "tool_call_parser": None})
    assert content_hash(bare) == result.content_hash


def test_an_embedding_model_asked_for_as_chat_is_told_the_class_that_serves_it() -> None:
    """Issue 16: the refusal advised asking for a recipe, while the FAQ's fix is a class naming one
    contract."""
    bge = ModelFacts(
        source="HuggingFace",
        name="BAAI/bge-m3",
        format="Safetensors",
        architecture="XLMRobertaModel",
        family="xlm-roberta",
        parameter_count=567_754_752,
    )
    refused = load_recipes().requirements(bge, EndpointType.CHAT)
    assert isinstance(refused, Refusal) and refused.reason == Reason.NO_COMPATIBLE_RUNTIME_AVAILABLE
    assert "serve(s) it as Embeddings" in refused.message
    assert "allowedEndpointTypes names Embeddings alone" in refused.message
    assert "platform-side decision" not in refused.message


# vLLM took --kv-cache-memory-bytes from v0.10.2 on: vllm/config/cache.py CacheConfig.kv_cache_memory_bytes
# is in the v0.10.2 wheel and absent from v0.10.1.1's (PyPI vllm-0.10.2 / vllm-0.10.1.1, cp38-abi3).
FIRST_VLLM_WITH_KV_BYTES = (0, 10, 2)


def test_every_vllm_recipe_states_its_kv_budget_on_an_image_that_takes_it_issue_25(book: RecipeBook) -> None:
    vllm = [r for r in book if r.runtime == "vllm"]
    assert vllm
    for recipe in vllm:
        assert ["--kv-cache-memory-bytes", "{kvCacheMemoryBytes}"] in recipe.args, recipe.name
        for image in [recipe.image, *(recipe.image_by_compute_capability or {}).values()]:
            tag = image.rsplit(":", 1)[1].removeprefix("v")
            assert tuple(int(p) for p in tag.split(".")[:3]) >= FIRST_VLLM_WITH_KV_BYTES, image
    assert "--kv-cache-memory-bytes" in book.flags["vllm"].flags


def test_co_tenants_get_their_kv_budgets_in_bytes_within_their_shares_issue_25(
    book: RecipeBook, facts: Facts, hardware: Hardware, estimates: Callable[..., Estimates]
) -> None:
    """Two halves of one A100: each launch states its KV bytes and a margin, and the two claims fit the card."""
    model = facts("qwen2.5-7b-instruct-awq")
    placement, card = hardware("a100-80gb-share-50")
    result = book.compile(model, EndpointType.CHAT, placement, estimates(model), "m", card)
    assert isinstance(result, CompiledRuntime), result
    budget = int(arg(result, "--kv-cache-memory-bytes"))
    assert budget == result.kv_cache_bytes and budget > 0
    assert result.margin_gi_b is not None and result.margin_gi_b > 0
    assert 2 * float(arg(result, "--gpu-memory-utilization")) <= 1.0
