"""The Hub as the cache asks it: may this download's token read this file (and what are its commit, hash and
size), the file's bytes, and the API calls a download makes besides the files (passed on, never kept).

Every file download is checked with the Hub with the download's own token: the resolve URL's HEAD, as the
`hf` client makes it, without following the redirect to the Hub's storage. A yes is remembered for a few
seconds under a hash of the token (the download's GET follows its HEAD), in memory only; a refusal is passed
on as the Hub worded it. The bytes come from the resolve URL with its redirects followed (the storage of LFS
and Xet-backed files, which serves them over plain HTTP); httpx drops the token at a redirect to another host,
as the Hub's client does.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit

import httpx
from cachetools import TTLCache

__all__ = ["FileMeta", "Hub", "HubAnswer"]

_PASSED = ("content-type", "x-error-code", "x-error-message", "x-repo-commit", "link", "etag")
_REDIRECTS = 5


@dataclass(frozen=True)
class FileMeta:
    """A file as the Hub published it for one revision: the commit, its hash and size, where its bytes are."""

    commit: str
    digest: str
    size: int
    url: str


@dataclass(frozen=True)
class HubAnswer:
    """An answer of the Hub passed on as it was (a refusal of a file, or an API call's answer)."""

    status: int
    headers: dict[str, str]
    body: bytes


def _normalize(etag: str) -> str:
    return etag.removeprefix("W/").strip('"')


def _headers(authorization: str | None, **more: str) -> dict[str, str]:
    headers = {"User-Agent": "isvc-model-cache", **more}
    if authorization:
        headers["Authorization"] = authorization
    return headers


def _answer(response: httpx.Response) -> HubAnswer:
    headers = {k: v for k, v in response.headers.items() if k.lower() in _PASSED}
    return HubAnswer(response.status_code, headers, response.content)


def _meta(response: httpx.Response, url: str) -> FileMeta | None:
    """The file's commit, hash and size from a resolve HEAD (a 302 to storage carries the X-Linked ones)."""
    h = response.headers
    commit, etag = h.get("x-repo-commit"), h.get("x-linked-etag") or h.get("etag")
    size = h.get("x-linked-size") or h.get("content-length")
    if not commit or not etag or size is None or not size.isdigit():
        return None
    return FileMeta(commit=commit, digest=_normalize(etag), size=int(size), url=url)


class Hub:
    """The Hub at `endpoint`, asked through `client`; a file's yes remembered `memo_seconds` per token."""

    def __init__(self, endpoint: str, client: httpx.AsyncClient, memo_seconds: float = 30.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.client = client
        self._memo: TTLCache[tuple[str, str, str, str], FileMeta] = TTLCache(4096, memo_seconds)

    def resolve_url(self, repo: str, revision: str, path: str) -> str:
        return f"{self.endpoint}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"

    async def check(
        self, repo: str, revision: str, path: str, authorization: str | None
    ) -> FileMeta | HubAnswer:
        """The file if the Hub lets this token read it, else the Hub's answer (502 when it gave none)."""
        key = (hashlib.sha256((authorization or "").encode()).hexdigest(), repo, revision, path)
        known = self._memo.get(key)
        if known is not None:
            return known
        url = self.resolve_url(repo, revision, path)
        try:
            response = await self._head(url, authorization)
        except httpx.HTTPError as error:
            return HubAnswer(502, {"X-Error-Message": f"the Hub did not answer: {error}"}, b"")
        if response.status_code >= 400:
            return _answer(response)
        meta = _meta(response, url)
        if meta is None:
            message = "the Hub's answer names no commit, hash or size of the file"
            return HubAnswer(502, {"X-Error-Message": message}, b"")
        self._memo[key] = meta
        return meta

    async def _head(self, url: str, authorization: str | None) -> httpx.Response:
        """HEAD of the resolve URL, following redirects within the Hub (a renamed repository) but not the one
        to the Hub's storage, whose answer carries the file's hash and size."""
        for _ in range(_REDIRECTS):
            response = await self.client.head(
                url, headers=_headers(authorization, **{"Accept-Encoding": "identity"})
            )
            location = response.headers.get("location")
            if not response.is_redirect or not location or urlsplit(location).netloc:
                return response
            url = urljoin(url, location)
        return response

    @asynccontextmanager
    async def fetch(self, url: str, authorization: str | None) -> AsyncIterator[httpx.Response]:
        """The file's bytes, its redirects followed; raises httpx.HTTPStatusError on an error answer."""
        async with self.client.stream(
            "GET", url, headers=_headers(authorization), follow_redirects=True
        ) as response:
            response.raise_for_status()
            yield response

    async def relay(self, method: str, target: str, authorization: str | None) -> HubAnswer:
        """An API call of a download (the repository's file list for a whole-repository download), passed on."""
        try:
            response = await self.client.request(
                method, f"{self.endpoint}{target}", headers=_headers(authorization), follow_redirects=True
            )
        except httpx.HTTPError as error:
            return HubAnswer(502, {"X-Error-Message": f"the Hub did not answer: {error}"}, b"")
        return _answer(response)
