"""Properties over random models and plans: accepted flags only, no oversubscription, stable hashes."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from isvc_api import (
    CompiledRuntime,
    EndpointType,
    Estimates,
    ModelFacts,
    ModelFormat,
    Placement,
    PlacementMode,
    Quantization,
    SharingMode,
    checkpoint_weights,
    visible_bytes,
)
from isvc_runtime_recipes import AcceleratorFacts, check_flags, load_recipes

BOOK = load_recipes()
_GIB = 1024**3

facts_strategy = st.builds(
    ModelFacts,
    source=st.just("HuggingFace"),
    name=st.sampled_from(
        ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "BAAI/bge-m3",
         "mistralai/Mistral-7B-Instruct-v0.3", "org/any-model@abc123", "my-catalog-model"]
    ),
    format=st.sampled_from([None, *ModelFormat]),
    architecture=st.sampled_from(
        [None, "LlamaForCausalLM", "Qwen2ForCausalLM", "XLMRobertaModel", "BertModel",
         "XLMRobertaForSequenceClassification", "MistralForCausalLM"]
    ),
    family=st.sampled_from([None, "llama", "qwen2", "qwen3", "mistral", "bert"]),
    quantization=st.sampled_from(list(Quantization)),
    parameter_count=st.integers(100_000_000, 80_000_000_000),
    context_length=st.one_of(st.none(), st.sampled_from([512, 4096, 8192, 32768, 131072])),
    num_layers=st.one_of(st.none(), st.integers(1, 96)),
    num_attention_heads=st.sampled_from([8, 16, 32, 64]),
    num_kv_heads=st.one_of(st.none(), st.sampled_from([1, 2, 4, 8])),
    hidden_size=st.sampled_from([1024, 2048, 4096, 8192]),
)


@st.composite
def plans(draw: st.DrawFn) -> tuple[Placement, AcceleratorFacts, Estimates]:
    mode = draw(st.sampled_from(list(PlacementMode)))
    sharing = SharingMode.NONE
    share: int | None = None
    count = 1
    if mode == PlacementMode.SHARED:
        sharing = draw(st.sampled_from([SharingMode.SHARES, SharingMode.PARTITION]))
        share = draw(st.integers(1, 100))
    elif mode == PlacementMode.MULTI_DEVICE:
        count = draw(st.integers(2, 8))
    memory = draw(st.sampled_from([16.0, 24.0, 40.0, 48.0, 80.0, 141.0]))
    placement = Placement(
        placement_mode=mode, sharing_mode=sharing, share_percent=share, device_count=count,
        accelerator_product_name="card", accelerator_memory_gi_b=memory,
        memory_gi_b=memory * (share or 100) / 100,
    )
    card = AcceleratorFacts(compute_capability=draw(st.sampled_from([None, "7.5", "8.0", "8.9", "9.0"])))
    weights = draw(st.floats(0.1, 200))
    estimates = Estimates(
        required_memory_gi_b=weights + 3, weights_gi_b=weights, kv_cache_gi_b=1.5, overhead_gi_b=1.5,
        context_length=draw(st.sampled_from([2048, 8192])), cpu="4", memory="16Gi", model_volume="100Gi",
    )
    return placement, card, estimates


@settings(max_examples=400, deadline=None)
@given(facts=facts_strategy, endpoint=st.sampled_from([None, *EndpointType]), plan=plans())
def test_every_compiled_command_uses_only_accepted_flags(
    facts: ModelFacts, endpoint: EndpointType | None, plan: tuple[Placement, AcceleratorFacts, Estimates]
) -> None:
    placement, card, estimates = plan
    result = BOOK.compile(facts, endpoint, placement, estimates, facts.name, card)
    if isinstance(result, CompiledRuntime):
        accepted = BOOK.flags[result.runtime]
        assert check_flags(result.command + result.args, accepted) == []
        assert result.tool_calling_supported == any(
            flag in result.args for flag in ("--enable-auto-tool-choice", "--jinja")
        )
        assert [p.name for p in result.ports] == ["http", "metrics"]
        assert result.api_key_env not in result.env


@settings(max_examples=300, deadline=None)
@given(
    facts=facts_strategy,
    shares=st.lists(st.integers(1, 100), min_size=2, max_size=6).filter(lambda s: sum(s) <= 100),
    memory=st.sampled_from([24.0, 40.0, 80.0]),
)
def test_co_placed_plans_never_claim_more_than_the_card(
    facts: ModelFacts, shares: list[int], memory: float
) -> None:
    """Orders sharing one card, shares summing to at most 100, claim at most all of it together."""
    total = Decimal(0)
    for share in shares:
        placement = Placement(
            placement_mode="Shared", sharing_mode="Shares", share_percent=share,
            accelerator_memory_gi_b=memory,
        )
        estimates = Estimates(
            required_memory_gi_b=1, weights_gi_b=0.1, kv_cache_gi_b=0.5, overhead_gi_b=0.2,
            context_length=512, cpu="1", memory="1Gi", model_volume="1Gi",
        )
        result = BOOK.compile(facts, None, placement, estimates, facts.name)
        if isinstance(result, CompiledRuntime) and "--gpu-memory-utilization" in result.args:
            total += Decimal(result.args[result.args.index("--gpu-memory-utilization") + 1])
    assert total <= Decimal(1)


@settings(max_examples=300, deadline=None)
@given(facts=facts_strategy, plan=plans())
def test_the_compiled_context_fits_what_the_placement_leaves(
    facts: ModelFacts, plan: tuple[Placement, AcceleratorFacts, Estimates]
) -> None:
    placement, card, estimates = plan
    result = BOOK.compile(facts, EndpointType.CHAT, placement, estimates, facts.name, card)
    if not isinstance(result, CompiledRuntime) or "--max-model-len" not in result.args:
        return
    if not facts.num_layers:
        return  # no KV geometry: the planner's own sizing stands
    context = int(result.args[result.args.index("--max-model-len") + 1])
    utilization = float(result.args[result.args.index("--gpu-memory-utilization") + 1])
    kv_heads = facts.num_kv_heads or facts.num_attention_heads
    assert kv_heads is not None and facts.hidden_size and facts.num_attention_heads
    tp = placement.device_count
    head_dim = facts.hidden_size // facts.num_attention_heads
    per_token = 2 * facts.num_layers * max(1, kv_heads // tp) * head_dim * 2
    published = placement.memory_gi_b if placement.sharing_mode == SharingMode.PARTITION else (
        placement.accelerator_memory_gi_b
    )
    assert published is not None
    seen = visible_bytes(round(published * _GIB)) / _GIB  # what vLLM multiplies the utilization by
    claim = utilization * seen
    weights = checkpoint_weights(facts)
    assert weights is not None
    used = weights.total / tp / _GIB + context * per_token / _GIB
    assert used <= claim + 1e-9  # weights and one request of --max-model-len fit vLLM's own budget
    assert context <= (facts.context_length or estimates.context_length)


@settings(max_examples=200, deadline=None)
@given(facts=facts_strategy, plan=plans())
def test_the_hash_is_stable_for_the_same_inputs(
    facts: ModelFacts, plan: tuple[Placement, AcceleratorFacts, Estimates]
) -> None:
    placement, card, estimates = plan
    first = BOOK.compile(facts, None, placement, estimates, facts.name, card)
    second = load_recipes().compile(
        facts.model_copy(deep=True), None, placement.model_copy(deep=True), estimates, facts.name, card
    )
    assert first == second
    if isinstance(first, CompiledRuntime):
        assert len(first.content_hash) == 64
