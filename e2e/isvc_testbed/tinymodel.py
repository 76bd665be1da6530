"""A tiny GGUF chat model for the real node: llama architecture, random weights, a byte-level vocabulary.

llama.cpp's `llama-server` loads it in a few MB and answers /v1/chat/completions with it: the tokenizer is a
SentencePiece-style one (`tokenizer.ggml.model` "llama") of three control tokens, the 256 byte tokens
`<0x00>`..`<0xFF>` every character falls back to, and the printable ASCII characters; the chat template is
ChatML's. The weights are seeded random numbers, so the same file comes out on every run (it is cached by
its recipe) and what it says is noise, not an answer.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType, TokenType

__all__ = [
    "CHAT_TEMPLATE",
    "GGUF_FILE",
    "OTHER_VARIANT",
    "TinyModel",
    "hub_fixture",
    "tiny_chat_model",
    "truncated",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Names as a GGUF repository on the Hub spells its variants (<model>-<quantization>.gguf); the catalog chooses
# the largest when no Q4_K_M is offered, the F32 file here.
GGUF_FILE = "tiny-chat-f32.gguf"
OTHER_VARIANT = "tiny-chat-q8_0.gguf"
_CONTROL = ("<unk>", "<s>", "</s>")  # llama.cpp's SentencePiece ids: unk 0, bos 1, eos 2


@dataclass(frozen=True)
class TinyModel:
    """The shape of the model: small enough for kilobytes of weights, a real llama graph all the same."""

    embedding: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    feed_forward: int = 128
    context: int = 512
    seed: int = 13

    @property
    def tokens(self) -> list[str]:
        printable = [chr(c) for c in range(33, 127)] + ["\u2581"]  # "▁": SentencePiece's space
        return [*_CONTROL, *(f"<0x{b:02X}>" for b in range(256)), *printable]

    @property
    def parameters(self) -> int:
        """Elements of every tensor, as the Hub's `gguf.total` counts them."""
        return sum(a.size for a in self._tensors().values())

    def _tensors(self) -> dict[str, np.ndarray]:
        """The weights, numpy shape (rows, columns) = ggml's (ne1, ne0) reversed."""
        rng = np.random.default_rng(self.seed)
        vocab, d, ff = len(self.tokens), self.embedding, self.feed_forward
        kv = d // self.heads * self.kv_heads

        def w(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) * 0.2).astype(np.float32)

        out = {
            "token_embd.weight": w(vocab, d),
            "output_norm.weight": np.ones(d, np.float32),
            "output.weight": w(vocab, d),
        }
        for i in range(self.layers):
            out |= {
                f"blk.{i}.attn_norm.weight": np.ones(d, np.float32),
                f"blk.{i}.attn_q.weight": w(d, d),
                f"blk.{i}.attn_k.weight": w(kv, d),
                f"blk.{i}.attn_v.weight": w(kv, d),
                f"blk.{i}.attn_output.weight": w(d, d),
                f"blk.{i}.ffn_norm.weight": np.ones(d, np.float32),
                f"blk.{i}.ffn_gate.weight": w(ff, d),
                f"blk.{i}.ffn_up.weight": w(ff, d),
                f"blk.{i}.ffn_down.weight": w(d, ff),
            }
        return out

    def write(self, path: Path, name: str) -> Path:
        """The GGUF file at `path`: metadata, tokenizer, chat template, F32 tensors."""
        writer = GGUFWriter(path, "llama")
        writer.add_name(name)
        writer.add_file_type(LlamaFileType.ALL_F32)
        writer.add_context_length(self.context)
        writer.add_embedding_length(self.embedding)
        writer.add_block_count(self.layers)
        writer.add_feed_forward_length(self.feed_forward)
        writer.add_head_count(self.heads)
        writer.add_head_count_kv(self.kv_heads)
        writer.add_rope_dimension_count(self.embedding // self.heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_vocab_size(len(self.tokens))
        tokens = self.tokens
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0] * len(_CONTROL) + [0.0] * 256 + [-1.0] * (len(tokens) - 259))
        writer.add_token_types(
            [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
            + [TokenType.BYTE] * 256
            + [TokenType.NORMAL] * (len(tokens) - 259)
        )
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_add_bos_token(True)
        writer.add_chat_template(CHAT_TEMPLATE)
        for tensor, data in self._tensors().items():
            writer.add_tensor(tensor, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path


def tiny_chat_model(
    name: str = "isvc-tiny-chat", model: TinyModel | None = None, cache: Path | None = None
) -> Path:
    """The GGUF file of `model` named `name`, written once into the test bed's cache (keyed by its recipe)."""
    model = model or TinyModel()
    root = Path(os.environ.get("ISVC_CACHE_DIR") or Path.home() / ".cache" / "isvc-testbed")
    cache = cache or root / "models"
    key = hashlib.sha256(json.dumps([name, asdict(model), CHAT_TEMPLATE]).encode()).hexdigest()[:16]
    out = cache / f"{name}-{key}.gguf"
    if not out.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        model.write(partial, name)
        partial.rename(out)
    return out


def truncated(gguf: Path, missing: int = 64 * 1024) -> Path:
    """A copy of `gguf` without its last `missing` bytes, beside it: the header (what the catalog reads) is
    whole, the last tensors' data is not, and llama.cpp refuses to load it ("data is not within the file
    bounds, model is corrupted or incomplete")."""
    out = gguf.with_name(f"{gguf.stem}-cut{missing}.gguf")
    if not out.is_file():
        data = gguf.read_bytes()
        out.write_bytes(data[: len(data) - missing])
    return out


def hub_fixture(directory: Path, repos: dict[str, Path], model: TinyModel | None = None) -> Path:
    """A directory of stand-in Hub repositories laid out as GGUF repositories on the Hub are: each holds its
    GGUF file whole under a variant's name (`GGUF_FILE`, F32 as written) beside a smaller variant whose
    header alone is real (`OTHER_VARIANT`), which the catalog must not choose and the fetch must not
    download; for `ModuleProcesses.start_hub(directory)`."""
    model = model or TinyModel()
    directory.mkdir(parents=True, exist_ok=True)
    fixtures = [
        {
            "repo": repo,
            "pipeline_tag": "text-generation",
            "library_name": None,
            "format": "gguf",
            "parameters": model.parameters,
            # Q8_0 holds 34 bytes per 32 weights (ggml's block_q8_0) against F32's 128: about a quarter
            "gguf": {
                "architecture": "llama",
                "context_length": model.context,
                "files": {OTHER_VARIANT: gguf.stat().st_size * 34 // 128},
            },
            "local_files": {GGUF_FILE: str(gguf)},
        }
        for repo, gguf in repos.items()
    ]
    (directory / "tiny-chat.yaml").write_text(json.dumps(fixtures, indent=2))
    return directory
