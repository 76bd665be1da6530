"""The files the cache holds, each under the hash the Hub published for it, within one size bound.

A file is `blobs/<hash>` once complete and verified, `partial/<hash>` while a fill writes it. The index (in
memory, rebuilt from the directory at start, where a file's mtime is its last use) knows each file's size, its
last use and how many downloads hold it. Room for a fill is taken before the fill starts, by evicting the files
used least recently that no download holds: a held file is never evicted. One lock guards the index; nothing
under it waits on more than one unlink, rename or utime.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from isvc_model_cache._errors import NoRoom

__all__ = ["DIGEST", "Store", "Usage"]

# The Hub's hashes: a git blob's sha1 (a file kept in git) or a sha256 (a file kept in LFS or Xet storage).
DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass
class _Entry:
    size: int
    used: float  # last use, seconds since the epoch (a blob's mtime)
    holders: int = 0  # downloads reading it, and its fill while it runs
    complete: bool = True


@dataclass(frozen=True)
class Usage:
    """What the store holds now: bytes (fills' reservations included), files, bytes held by downloads."""

    used: int
    files: int
    held: int
    capacity: int


class Store:
    """The verified files by hash under a bound of `max_bytes`, least recently used evicted first."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.blobs, self.partial = root / "blobs", root / "partial"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.partial.mkdir(parents=True, exist_ok=True)
        self.capacity = max_bytes
        self.on_evict: Callable[[int], None] = lambda size: None  # bytes evicted (the metrics count them)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        for stale in self.partial.iterdir():  # a fill the last process did not finish: never served
            stale.unlink()
        for blob in self.blobs.iterdir():
            if DIGEST.fullmatch(blob.name):
                stat = blob.stat()
                self._entries[blob.name] = _Entry(stat.st_size, stat.st_mtime)

    def hold(self, digest: str) -> Path | None:
        """The complete file of `digest`, held (never evicted) until `release`; None when the store lacks it."""
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None or not entry.complete:
                return None
            entry.holders += 1
            entry.used = time.time()
        path = self.blobs / digest
        with contextlib.suppress(OSError):  # the last use survives a restart as the file's mtime
            os.utime(path, (entry.used, entry.used))
        return path

    def join(self, digest: str) -> None:
        """A download reads the file of a fill under way: held until `release` (past the fill's end too)."""
        with self._lock:
            self._entries[digest].holders += 1

    def release(self, digest: str) -> None:
        """A download (or a fill) no longer reads the file."""
        with self._lock:
            entry = self._entries.get(digest)
            if entry is not None and entry.holders > 0:
                entry.holders -= 1

    def reserve(self, digest: str, size: int) -> Path:
        """Room for a fill of `size` bytes, taken now by evicting unheld files, least recently used first; the
        (empty) file the fill writes, held by it. NoRoom when the file is larger than the store or the room it needs is
        held by downloads."""
        if size > self.capacity:
            raise NoRoom(f"the file ({size} bytes) is larger than the cache ({self.capacity} bytes)")
        with self._lock:
            if digest in self._entries:
                raise ValueError(f"{digest} is in the store already")
            need = sum(e.size for e in self._entries.values()) + size - self.capacity
            evicted = self._evict(need) if need > 0 else []
            if need > sum(size for _, size in evicted):
                held = sum(e.size for e in self._entries.values() if e.holders)
                raise NoRoom(
                    f"{held} of the cache's {self.capacity} bytes are held by downloads reading them or fills "
                    f"writing them; {size} more do not fit"
                )
            self._entries[digest] = _Entry(size, time.time(), holders=1, complete=False)
        for name, freed in evicted:
            (self.blobs / name).unlink(missing_ok=True)
            self.on_evict(freed)
        path = self.partial / digest
        path.write_bytes(b"")  # there already for the downloads that read the fill from its first byte
        return path

    def _evict(self, need: int) -> list[tuple[str, int]]:
        """Drop unheld complete files from the index, least recently used first, until `need` bytes are free
        (all of them when that is not enough); the caller removes them from disk and checks the sum."""
        candidates = sorted(
            ((e.used, name) for name, e in self._entries.items() if e.complete and not e.holders),
        )
        if sum(self._entries[name].size for _, name in candidates) < need:
            return []  # evicting would not make room: keep every file
        evicted: list[tuple[str, int]] = []
        for _, name in candidates:
            if need <= 0:
                break
            size = self._entries.pop(name).size
            evicted.append((name, size))
            need -= size
        return evicted

    def commit(self, digest: str) -> None:
        """The fill of `digest` is complete and verified: its file joins the store (the fill's hold ends)."""
        os.replace(self.partial / digest, self.blobs / digest)
        with self._lock:
            entry = self._entries[digest]
            entry.complete, entry.used = True, time.time()
            entry.holders -= 1

    def abandon(self, digest: str) -> None:
        """The fill of `digest` failed: its partial file and its room go (readers keep their open file)."""
        with self._lock:
            self._entries.pop(digest, None)
        (self.partial / digest).unlink(missing_ok=True)

    def usage(self) -> Usage:
        with self._lock:
            entries = list(self._entries.values())
        return Usage(
            used=sum(e.size for e in entries),
            files=sum(1 for e in entries if e.complete),
            held=sum(e.size for e in entries if e.holders),
            capacity=self.capacity,
        )
