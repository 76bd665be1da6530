"""The cache's HTTP API against the stand-in Hub, asked by the Hub's own client as the download step runs it."""

from __future__ import annotations

import concurrent.futures
import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_model_cache import file_target
from isvc_testing.standin_hub import FixtureModel, StandinHub

StartCache = Callable[..., Any]
Hf = Callable[..., Any]

CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64}
PUBLIC = "isvc-test/tiny"
GATED = "isvc-test/tiny-gated"
SLOW = "isvc-test/tiny-slow"
TOKENS = ["hf_good_token", "hf_other_good_token"]
WEIGHTS = "model.safetensors"


def _tiny(repo: str, **more: object) -> FixtureModel:
    # 1,000,000 BF16 parameters: a 2 MB safetensors file the stand-in serves whole, kept in LFS storage
    return FixtureModel.model_validate(
        {"repo": repo, "parameters": 1_000_000, "config": CONFIG, "lfs_storage": True, **more}
    )


@pytest.fixture
def hub() -> Iterator[tuple[StandinHub, str]]:
    """The stand-in Hub: a public tiny model, a gated one two tokens may read, one served slowly."""
    standin = StandinHub([_tiny(PUBLIC), _tiny(GATED, gated=True, tokens=TOKENS), _tiny(SLOW, drip=0.0015)])
    url = standin.start()
    yield standin, url
    standin.stop()


def _content(hub: StandinHub, repo: str, name: str) -> bytes:
    f = hub.repos[repo].files[name]
    return b"".join(f.chunks(0, f.size - 1))


def test_a_file_crosses_from_the_hub_once_for_every_download_of_it(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    standin, url = hub
    cache = start_cache(url)
    commit = standin.repos[PUBLIC].model.commit
    for replica in ("a", "b", "c"):
        done = hf(cache.url, PUBLIC, tmp_path / replica, WEIGHTS, revision=commit)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / replica / WEIGHTS).read_bytes() == _content(standin, PUBLIC, WEIGHTS)
    size = standin.repos[PUBLIC].files[WEIGHTS].size
    assert standin.served == {f"{PUBLIC}/{WEIGHTS}": size}
    assert (cache.count("Miss"), cache.count("Hit")) == (1, 2)
    assert cache.metric("isvc_model_cache_hub_bytes_total") == size
    assert cache.metric("isvc_model_cache_served_bytes_total") == 3 * size
    assert cache.store.usage().held == 0  # every download gave its hold back
    # the stand-in answered the resolve URL with the Hub's redirect to storage, which the fill followed
    assert ("GET", f"/_lfs/{standin.repos[PUBLIC].files[WEIGHTS].etag}", None) in standin.requests


def test_a_whole_repository_download_takes_every_file_through_the_cache(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    standin, url = hub
    cache = start_cache(url)
    for replica in ("a", "b"):
        done = hf(cache.url, PUBLIC, tmp_path / replica)
        assert done.returncode == 0, done.stderr
    files = standin.repos[PUBLIC].files
    assert standin.served == {f"{PUBLIC}/{name}": f.size for name, f in files.items()}
    for name in files:
        assert (tmp_path / "b" / name).read_bytes() == _content(standin, PUBLIC, name)
    assert (cache.count("Miss"), cache.count("Hit")) == (len(files), len(files))


def test_downloads_of_one_file_at_once_share_one_fill(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    """The stand-in drips the file (about three seconds): the second download reads the first one's fill."""
    standin, url = hub
    cache = start_cache(url)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda r: hf(cache.url, SLOW, tmp_path / r, WEIGHTS), ("a", "b", "c")))
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
    for replica in ("a", "b", "c"):
        assert (tmp_path / replica / WEIGHTS).read_bytes() == _content(standin, SLOW, WEIGHTS)
    assert standin.served == {f"{SLOW}/{WEIGHTS}": standin.repos[SLOW].files[WEIGHTS].size}
    assert (cache.count("Miss"), cache.count("Joined"), cache.count("Hit")) == (1, 2, 0)


