"""The stand-in Hub's repositories: fixture models described in YAML, made into the files the Hub would list
and serve (config.json, safetensors and GGUF headers followed by filler, an index, local files), with their
hashes; hostile ones too (issue 14, 29: padded, malformed, slow, many-shard, huge-header). `_hub` serves them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from isvc_catalog import DTYPE_BYTES, TORCH_DTYPES, build_header
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "LFS_POINTER",
    "SERVE_LIMIT",
    "FixtureModel",
    "GgufSpec",
    "Repo",
    "RepoFile",
    "build_repo",
    "load_fixtures",
    "packaged_fixtures",
    "repo_info",
]

SERVE_LIMIT = 64 * 1024 * 1024  # bytes of zeros one answer may carry past a file's real content
LFS_POINTER = 135
_LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")  # what the Hub's .gitattributes keep in LFS


class GgufSpec(BaseModel):
    """The `gguf` block of model info, the GGUF files of the repository and what their headers say."""

    model_config = ConfigDict(extra="forbid")
    architecture: str
    context_length: int
    files: dict[str, int] = Field(description="File name -> size in bytes.")
    block_count: int | None = None
    head_count: int | None = None
    head_count_kv: int | None = None
    embedding_length: int | None = None
    feed_forward_length: int | None = None
    vocab_size: int | None = Field(default=None, description="Entries of tokenizer.ggml.tokens.")
    chat_template: str | None = None
    padding: int = Field(
        default=0,
        description="Bytes of a string value (general.padding) in the header of every file: a header of any "
        "size, generated as it is served.",
    )
    tensors: int = Field(default=1, description="Tensor records in the header of every file.")


# The ggml type a variant's tensors are written as, by the variant's name (one type for the whole file).
_GGUF_TYPES = {"q2_k": "Q2_K", "q4_0": "Q4_0", "q4_k_m": "Q4_K", "q8_0": "Q8_0", "fp16": "F16", "f16": "F16"}
_GGUF_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})(?=\.gguf$)")


class FixtureModel(BaseModel):
    """One repository of the stand-in Hub, as written in a YAML file."""

    model_config = ConfigDict(extra="forbid")

    repo: str
    sha: str | None = None
    gated: bool = False
    private: bool = False
    tokens: list[str] = Field(default_factory=list, description="Tokens granted access.")
    pipeline_tag: str | None = None
    library_name: str | None = "transformers"
    format: Literal["safetensors", "gguf", "pytorch"] = "safetensors"
    dtype: str = "bfloat16"
    parameters: int = Field(description="Parameters of the unquantized model.")
    safetensors: dict[str, int] | None = Field(
        default=None, description="Stored elements per safetensors dtype; default: all in dtype."
    )
    shards: int = 1
    tensors_per_shard: int = Field(
        default=1, description="Safetensors records per dtype in each shard: a header as large as wanted."
    )
    info_safetensors: bool = Field(
        default=True, description="Whether model info carries the `safetensors` summary."
    )
    config: dict[str, Any] | None = Field(default=None, description="config.json; None: absent.")
    gguf: GgufSpec | None = None
    extra_files: dict[str, int] = Field(default_factory=dict, description="Other files, sizes.")
    texts: dict[str, str] = Field(
        default_factory=dict,
        description="Small files served in full (tokenizer_config.json, chat_template.jinja), by name.",
    )
    padded_files: dict[str, int] = Field(
        default_factory=dict, description="JSON file -> size: padded to that many bytes, still valid JSON."
    )
    raw_files: dict[str, str] = Field(default_factory=dict, description="File -> its exact content.")
    local_files: dict[str, Path] = Field(
        default_factory=dict, description="File -> a local file served whole (a real model a test made)."
    )
    header_length: int | None = Field(
        default=None, description="Header length every safetensors file announces, with no header behind it."
    )
    drip: float = Field(default=0.0, description="Seconds between 1 KiB chunks of every resolved file.")
    lfs_storage: bool = Field(
        default=False,
        description="LFS files served whole are answered as the Hub answers them: the resolve URL redirects "
        "(302, X-Linked-Etag and X-Linked-Size) to the file in storage (/_lfs/<sha256>, no token needed).",
    )

    @property
    def commit(self) -> str:
        return self.sha or hashlib.sha1(self.repo.encode()).hexdigest()


_FILLER = b"a"  # what a file's filler reads as


@dataclass
class RepoFile:
    size: int
    prefix: bytes = b""  # the real leading bytes; the rest of the file reads as zeros
    lfs: bool = False
    filler_at: int = 0  # where in `prefix` `filler` bytes of _FILLER are served (a padded header), never held
    filler: int = 0
    _digest: str | None = field(default=None, repr=False)

    @property
    def oid(self) -> str:
        return hashlib.sha1(self.prefix + str(self.size + self.filler).encode()).hexdigest()

    @property
    def whole(self) -> bool:
        """Whether a GET of the whole file is served (its zeros within the serve limit): a file a download
        can fetch, so the Hub's hash of it is published."""
        return self.size - self.real <= SERVE_LIMIT

    @property
    def etag(self) -> str:
        """The hash the Hub publishes for a file: its sha256 when kept in LFS, else git's blob id (sha1 of
        "blob <size>\\0" and the content); for a file served only in part, a stand-in id (nothing downloads it)."""
        if not self.whole:
            return self.oid
        if self._digest is None:
            h = hashlib.sha256() if self.lfs else hashlib.sha1(b"blob %d\0" % self.size)
            for chunk in self.chunks(0, self.size - 1):
                h.update(chunk)
            self._digest = h.hexdigest()
        return self._digest

    @property
    def lfs_oid(self) -> str:
        """The sha256 the tree and model info list for an LFS file."""
        return self.etag if self.whole else hashlib.sha256(self.oid.encode()).hexdigest()

    @property
    def real(self) -> int:
        """Bytes of real content (the prefix with its filler); the rest reads as zeros."""
        return len(self.prefix) + self.filler

    def chunks(self, start: int, end: int, size: int = 1 << 20) -> Iterator[bytes]:
        """Bytes start..end (inclusive) of the file, a chunk at a time."""
        at = start
        while at <= end:
            stop = min(end + 1, at + size)
            if at < self.filler_at:
                stop = min(stop, self.filler_at)
                yield self.prefix[at:stop].ljust(stop - at, b"\0")
            elif at < self.filler_at + self.filler:
                stop = min(stop, self.filler_at + self.filler)
                yield _FILLER * (stop - at)
            else:
                offset = at - self.filler
                yield self.prefix[offset : offset + stop - at].ljust(stop - at, b"\0")
            at = stop


