"""KV-cache bytes per token of a model on one GPU, as the runtimes lay the cache out: full-attention layers,
sliding-window layers and MLA latents (source keys as in `_memory`: V33 = vllm-project/vllm v0.33.0)."""

from __future__ import annotations

from dataclasses import dataclass

from isvc_api._facts import ModelFacts

__all__ = ["KvLayout", "is_encoder", "kv_layout"]


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


_ENCODER_MARKS = ("bert", "roberta", "electra", "mpnet", "deberta", "t5encoder")


def is_encoder(facts: ModelFacts) -> bool:
    """Whether the model is an encoder (BERT and its kin): no KV cache, served by TEI."""
    names = f"{facts.architecture or ''} {facts.family or ''}".lower().replace("-", "").replace("_", "")
    return any(mark in names for mark in _ENCODER_MARKS)


def kv_layout(facts: ModelFacts, tp: int = 1, element: int = 2) -> KvLayout | None:
    """KV bytes per token on one of `tp` GPUs; None when the geometry is unknown.

    GQA/MHA: 2 × layers × max(1, KV heads / tp) × head dim × bytes (V33 kv_cache_interface.py:552-616);
    MLA: layers × (kv_lora_rank + rope dim) × bytes, replicated on every rank (V33 mla_attention.py);
    sliding-window layers hold at most the window (V33 kv_cache_interface.py:901-955).
    """
    if is_encoder(facts):
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
