"""One file's download from the Hub into the store, read by any number of downloads while it runs.

The bytes are hashed as they are written: a sha256 for a file kept in LFS or Xet storage, a git blob's sha1
for a file kept in git, the hashes the Hub publishes. Downloads that read the file meanwhile get every byte as
it arrives but the file's last one, which they get only once the whole file matched; a fill that fails (the
Hub stops, the bytes do not match, the disk is full) cuts them off instead, so no download ever completes a
file the cache did not verify. Only a verified file joins the store.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from pathlib import Path
from typing import Protocol

import httpx
from starlette.concurrency import run_in_threadpool

from isvc_model_cache._errors import FillFailed
from isvc_model_cache._hub import FileMeta, Hub
from isvc_model_cache._metrics import CacheMetrics
from isvc_model_cache._store import Store

__all__ = ["Fill", "Hasher", "hasher"]

_log = logging.getLogger(__name__)


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def hexdigest(self) -> str: ...


def hasher(digest: str, size: int) -> Hasher | None:
    """What checks a file against the hash the Hub published for it; None when the hash is of neither form."""
    if len(digest) == 64:
        return hashlib.sha256()
    if len(digest) == 40:  # git's object id of a blob: sha1 over "blob <size>\0" and the content
        blob = hashlib.sha1(usedforsecurity=False)
        blob.update(b"blob %d\0" % size)
        return blob
    return None


class Fill:
    """The fill of one file: how far it got, whether it ended verified, and a condition its readers wait on."""

    def __init__(self, meta: FileMeta, path: Path) -> None:
        self.meta = meta
        self.path = path
        self.written = 0
        self.done = False
        self.verified = False
        self.error = ""
        self._changed = asyncio.Condition()

    def readable(self) -> int:
        """How many bytes a reader may have now: all once verified, else what is written less the last byte."""
        if self.verified:
            return self.meta.size
        return min(self.written, self.meta.size - 1)

    async def wait_past(self, offset: int) -> None:
        """Until a reader at `offset` may read on (FillFailed when the fill ended unverified)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.readable() > offset or self.done)
        if self.readable() <= offset:
            raise FillFailed(self.error or "the fill ended before this byte")

    async def _advance(self, written: int | None = None, done: bool = False) -> None:
        async with self._changed:
            if written is not None:
                self.written = written
            self.done = done or self.done
            self._changed.notify_all()

    async def run(self, hub: Hub, authorization: str | None, store: Store, metrics: CacheMetrics) -> None:
        """Download, hash and write the file; commit it when it matched, else abandon it. Never raises."""
        meta, check = self.meta, hasher(self.meta.digest, self.meta.size)
        try:
            if check is None:
                raise FillFailed(f"{meta.digest} is no hash the cache can check")
            fd = os.open(self.path, os.O_WRONLY)
            try:
                async with hub.fetch(meta.url, authorization) as response:
                    async for chunk in response.aiter_bytes(1 << 20):
                        await run_in_threadpool(_write, fd, check, chunk)
                        metrics.hub_bytes.inc(len(chunk))
                        await self._advance(self.written + len(chunk))
                        if self.written > meta.size:
                            break
            finally:
                os.close(fd)
            if self.written != meta.size:
                raise FillFailed(f"the Hub sent {self.written} of the file's {meta.size} bytes")
            if check.hexdigest() != meta.digest:
                metrics.verify_failures.inc()
                raise FillFailed(f"the file's hash {check.hexdigest()} is not the Hub's {meta.digest}")
            store.commit(meta.digest)
            self.verified = True
        except (FillFailed, httpx.HTTPError, OSError) as error:
            self.error = f"{meta.url}: {error}"
            _log.warning("fill of %s failed: %s", meta.digest, self.error)
            store.abandon(meta.digest)
        finally:
            await self._advance(done=True)


def _write(fd: int, check: Hasher, chunk: bytes) -> None:
    check.update(chunk)
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view) :]
