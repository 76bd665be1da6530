"""Accelerator memory of one runtime on one card: the one model the planner and the recipes share.

Pure arithmetic on ModelFacts; every constant names the public measurement or source it comes from
(source keys as in module/docs/FAQ.md, "How the memory estimate is made"):

    LLMD   llm-d/llm-d-benchmark @0fa12aa config_explorer/empirical-vllm-memory-results.md
           (vLLM v0.11.0 on H100, the version the shipped recipes run)
    V33    vllm-project/vllm v0.33.0 source (start-up accounting, quantized layers)
    MODAL  modal-labs/modal-client PR #2797 (nvidia-smi memory.total per card)
    DRA    kubernetes-sigs/dra-driver-nvidia-gpu: capacity.memory = NVML memory.total

What a runtime occupies on each GPU (tensor parallel size `tp`):

    weights / tp                    from the checkpoint: safetensors element counts per dtype, or
                                    parameters with embeddings and lm_head kept 16-bit when quantized
    + inside                        vLLM's own non-KV accounting: activation peak of its profiling run
                                    (sampler rows × vocabulary, or the forward of the batched tokens)
                                    + non-torch memory
    + margin                        room kept beyond vLLM's own non-KV need (`vllm_margin`)
    + KV cache                      bytes per token × context (sliding-window layers capped, MLA latent);
                                    for vLLM the absolute budget it is launched with
                                    (--kv-cache-memory-bytes), so the size never depends on what a
                                    co-tenant of the card does while this one profiles its start-up
    + outside                       what the runtime's accounting does not see: the CUDA context, and
                                    vLLM v0.11's CUDA graphs (captured after the KV cache is allocated)

vLLM's `--gpu-memory-utilization × total` (total: what torch sees, the driver-published capacity minus
`SEEN_GAP`) must be free when it starts (V11 gpu_worker.py init_device); inside it go weights, inside,
margin and the KV budget, and outside goes beside it.

    V11    vllm-project/vllm v0.11.0 (the recipes' image; PyPI wheel vllm-0.11.0, vllm/v1/worker/
           gpu_worker.py): with kv_cache_memory_bytes set, determine_available_memory still runs the
           profiling forward but returns the bytes given, without measuring free memory; the flag
           first shipped in v0.10.2 (vllm/config/cache.py CacheConfig.kv_cache_memory_bytes; absent
           from v0.10.1.1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from enum import StrEnum

from isvc_api._facts import ModelFacts
from isvc_api._kv import KvLayout, is_encoder, kv_layout
from isvc_api._quantity import gib
from isvc_api._serving import Load
from isvc_api._vocabulary import (
    ModelFormat,
    Quantization,
)
from isvc_api._weights import checkpoint_weights

__all__ = [
    "KV_GEOMETRY_UNKNOWN",
    "MIN_CONTEXT",
    "PLANNING_BATCH",
    "SIZED_BY_KV",
    "VLLM_LADDER",
    "Batch",
    "Fit",
    "MemoryRuntime",
    "fit_launch",
    "need_per_device",
    "planning_batch",
    "runtime_for",
    "unknown_kv_bytes",
    "visible_bytes",
    "vllm_margin",
]

MIB = 1024**2

# Published capacity (NVML memory.total, DRA) minus the total torch reports: H100 81559 MiB vs
# 79.18 GiB seen by vLLM (479 MiB; MODAL, LLMD header); a 24 GB card 24564 MiB vs 23.58 GiB
# (419 MiB; vllm issue #7553, PR #14447). Taken as 512 MiB on every card.
SEEN_GAP = 512 * MIB
# CUDA context and cuBLAS handles, created before vLLM's memory snapshot, so outside its accounting:
# "~300MB" with lazy loading (pytorch issue #107667) plus cuBLAS workspaces (V33 gpu_worker.py:449-548).
CUDA_CONTEXT = 512 * MIB
# vLLM v0.11 captures CUDA graphs after allocating the KV cache, outside the utilization budget
# (V35d compile_or_warm_up_model). Measured change during capture: -0.88 .. +1.03 GiB (LLMD rows 1-8).
GRAPH_POOL = 1280 * MIB
# Activation peak of vLLM's profiling run per sampler row and vocabulary entry: LLMD activation /
# (vocab × 1024 rows) = 38.9 (Llama-3.1-8B), 38.4 (Qwen3-0.6B), 38.9 (Qwen3-32B), 37.6 (gpt-oss),
# 39.6 (Llama-3.3-70B FP8, TP2) bytes. The logits are not sharded by tensor parallelism.
SAMPLER_BYTES = 40
ACTIVATION_FLOOR = 256 * MIB  # allocator workspace at small batches; no public measurement below 1024 rows
# Non-torch memory: 0.13-0.14 GiB at TP1, 0.54-0.55 GiB at TP2 (LLMD rows 3-8); llm-d planner 0.15 / 0.6.
NON_TORCH_TP1 = 154 * MIB
NON_TORCH_TP = 615 * MIB
MIN_CONTEXT = 4096  # the shortest context worth starting a chat runtime for (or the model's own, if less)
MAX_UTILIZATION = Decimal("0.97")
UNKNOWN_CONTEXT = 8192  # the longest context set for a model that states none
# TEI warms up one batch of --max-batch-tokens (default 16384; TEI router/src/main.rs:62-74). At rest
# after warm-up, bge-reranker-v2-m3 (568M parameters, 1.06 GiB in fp16) held "about 1.5G" of GPU memory
# under TEI's defaults (TEI issue #280): 0.3-0.45 GiB beside the weights. No warm-up peak is published,
# so the estimate keeps the forward of a whole batch (more than that at-rest figure; the table checks it).
TEI_BATCH_TOKENS = 16384
# llama.cpp compute buffer: logits of one micro-batch (-ub 512) in f32 plus its activations, and, without
# flash attention, the f32 attention scores and mask of the micro-batch against the whole context,
# -ub × -c × (heads + 1) × 4 B. Published log (fedora-copr/logdetective PR #106; flash_attn = 0, -ub 512,
# 32 heads, KV 128 KiB/token): "CUDA0 compute buffer size" 164 MiB at -c 2048 and 2144 MiB at -c 32768,
# i.e. 512 × c × 33 × 4 B + 32 MiB. The image's -fa auto turns flash attention on where the card and model
# support it, which needs less; the scores are charged all the same, so a launch starts either way.
LLAMACPP_UBATCH = 512
# The margin every vLLM launch keeps beyond the runtime's own non-KV need at its batch flags: vLLM's own
# 150 MiB buffer, "empirically observed that the memory profiling may slightly underestimate the memory
# consumption" (V11 gpu_worker.py compile_or_warm_up_model, the --kv-cache-memory it suggests), plus a
# tenth of the estimated need: LLMD's activation per sampler row and vocabulary entry spans 37.6-39.6 B
# across five models (a 5 % spread, counted twice).
MARGIN_BUFFER = 150 * MIB
MARGIN_FRACTION = Decimal("0.10")
_DEFAULT_VOCAB = 152064


class MemoryRuntime(StrEnum):
    """Runtimes whose start-up memory the model knows."""

    VLLM = "vllm"
    TEI = "tei"
    LLAMACPP = "llamacpp"


# Runtimes started with a context their KV cache must hold (vLLM's --max-model-len, llama.cpp's -c): without
# the model's KV geometry that context cannot be sized, and a guessed one need not start (vLLM refuses a
# max-model-len its KV cache cannot hold: "The model's max seq len ... is larger than the maximum number of
# tokens that can be stored in KV cache"). TEI sizes no context.
SIZED_BY_KV = frozenset({MemoryRuntime.VLLM, MemoryRuntime.LLAMACPP})
KV_GEOMETRY_UNKNOWN = (
    "its KV cache geometry is unknown (no layer, KV head and head size counts), so the context a KV budget "
    "holds cannot be computed"
)


@dataclass(frozen=True)
class Batch:
    """vLLM batch settings that set its activation peak (V33 gpu_model_runner.py:5525-5548)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    cuda_graphs: bool

    def words(self) -> str:
        graphs = "CUDA graphs" if self.cuda_graphs else "eager (no CUDA graphs)"
        return f"{self.max_num_seqs} sequences, {self.max_num_batched_tokens} batched tokens, {graphs}"


