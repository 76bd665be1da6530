"""Facts about a Hugging Face model from the Hub HTTP API, without downloading its weights.

Routes used (the Hub's own; a mirror serves the same):
  GET {endpoint}/api/models/{repo}[/revision/{rev}]?blobs=true   model info, file list with sizes
  GET {endpoint}/api/models/{repo}/tree/{rev}?recursive=true      file list, when sizes are missing
  GET {endpoint}/{repo}/resolve/{rev}/config.json                 architecture numbers
  GET {endpoint}/{repo}/resolve/{rev}/chat_template.jinja         the chat template, else the
  GET {endpoint}/{repo}/resolve/{rev}/tokenizer_config.json       `chat_template` of the tokenizer
  GET {endpoint}/{repo}/resolve/{rev}/{file} with Range           safetensors and GGUF headers

Every answer is streamed and capped (issue 14: a user's repository could hand the controller a
100 MiB header or a gigabyte config.json, read whole): `HubLimits` bounds each file read, the number of
files and of shards whose headers are read, the header bytes of one resolution together, the time one
resolution may take, and how many resolutions read the Hub at once (issue 29: a split GGUF variant of eight
headers with 60 MiB strings in each took the controller past its memory limit, and four resolutions at once
quadrupled what one costs). A GGUF header is streamed to a scratch file and mapped, never held in memory.
Going past a limit refuses the order with InvalidModelSource, naming the limit. Redirects are followed only
to the Hub's own hosts (its LFS and CDN hosts for huggingface.co), and the token goes to the Hub's own host
only.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import IO, Any
from urllib.parse import quote

import httpx
from cachetools import TTLCache
from isvc_api import ModelFacts, ModelFormat, Reason, Refusal

from isvc_catalog._gguf import GgufHeader, GgufHeaderError, TruncatedHeader, read_gguf_header_file
from isvc_catalog._hubfacts import (
    Weights,
    _gguf_variant,
    _info_counts,
    _quantization,
    _refuse,
    _Refused,
    _shown,
    _size,
    _str,
    gguf_weights,
    model_facts,
    safetensors_weights,
    sized_weights,
)
from isvc_catalog._hubsession import HubLimits, HubSession
from isvc_catalog._refs import RepoRef, parse_repo_ref
from isvc_catalog._safetensors import (
    SafetensorsHeaderError,
    count_elements,
    header_length,
)

__all__ = ["DEFAULT_ENDPOINT", "HubClient", "HubLimits"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_log = logging.getLogger("isvc_catalog.hub")
_FIRST_READ = 64 * 1024  # one Range request covers the header of a typical shard
# A GGUF header holds the vocabulary: ~9 MB for a 128k-token model; read from 1 MiB, doubling, to the cap.
_GGUF_FIRST_READ = 1024 * 1024
_MAX_TREE_PAGES = 100


class HubClient(HubSession):
    """Resolves `owner/name[@revision]` into ModelFacts through the Hub API, with a TTL cache.

    The token of an order is used for its requests only: it is never stored, logged or shown; the
    cache is keyed by a salted hash of it, so a token without access cannot read another's answer.
    Refusals are returned; a Hub that does not answer raises SourceUnavailableError.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        timeout: float = 10.0,
        positive_ttl: float = 600.0,
        negative_ttl: float = 30.0,
        cache_size: int = 1024,
        transport: httpx.BaseTransport | None = None,
        timer: Callable[[], float] | None = None,
        limits: HubLimits | None = None,
    ) -> None:
        super().__init__(endpoint, timeout=timeout, transport=transport, limits=limits)
        clock: dict[str, Any] = {} if timer is None else {"timer": timer}
        self._positive: TTLCache[tuple[str, str | None, str], ModelFacts | Refusal] = TTLCache(
            maxsize=cache_size, ttl=positive_ttl, **clock
        )
        self._negative: TTLCache[tuple[str, str | None, str], ModelFacts | Refusal] = TTLCache(
            maxsize=cache_size, ttl=negative_ttl, **clock
        )
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HubClient(endpoint={self.endpoint!r})"

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ public

    def resolve(self, ref: str, token: str | None = None) -> ModelFacts | Refusal:
        """Facts about `ref`, or a refusal saying whose fix it is; raises SourceUnavailableError."""
        parsed = parse_repo_ref(ref)
        if isinstance(parsed, Refusal):
            return parsed
        token = token or None
        key = (parsed.repo, parsed.revision, self._fingerprint(token))
        with self._lock:
            cached = self._positive.get(key) or self._negative.get(key)
        if cached is not None:
            return cached.model_copy(deep=True)
        # A turn comes within two deadlines behind one resolution that holds the Hub to its own deadline;
        # one that does not come is the platform's load, not the repository's fault: asked again later.
        if not self._slots.acquire(timeout=2 * self.limits.deadline):
            wait = 2 * self.limits.deadline
            raise self._unavailable(
                parsed, f"{self.limits.concurrent} other resolutions held the Hub for {wait:g}s"
            )
        try:
            self._budget.at = time.monotonic() + self.limits.deadline
            self._budget.header_bytes = 0
            result: ModelFacts | Refusal = self._fetch(parsed, token)
        except _Refused as refused:
            result = refused.refusal
        finally:
            self._budget.at = None
            self._slots.release()
        _log.info("resolved %s: %s", parsed, getattr(result, "reason", "facts"))
        with self._lock:
            (self._positive if isinstance(result, ModelFacts) else self._negative)[key] = result
        return result.model_copy(deep=True)

    def forget(self) -> None:
        """Drop every cached answer."""
        with self._lock:
            self._positive.clear()
            self._negative.clear()

    # ------------------------------------------------------------------ facts

    def _api(self, ref: RepoRef, suffix: str = "") -> str:
        return f"{self.endpoint}/api/models/{ref.repo}{suffix}"

    def _file(self, ref: RepoRef, commit: str, path: str) -> str:
        return f"{self.endpoint}/{ref.repo}/resolve/{quote(commit, safe='')}/{quote(path)}"

    def _fetch(self, ref: RepoRef, token: str | None) -> ModelFacts:
        info = self._info(ref, token)
        sha = info.get("sha")
        pinned = sha if isinstance(sha, str) and sha else None
        commit = pinned or ref.revision or "main"
        files = self._files(info, ref, token, commit)
        root = {name: size for name, size in files.items() if "/" not in name}
        if "adapter_config.json" in root and "config.json" not in root:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref} is a LoRA adapter, which needs its base model and cannot be served alone. "
                "Name the base model repository in spec.model.ref.name.",
            )
        config = self._config(ref, token, commit, root, info)
        quant = _quantization(ref, config.get("quantization_config"))
        fmt, weights = self._weights(ref, token, commit, root)
        if fmt != ModelFormat.GGUF and not config:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref.repo} has no config.json, so no runtime can load it as a model. "
                "Name a transformers model repository in spec.model.ref.name.",
            )
        if fmt == ModelFormat.SAFETENSORS:
            counts = _info_counts(info) or self._header_counts(ref, token, commit, weights)
            counted = safetensors_weights(config, root, weights, counts, quant)
        elif fmt == ModelFormat.GGUF:
            counted = self._gguf_weights(ref, token, commit, info, config, root, weights)
        else:
            counted = sized_weights(config, root, weights, quant)
        template = self._chat_template(ref, token, commit, root)
        if template is None and counted.header is not None:
            template = _str(counted.header.values.get("tokenizer.chat_template"))
        return model_facts(ref, pinned, fmt, config, info, root, weights, counted, template)

    def _info(self, ref: RepoRef, token: str | None) -> dict[str, Any]:
        """The model info of the revision; a gated repository without a token is refused."""
        suffix = f"/revision/{quote(ref.revision, safe='')}" if ref.revision else ""
        answer = self._request(
            self._api(ref, suffix),
            ref,
            token,
            params={"blobs": "true"},
            what="The model info",
            limit=self.limits.info_bytes,
        )
        assert answer is not None
        info = self._json(answer[1], ref, "the model info")
        if not isinstance(info, dict):
            raise self._unavailable(ref, "the model info is not an object")
        if info.get("gated") and token is None:
            raise _refuse(
                Reason.MODEL_NOT_FOUND,
                f"{ref.repo} is gated on the Hugging Face Hub and the order carries no token. "
                "Accept the model's licence on the Hub, put that account's token in a Secret and "
                "name it in spec.model.authSecretRef.",
            )
        return info

    def _gguf_weights(
        self,
        ref: RepoRef,
        token: str | None,
        commit: str,
        info: Mapping[str, Any],
        config: Mapping[str, Any],
        root: Mapping[str, int | None],
        weights: list[str],
    ) -> Weights:
        """What the headers of a GGUF variant's files count (the first file's key/values kept)."""
        self._count_shards(ref, weights, "GGUF")
        header: GgufHeader | None = None
        counted = stored = 0
        for i, name in enumerate(weights):
            read = self._gguf_header(ref, token, commit, name, root.get(name), values=i == 0)
            header = header or read
            counted, stored = counted + read.parameters, stored + read.tensor_bytes
        return gguf_weights(config, info, root, weights, header, counted, stored)

    def _files(
        self, info: Mapping[str, Any], ref: RepoRef, token: str | None, commit: str
    ) -> dict[str, int | None]:
        """Every file path of the revision and its size, from siblings or else the tree API."""
        files: dict[str, int | None] = {}
        for sibling in info.get("siblings") or []:
            if isinstance(sibling, dict) and isinstance(sibling.get("rfilename"), str):
                files[sibling["rfilename"]] = _size(sibling)
        self._count_files(ref, files)
        if files and all(size is not None for size in files.values()):
            return files
        url: str | None = self._api(ref, f"/tree/{quote(commit, safe='')}")
        params: dict[str, str] | None = {"recursive": "true"}
        for _ in range(_MAX_TREE_PAGES):
            if url is None:
                break
            answer = self._request(
                url, ref, token, params=params, what="A page of the file tree", limit=self.limits.info_bytes
            )
            assert answer is not None
            resp, body = answer
            entries = self._json(body, ref, "the file tree")
            if not isinstance(entries, list):
                raise self._unavailable(ref, "the file tree is not a list")
            for entry in entries:
                if (
                    isinstance(entry, dict)
                    and entry.get("type") == "file"
                    and isinstance(entry.get("path"), str)
                ):
                    files[entry["path"]] = _size(entry)
            self._count_files(ref, files)
            url, params = resp.links.get("next", {}).get("url"), None
        return files

    def _count_files(self, ref: RepoRef, files: Mapping[str, int | None]) -> None:
        if len(files) > self.limits.files:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref} holds more than {self.limits.files} files, the limit the platform lists for one "
                "model. Name a repository that holds one model in spec.model.ref.name.",
            )

    def _small_file(
        self, ref: RepoRef, token: str | None, commit: str, root: Mapping[str, int | None], name: str
    ) -> bytes | None:
        """A metadata file of the revision (config, index, template) read whole within the JSON limit; None
        when the listing does not hold it or the Hub says it is missing."""
        if name not in root:
            return None
        answer = self._request(
            self._file(ref, commit, name),
            ref,
            token,
            missing_ok=True,
            what=name,
            limit=self.limits.json_bytes,
        )
        return None if answer is None else answer[1]

    def _config(
        self,
        ref: RepoRef,
        token: str | None,
        commit: str,
        root: Mapping[str, int | None],
        info: Mapping[str, Any],
    ) -> dict[str, Any]:
        """config.json of the revision; the Hub's summary of it when the file is absent."""
        body = self._small_file(ref, token, commit, root, "config.json")
        if body is not None:
            try:
                config = self._parsed(body, ref, "config.json")
            except ValueError:
                config = None
            if not isinstance(config, dict):
                raise _refuse(
                    Reason.INVALID_MODEL_SOURCE,
                    f"config.json of {ref} is not a JSON object, so no runtime can load the "
                    "model. Name another repository or revision in spec.model.ref.name.",
                )
            return config
        summary = info.get("config")
        return dict(summary) if isinstance(summary, dict) and summary.get("architectures") else {}

    def _gguf_header(
        self, ref: RepoRef, token: str | None, commit: str, name: str, size: int | None, values: bool = True
    ) -> GgufHeader:
        """The header of one GGUF file, read by Range requests of growing length into a scratch file (mapped
        to be parsed, never held in memory), up to the header cap; `values`: keep its key/values (the first
        file of a variant; the others count tensors only). A file that is not GGUF, or whose header runs
        past the cap, is refused."""
        url, cap = self._file(ref, commit, name), self.limits.gguf_header_bytes
        with tempfile.NamedTemporaryFile(prefix="isvc-gguf-", suffix=".gguf") as scratch:
            end = _GGUF_FIRST_READ
            while True:
                end = min(end, cap, size if size is not None else cap)
                have = scratch.tell()
                got = self._read_range(url, ref, token, have, end - 1, _writer(scratch))
                self._spend(ref, got)
                scratch.flush()
                try:
                    return read_gguf_header_file(scratch.name, values=values)
                except TruncatedHeader:
                    if have + got < end or end == size:  # the file ended inside its header
                        raise _refuse(
                            Reason.INVALID_MODEL_SOURCE,
                            f"{_shown(name)} of {ref} ends inside its GGUF header. Name another repository or "
                            "revision in spec.model.ref.name.",
                        ) from None
                    if end >= cap:
                        raise self._too_large(ref, f"The GGUF header of {_shown(name)}", cap) from None
                    end *= 2
                except GgufHeaderError as exc:
                    raise _refuse(
                        Reason.INVALID_MODEL_SOURCE,
                        f"{_shown(name)} of {ref} is not a valid GGUF file ({str(exc)[:200]}). Name another "
                        "repository or revision in spec.model.ref.name.",
                    ) from None

    def _chat_template(
        self, ref: RepoRef, token: str | None, commit: str, root: Mapping[str, int | None]
    ) -> str | None:
        """The chat template: chat_template.jinja, else tokenizer_config.json's `chat_template` (a string,
        or a list of named templates, the `default` one or the first); None when neither holds one."""
        jinja = self._small_file(ref, token, commit, root, "chat_template.jinja")
        if jinja is not None:
            return jinja.decode("utf-8", errors="replace")
        body = self._small_file(ref, token, commit, root, "tokenizer_config.json")
        try:
            template = (
                self._parsed(body, ref, "tokenizer_config.json").get("chat_template")
                if body is not None
                else None
            )
        except (ValueError, AttributeError):
            return None
        if isinstance(template, list):
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default", next(iter(named.values()), None))
        return template if isinstance(template, str) else None

    def _weights(
        self, ref: RepoRef, token: str | None, commit: str, root: Mapping[str, int | None]
    ) -> tuple[ModelFormat, list[str]]:
        """The weight format a runtime would load and the files that make it up."""
        safetensors = sorted(f for f in root if f.endswith(".safetensors") and not f.startswith("adapter_"))
        if safetensors:
            indexed = self._index(ref, token, commit, root, "model.safetensors.index.json")
            if indexed:
                return ModelFormat.SAFETENSORS, indexed
            if "model.safetensors" in root:
                return ModelFormat.SAFETENSORS, ["model.safetensors"]
            return ModelFormat.SAFETENSORS, safetensors
        # the chosen files are named on the fetch container's command line: a name that reads as an option
        # is never one of them
        gguf = sorted(f for f in root if f.endswith(".gguf") and not f.startswith("-"))
        if gguf:
            return ModelFormat.GGUF, _gguf_variant(gguf, root)
        bins = sorted(f for f in root if re.fullmatch(r"pytorch_model.*\.bin", f))
        if bins:
            indexed = self._index(ref, token, commit, root, "pytorch_model.bin.index.json")
            return ModelFormat.PYTORCH, indexed or [b for b in bins if not b.endswith(".index.json")]
        pts = sorted(f for f in root if f.endswith((".pt", ".pth")))
        if pts:
            return ModelFormat.PYTORCH, pts
        raise _refuse(
            Reason.INVALID_MODEL_SOURCE,
            f"{ref} holds no model weights (safetensors, GGUF or PyTorch files). "
            "Check spec.model.ref.name: it must name a model repository.",
        )

    def _index(
        self, ref: RepoRef, token: str | None, commit: str, root: Mapping[str, int | None], name: str
    ) -> list[str]:
        """Shard files named by a sharded checkpoint's index, or [] without an index."""
        body = self._small_file(ref, token, commit, root, name)
        if body is None:
            return []
        try:
            weight_map = self._parsed(body, ref, name)["weight_map"]
            shards = sorted({str(v) for v in weight_map.values()})
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{name} of {ref} is not a checkpoint index (no weight_map), so the shards of the "
                "model cannot be told. Name another repository or revision in spec.model.ref.name.",
            ) from None
        missing = [s for s in shards if s not in root]
        if missing:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{name} of {ref} names shards the repository does not hold ({_shown(missing[0])} …). "
                "Name another repository or revision in spec.model.ref.name.",
            )
        return shards

    def _count_shards(self, ref: RepoRef, files: list[str], kind: str) -> None:
        """Refuses a model split into more files than the limit whose headers are read."""
        if len(files) > self.limits.shards:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{ref} is split into {len(files)} {kind} files, more than {self.limits.shards}, the "
                "limit whose headers the platform reads. Name a repository with fewer, larger shards in "
                "spec.model.ref.name.",
            )

    def _header_counts(self, ref: RepoRef, token: str | None, commit: str, files: list[str]) -> Counter[str]:
        """Element counts per dtype, read from the safetensors headers by Range requests."""
        counts: Counter[str] = Counter()
        self._count_shards(ref, files, "safetensors")
        for name in files:
            url = self._file(ref, commit, name)
            head = bytearray()
            self._read_range(url, ref, token, 0, _FIRST_READ - 1, head.extend)
            try:
                length = header_length(head)
                if length > self.limits.header_bytes:
                    what = f"The safetensors header of {_shown(name)}"
                    raise self._too_large(ref, what, self.limits.header_bytes)
                if len(head) < 8 + length:
                    self._read_range(url, ref, token, len(head), 8 + length - 1, head.extend)
                self._spend(ref, len(head))
                if len(head) < 8 + length:
                    raise SafetensorsHeaderError("the file ends inside its header")
                del head[:8], head[length:]
                counts.update(count_elements(head))
            except SafetensorsHeaderError as exc:
                raise _refuse(
                    Reason.INVALID_MODEL_SOURCE,
                    f"{_shown(name)} of {ref} is not a valid safetensors file ({str(exc)[:200]}). Name "
                    "another repository or revision in spec.model.ref.name.",
                ) from None
        return counts


def _writer(sink: IO[bytes]) -> Callable[[bytes], Any]:
    return sink.write