@dataclass
class Repo:
    model: FixtureModel
    files: dict[str, RepoFile] = field(default_factory=dict)


def _split(total: int, parts: int) -> list[int]:
    base = total // parts
    return [base] * (parts - 1) + [total - base * (parts - 1)]


def _shard_names(stem: str, ext: str, n: int) -> list[str]:
    if n == 1:
        return [f"{stem}.{ext}"]
    return [f"{stem}-{i:05d}-of-{n:05d}.{ext}" for i in range(1, n + 1)]


def _dtype_code(torch_dtype: str) -> str:
    return next((c for c, name in TORCH_DTYPES.items() if name == torch_dtype), "BF16")


def build_repo(model: FixtureModel) -> Repo:
    """The files of a fixture repository: small ones in full, weight files as headers."""
    repo = Repo(model)
    files = repo.files
    files[".gitattributes"] = RepoFile(1519, b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    if model.config is not None:
        raw = json.dumps(model.config, indent=2).encode()
        files["config.json"] = RepoFile(len(raw), raw)
    if model.format == "safetensors":
        _add_safetensors(files, model)
    elif model.format == "pytorch":
        _add_pytorch(files, model)
    elif model.gguf is not None:
        for name, (size, header) in _gguf_files(model, model.gguf).items():
            padded = _padded(header, model.gguf.padding)
            files[name] = RepoFile(
                max(size, padded.real), padded.prefix, True, padded.filler_at, padded.filler
            )
    for name, size in model.extra_files.items():
        files[name] = RepoFile(size, lfs=size > 10 * 1024 * 1024)
    for name, text in model.texts.items():
        raw = text.encode()
        files[name] = RepoFile(len(raw), raw)
    if model.header_length is not None:
        for name, f in files.items():
            if name.endswith(".safetensors"):
                files[name] = RepoFile(f.size, struct.pack("<Q", model.header_length) + b"{", lfs=True)
    for name, size in model.padded_files.items():
        doc = json.loads(files[name].prefix) if name in files else {}
        raw = json.dumps({**doc, "_padding": ""}).encode()
        raw = json.dumps({**doc, "_padding": " " * max(size - len(raw), 0)}).encode()
        files[name] = RepoFile(len(raw), raw)
    for name, text in model.raw_files.items():
        files[name] = RepoFile(len(text.encode()), text.encode())
    for name, local in model.local_files.items():
        content = local.read_bytes()
        files[name] = RepoFile(len(content), content, lfs=name.endswith(_LFS_SUFFIXES))
    return repo


def _add_safetensors(files: dict[str, RepoFile], model: FixtureModel) -> None:
    """Safetensors shards as real headers over the element counts, and their index when sharded."""
    counts = model.safetensors or {_dtype_code(model.dtype): model.parameters}
    names = _shard_names("model", "safetensors", model.shards) if model.shards > 1 else ["model.safetensors"]
    shares = {dtype: _split(count, len(names)) for dtype, count in counts.items()}
    weight_map: dict[str, str] = {}
    total = 0
    for i, name in enumerate(names):
        tensors = [
            (f"model.layers.{i}.packed_{dtype.lower()}.{k}", dtype, [part])
            for dtype, share in shares.items()
            if share[i] > 0
            for k, part in enumerate(_split(share[i], model.tensors_per_shard))
        ]
        header, data = build_header(tensors)
        files[name] = RepoFile(len(header) + data, header, lfs=True)
        weight_map.update({t[0]: name for t in tensors})
        total += data
    if len(names) > 1:
        index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()
        files["model.safetensors.index.json"] = RepoFile(len(index), index)


def _add_pytorch(files: dict[str, RepoFile], model: FixtureModel) -> None:
    """Pickled shards of the weights' size (only their zip magic kept), and their index when sharded."""
    names = _shard_names("pytorch_model", "bin", model.shards)
    size = math.ceil(model.parameters * DTYPE_BYTES[_dtype_code(model.dtype)])
    for name, part in zip(names, _split(size, len(names)), strict=True):
        files[name] = RepoFile(part, b"PK\x03\x04", lfs=True)
    if len(names) > 1:
        index = json.dumps(
            {"metadata": {"total_size": size}, "weight_map": {f"t{i}": n for i, n in enumerate(names)}}
        ).encode()
        files["pytorch_model.bin.index.json"] = RepoFile(len(index), index)


def _gguf_files(model: FixtureModel, spec: GgufSpec) -> dict[str, tuple[int, bytes]]:
    """Each GGUF file with a real header (gguf.GGUFWriter): the key/values in the first file of a
    variant (split files: the split.* keys in the rest, as gguf-split writes them), and tensor records
    of the variant's type whose elements add up to the model's parameters across the variant's files."""
    variants: dict[str, list[str]] = {}
    for name in spec.files:
        variants.setdefault(_GGUF_SPLIT.sub("", name), []).append(name)
    out: dict[str, tuple[int, bytes]] = {}
    # one scratch file, rewritten for each header: in memory where the machine offers it (a disk's create and
    # remove take milliseconds, and a variant may have thousands of files)
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="standin-gguf-", dir=memory) as scratch:
        for stem, names in variants.items():
            _gguf_variant(spec, model.parameters, stem, names, Path(scratch) / "header.gguf", out)
    return out


