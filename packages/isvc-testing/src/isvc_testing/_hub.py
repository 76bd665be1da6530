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

import json
import re
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from isvc_testing._repos import LFS_POINTER, SERVE_LIMIT, FixtureModel, Repo, RepoFile, build_repo, repo_info

__all__ = ["StandinHub"]


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
    ) -> Repo | None:
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
                self._json(repo_info(repo, self._blobs(query)), head)
        elif rest[0] == "revision" and len(rest) == 2:
            repo = self._repo(repo_id, rest[1], token, False, head)
            if repo:
                self._json(repo_info(repo, self._blobs(query)), head)
        elif rest[0] == "tree" and len(rest) >= 2:
            repo = self._repo(repo_id, rest[1], token, False, head)
            if repo:
                self._tree(repo, repo_id, rest[1], "/".join(rest[2:]), query, head)
        else:
            self._send(404, b"Not Found", head=head)

    def _blobs(self, query: dict[str, list[str]]) -> bool:
        return self.hub.sizes_in_info and query.get("blobs") == ["true"]

    def _tree(
        self, repo: Repo, repo_id: str, revision: str, under: str, query: dict[str, list[str]], head: bool
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
                    "pointerSize": LFS_POINTER,
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

    def _file(self, key: str, f: RepoFile, drip: float, headers: dict[str, str], head: bool) -> None:
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
        if end + 1 - max(start, f.real) > SERVE_LIMIT:  # more than 64 MiB of the zeros
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
        self, status: int, f: RepoFile, start: int, end: int, headers: dict[str, str], head: bool, key: str
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
