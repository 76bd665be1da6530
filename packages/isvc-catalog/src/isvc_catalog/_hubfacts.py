"""What a Hugging Face repository's own files say about a model: config.json, its quantization_config,
the header keys of a GGUF file, the model info's counts. Plain data in, ModelFacts out; `_hub` reads them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from isvc_api import ModelFacts, ModelFormat, ModelSource, Quantization, Reason, Refusal

from isvc_catalog._gguf import GgufHeader
from isvc_catalog._refs import RepoRef
from isvc_catalog._safetensors import DTYPE_BYTES, TORCH_DTYPES, logical_parameters

_SHOWN = 80  # characters of a repository's own text shown in a status message
_GGUF_SHARD = re.compile(r"-\d{5}-of-\d{5}(?=\.gguf$)")
_GGUF_BITS = re.compile(r"(?:^|[-_.])(?:i?q(\d)|f(16|32)|bf(16))", re.IGNORECASE)
_PREFERRED_GGUF = "q4_k_m"  # the variant llama.cpp-based runtimes are usually handed
_NESTED_CONFIGS = ("text_config", "llm_config", "language_config")
# A chat template that renders tools names the `tools` variable the chat API passes it (Jinja).
_TEMPLATE_TOOLS = re.compile(r"\btools\b")


class _Refused(Exception):
    """Internal: a refusal found deep in the fetch; caught by `resolve`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def _refuse(reason: Reason, message: str) -> _Refused:
    return _Refused(Refusal(reason=reason, message=message))


def _shown(text: object) -> str:
    """A repository's own text as a status message quotes it: as it is when short and printable, else its
    repr cut to _SHOWN characters."""
    if isinstance(text, str) and len(text) <= _SHOWN and text.isprintable():
        return text
    return _quoted(text)


