"""The store: its bound, the order it evicts in, and the files it never evicts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from isvc_model_cache import NoRoom, Store

A, B, C, D = (f"{c}" * 64 for c in "abcd")


def _filled(store: Store, digest: str, size: int) -> None:
    path = store.reserve(digest, size)
    path.write_bytes(b"x" * size)
    store.commit(digest)


def test_a_fill_takes_its_room_from_the_least_recently_used_file(tmp_path: Path) -> None:
    store = Store(tmp_path, 30)
    evicted: list[int] = []
    store.on_evict = evicted.append
    for digest in (A, B, C):
        _filled(store, digest, 10)
    held = store.hold(A)  # A is used again: B is now the least recently used
    assert held is not None
    store.release(A)
    _filled(store, D, 10)
    assert sorted(p.name for p in store.blobs.iterdir()) == sorted([A, C, D])
    assert evicted == [10]
    assert store.usage().used == 30


def test_a_file_a_download_holds_is_never_evicted(tmp_path: Path) -> None:
    store = Store(tmp_path, 20)
    _filled(store, A, 10)
    _filled(store, B, 10)
    assert store.hold(A) is not None
    assert store.hold(B) is not None
    with pytest.raises(NoRoom, match="20 of the cache's 20 bytes are held"):
        store.reserve(C, 10)
    store.release(A)
    store.reserve(C, 10)  # A goes now; B, still read, stays
    assert (store.blobs / B).exists() and not (store.blobs / A).exists()


def test_a_fill_under_way_holds_its_room_and_is_not_evicted(tmp_path: Path) -> None:
    store = Store(tmp_path, 20)
    store.reserve(A, 15)
    with pytest.raises(NoRoom):
        store.reserve(B, 10)
    assert store.hold(A) is None  # not complete: no download reads it from the store
    store.abandon(A)
    store.reserve(B, 10)
    assert store.usage().used == 10


def test_a_file_larger_than_the_cache_is_refused_before_anything_is_evicted(tmp_path: Path) -> None:
    store = Store(tmp_path, 20)
    _filled(store, A, 10)
    with pytest.raises(NoRoom, match=r"the file \(21 bytes\) is larger than the cache \(20 bytes\)"):
        store.reserve(B, 21)
    assert (store.blobs / A).exists()


def test_evicting_what_would_not_make_room_keeps_every_file(tmp_path: Path) -> None:
    store = Store(tmp_path, 30)
    _filled(store, A, 10)
    _filled(store, B, 10)
    assert store.hold(B) is not None
    with pytest.raises(NoRoom):
        store.reserve(C, 25)  # A alone frees 10 of the 15 needed
    assert (store.blobs / A).exists()


def test_a_restart_finds_the_files_in_their_order_of_use_and_drops_unfinished_fills(tmp_path: Path) -> None:
    store = Store(tmp_path, 30)
    _filled(store, A, 10)
    _filled(store, B, 10)
    os.utime(store.blobs / A, (1000, 1000))  # A used long ago
    store.reserve(C, 10)  # a fill the process did not finish
    again = Store(tmp_path, 20)
    assert not any(again.partial.iterdir())
    assert again.usage().files == 2
    _filled(again, D, 10)
    assert sorted(p.name for p in again.blobs.iterdir()) == sorted([B, D])
