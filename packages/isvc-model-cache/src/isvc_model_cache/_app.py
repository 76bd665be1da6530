"""The cache's HTTP API, the Hub's own for what a download step asks: a model file's resolve URL (HEAD, GET with
an optional Range) answered from the store, from a fill under way or from a new one, once the Hub said the
download's token may read that file; the API calls of a whole-repository download passed on to the Hub;
/healthz and /readyz.

What the step gets when the cache cannot serve a file: the Hub's own refusal (its token, a missing file), 507
when the store has no room for it, 501 when the Hub published no hash the cache can check, 502 when the Hub did
not answer. The step's `hf` does not retry 501 and 507, so it goes to the Hub at once (isvc-workload's download
step); a fill that fails cuts its readers off before the file's last byte.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from isvc_model_cache._errors import NoRoom
from isvc_model_cache._fill import Fill
from isvc_model_cache._hub import FileMeta, Hub, HubAnswer
from isvc_model_cache._metrics import CacheMetrics, Served
from isvc_model_cache._store import DIGEST, Store

__all__ = ["ModelCache", "create_app", "file_target"]

_log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def file_target(raw_path: bytes) -> tuple[str, str, str] | None:
    """(repository, revision, file) of a model's resolve path `/{org}/{name}/resolve/{revision}/{file}` (or a
    repository without an organisation); None for any other path. The revision is one segment, quoted."""
    segments = [unquote(s) for s in raw_path.decode("latin-1").split("/")[1:]]
    for at in (2, 1):
        if len(segments) > at + 2 and segments[at] == "resolve" and segments[0] not in ("datasets", "spaces"):
            return "/".join(segments[:at]), segments[at + 1], "/".join(segments[at + 2 :])
    return None


def _span(header: str | None, size: int) -> tuple[int, int] | bool | None:
    """(start, end) of a single `bytes=` range, clipped; None for the whole file (no Range, or one the cache
    does not serve in part, which HTTP lets it ignore); False when unsatisfiable."""
    match = _RANGE.fullmatch((header or "").strip())
    if not match or not (match.group(1) or match.group(2)):
        return None
    if not match.group(1):
        start, end = max(size - int(match.group(2)), 0), size - 1
    else:
        start = int(match.group(1))
        end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
    return (start, end) if start <= end else False


class _Reading:
    """A download's open file and its hold on it, given back once: by the body when it ends, or after the
    response when the body never started (the client left first)."""

    def __init__(self, store: Store, digest: str, path: Path) -> None:
        self.store, self.digest = store, digest
        self.fd = os.open(path, os.O_RDONLY)
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            self.store.release(self.digest)


def _passed(answer: HubAnswer) -> Response:
    return Response(answer.body, answer.status, answer.headers)


class ModelCache:
    """The store, the Hub and the fills under way, by file hash."""

    def __init__(self, hub: Hub, store: Store, metrics: CacheMetrics) -> None:
        self.hub, self.store, self.metrics = hub, store, metrics
        self.fills: dict[str, Fill] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def file(self, request: Request) -> Response:
        target = file_target(request.scope["raw_path"])
        if target is None:
            return PlainTextResponse("the model cache serves model files and the Hub's API", 404)
        get = request.method == "GET"
        authorization = request.headers.get("authorization")
        meta = await self.hub.check(*target, authorization)
        if isinstance(meta, HubAnswer):
            if get:
                self.metrics.served(Served.HUB_UNREACHABLE if meta.status == 502 else Served.REFUSED)
            return _passed(meta)
        if not DIGEST.fullmatch(meta.digest):
            if get:
                self.metrics.served(Served.UNVERIFIABLE)
            message = (
                f"the Hub published no hash the cache can check for {target[2]}: download it from the Hub"
            )
            return PlainTextResponse(message, 501, {"X-Error-Message": message})
        headers = {
            "X-Repo-Commit": meta.commit,
            "ETag": f'"{meta.digest}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        span = _span(request.headers.get("range"), meta.size)
        if span is False:
            return Response(b"", 416, {**headers, "Content-Range": f"bytes */{meta.size}"})
        if not get:
            return Response(b"", 200, {**headers, "Content-Length": str(meta.size)})
        try:
            path, fill = self._source(meta, authorization)
        except NoRoom as error:
            self.metrics.served(Served.FULL)
            _log.warning("no room for %s (%s): %s", target, meta.digest, error)
            message = f"the model cache has no room for {target[2]}: {error}; download it from the Hub"
            return PlainTextResponse(message, 507, {"X-Error-Message": message})
        start, end = span if isinstance(span, tuple) else (0, meta.size - 1)
        if isinstance(span, tuple):
            headers["Content-Range"] = f"bytes {start}-{end}/{meta.size}"
        headers["Content-Length"] = str(end - start + 1)
        reading = _Reading(self.store, meta.digest, path)
        body = self._body(reading, start, end, fill)
        status = 206 if isinstance(span, tuple) else 200
        return StreamingResponse(body, status, headers, background=BackgroundTask(reading.close))

    def _source(self, meta: FileMeta, authorization: str | None) -> tuple[Path, Fill | None]:
        """Where a GET reads the file, held for it: the store's file, a fill under way, or a new fill (which
        takes its room now: NoRoom). Runs without awaiting, so no other request changes the store meanwhile."""
        held = self.store.hold(meta.digest)
        if held is not None:
            self.metrics.served(Served.HIT)
            return held, None
        fill = self.fills.get(meta.digest)
        if fill is None or fill.error or fill.done:  # a fill that failed has given its room back: anew
            fill = Fill(meta, self.store.reserve(meta.digest, meta.size))
            self.fills[meta.digest] = fill
            task = asyncio.get_running_loop().create_task(self._run(fill, authorization))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self.metrics.served(Served.MISS)
        else:
            self.metrics.served(Served.JOINED)
        self.store.join(meta.digest)
        return fill.path, fill

    async def _run(self, fill: Fill, authorization: str | None) -> None:
        try:
            await fill.run(self.hub, authorization, self.store, self.metrics)
        finally:
            if self.fills.get(fill.meta.digest) is fill:  # a failed one may have been started anew meanwhile
                del self.fills[fill.meta.digest]

    async def _body(self, reading: _Reading, start: int, end: int, fill: Fill | None) -> AsyncIterator[bytes]:
        """Bytes start..end of the file, as a fill makes them readable; the file's hold ends with the body."""
        fd, digest = reading.fd, reading.digest
        try:
            at = start
            while at <= end:
                stop = end + 1
                if fill is not None:
                    await fill.wait_past(at)
                    stop = min(stop, fill.readable())
                chunk = await run_in_threadpool(os.pread, fd, min(stop - at, _CHUNK), at)
                if not chunk:
                    raise OSError(f"{digest} ends at {at}, before byte {end}")
                at += len(chunk)
                self.metrics.served_bytes.inc(len(chunk))
                yield chunk
            if fill is not None and end < start:  # an empty file: answered once it matched its hash
                await fill.wait_past(end)
        finally:
            reading.close()

    async def api(self, request: Request) -> Response:
        """An API call a download makes besides the files (the file list of a repository), passed on."""
        target = request.scope["raw_path"].decode("latin-1")
        if request.scope.get("query_string"):
            target += "?" + request.scope["query_string"].decode("latin-1")
        return _passed(await self.hub.relay(request.method, target, request.headers.get("authorization")))


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(cache: ModelCache) -> Starlette:
    """The ASGI app of the cache; its Hub client closes with it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await cache.hub.client.aclose()

    return Starlette(
        lifespan=lifespan,
        routes=[
            Route("/healthz", _ok, methods=["GET"]),
            Route("/readyz", _ok, methods=["GET"]),
            Route("/api/{rest:path}", cache.api, methods=["GET", "HEAD"]),
            Route("/{rest:path}", cache.file, methods=["GET", "HEAD"]),
        ],
    )
