"""The HTTP side of reading the Hub: one session's client, its hosts, its budget and its limits.

Every request, redirects included, goes to the Hub's own hosts and the token to its own host only; every
answer is streamed and capped by `HubLimits`, and one resolution's time and header bytes are counted
against them (issues 14 and 29). `HubClient` (`_hub`) reads a repository's facts through it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from isvc_api import Reason

from isvc_catalog._errors import SettingsError, SourceUnavailableError
from isvc_catalog._hubfacts import (
    _refuse,
    _Refused,
)
from isvc_catalog._refs import RepoRef

__all__ = ["HubLimits", "HubSession"]

_MIB = 1024 * 1024


_MAX_REDIRECTS = 5
# huggingface.co answers the files it keeps in LFS or Xet storage with a redirect to these hosts
# (https://huggingface.co/.well-known/meta.json: lfsDomains, cdnDomains); a mirror, to its own subdomains.
_HF_HOSTS = ("huggingface.co", "hf.co")


@dataclass(frozen=True, slots=True)
class HubLimits:
    """How much of a repository one resolution reads at most, for how long, and how many read at once."""

    json_bytes: int = 4 * _MIB  # config.json, a checkpoint index, tokenizer_config.json
    info_bytes: int = 8 * _MIB  # the model info, each page of the file tree
    json_values: int = 500_000  # values of one JSON document (each costs tens of bytes parsed)
    files: int = 20_000  # paths of one revision (the model info or the file tree)
    header_bytes: int = 8 * _MIB  # the header of one safetensors file
    gguf_header_bytes: int = 32 * _MIB  # the header of one GGUF file
    headers_bytes: int = 64 * _MIB  # the headers of one resolution together
    shards: int = 64  # weight files (safetensors or GGUF) whose headers are read
    deadline: float = 60.0  # seconds for one resolution, every request together, from its turn
    concurrent: int = 2  # resolutions reading the Hub at once; the others wait their turn (two deadlines)


def _amount(size: int) -> str:
    return f"{size / _MIB:g} MiB" if size >= _MIB else f"{size} bytes"


def _redirect_hosts(endpoint: str) -> tuple[str, ...]:
    """Hosts a redirect of the Hub may lead to: the endpoint's host and its subdomains; for huggingface.co
    also hf.co and its subdomains (its LFS, Xet and CDN hosts)."""
    host = (urlsplit(endpoint).hostname or "").lower()
    return (*_HF_HOSTS,) if host in _HF_HOSTS else (host,)


class _ForeignHost(httpx.TransportError):
    """A redirect of the Hub led to a host that is not one of its own: not followed."""


def _failure(exc: httpx.HTTPError) -> str:
    return str(exc) if isinstance(exc, _ForeignHost) else type(exc).__name__


class _Budget(threading.local):
    """What the running resolution of this thread has left: time and header bytes."""

    at: float | None = None
    header_bytes: int = 0


class HubSession:
    def __init__(
        self,
        endpoint: str,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
        limits: HubLimits | None,
    ) -> None:
        endpoint = endpoint.rstrip("/")
        if not endpoint.startswith(("http://", "https://")):
            raise SettingsError(f"the Hugging Face endpoint {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint
        self._timeout = timeout
        self.limits = limits or HubLimits()
        self._budget = _Budget()  # the running resolution's, per thread
        self._slots = threading.BoundedSemaphore(self.limits.concurrent)
        self._host = (urlsplit(endpoint).hostname or "").lower()
        self._redirect_hosts = _redirect_hosts(endpoint)
        self._http = httpx.Client(
            timeout=timeout,
            follow_redirects=True,
            max_redirects=_MAX_REDIRECTS,
            transport=transport,
            headers={"User-Agent": "isvc-catalog/0.1.0"},
            event_hooks={"request": [self._check_host]},
        )
        self._salt = os.urandom(16)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # ------------------------------------------------------------------ HTTP

    def _check_host(self, request: httpx.Request) -> None:
        """Every request, redirects included, goes to the Hub's own hosts; the token to its own host only
        (httpx drops it on a redirect to another origin)."""
        host = (request.url.host or "").lower()
        if not any(host == h or host.endswith("." + h) for h in self._redirect_hosts):
            raise _ForeignHost(f"a redirect to {host!r}, which is not a host of the Hub")
        if host != self._host:
            request.headers.pop("Authorization", None)

    def _fingerprint(self, token: str | None) -> str:
        if token is None:
            return ""
        return hmac.new(self._salt, token.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _headers(token: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _unavailable(self, ref: RepoRef, what: str, delay: float = 10.0) -> SourceUnavailableError:
        return SourceUnavailableError(
            f"The Hugging Face Hub at {self.endpoint} did not answer for {ref} ({what}); "
            "this passes on its own and the next pass asks again.",
            delay=delay,
        )

    def _remaining(self, ref: RepoRef) -> float:
        """Seconds left of this resolution; refuses once none are."""
        at = self._budget.at
        if at is None:
            return self._timeout
        left = at - time.monotonic()
        if left <= 0:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"Reading {ref} from the Hugging Face Hub took longer than {self.limits.deadline:g}s, "
                "the limit for one model. Name a repository the Hub serves promptly in spec.model.ref.name, "
                "or ask the administrator whether the Hub endpoint is overloaded.",
            )
        return left

    def _spend(self, ref: RepoRef, size: int) -> None:
        """Count header bytes against the resolution's budget; refuses past it."""
        self._budget.header_bytes += size
        if self._budget.at is not None and self._budget.header_bytes > self.limits.headers_bytes:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"The weight file headers of {ref} add up to more than {_amount(self.limits.headers_bytes)}, "
                "the limit the platform reads for one model. Name a repository with ordinary headers in "
                "spec.model.ref.name.",
            )

    def _too_large(self, ref: RepoRef, what: str, limit: int) -> _Refused:
        return _refuse(
            Reason.INVALID_MODEL_SOURCE,
            f"{what} of {ref} is larger than {_amount(limit)}, the limit the platform reads. Name a "
            "repository with ordinary metadata in spec.model.ref.name.",
        )

    def _request(
        self,
        url: str,
        ref: RepoRef,
        token: str | None,
        *,
        what: str,
        limit: int,
        params: Mapping[str, str] | None = None,
        missing_ok: bool = False,
    ) -> tuple[httpx.Response, bytes] | None:
        """The answer and its body, read by chunks up to `limit` bytes and within the deadline."""
        body = bytearray()
        try:
            timeout = min(self._timeout, self._remaining(ref))
            with self._http.stream(
                "GET", url, params=params, headers=self._headers(token), timeout=timeout
            ) as resp:
                if missing_ok and resp.status_code == 404 and self._error_code(resp) != "RepoNotFound":
                    return None
                self._check(resp, ref, token)
                announced = resp.headers.get("Content-Length", "")
                if announced.isdigit() and int(announced) > limit:
                    raise self._too_large(ref, what, limit)
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise self._too_large(ref, what, limit)
                    self._remaining(ref)
        except httpx.TimeoutException:
            self._remaining(ref)
            raise self._unavailable(ref, f"no answer within {self._timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise self._unavailable(ref, _failure(exc)) from None
        return resp, bytes(body)

    def _json(self, body: bytes, ref: RepoRef, what: str) -> Any:
        """An answer of the Hub's API; one that is not JSON is the Hub's failure (asked again)."""
        try:
            return self._parsed(body, ref, what)
        except ValueError:
            raise self._unavailable(ref, f"{what} is not JSON") from None

    def _parsed(self, body: bytes, ref: RepoRef, what: str) -> Any:
        """JSON the repository holds, parsed only when it has no more values than the limit: a value costs
        tens of bytes of Python objects and as little as two of JSON (`{},{},…` would take twenty times its
        size). Raises ValueError when it is not JSON."""
        values = body.count(b",") + body.count(b"{") + body.count(b"[")
        if values > self.limits.json_values:
            raise _refuse(
                Reason.INVALID_MODEL_SOURCE,
                f"{what} of {ref} holds more than {self.limits.json_values} JSON values, the limit the "
                "platform reads. Name a repository with ordinary metadata in spec.model.ref.name.",
            )
        try:
            return json.loads(body)
        except RecursionError:
            raise ValueError("nested too deep") from None

    @staticmethod
    def _error_code(resp: httpx.Response) -> str:
        return str(resp.headers.get("X-Error-Code", ""))

    def _check(self, resp: httpx.Response, ref: RepoRef, token: str | None) -> None:
        """Map an HTTP status of the Hub to a refusal (raised as _Refused) or a retry."""
        status = resp.status_code
        if status < 300:
            return
        code = self._error_code(resp)
        if status in (401, 403):
            if token is None and (code == "RepoNotFound" or (status == 401 and code != "GatedRepo")):
                raise _refuse(
                    Reason.MODEL_NOT_FOUND,
                    f"Hugging Face repository {ref.repo} does not exist or is private. Check "
                    "spec.model.ref.name; for a private repository, put a token with read access "
                    "in a Secret and name it in spec.model.authSecretRef.",
                )
            if token is None:
                raise _refuse(
                    Reason.MODEL_NOT_FOUND,
                    f"{ref.repo} is gated on the Hugging Face Hub and the order carries no token. "
                    "Accept the model's licence on the Hub, put that account's token in a Secret "
                    "and name it in spec.model.authSecretRef.",
                )
            if status == 401 and code not in ("GatedRepo", "RepoNotFound"):
                raise _refuse(
                    Reason.MODEL_NOT_FOUND,
                    f"The Hugging Face Hub refused the token in spec.model.authSecretRef for "
                    f"{ref.repo} as invalid or expired. Put a valid token in that Secret.",
                )
            raise _refuse(
                Reason.MODEL_NOT_FOUND,
                f"The token in spec.model.authSecretRef gives no access to {ref.repo}. Accept the "
                "model's licence on the Hub with the token's account, or use a token that has access.",
            )
        if status == 404:
            if code == "RevisionNotFound":
                raise _refuse(
                    Reason.MODEL_NOT_FOUND,
                    f"Revision {ref.revision} of {ref.repo} does not exist on the Hugging Face Hub. "
                    "Correct the part after @ in spec.model.ref.name.",
                )
            raise _refuse(
                Reason.MODEL_NOT_FOUND,
                f"Hugging Face repository {ref.repo} does not exist at {self.endpoint}. "
                "Check spec.model.ref.name.",
            )
        if status == 429:
            retry = resp.headers.get("Retry-After", "")
            delay = float(retry) if retry.isdigit() else 30.0
            raise self._unavailable(ref, "HTTP 429, rate limited", delay=delay)
        raise self._unavailable(ref, f"HTTP {status}")

    def _read_prefix(self, url: str, ref: RepoRef, token: str | None, start: int, end: int) -> bytes:
        """Bytes start..end (inclusive) of a file; stops reading even if Range is ignored."""
        buf = bytearray()
        self._read_range(url, ref, token, start, end, buf.extend)
        return bytes(buf)

    def _read_range(
        self, url: str, ref: RepoRef, token: str | None, start: int, end: int, write: Callable[[bytes], Any]
    ) -> int:
        """Hand bytes start..end (inclusive) of a file to `write` as they arrive; stops reading even if Range
        is ignored. Returns how many were handed."""
        want, seen, handed = end - start + 1, 0, 0
        try:
            timeout = min(self._timeout, self._remaining(ref))
            with self._http.stream(
                "GET", url, headers=self._headers(token, {"Range": f"bytes={start}-{end}"}), timeout=timeout
            ) as resp:
                if resp.status_code == 416:
                    return 0
                self._check(resp, ref, token)
                skip = start if resp.status_code == 200 else 0
                for chunk in resp.iter_bytes():
                    lo, hi = max(skip - seen, 0), min(len(chunk), skip + want - seen)
                    seen += len(chunk)
                    if hi > lo:
                        write(chunk[lo:hi])
                        handed += hi - lo
                    if handed >= want:
                        break
                    self._remaining(ref)
        except httpx.TimeoutException:
            self._remaining(ref)
            raise self._unavailable(ref, f"no answer within {self._timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise self._unavailable(ref, _failure(exc)) from None
        return handed
