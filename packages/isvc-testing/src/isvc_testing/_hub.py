"""A Hub-shaped HTTP server for tests: fixture models described in YAML, headers without weights.

It answers the routes HubClient uses (model info with ?blobs=true, the tree API with paging,
resolve with Range and HEAD), gates and private repositories like the Hub does (401/403 with
X-Error-Code), and serves weight files as their real safetensors or GGUF header followed by zeros, a
chunk at a time; a request reaching more than 64 MiB into the zeros (a whole weight file) gets 416, so
nothing large is ever held, and nothing of a file's size is sent.

Hostile repositories (issue 14) are fixtures too: `padded_files` make config.json or an index huge,
`raw_files` malformed, `header_length` announces a safetensors header of any size without holding it,
`drip` serves files slowly, and `shards` makes as many shards as wanted. GGUF ones (issue 29): a variant
of thousands of files, headers made as large as wanted by a string value (`gguf.padding`, generated as it
is served, never held) or by many tensor records (`gguf.tensors`). `local_files` are served whole: a small
real model a test made, which a real runtime then loads.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, quote, unquote, urlsplit

import numpy as np
import yaml
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from isvc_catalog import DTYPE_BYTES, TORCH_DTYPES, build_header
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FixtureModel", "StandinHub", "load_fixtures", "packaged_fixtures"]

_SERVE_LIMIT = 64 * 1024 * 1024  # bytes of zeros one answer may carry past a file's real content
_LFS_POINTER = 135
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
class _File:
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
        return self.size - self.real <= _SERVE_LIMIT

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
class _Repo:
    model: FixtureModel
    files: dict[str, _File] = field(default_factory=dict)


def _split(total: int, parts: int) -> list[int]:
    base = total // parts
    return [base] * (parts - 1) + [total - base * (parts - 1)]


def _shard_names(stem: str, ext: str, n: int) -> list[str]:
    if n == 1:
        return [f"{stem}.{ext}"]
    return [f"{stem}-{i:05d}-of-{n:05d}.{ext}" for i in range(1, n + 1)]


def _dtype_code(torch_dtype: str) -> str:
    return next((c for c, name in TORCH_DTYPES.items() if name == torch_dtype), "BF16")


def build_repo(model: FixtureModel) -> _Repo:
    """The files of a fixture repository: small ones in full, weight files as headers."""
    repo = _Repo(model)
    files = repo.files
    files[".gitattributes"] = _File(1519, b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    if model.config is not None:
        raw = json.dumps(model.config, indent=2).encode()
        files["config.json"] = _File(len(raw), raw)
    if model.format == "safetensors":
        _add_safetensors(files, model)
    elif model.format == "pytorch":
        _add_pytorch(files, model)
    elif model.gguf is not None:
        for name, (size, header) in _gguf_files(model, model.gguf).items():
            padded = _padded(header, model.gguf.padding)
            files[name] = _File(max(size, padded.real), padded.prefix, True, padded.filler_at, padded.filler)
    for name, size in model.extra_files.items():
        files[name] = _File(size, lfs=size > 10 * 1024 * 1024)
    for name, text in model.texts.items():
        raw = text.encode()
        files[name] = _File(len(raw), raw)
    if model.header_length is not None:
        for name, f in files.items():
            if name.endswith(".safetensors"):
                files[name] = _File(f.size, struct.pack("<Q", model.header_length) + b"{", lfs=True)
    for name, size in model.padded_files.items():
        doc = json.loads(files[name].prefix) if name in files else {}
        raw = json.dumps({**doc, "_padding": ""}).encode()
        raw = json.dumps({**doc, "_padding": " " * max(size - len(raw), 0)}).encode()
        files[name] = _File(len(raw), raw)
    for name, text in model.raw_files.items():
        files[name] = _File(len(text.encode()), text.encode())
    for name, local in model.local_files.items():
        content = local.read_bytes()
        files[name] = _File(len(content), content, lfs=name.endswith(_LFS_SUFFIXES))
    return repo


def _add_safetensors(files: dict[str, _File], model: FixtureModel) -> None:
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
        files[name] = _File(len(header) + data, header, lfs=True)
        weight_map.update({t[0]: name for t in tensors})
        total += data
    if len(names) > 1:
        index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()
        files["model.safetensors.index.json"] = _File(len(index), index)


def _add_pytorch(files: dict[str, _File], model: FixtureModel) -> None:
    """Pickled shards of the weights' size (only their zip magic kept), and their index when sharded."""
    names = _shard_names("pytorch_model", "bin", model.shards)
    size = math.ceil(model.parameters * DTYPE_BYTES[_dtype_code(model.dtype)])
    for name, part in zip(names, _split(size, len(names)), strict=True):
        files[name] = _File(part, b"PK\x03\x04", lfs=True)
    if len(names) > 1:
        index = json.dumps(
            {"metadata": {"total_size": size}, "weight_map": {f"t{i}": n for i, n in enumerate(names)}}
        ).encode()
        files["pytorch_model.bin.index.json"] = _File(len(index), index)


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


