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
from isvc_api._quantity import gib
from isvc_api._vocabulary import (
    ModelFormat,
    Quantization,
)
from isvc_api._weights import checkpoint_weights

__all__ = [
    "MIN_CONTEXT",
    "PLANNING_BATCH",
    "VLLM_LADDER",
    "Batch",
    "Fit",
    "KvLayout",
    "MemoryRuntime",
    "fit_launch",
    "kv_layout",
    "need_per_device",
    "runtime_for",
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
class KvLayout:
    """KV-cache bytes per token on one GPU: full-attention layers, sliding-window layers and window."""

    full: int
    window_layers: int = 0
    window: int = 0
    words: str = ""

    @property
    def per_token(self) -> int:
        """Bytes per token while the context is within the window."""
        return self.full + self.window_layers

    def bytes_for(self, tokens: int, batched: int) -> int:
        """KV bytes of one request of `tokens`; a window layer holds window − 1 + batched tokens at most
        (V33 kv_cache_interface.py:901-955)."""
        if tokens <= 0:
            return 0
        capped = min(tokens, self.window - 1 + batched) if self.window_layers else 0
        return self.full * tokens + self.window_layers * capped

    def tokens_in(self, room: int, batched: int) -> int:
        """The longest request whose KV cache fits `room` bytes."""
        if room <= 0 or self.per_token <= 0:
            return 0
        tokens = room // self.per_token
        cap = self.window - 1 + batched
        if self.window_layers and tokens > cap:
            rest = room - self.window_layers * cap
            tokens = rest // self.full if self.full else 1 << 40
        return max(0, int(tokens))


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

    @property
    def overhead(self) -> int:
        """Non-KV, non-weight memory per GPU."""
        return self.inside + self.outside

    def words(self) -> str:
        util = f"utilization {self.utilization}, " if self.utilization is not None else ""
        batch = f"; {self.batch.words()}" if self.batch else ""
        return (
            f"{util}per GPU: weights {gib(self.weights)} GiB, "
            f"runtime overhead {gib(self.overhead)} GiB "
            f"({gib(self.inside)} GiB counted by the runtime, {gib(self.outside)} GiB beside it), "
            f"KV {self.kv_bytes:,} B ({gib(self.kv_bytes)} GiB) at {self.kv.per_token:,} B/token = context "
            f"{self.context:,}, margin {gib(self.margin)} GiB{batch}"
        )


def visible_bytes(published: int) -> int:
    """Memory the runtime sees on a card whose driver publishes `published` bytes."""
    return max(0, published - SEEN_GAP)


def runtime_for(facts: ModelFacts) -> MemoryRuntime:
    """The runtime a model is served with when nothing else says: GGUF llama.cpp, encoders TEI."""
    if facts.format == ModelFormat.GGUF or facts.quantization == Quantization.GGUF:
        return MemoryRuntime.LLAMACPP
    if _is_encoder(facts):
        return MemoryRuntime.TEI
    return MemoryRuntime.VLLM


_ENCODER_MARKS = ("bert", "roberta", "electra", "mpnet", "deberta", "t5encoder")


def _is_encoder(facts: ModelFacts) -> bool:
    names = f"{facts.architecture or ''} {facts.family or ''}".lower().replace("-", "").replace("_", "")
    return any(mark in names for mark in _ENCODER_MARKS)


# ---------------------------------------------------------------------------------------- KV cache


def kv_layout(facts: ModelFacts, tp: int = 1, element: int = 2) -> KvLayout | None:
    """KV bytes per token on one of `tp` GPUs; None when the geometry is unknown.

    GQA/MHA: 2 × layers × max(1, KV heads / tp) × head dim × bytes (V33 kv_cache_interface.py:552-616);
    MLA: layers × (kv_lora_rank + rope dim) × bytes, replicated on every rank (V33 mla_attention.py);
    sliding-window layers hold at most the window (V33 kv_cache_interface.py:901-955).
    """
    if _is_encoder(facts):
        return KvLayout(0, words="no KV cache (encoder-only model)")
    layers = facts.num_layers
    if not layers:
        return None
    if facts.kv_lora_rank:
        per_layer = (facts.kv_lora_rank + (facts.qk_rope_head_dim or 0)) * element
        return KvLayout(
            layers * per_layer,
            words=(
                f"MLA {layers} layers × ({facts.kv_lora_rank} + {facts.qk_rope_head_dim or 0}) × {element} B"
            ),
        )
    heads = facts.num_attention_heads
    kv_heads = facts.num_kv_heads or heads
    head_dim = facts.head_dim
    if head_dim is None and facts.hidden_size and heads:
        head_dim = facts.hidden_size // heads
    if not (kv_heads and head_dim):
        return None
    per_gpu_heads = max(1, kv_heads // max(1, tp))
    per_layer = 2 * per_gpu_heads * head_dim * element
    window_layers = min(layers, facts.sliding_window_layers or 0) if facts.sliding_window else 0
    full = layers - window_layers
    words = f"2 × {layers} layers × {per_gpu_heads} KV heads × {head_dim} head dim × {element} B"
    if window_layers:
        words += f" ({window_layers} layers capped at a {facts.sliding_window}-token window)"
    return KvLayout(full * per_layer, window_layers * per_layer, facts.sliding_window or 0, words)


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


def need_per_device(
    facts: ModelFacts,
    runtime: MemoryRuntime,
    tp: int = 1,
    batch: Batch | None = None,
    context: int | None = None,
) -> tuple[int, str] | None:
    """Bytes each of `tp` GPUs must give the runtime for weights, overhead, vLLM's margin and the KV of the
    minimum context (the model's own maximum if smaller), and the arithmetic; None when weights are unknown."""
    w = checkpoint_weights(facts)
    if w is None:
        return None
    kv = kv_layout(facts, tp)
    ctx = min(context or MIN_CONTEXT, facts.context_length or context or MIN_CONTEXT)
    b = (batch or PLANNING_BATCH) if runtime == MemoryRuntime.VLLM else None
    inside, outside = _overhead(facts, runtime, tp, b)
    batched = b.max_num_batched_tokens if b else LLAMACPP_UBATCH
    if kv is None:  # geometry unknown: a tenth of the weights, as before
        kv_bytes, kv_words = math.ceil(w.total * 0.10), "KV cache unknown, taken as 10 % of weights"
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


def _utilization(share_bytes: int, visible: int, outside: int, margin: Decimal) -> Decimal:
    raw = Decimal(share_bytes - outside) / Decimal(visible) - margin
    return min(MAX_UTILIZATION, raw.quantize(Decimal("0.01"), rounding=ROUND_FLOOR))


# vLLM reserves one null block of its KV cache and counts in blocks of 16 tokens (V33 kv_cache_planning.py);
# the context is sized against the budget less two blocks' worth, so one request of it always fits.
_KV_BLOCKS_HELD = 2 * 16


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
) -> Fit | str:
    """The launch on `share_percent` of each of `tp` cards publishing `published` bytes, or why none starts.

    vLLM: the first batch setting of `ladder` that leaves `min_context` tokens (or the model's own
    maximum if smaller); its utilization from the share (less `margin`, floored to a percent); its KV
    budget in bytes, what that claim holds after weights, vLLM's own non-KV need and `vllm_margin`; the
    context, what the budget holds. TEI and llama.cpp: what the share holds after weights and overhead.
    """
    w = checkpoint_weights(facts)
    if w is None:
        return "the weights are unknown (no parameter count, element counts or file size)"
    visible = visible_bytes(published)
    if visible <= 0:
        return f"a card of {gib(published)} GiB leaves the runtime nothing after the driver's own memory"
    share_bytes = visible * share_percent // 100
    cap = facts.context_length or max_context or UNKNOWN_CONTEXT
    kv = kv_layout(facts, tp)
    per_weights = math.ceil(w.total / tp)
    floor = _min_context(facts, min_context)
    options: tuple[Batch | None, ...] = ladder if runtime == MemoryRuntime.VLLM else (None,)
    layout = kv or KvLayout(0, words="KV geometry unknown")
    scores = _scores_per_token(facts, runtime)
    last = ""
    for batch in options:
        inside, outside = _overhead(facts, runtime, tp, batch)
        util, budget, reserve = _budget(runtime, share_bytes, visible, inside, outside, margin)
        room = budget - per_weights - inside - reserve
        batched = batch.max_num_batched_tokens if batch else LLAMACPP_UBATCH
        known = kv is not None and bool(layout.per_token)
        context = _context_in(room, layout, known, runtime, scores, batched, cap, granularity)
        if scores and context:
            outside += scores * context
            room -= scores * context
        kv_bytes = _kv_bytes(runtime, layout, kv is None, room, context, batched)
        left = share_bytes - outside - per_weights - inside - kv_bytes
        if room >= 0 and context >= floor:
            return Fit(
                runtime, tp, util, per_weights, inside, outside, layout, room, context, batch, kv_bytes, left
            )
        how = f" at {batch.words()}" if batch else ""
        kept = f" and a {gib(reserve)} GiB margin" if reserve else ""
        last = (
            f"{share_percent}% of {gib(published)} GiB ({gib(visible)} GiB seen) × {tp} leaves "
            f"{gib(max(room, 0))} GiB for the KV cache after {gib(per_weights)} GiB weights, "
            f"{gib(inside + outside)} GiB runtime overhead{kept}{how}: {context:,} tokens, "
            f"fewer than {floor:,}"
        )
    return last


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
    """What the KV cache takes: all the room left for vLLM, the context's own cache for the others."""
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
) -> int:
    """The tokens of context `room` bytes hold (at most `cap`), rounded down to `granularity`."""
    if not known:
        return cap if room >= 0 else 0
    # llama.cpp's compute buffer grows with the context too: the two share the room per token
    sized = KvLayout(layout.full + scores, layout.window_layers, layout.window)
    held = _KV_BLOCKS_HELD * layout.per_token if runtime == MemoryRuntime.VLLM else 0
    context = min(sized.tokens_in(room - held, batched), cap)
    if context >= granularity:
        context -= context % granularity
    return context