def _quoted(text: object) -> str:
    """The repr of a repository's own text, cut to _SHOWN characters."""
    said = repr(text)
    return said if len(said) <= _SHOWN else said[: _SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Quant:
    scheme: Quantization
    bits: int | None = None
    group_size: int | None = None


@dataclass(frozen=True, slots=True)
class Weights:
    """What the weight files tell: parameters, dtype, quantization and bytes; the GGUF header read."""

    parameters: int | None
    dtype: str | None
    quant: _Quant
    bits: int | None
    weight_bytes: int | None
    dtype_counts: dict[str, int] | None = None
    header: GgufHeader | None = None


def _listed_bytes(root: Mapping[str, int | None], weights: list[str]) -> int | None:
    """The weight files' sizes added up, when the listing gave every one."""
    sizes = [root.get(name) for name in weights]
    return sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None


def _config_dtype(config: Mapping[str, Any]) -> str | None:
    return _str(config.get("torch_dtype")) or _str(config.get("dtype"))


def safetensors_weights(
    config: Mapping[str, Any],
    root: Mapping[str, int | None],
    weights: list[str],
    counts: Counter[str],
    quant: _Quant,
) -> Weights:
    """Safetensors: the element counts per dtype make the parameters, and the dtype when config.json has none."""
    return Weights(
        parameters=logical_parameters(counts, quant.scheme, quant.bits, quant.group_size),
        dtype=_config_dtype(config) or _dominant_float(counts),
        quant=quant,
        bits=quant.bits,
        weight_bytes=_listed_bytes(root, weights),
        dtype_counts=dict(sorted(counts.items())),
    )


def gguf_weights(
    config: Mapping[str, Any],
    info: Mapping[str, Any],
    root: Mapping[str, int | None],
    weights: list[str],
    header: GgufHeader | None,
    counted: int,
    stored: int,
) -> Weights:
    """GGUF: what the headers count, else the Hub's own count; the bits from the file name, else the size."""
    gguf_info: dict[str, Any] = info["gguf"] if isinstance(info.get("gguf"), dict) else {}
    params = counted or _int(gguf_info.get("total"))
    weight_bytes = stored or _listed_bytes(root, weights)
    bits = _gguf_bits(weights[0]) if weights else None
    if bits is None and params and weight_bytes:
        bits = max(1, weight_bytes * 8 // params)
    return Weights(
        params, _config_dtype(config), _Quant(Quantization.GGUF), bits, weight_bytes, header=header
    )


def sized_weights(
    config: Mapping[str, Any], root: Mapping[str, int | None], weights: list[str], quant: _Quant
) -> Weights:
    """Other formats: the parameters the file sizes make at config.json's dtype."""
    weight_bytes = _listed_bytes(root, weights)
    dtype = _config_dtype(config)
    params: int | None = None
    if weight_bytes is not None and dtype:
        per = DTYPE_BYTES.get(_safetensors_code(dtype) or "", 0)
        params = int(weight_bytes / per) if per else None
    return Weights(params, dtype, quant, quant.bits, weight_bytes)


def model_facts(
    ref: RepoRef,
    pinned: str | None,
    fmt: ModelFormat,
    config: Mapping[str, Any],
    info: Mapping[str, Any],
    root: Mapping[str, int | None],
    files: list[str],
    weights: Weights,
    template: str | None,
) -> ModelFacts:
    """The facts of a repository: config.json's, a GGUF header's geometry over them (reconciled), each range-checked."""
    gguf_info: dict[str, Any] = info["gguf"] if isinstance(info.get("gguf"), dict) else {}
    heads, kv_heads, head_dim, hidden = _attention(config)
    architectures = config.get("architectures")
    window, window_layers = _sliding_window(config, _pick(config, "num_hidden_layers", "n_layer"))
    facts = ModelFacts(
        source=ModelSource.HUGGING_FACE,
        name=ref.repo,
        revision=ref.revision,
        commit=pinned,
        ready=True,
        format=fmt,
        architecture=architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else None,
        family=_str(config.get("model_type")) or _str(gguf_info.get("architecture")),
        parameter_count=weights.parameters,
        dtype=weights.dtype,
        quantization=weights.quant.scheme,
        quantization_bits=weights.bits,
        context_length=_usable_positions(config)
        or _pick(config, "n_positions", "max_seq_len", "seq_length", "max_sequence_length")
        or _int(gguf_info.get("context_length")),
        num_layers=_pick(config, "num_hidden_layers", "n_layer", "num_layers"),
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        weight_bytes=weights.weight_bytes,
        gguf_files=files if fmt == ModelFormat.GGUF else None,
        dtype_counts=weights.dtype_counts,
        intermediate_size=_pick(config, "intermediate_size", "n_inner", "ffn_dim"),
        vocab_size=_pick(config, "vocab_size"),
        tie_word_embeddings=_bool(config, "tie_word_embeddings"),
        num_experts=_pick(config, "num_experts", "n_routed_experts", "num_local_experts"),
        sliding_window=window,
        sliding_window_layers=window_layers,
        kv_lora_rank=_pick(config, "kv_lora_rank"),
        qk_rope_head_dim=_pick(config, "qk_rope_head_dim"),
        chat_template_tools=None if template is None else bool(_TEMPLATE_TOOLS.search(template)),
        mistral_format="params.json" in root
        and any(n.startswith("consolidated") and n.endswith(".safetensors") for n in root),
        endpoint_types=None,  # a bare Hugging Face reference carries no endpoint-type facts
    )
    if weights.header is not None:
        facts = _reconciled(ref, facts, weights.header)
    return _in_range(ref, facts)


# The geometry both config.json and a GGUF header state (ggml docs/gguf.md keys): llama.cpp reads the header
# alone, so it is the model's; a config.json that says otherwise is a repository contradicting itself.
_RECONCILED = {
    "num_layers": "block_count",
    "num_attention_heads": "attention.head_count",
    "num_kv_heads": "attention.head_count_kv",
    "hidden_size": "embedding_length",
}
# What a model's facts may be: positive counts, within bounds no published model comes near (DeepSeek-V3:
# 61 layers, 128 heads, hidden 7,168, 256 experts; Llama 3.1 405B: hidden 16,384, intermediate 53,248; Gemma
# 3: a vocabulary of 262,144; Llama 4 Scout: a context of 10,485,760 tokens, from their config.json files).
FACT_RANGES: dict[str, tuple[int, int]] = {
    "parameter_count": (1, 10**14),
    "quantization_bits": (1, 32),
    "context_length": (1, 1 << 24),
    "num_layers": (1, 1024),
    "num_attention_heads": (1, 1024),
    "num_kv_heads": (1, 1024),
    "hidden_size": (1, 1 << 17),
    "head_dim": (1, 4096),
    "weight_bytes": (0, 1 << 50),
    "intermediate_size": (1, 1 << 20),
    "vocab_size": (1, 1 << 22),
    "num_experts": (1, 4096),
    "sliding_window": (1, 1 << 24),
    "sliding_window_layers": (0, 1024),
    "kv_lora_rank": (1, 1 << 16),
    "qk_rope_head_dim": (1, 4096),
}


def _reconciled(ref: RepoRef, facts: ModelFacts, header: GgufHeader) -> ModelFacts:
    """The GGUF header's geometry over config.json's: the rule is that the header is the model (llama.cpp
    reads nothing else); a config.json stating another value for a field both state is refused, naming it."""
    geometry = _gguf_geometry(header)
    for field, key in _RECONCILED.items():
        said, read = getattr(facts, field), geometry.get(field)
        if said is not None and read is not None and said != read:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref.repo} contradicts itself: config.json gives {field} {said}, the GGUF header "
                f"({header.architecture}.{key}) {read}; llama.cpp reads the header, so the memory the model "
                "needs cannot be told from a config.json that disagrees. Fix or remove the repository's "
                "config.json, or name another repository.",
            )
    return facts.model_copy(update=geometry)