def _padded(header: bytes, padding: int) -> _File:
    """The header with its padding string value grown to `padding` bytes of filler (a multiple of the
    32-byte alignment longer than the mark, so the tensor data stays aligned)."""
    if not padding:
        return _File(len(header), header)
    length = struct.pack("<Q", len(_PAD_MARK))
    at = header.index(length + _PAD_MARK)
    grown = len(_PAD_MARK) + max(0, padding - len(_PAD_MARK)) // 32 * 32
    prefix = header[:at] + struct.pack("<Q", grown) + header[at + 8 + len(_PAD_MARK) :]
    return _File(len(prefix) + grown, prefix, filler_at=at + 8, filler=grown)


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


def _info(repo: _Repo, blobs: bool) -> dict[str, Any]:
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
                    "pointerSize": _LFS_POINTER,
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


class StandinHub:
    """The fixture repositories and the knobs tests turn (failures, paging, a request log)."""

    def __init__(self, models: Iterable[FixtureModel]) -> None:
        self.repos = {m.repo: build_repo(m) for m in models}
        self.fail_with: int | None = None  # answer every request with this status
        self.tree_page_size = 1000
        self.sizes_in_info = True  # False: model info lists files without sizes, as some mirrors do
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, Range
        # bytes of file content sent, by "repo/file" (a test shows a file crossed once: GET /_control/served)
        self.served: dict[str, int] = {}
        self.storage: dict[str, tuple[str, str]] = {}  # sha256 -> (repo, file) of the files /_lfs serves
        self._served_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def server(self, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
        """An HTTP server bound to host:port answering for this hub (not yet serving)."""
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        return ThreadingHTTPServer((host, port), Handler)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve in a background thread; returns the endpoint URL."""
        self._server = self.server(host, port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        bound_host, bound_port = self._server.server_address[:2]
        return f"http://{bound_host!s}:{bound_port}"

    def count(self, key: str, sent: int) -> None:
        """Add `sent` bytes of content to the file's count (handler threads serve at once)."""
        with self._served_lock:
            self.served[key] = self.served.get(key, 0) + sent

    def stop(self) -> None:
        """Stop the background server."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    hub: StandinHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read hub.requests

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    # ------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        head: bool = False,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if not head:
            try:
                self.wfile.write(body)
            except OSError:  # the client stopped reading (a capped read); nothing to tell it
                self.close_connection = True

    def _json(self, doc: Any, head: bool = False, headers: dict[str, str] | None = None) -> None:
        self._send(
            200, json.dumps(doc).encode(), {"Content-Type": "application/json", **(headers or {})}, head
        )

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        self._send(
            status,
            json.dumps({"error": message}).encode(),
            {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message},
            head,
        )

    def _route(self, head: bool) -> None:
        url = urlsplit(self.path)
        self.hub.requests.append((self.command, url.path, self.headers.get("Range")))
        if self.hub.fail_with is not None:
            self._send(self.hub.fail_with, b"stand-in failure", head=head)
            return
        query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        if parts == ["_control", "served"]:
            with self.hub._served_lock:
                self._json(dict(self.hub.served), head)
        elif len(parts) == 2 and parts[0] == "_lfs":
            self._storage(parts[1], head)
        elif parts[:2] == ["api", "models"] and len(parts) >= 4:
            self._api(parts[2] + "/" + parts[3], parts[4:], query, token, head)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), token, head)
        else:
            self._send(404, b"Not Found", head=head)

    def _repo(
        self, repo_id: str, revision: str | None, token: str | None, resolve: bool, head: bool
    ) -> _Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        m = repo.model
        granted = token is not None and token in m.tokens
        if m.private and not granted:
            self._error(401 if token is None else 404, "RepoNotFound", "Repository not found", head)
            return None
        if m.gated and resolve and not granted:
            message = (
                f"Access to model {m.repo} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in."
                if token is None
                else f"Access to model {m.repo} is restricted and you are not in the authorized list."
            )
            self._error(401 if token is None else 403, "GatedRepo", message, head)
            return None
        if revision not in (None, "main", m.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return None
        return repo

    def _api(
        self, repo_id: str, rest: list[str], query: dict[str, list[str]], token: str | None, head: bool
    ) -> None:
        if not rest:
            repo = self._repo(repo_id, None, token, False, head)
            if repo:
                self._json(_info(repo, self._blobs(query)), head)
        elif rest[0] == "revision" and len(rest) == 2:
            repo = self._repo(repo_id, rest[1], token, False, head)
            if repo:
                self._json(_info(repo, self._blobs(query)), head)
        elif rest[0] == "tree" and len(rest) >= 2:
            repo = self._repo(repo_id, rest[1], token, False, head)
            if repo:
                self._tree(repo, repo_id, rest[1], "/".join(rest[2:]), query, head)
        else:
            self._send(404, b"Not Found", head=head)

    def _blobs(self, query: dict[str, list[str]]) -> bool:
        return self.hub.sizes_in_info and query.get("blobs") == ["true"]

    def _tree(
        self, repo: _Repo, repo_id: str, revision: str, under: str, query: dict[str, list[str]], head: bool
    ) -> None:
        recursive = query.get("recursive") == ["true"]
        prefix = f"{under}/" if under else ""
        entries: list[dict[str, Any]] = []
        dirs: set[str] = set()
        for name, f in sorted(repo.files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            if "/" in rest and not recursive:
                dirs.add(prefix + rest.split("/")[0])
                continue
            entry: dict[str, Any] = {"type": "file", "oid": f.oid, "size": f.size, "path": name}
            if f.lfs:
                entry["lfs"] = {
                    "oid": f.lfs_oid,
                    "size": f.size,
                    "pointerSize": _LFS_POINTER,
                }
            entries.append(entry)
        entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(dirs)]
        start = int((query.get("cursor") or ["0"])[0])
        page = entries[start : start + self.hub.tree_page_size]
        headers: dict[str, str] = {}
        if start + self.hub.tree_page_size < len(entries):
            host = self.headers.get("Host", "127.0.0.1")
            path = f"/api/models/{repo_id}/tree/{quote(revision, safe='')}" + (f"/{under}" if under else "")
            flag = "&recursive=true" if recursive else ""
            headers["Link"] = (
                f'<http://{host}{path}?cursor={start + self.hub.tree_page_size}{flag}>; rel="next"'
            )
        self._json(page, head, headers)

    def _resolve(self, repo_id: str, revision: str, path: str, token: str | None, head: bool) -> None:
        repo = self._repo(repo_id, revision, token, True, head)
        if repo is None:
            return
        f = repo.files.get(path)
        if f is None:
            self._error(404, "EntryNotFound", f"{path} does not exist on {revision}", head)
            return
        headers = {"X-Repo-Commit": repo.model.commit, "ETag": f'"{f.etag}"'}
        if f.lfs and f.whole and repo.model.lfs_storage:  # as the Hub: a redirect to the file in storage
            self.hub.storage[f.etag] = (repo_id, path)
            host = self.headers.get("Host", "127.0.0.1")
            headers.update(
                {
                    "Location": f"http://{host}/_lfs/{f.etag}",
                    "X-Linked-Etag": f'"{f.etag}"',
                    "X-Linked-Size": str(f.size),
                }
            )
            self._send(302, b"", headers, head)
            return
        self._file(f"{repo_id}/{path}", f, repo.model.drip, headers, head)

    def _storage(self, sha: str, head: bool) -> None:
        """A file in storage by its sha256 (the redirect's target): no token asked, as a signed URL's."""
        where = self.hub.storage.get(sha)
        if where is None:
            self._send(404, b"no such object", head=head)
            return
        repo = self.hub.repos[where[0]]
        self._file("/".join(where), repo.files[where[1]], repo.model.drip, {"ETag": f'"{sha}"'}, head)

    def _file(self, key: str, f: _File, drip: float, headers: dict[str, str], head: bool) -> None:
        """The file's bytes, whole or the asked Range, counted under `key` (repository/file)."""
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        wanted = _range(self.headers.get("Range"), f.size)
        if wanted is None and self.headers.get("Range"):
            self._send(416, b"", {"Content-Range": f"bytes */{f.size}"}, head)
            return
        if head and not wanted:
            self._send(200, b"", headers, head=True, length=f.size)
            return
        start, end = wanted if wanted else (0, f.size - 1)
        if end + 1 - max(start, f.real) > _SERVE_LIMIT:  # more than 64 MiB of the zeros
            self._send(
                416, b"the stand-in Hub serves headers only", {"Content-Range": f"bytes */{f.size}"}, head
            )
            return
        if drip and not head:
            body = b"".join(f.chunks(start, end)) if f.size else b""
            self._drip(206 if wanted else 200, body, headers, drip, key)
            return
        if wanted:
            headers["Content-Range"] = f"bytes {start}-{end}/{f.size}"
        self._stream(206 if wanted else 200, f, start, end if f.size else start - 1, headers, head, key)

    def _stream(
        self, status: int, f: _File, start: int, end: int, headers: dict[str, str], head: bool, key: str
    ) -> None:
        """Bytes start..end of `f`, written a chunk at a time (a padded header is never held whole)."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if head:
            return
        try:
            for chunk in f.chunks(start, end):
                self.wfile.write(chunk)
                self.hub.count(key, len(chunk))
        except OSError:  # the client stopped reading (a capped read); nothing to tell it
            self.close_connection = True

    def _drip(self, status: int, body: bytes, headers: dict[str, str], pause: float, key: str) -> None:
        """Send `body` 1 KiB at a time, `pause` seconds apart, until done or the client leaves."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for at in range(0, len(body), 1024):
                self.wfile.write(body[at : at + 1024])
                self.wfile.flush()
                self.hub.count(key, len(body[at : at + 1024]))
                time.sleep(pause)
        except OSError:
            self.close_connection = True


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end) of a single `bytes=` range, clipped to the file; None when absent or unsatisfiable."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (header or "").strip())
    if not match or not (match.group(1) or match.group(2)):
        return None
    if not match.group(1):
        start, end = max(size - int(match.group(2)), 0), size - 1
    else:
        start = int(match.group(1))
        end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
    return (start, end) if start <= end and start < size else None


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