def test_a_gated_file_is_served_only_to_a_token_the_hub_accepts(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    standin, url = hub
    cache = start_cache(url)
    first = hf(cache.url, GATED, tmp_path / "first", WEIGHTS, token=TOKENS[0])
    assert first.returncode == 0, first.stderr
    refused = {
        "wrong": hf(cache.url, GATED, tmp_path / "wrong", WEIGHTS, token="hf_wrong"),
        "none": hf(cache.url, GATED, tmp_path / "none", WEIGHTS),
    }
    for who, run in refused.items():
        assert run.returncode != 0, who
        assert "GatedRepoError" in run.stderr or "gated" in run.stderr.lower(), (who, run.stderr[-2000:])
        assert not (tmp_path / who / WEIGHTS).exists(), who
    # the Hub's own refusal, passed on: 403 for a token it does not accept, 401 without one
    resolve = f"{cache.url}/{GATED}/resolve/main/{WEIGHTS}"
    wrong = httpx.get(resolve, headers={"Authorization": "Bearer hf_wrong"})
    assert (wrong.status_code, wrong.headers["X-Error-Code"]) == (403, "GatedRepo")
    assert httpx.get(resolve).status_code == 401
    other = hf(cache.url, GATED, tmp_path / "other", WEIGHTS, token=TOKENS[1])
    assert other.returncode == 0, other.stderr
    assert (tmp_path / "other" / WEIGHTS).read_bytes() == _content(standin, GATED, WEIGHTS)
    assert standin.served == {f"{GATED}/{WEIGHTS}": standin.repos[GATED].files[WEIGHTS].size}
    assert (cache.count("Miss"), cache.count("Hit"), cache.count("Refused")) == (1, 1, 2)


def test_a_download_that_leaves_gives_its_hold_back_and_the_fill_goes_on(
    hub: tuple[StandinHub, str], start_cache: StartCache
) -> None:
    standin, url = hub
    cache = start_cache(url)
    size = standin.repos[SLOW].files[WEIGHTS].size
    with (
        httpx.Client(timeout=30) as http,
        http.stream("GET", f"{cache.url}/{SLOW}/resolve/main/{WEIGHTS}") as r,
    ):
        next(r.iter_bytes())  # one chunk, then the client goes
    deadline = time.monotonic() + 30
    while cache.store.usage().files == 0 or cache.store.usage().held:
        assert time.monotonic() < deadline, cache.store.usage()
        time.sleep(0.1)
    assert cache.store.usage().used == size  # the fill finished for the next download, which reads the store
    assert standin.served == {f"{SLOW}/{WEIGHTS}": size}


def test_a_resumed_download_gets_the_rest_of_the_file(
    hub: tuple[StandinHub, str], start_cache: StartCache
) -> None:
    standin, url = hub
    cache = start_cache(url)
    content = _content(standin, SLOW, WEIGHTS)
    resolve = f"{cache.url}/{SLOW}/resolve/main/{WEIGHTS}"
    with httpx.Client(timeout=30) as http:
        during = http.get(resolve, headers={"Range": "bytes=1000-"})  # a fill starts for it
        after = http.get(resolve, headers={"Range": "bytes=-10"})  # from the store
    assert (during.status_code, during.content) == (206, content[1000:])
    assert during.headers["Content-Range"] == f"bytes 1000-{len(content) - 1}/{len(content)}"
    assert (after.status_code, after.content) == (206, content[-10:])
    unsatisfiable = httpx.get(resolve, headers={"Range": f"bytes={len(content)}-"})
    assert unsatisfiable.status_code == 416


def test_a_fill_that_does_not_match_the_hubs_hash_is_cut_off_before_its_last_byte_and_not_kept(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    standin, url = hub
    weights = standin.repos[PUBLIC].files[WEIGHTS]
    weights._digest = hashlib.sha256(b"another file").hexdigest()  # the Hub publishes a hash the bytes miss
    cache = start_cache(url)
    with (
        httpx.Client(timeout=30) as http,
        http.stream("GET", f"{cache.url}/{PUBLIC}/resolve/main/{WEIGHTS}") as r,
    ):
        assert int(r.headers["Content-Length"]) == weights.size
        received = bytearray()
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in r.iter_bytes():
                received += chunk
    assert len(received) < weights.size
    assert cache.metric("isvc_model_cache_verify_failures_total") == 1
    assert not any(cache.store.blobs.iterdir()) and not any(cache.store.partial.iterdir())
    assert cache.store.usage().used == 0
    run = hf(cache.url, PUBLIC, tmp_path / "step", WEIGHTS)
    assert run.returncode != 0  # the step then goes to the Hub (isvc-workload's download step)


def test_a_file_larger_than_the_cache_gets_507_once_and_the_client_does_not_retry_it(
    hub: tuple[StandinHub, str], start_cache: StartCache, tmp_path: Path, hf: Hf
) -> None:
    standin, url = hub
    cache = start_cache(url, max_bytes=1 << 20)  # the weights are 2 MB
    run = hf(cache.url, PUBLIC, tmp_path / "step", WEIGHTS)
    assert run.returncode != 0
    assert "507" in run.stderr, run.stderr[-2000:]
    assert cache.count("Full") == 1  # one GET: hf raised at once instead of retrying
    assert standin.served == {}


def test_a_hash_the_cache_cannot_check_gets_501(hub: tuple[StandinHub, str], start_cache: StartCache) -> None:
    standin, url = hub
    standin.repos[PUBLIC].files[WEIGHTS]._digest = "v1-a-mirrors-own-etag"
    cache = start_cache(url)
    answer = httpx.get(f"{cache.url}/{PUBLIC}/resolve/main/{WEIGHTS}")
    assert answer.status_code == 501
    assert "no hash the cache can check" in answer.headers["X-Error-Message"]
    assert cache.count("Unverifiable") == 1


def test_a_hub_that_does_not_answer_gets_502(start_cache: StartCache) -> None:
    cache = start_cache("http://127.0.0.1:9")  # discard: nothing listens
    answer = httpx.get(f"{cache.url}/{PUBLIC}/resolve/main/{WEIGHTS}")
    assert answer.status_code == 502
    assert answer.headers["X-Error-Message"].startswith("the Hub did not answer")
    assert cache.count("HubUnreachable") == 1


def test_the_head_answers_what_hf_reads_without_a_fill(
    hub: tuple[StandinHub, str], start_cache: StartCache
) -> None:
    standin, url = hub
    cache = start_cache(url)
    head = httpx.head(f"{cache.url}/{PUBLIC}/resolve/main/{WEIGHTS}")
    f = standin.repos[PUBLIC].files[WEIGHTS]
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == standin.repos[PUBLIC].model.commit
    assert (head.headers["ETag"], head.headers["Content-Length"]) == (f'"{f.etag}"', str(f.size))
    assert "x-xet-hash" not in head.headers and "location" not in head.headers
    assert standin.served == {} and cache.store.usage().used == 0


@pytest.mark.parametrize(
    ("path", "target"),
    [
        (b"/org/name/resolve/0123abc/model.safetensors", ("org/name", "0123abc", "model.safetensors")),
        (b"/org/name/resolve/refs%2Fpr%2F1/sub/dir/f.gguf", ("org/name", "refs/pr/1", "sub/dir/f.gguf")),
        (b"/gpt2/resolve/main/config.json", ("gpt2", "main", "config.json")),
        (b"/datasets/org/name/resolve/main/x", None),
        (b"/org/name/blob/main/x", None),
        (b"/org/name/resolve/main", None),
    ],
)
def test_a_resolve_path_names_its_repository_revision_and_file(
    path: bytes, target: tuple[str, str, str] | None
) -> None:
    assert file_target(path) == target