def _in_range(ref: RepoRef, facts: ModelFacts) -> ModelFacts:
    """The facts, each within FACT_RANGES and KV heads no more than heads; else refused naming the field."""
    for field, (low, high) in FACT_RANGES.items():
        value = getattr(facts, field)
        if value is not None and not low <= value <= high:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref.repo} states {field} {value}, outside what a model can have ({low}..{high}); its "
                "files are not a model the platform can plan. Name another repository.",
            )
    heads, kv_heads = facts.num_attention_heads, facts.num_kv_heads
    if heads is not None and kv_heads is not None and kv_heads > heads:
        raise _refuse(
            Reason.INVALID_MODEL_SOURCE,
            f"{ref.repo} states num_kv_heads {kv_heads} over num_attention_heads {heads}, which no attention "
            "layout has; its files are not a model the platform can plan. Name another repository.",
        )
    return facts


def _attention(config: Mapping[str, Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """Attention heads, KV heads, head dimension and hidden size of config.json."""
    heads = _pick(config, "num_attention_heads", "n_head", "num_heads")
    hidden = _pick(config, "hidden_size", "n_embd", "d_model")
    head_dim = _pick(config, "head_dim") or (hidden // heads if hidden and heads else None)
    kv_heads = _pick(config, "num_key_value_heads", "n_head_kv", "num_kv_heads")
    if kv_heads is None and heads is not None:
        kv_heads = 1 if config.get("multi_query") is True else heads
    return heads, kv_heads, head_dim, hidden


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _size(entry: Mapping[str, Any]) -> int | None:
    lfs = entry.get("lfs")
    return _int(entry.get("size")) or (_int(lfs.get("size")) if isinstance(lfs, dict) else None)


def _pick(config: Mapping[str, Any], *keys: str) -> int | None:
    """The first integer under one of `keys`, at the top or in a nested text config."""
    scopes = [config, *(config[n] for n in _NESTED_CONFIGS if isinstance(config.get(n), dict))]
    for scope in scopes:
        for key in keys:
            value = _int(scope.get(key))
            if value is not None:
                return value
    return None


# Models whose learned position table starts after the padding index: position ids begin at
# pad_token_id + 1 (transformers, models/roberta and models/xlm_roberta, create_position_ids_from_input_ids),
# so bge-m3's 8194 positions hold 8192 tokens.
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert"})


def _usable_positions(config: Mapping[str, Any]) -> int | None:
    """The tokens a model's position table holds: max_position_embeddings, less the padding offset of the
    RoBERTa family."""
    positions = _pick(config, "max_position_embeddings")
    if positions is None or config.get("model_type") not in _OFFSET_POSITIONS:
        return positions
    pad = _int(config.get("pad_token_id"))
    return positions - (1 if pad is None else pad) - 1


def _bool(config: Mapping[str, Any], key: str) -> bool | None:
    scopes = [config, *(config[n] for n in _NESTED_CONFIGS if isinstance(config.get(n), dict))]
    return next((scope[key] for scope in scopes if isinstance(scope.get(key), bool)), None)


def _sliding_window(config: Mapping[str, Any], layers: int | None) -> tuple[int | None, int | None]:
    """The window and how many layers use it: `layer_types` when given (Gemma 2/3, gpt-oss), every
    other layer for Gemma 2, none when `use_sliding_window` is false (Qwen2)."""
    window = _pick(config, "sliding_window")
    if window is None or config.get("use_sliding_window") is False:
        return None, None
    types = config.get("layer_types")
    if isinstance(types, list):
        count = sum(1 for t in types if t == "sliding_attention")
        return (window, count) if count else (None, None)
    if config.get("model_type") == "gemma2" and layers:
        return window, layers // 2
    return None, None  # a window stated without a layout: counted as full attention, the safe side


def _info_counts(info: Mapping[str, Any]) -> Counter[str] | None:
    """Element counts per dtype the Hub computed (the `safetensors` field of model info)."""
    st = info.get("safetensors")
    params = st.get("parameters") if isinstance(st, dict) else None
    if not isinstance(params, dict) or not params:
        return None
    counts: Counter[str] = Counter()
    for dtype, count in params.items():
        if _int(count) is None:
            return None
        counts[str(dtype)] = count
    return counts


def _dominant_float(counts: Mapping[str, int]) -> str | None:
    floats = {d: c for d, c in counts.items() if d in TORCH_DTYPES}
    return TORCH_DTYPES[max(floats, key=lambda d: floats[d])] if floats else None


def _safetensors_code(torch_dtype: str) -> str | None:
    return next((code for code, name in TORCH_DTYPES.items() if name == torch_dtype), None)


def _gguf_variant(files: list[str], root: Mapping[str, int | None]) -> list[str]:
    """The files of one GGUF variant: Q4_K_M when offered, else the largest."""
    variants: dict[str, list[str]] = {}
    for name in files:
        variants.setdefault(_GGUF_SHARD.sub("", name).lower(), []).append(name)
    preferred = [v for v in variants if _PREFERRED_GGUF in v]
    if preferred:
        return variants[preferred[0]]
    return max(variants.values(), key=lambda group: sum(root.get(n) or 0 for n in group))


def _gguf_geometry(header: GgufHeader) -> dict[str, Any]:
    """ModelFacts fields from the standardized keys of a GGUF header (ggml docs/gguf.md)."""
    heads = header.arch_int("attention.head_count")
    hidden = header.arch_int("embedding_length")
    layers = header.arch_int("block_count")
    vocab = header.arch_int("vocab_size") or header.array_lengths.get("tokenizer.ggml.tokens")
    window = header.arch_int("attention.sliding_window")
    window_layers = layers // 2 if window and layers and header.architecture == "gemma2" else None
    geometry: dict[str, Any] = {
        "family": header.architecture,
        "context_length": header.arch_int("context_length"),
        "num_layers": layers,
        "num_attention_heads": heads,
        # absent: no grouped-query attention (as many KV heads as heads)
        "num_kv_heads": header.arch_int("attention.head_count_kv") or heads,
        "head_dim": header.arch_int("attention.key_length")
        or (hidden // heads if hidden and heads else None),
        "hidden_size": hidden,
        "intermediate_size": header.arch_int("feed_forward_length"),
        "vocab_size": vocab,
        "num_experts": header.arch_int("expert_count"),
        "sliding_window": window if window_layers else None,
        "sliding_window_layers": window_layers,
        "kv_lora_rank": header.arch_int("attention.kv_lora_rank"),
        "qk_rope_head_dim": header.arch_int("rope.dimension_count")
        if header.arch_int("attention.kv_lora_rank")
        else None,
    }
    return {k: v for k, v in geometry.items() if v is not None}


def _gguf_bits(name: str) -> int | None:
    match = _GGUF_BITS.search(name.rsplit("/", 1)[-1])
    if not match:
        return None
    return int(next(g for g in match.groups() if g))


def _quantization(ref: RepoRef, qc: object) -> _Quant:
    """The scheme of config.json's quantization_config; an unknown one is refused."""
    if not isinstance(qc, dict):
        return _Quant(Quantization.NONE)
    method = str(qc.get("quant_method", "")).lower().replace("_", "-")
    bits = _int(qc.get("bits")) or _int(qc.get("w_bit"))
    group = _int(qc.get("group_size")) or _int(qc.get("q_group_size"))
    if method == "awq":
        return _Quant(Quantization.AWQ, bits or 4, group)
    if method in ("gptq", "gptq-marlin"):
        return _Quant(Quantization.GPTQ, bits or 4, group if group and group > 0 else None)
    if method in ("fp8", "fbgemm-fp8"):
        return _Quant(Quantization.FP8, 8)
    if method == "bitsandbytes":
        four = qc.get("load_in_4bit") or qc.get("_load_in_4bit")
        return _Quant(Quantization.BITSANDBYTES, 4 if four else 8)
    if method == "compressed-tensors":
        for group_cfg in (qc.get("config_groups") or {}).values():
            weights = group_cfg.get("weights") if isinstance(group_cfg, dict) else None
            if isinstance(weights, dict):
                wbits = _int(weights.get("num_bits"))
                if weights.get("type") == "float" and wbits == 8:
                    return _Quant(Quantization.FP8, 8)
                if weights.get("type") == "int" and wbits:
                    return _Quant(Quantization.GPTQ, wbits, _int(weights.get("group_size")))
    if not method:
        return _Quant(Quantization.NONE)
    raise _refuse(
        Reason.INVALID_MODEL_SOURCE,
        f"{ref} is quantized with {_quoted(method)}, which the platform cannot serve. Name a variant "
        "quantized with AWQ, GPTQ, FP8 or bitsandbytes, or the unquantized model.",
    )