# Tried in order on a placement: the first that leaves the minimum context wins. 256 sequences and
# 2048 batched tokens are vLLM's own defaults below 70 GiB (V33 arg_utils.py:2940-3039).
VLLM_LADDER = (
    Batch(256, 2048, True),
    Batch(128, 2048, True),
    Batch(64, 2048, True),
    Batch(32, 1024, False),
    Batch(16, 512, False),
)
PLANNING_BATCH = VLLM_LADDER[2]  # what the planner sizes a share for


@dataclass(frozen=True)
class Fit:
    """One launch on one GPU share: the numbers a recipe's flags and a plan's estimates come from."""

    runtime: MemoryRuntime
    tp: int
    utilization: Decimal | None  # vLLM's --gpu-memory-utilization; None for runtimes without one
    weights: int  # per GPU
    inside: int  # the runtime's own non-KV accounting, per GPU
    outside: int  # beside it: CUDA context, graph pool
    kv: KvLayout
    kv_room: int  # per GPU
    context: int
    batch: Batch | None
    kv_bytes: int = 0  # per GPU: vLLM's --kv-cache-memory-bytes, llama.cpp's KV of -c; 0 without a KV cache
    margin: int = 0  # per GPU: what the share holds beyond weights, the runtime's need and the KV budget
    slots: int = 0  # llama.cpp's -np, each slot `context` tokens (so -c is slots × context); 0 for the others
    typical: int = 0  # tokens of the typical request the launch was sized to serve at once (0: no load)

    @property
    def overhead(self) -> int:
        """Non-KV, non-weight memory per GPU."""
        return self.inside + self.outside

    @property
    def sequences(self) -> int:
        """Requests the runtime runs at once: vLLM's --max-num-seqs, llama.cpp's slots, the typical requests of
        one TEI batch (--max-batch-tokens); 0 when it states none."""
        if self.batch is not None:
            return self.batch.max_num_seqs
        if self.runtime == MemoryRuntime.TEI and self.typical:
            return max(1, TEI_BATCH_TOKENS // self.typical)
        return self.slots

    @property
    def kv_tokens(self) -> int:
        """Tokens of KV cache the budget holds: llama.cpp's -c; vLLM's budget at the bytes of one token."""
        if self.slots:
            return self.slots * self.context
        return self.kv_bytes // self.kv.per_token if self.kv.per_token else 0

    def serves(self) -> str:
        """What the launch serves, in the words of its serving target."""
        at_once = f"{self.sequences} requests of {self.typical:,} tokens at once, " if self.typical else ""
        kv = f"a KV cache of {self.kv_tokens:,} tokens, " if self.kv_tokens else ""
        return f"{at_once}{kv}requests of up to {self.context:,} tokens"

    def words(self) -> str:
        util = f"utilization {self.utilization}, " if self.utilization is not None else ""
        batch = f"; {self.batch.words()}" if self.batch else ""
        slots = f" in each of {self.slots} slots" if self.slots else ""
        return (
            f"{util}per GPU: weights {gib(self.weights)} GiB, "
            f"runtime overhead {gib(self.overhead)} GiB "
            f"({gib(self.inside)} GiB counted by the runtime, {gib(self.outside)} GiB beside it), "
            f"KV {self.kv_bytes:,} B ({gib(self.kv_bytes)} GiB) at {self.kv.per_token:,} B/token = context "
            f"{self.context:,}{slots}, margin {gib(self.margin)} GiB{batch}; serves {self.serves()}"
        )


def visible_bytes(published: int) -> int:
    """Memory the runtime sees on a card whose driver publishes `published` bytes."""
    return max(0, published - SEEN_GAP)


def runtime_for(facts: ModelFacts) -> MemoryRuntime:
    """The runtime a model is served with when nothing else says: GGUF llama.cpp, encoders TEI."""
    if facts.format == ModelFormat.GGUF or facts.quantization == Quantization.GGUF:
        return MemoryRuntime.LLAMACPP
    if is_encoder(facts):
        return MemoryRuntime.TEI
    return MemoryRuntime.VLLM


# ---------------------------------------------------------------------------------------- overhead


def _activation(facts: ModelFacts, tp: int, tokens: int, rows: int) -> int:
    vocab = facts.vocab_size or _DEFAULT_VOCAB
    hidden = facts.hidden_size or 4096
    inter = facts.intermediate_size or 4 * hidden
    sampler = SAMPLER_BYTES * vocab * rows
    forward = tokens * (3 * inter // max(1, tp) + 8 * hidden) * 2
    return max(sampler, forward) + ACTIVATION_FLOOR


def _overhead(facts: ModelFacts, runtime: MemoryRuntime, tp: int, batch: Batch | None) -> tuple[int, int]:
    """(inside, outside): the runtime's own non-KV accounting and what sits beside it, per GPU."""
    if runtime == MemoryRuntime.VLLM:
        b = batch or PLANNING_BATCH
        rows = min(b.max_num_seqs, b.max_num_batched_tokens)
        inside = _activation(facts, tp, b.max_num_batched_tokens, rows) + (
            NON_TORCH_TP if tp > 1 else NON_TORCH_TP1
        )
        return inside, CUDA_CONTEXT + (GRAPH_POOL if b.cuda_graphs else 0)
    if runtime == MemoryRuntime.TEI:
        return 0, CUDA_CONTEXT + _activation(facts, 1, TEI_BATCH_TOKENS, 0)
    vocab = facts.vocab_size or _DEFAULT_VOCAB
    hidden = facts.hidden_size or 4096
    compute = 4 * LLAMACPP_UBATCH * (vocab + 3 * (facts.intermediate_size or 4 * hidden) + 8 * hidden)
    return 0, CUDA_CONTEXT + compute


def _scores_per_token(facts: ModelFacts, runtime: MemoryRuntime) -> int:
    """llama.cpp's compute-buffer bytes per token of context: attention scores and mask of one micro-batch
    in f32 (flash attention off; see LLAMACPP_UBATCH). Other runtimes: 0."""
    if runtime != MemoryRuntime.LLAMACPP:
        return 0
    return 4 * LLAMACPP_UBATCH * ((facts.num_attention_heads or 32) + 1)


def _min_context(facts: ModelFacts, floor: int = MIN_CONTEXT) -> int:
    return min(facts.context_length or floor, floor)


def vllm_margin(inside: int) -> int:
    """Bytes a vLLM launch keeps beyond its own non-KV need `inside` (MARGIN_BUFFER, MARGIN_FRACTION)."""
    return MARGIN_BUFFER + math.ceil(inside * MARGIN_FRACTION)


def unknown_kv_bytes(weights: int) -> int:
    """The KV bytes counted for a model whose KV geometry is unknown: a tenth of its weights."""
    return math.ceil(weights * 0.10)


def need_per_device(
    facts: ModelFacts,
    runtime: MemoryRuntime,
    tp: int = 1,
    batch: Batch | None = None,
    context: int | None = None,
    load: Load | None = None,
) -> tuple[int, str] | None:
    """Bytes each of `tp` GPUs must give the runtime for weights, overhead, vLLM's margin and the KV cache, and
    the arithmetic; None when weights are unknown. The KV cache is of the minimum context (the model's own
    maximum if smaller), or with a `load` (issue 42) what holds its requests at once and its longest request,
    by the runtime's own accounting (`_load_kv`)."""
    w = checkpoint_weights(facts)
    if w is None:
        return None
    kv = kv_layout(facts, tp)
    wanted = load.within(facts.context_length) if load is not None else None
    ctx = min(context or MIN_CONTEXT, facts.context_length or context or MIN_CONTEXT)
    b = (batch or planning_batch(wanted)) if runtime == MemoryRuntime.VLLM else None
    inside, outside = _overhead(facts, runtime, tp, b)
    batched = b.max_num_batched_tokens if b else LLAMACPP_UBATCH
    if (
        kv is None
    ):  # geometry unknown: a tenth of the weights (a runtime sizing a context is refused such a model)
        kv_bytes, kv_words = unknown_kv_bytes(w.total), "KV cache geometry unknown, taken as 10 % of weights"
    elif wanted is not None:
        kv_bytes, kv_words, ctx = _load_kv(runtime, kv, wanted, batched, facts.context_length)
    else:
        kv_bytes = kv.bytes_for(ctx, batched) if kv.per_token else 0
        kv_words = f"KV {kv.per_token:,} B/token ({kv.words}) × {ctx:,} tokens"
    per_weights = math.ceil(w.total / tp)
    outside += _scores_per_token(facts, runtime) * ctx
    reserve = vllm_margin(inside) if runtime == MemoryRuntime.VLLM else 0
    total = per_weights + inside + outside + kv_bytes + reserve
    where = f" on each of {tp} GPUs" if tp > 1 else ""
    batch_words = f" at {b.words()}" if b else ""
    margin_words = f"; margin {gib(reserve)} GiB" if reserve else ""
    words = (
        f"{w.words}{where}; {kv_words} = {gib(kv_bytes)} GiB; {runtime.value} overhead "
        f"{gib(inside + outside)} GiB ({gib(inside)} counted by the runtime, {gib(outside)} beside "
        f"it{batch_words}){margin_words}; {gib(total)} GiB per GPU"
    )
    return total, words


def _load_kv(
    runtime: MemoryRuntime, kv: KvLayout, load: Load, batched: int, model_context: int | None
) -> tuple[int, str, int]:
    """KV bytes that hold `load`, the words, and the context of one sequence (what llama.cpp's compute buffer
    is charged for). vLLM: the requests at the typical length in blocks of 16 tokens, or the longest request
    at the context's granularity, whichever is more, beside its held blocks. llama.cpp: one slot per request,
    each of the longest request (slots do not share their cells)."""
    if not kv.per_token:
        return 0, "no KV cache", 0
    longest = _round_up(load.longest, 256)
    if model_context:
        longest = min(longest, model_context)
    if runtime == MemoryRuntime.LLAMACPP:
        amount = load.requests * kv.bytes_for(longest, batched)
        return (
            amount,
            f"KV {kv.per_token:,} B/token ({kv.words}) × {load.requests} slots × {longest:,}",
            longest,
        )
    at_once = load.requests * kv.bytes_for(_round_up(load.typical, VLLM_BLOCK), batched)
    amount = max(at_once, kv.bytes_for(longest, batched)) + _KV_BLOCKS_HELD * kv.per_token
    words = f"KV {kv.per_token:,} B/token ({kv.words}) for {load.words()}"
    return amount, words, longest


def _utilization(share_bytes: int, visible: int, outside: int, margin: Decimal) -> Decimal:
    raw = Decimal(share_bytes - outside) / Decimal(visible) - margin
    return min(MAX_UTILIZATION, raw.quantize(Decimal("0.01"), rounding=ROUND_FLOOR))


# vLLM reserves one null block of its KV cache and counts in blocks of 16 tokens (V33 kv_cache_planning.py);
# the context is sized against the budget less two blocks' worth, so one request of it always fits.
VLLM_BLOCK = 16
_KV_BLOCKS_HELD = 2 * VLLM_BLOCK


@dataclass(frozen=True)
class _Launch:
    """What one launch is tried with, whatever its batch settings."""

    facts: ModelFacts
    runtime: MemoryRuntime
    tp: int
    published: int
    share_percent: int
    visible: int
    margin: Decimal
    weights: int  # per GPU
    layout: KvLayout
    known: bool  # the KV geometry is known
    cap: int  # the longest context the model takes
    granularity: int
    floor: int  # the shortest context the launch must accept
    load: Load | None

    @property
    def share_bytes(self) -> int:
        return self.visible * self.share_percent // 100


def fit_launch(
    facts: ModelFacts,
    runtime: MemoryRuntime,
    published: int,
    share_percent: int = 100,
    tp: int = 1,
    *,
    margin: Decimal = Decimal(0),
    min_context: int = MIN_CONTEXT,
    granularity: int = 256,
    ladder: tuple[Batch, ...] = VLLM_LADDER,
    max_context: int | None = None,
    load: Load | None = None,
) -> Fit | str:
    """The launch on `share_percent` of each of `tp` cards publishing `published` bytes, or why none starts.

    vLLM: the first batch setting of `ladder` that leaves `min_context` tokens (or the model's own
    maximum if smaller); its utilization from the share (less `margin`, floored to a percent); its KV
    budget in bytes, what that claim holds after weights, vLLM's own non-KV need and `vllm_margin`; the
    context, what the budget holds. TEI and llama.cpp: what the share holds after weights and overhead.
    With a `load` (issue 42) the context is at least its longest request instead, vLLM tries the batch
    settings that run at least its requests at once, and the budget must hold them at its typical length:
    `--max-num-seqs` is at most what it holds, llama.cpp gets one slot (-np) per request of the context each.
    None on a guess: a runtime sizing a context is refused a model whose KV geometry is unknown.
    """
    w = checkpoint_weights(facts)
    if w is None:
        return "the weights are unknown (no parameter count, element counts or file size)"
    kv = kv_layout(facts, tp)
    if kv is None and runtime in SIZED_BY_KV:
        return KV_GEOMETRY_UNKNOWN
    visible = visible_bytes(published)
    if visible <= 0:
        return f"a card of {gib(published)} GiB leaves the runtime nothing after the driver's own memory"
    cap = facts.context_length or max_context or UNKNOWN_CONTEXT
    wanted = load.within(cap) if load is not None else None
    launch = _Launch(
        facts, runtime, tp, published, share_percent, visible, margin, math.ceil(w.total / tp),
        kv or KvLayout(0, words="KV geometry unknown"), kv is not None, cap, granularity,
        wanted.longest if wanted else _min_context(facts, min_context), wanted,
    )  # fmt: skip
    last = ""
    for batch in _batches(runtime, ladder, wanted):
        tried = _try(launch, batch)
        if isinstance(tried, Fit):
            return tried
        last = tried
    return last


def _batches(
    runtime: MemoryRuntime, ladder: tuple[Batch, ...], load: Load | None
) -> tuple[Batch | None, ...]:
    """vLLM's batch settings to try, in order: those of `ladder` that run the load's requests at once."""
    if runtime != MemoryRuntime.VLLM:
        return (None,)
    if load is None:
        return ladder
    return tuple(b for b in ladder if b.max_num_seqs >= load.requests) or (planning_batch(load),)


def planning_batch(load: Load | None) -> Batch:
    """The vLLM batch the planner sizes a share at: `PLANNING_BATCH`, or one running the load's requests."""
    if load is None or load.requests <= PLANNING_BATCH.max_num_seqs:
        return PLANNING_BATCH
    fitting = [b for b in VLLM_LADDER if b.cuda_graphs and b.max_num_seqs >= load.requests]
    return fitting[-1] if fitting else Batch(load.requests, max(2048, load.requests), True)


def _try(t: _Launch, batch: Batch | None) -> Fit | str:
    """The launch at one batch setting (None: not vLLM), or why it does not start."""
    inside, outside = _overhead(t.facts, t.runtime, t.tp, batch)
    util, budget, reserve = _budget(t.runtime, t.share_bytes, t.visible, inside, outside, t.margin)
    room = budget - t.weights - inside - reserve
    batched = batch.max_num_batched_tokens if batch else LLAMACPP_UBATCH
    slots = t.load.requests if t.load is not None and t.runtime == MemoryRuntime.LLAMACPP else 1
    scores = _scores_per_token(t.facts, t.runtime)
    context = _context_in(room, t.layout, t.known and bool(t.layout.per_token), t.runtime, scores, batched,
                          t.cap, t.granularity, slots)  # fmt: skip
    if scores and context:
        outside += scores * context
        room -= scores * context
    kv_bytes = slots * _kv_bytes(t.runtime, t.layout, not t.known, room, context, batched)
    held = _held(t, kv_bytes, batched, slots)
    left = t.share_bytes - outside - t.weights - inside - kv_bytes
    wanted = t.load.requests if t.load is not None else 0
    if room >= 0 and context >= t.floor and held >= wanted:
        if batch is not None and t.load is not None:
            batch = Batch(min(batch.max_num_seqs, held), batch.max_num_batched_tokens, batch.cuda_graphs)
        typical = t.load.typical if t.load is not None else 0
        return Fit(t.runtime, t.tp, util, t.weights, inside, outside, t.layout, room, context, batch,
                   kv_bytes, left, slots if t.runtime == MemoryRuntime.LLAMACPP else 0, typical)  # fmt: skip
    how = f" at {batch.words()}" if batch else ""
    kept = f" and a {gib(reserve)} GiB margin" if reserve else ""
    short = f"{context:,} tokens, fewer than {t.floor:,}"
    if context >= t.floor:
        short = (
            f"{held} requests of {t.load.typical:,} tokens at once, fewer than {wanted}" if t.load else short
        )
    return (
        f"{t.share_percent}% of {gib(t.published)} GiB ({gib(t.visible)} GiB seen) × {t.tp} leaves "
        f"{gib(max(room, 0))} GiB for the KV cache after {gib(t.weights)} GiB weights, "
        f"{gib(inside + outside)} GiB runtime overhead{kept}{how}: {short}"
    )


def _held(t: _Launch, kv_bytes: int, batched: int, slots: int) -> int:
    """Requests of the load's typical length the KV budget holds at once, by the runtime's own accounting:
    vLLM's blocks of 16 tokens beside its held blocks, llama.cpp's slots; 0 without a load. A model without a
    KV cache (an encoder) holds any number."""
    if t.load is None:
        return 0
    if t.runtime != MemoryRuntime.VLLM or not t.layout.per_token or not t.known:
        return slots if t.runtime == MemoryRuntime.LLAMACPP else t.load.requests
    one = t.layout.bytes_for(_round_up(t.load.typical, VLLM_BLOCK), batched)
    return max(0, (kv_bytes - _KV_BLOCKS_HELD * t.layout.per_token) // one)


def _round_up(tokens: int, step: int) -> int:
    return -(-tokens // step) * step


def _budget(
    runtime: MemoryRuntime, share_bytes: int, visible: int, inside: int, outside: int, margin: Decimal
) -> tuple[Decimal | None, int, int]:
    """vLLM's utilization (None for the others), the bytes the runtime may fill, and vLLM's own margin."""
    if runtime != MemoryRuntime.VLLM:
        return None, share_bytes - outside, 0
    util = _utilization(share_bytes, visible, outside, margin)
    return util, int(util * visible) if util > 0 else 0, vllm_margin(inside)


def _kv_bytes(
    runtime: MemoryRuntime, layout: KvLayout, unknown: bool, room: int, context: int, batched: int
) -> int:
    """What the KV cache takes: all the room left for vLLM, the context's own cache for the others (per slot)."""
    if runtime == MemoryRuntime.VLLM:
        return max(room, 0) if layout.per_token or unknown else 0  # encoder-only: no KV cache
    return layout.bytes_for(context, batched) if layout.per_token else 0


def _context_in(
    room: int,
    layout: KvLayout,
    known: bool,
    runtime: MemoryRuntime,
    scores: int,
    batched: int,
    cap: int,
    granularity: int,
    slots: int = 1,
) -> int:
    """The tokens of context `room` bytes hold (at most `cap`) for each of `slots` sequences, rounded down to
    `granularity` unless the model's own maximum caps it."""
    if not known:
        return cap if room >= 0 else 0
    # llama.cpp's compute buffer grows with a slot's context too (its scores are of one stream's cells:
    # llama.cpp src/llama-context.cpp reserves the worst-case graph with n_seq_max streams unless the KV cache is
    # unified), so the slots' KV and the scores share the room per token
    sized = KvLayout(layout.full * slots + scores, layout.window_layers * slots, layout.window)
    held = _KV_BLOCKS_HELD * layout.per_token if runtime == MemoryRuntime.VLLM else 0
    context = min(sized.tokens_in(room - held, batched), cap)
    if granularity <= context < cap:
        context -= context % granularity
    return context