def _gguf_variant(
    spec: GgufSpec,
    parameters: int,
    stem: str,
    names: list[str],
    path: Path,
    out: dict[str, tuple[int, bytes]],
) -> None:
    names.sort()
    key = next((k for k in _GGUF_TYPES if f"-{k}" in stem.lower()), "q4_k_m")
    kind = GGMLQuantizationType[_GGUF_TYPES[key]]
    block, type_size = GGML_QUANT_SIZES[kind]
    total = sum(spec.files[n] for n in names)
    left = parameters // block * block
    for i, name in enumerate(names):
        last = i == len(names) - 1
        share = left if last else parameters * spec.files[name] // total // block * block
        left -= share
        main = share - (spec.tensors - 1) * block  # the extra records hold one block each
        header = _gguf_header(path, spec, kind, main * type_size // block, i, len(names))
        out[name] = (spec.files[name], header)


_PAD_MARK = b"isvc-standin-padding-mark-0000000"  # the padding value as written, then swapped for the filler


def _padded(header: bytes, padding: int) -> RepoFile:
    """The header with its padding string value grown to `padding` bytes of filler (a multiple of the
    32-byte alignment longer than the mark, so the tensor data stays aligned)."""
    if not padding:
        return RepoFile(len(header), header)
    length = struct.pack("<Q", len(_PAD_MARK))
    at = header.index(length + _PAD_MARK)
    grown = len(_PAD_MARK) + max(0, padding - len(_PAD_MARK)) // 32 * 32
    prefix = header[:at] + struct.pack("<Q", grown) + header[at + 8 + len(_PAD_MARK) :]
    return RepoFile(len(prefix) + grown, prefix, filler_at=at + 8, filler=grown)


def _gguf_header(
    path: Path, spec: GgufSpec, kind: GGMLQuantizationType, nbytes: int, index: int, count: int
) -> bytes:
    writer = GGUFWriter(path, spec.architecture)
    if spec.padding:
        writer.add_string("general.padding", _PAD_MARK.decode())
    if count > 1:
        writer.add_uint16("split.no", index)
        writer.add_uint16("split.count", count)
        writer.add_int32("split.tensors.count", count)
    if index == 0:
        writer.add_context_length(spec.context_length)
        for key, value in (
            ("block_count", spec.block_count),
            ("attention.head_count", spec.head_count),
            ("attention.head_count_kv", spec.head_count_kv),
            ("embedding_length", spec.embedding_length),
            ("feed_forward_length", spec.feed_forward_length),
        ):
            if value is not None:
                writer.add_uint32(f"{spec.architecture}.{key}", value)
        if spec.chat_template is not None:
            writer.add_chat_template(spec.chat_template)
        if spec.vocab_size:
            # short stand-in tokens keep the header under 2 MiB, still past the reader's first MiB
            writer.add_token_list([_token(i) for i in range(spec.vocab_size)])
    # a quantized tensor's shape is given in bytes per row (gguf quant_shape_from_byte_shape)
    writer.add_tensor_info(f"blk.{index}.weight", (nbytes,), np.dtype(np.uint8), nbytes, raw_dtype=kind)
    _, size = GGML_QUANT_SIZES[kind]
    for extra in range(1, spec.tensors):  # one block each: the records, not the bytes, are the point
        writer.add_tensor_info(f"blk.{index}.x{extra}", (size,), np.dtype(np.uint8), size, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path.read_bytes()


def _token(index: int) -> str:
    return "".join(chr(33 + (index // 94**k) % 94) for k in range(3))


def repo_info(repo: Repo, blobs: bool) -> dict[str, Any]:
    m = repo.model
    siblings: list[dict[str, Any]] = []
    for name, f in sorted(repo.files.items()):
        entry: dict[str, Any] = {"rfilename": name}
        if blobs:
            entry.update(blobId=f.oid, size=f.size)
            if f.lfs:
                entry["lfs"] = {
                    "sha256": f.lfs_oid,
                    "size": f.size,
                    "pointerSize": LFS_POINTER,
                }
        siblings.append(entry)
    cfg = m.config or {}
    info: dict[str, Any] = {
        "_id": m.commit[:24],
        "id": m.repo,
        "modelId": m.repo,
        "author": m.repo.split("/")[0],
        "sha": m.commit,
        "lastModified": "2024-09-25T14:32:00.000Z",
        "createdAt": "2024-09-16T11:55:00.000Z",
        "private": m.private,
        "disabled": False,
        "gated": "manual" if m.gated else False,
        "downloads": 0,
        "likes": 0,
        "library_name": m.library_name,
        "pipeline_tag": m.pipeline_tag,
        "tags": [t for t in (m.library_name, m.format, cfg.get("model_type")) if t],
        "config": {k: cfg[k] for k in ("architectures", "model_type", "quantization_config") if k in cfg},
        "cardData": {},
        "siblings": siblings,
        "usedStorage": sum(f.size for f in repo.files.values()),
    }
    if m.format == "safetensors" and m.info_safetensors:
        counts = m.safetensors or {_dtype_code(m.dtype): m.parameters}
        info["safetensors"] = {"parameters": dict(counts), "total": sum(counts.values())}
    if m.gguf is not None:
        info["gguf"] = {
            "total": m.parameters,
            "architecture": m.gguf.architecture,
            "context_length": m.gguf.context_length,
        }
    return info


def load_fixtures(directory: Path) -> list[FixtureModel]:
    """Every *.yaml in `directory`, one model (or a list of models) per file."""
    models: list[FixtureModel] = []
    for path in sorted(directory.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for item in doc if isinstance(doc, list) else [doc]:
            models.append(FixtureModel.model_validate(item))
    return models


def packaged_fixtures() -> Path:
    """The fixture descriptions shipped with this package."""
    return Path(str(resources.files("isvc_testing") / "standin_models"))
