from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from isvc_catalog._safetensors import count_elements, header_length  # the reader under test
from isvc_testing.standin_hub import FixtureModel, StandinHub, load_fixtures, packaged_fixtures

SHIPPED = {
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct-AWQ",
    "meta-llama/Llama-3.1-8B-Instruct",
    "BAAI/bge-m3",
    "Qwen/Qwen2.5-7B-Instruct-GGUF",
    "meta-llama/Llama-3.1-405B-Instruct",
    "Qwen/Qwen2.5-3B-Instruct",  # the scenario's second model (module/docs/SCENARIO.md)
}


def test_the_shipped_fixtures_describe_the_models_the_docs_order() -> None:
    assert {m.repo for m in load_fixtures(packaged_fixtures())} == SHIPPED


@pytest.mark.parametrize("repo", sorted(SHIPPED - {"Qwen/Qwen2.5-7B-Instruct-GGUF"}))
def test_the_safetensors_headers_declare_the_stored_element_count(repo: str) -> None:
    [model] = [m for m in load_fixtures(packaged_fixtures()) if m.repo == repo]
    hub = StandinHub([model])
    stored = model.safetensors or {}
    total = 0
    for name, f in hub.repos[repo].files.items():
        if name.endswith(".safetensors"):
            counts = count_elements(f.prefix[8 : 8 + header_length(f.prefix)])
            total += sum(counts.values())
            assert f.size > len(f.prefix)
    assert (sum(stored.values()) if stored else model.parameters) == total


def test_range_requests_serve_header_bytes_and_refuse_the_weights(standin: tuple[StandinHub, str]) -> None:
    hub, url = standin
    f = hub.repos["BAAI/bge-m3"].files["model.safetensors"]
    file_url = f"{url}/BAAI/bge-m3/resolve/main/model.safetensors"
    with httpx.Client() as http:
        head = http.get(file_url, headers={"Range": "bytes=0-7"})
        assert (206, f.prefix[:8], f"bytes 0-7/{f.size}") == (
            head.status_code,
            head.content,
            head.headers["Content-Range"],
        )
        assert http.get(file_url).status_code == 416
        assert http.get(file_url, headers={"Range": f"bytes={f.size}-"}).status_code == 416
        tail = http.get(file_url, headers={"Range": "bytes=-16"})
        assert (tail.status_code, tail.content) == (206, b"\0" * 16)
        meta = http.head(file_url)
        assert str(f.size) == meta.headers["Content-Length"]


def test_the_tree_api_lists_folders_unless_recursive(standin: tuple[StandinHub, str]) -> None:
    url = standin[1]
    with httpx.Client() as http:
        flat = http.get(f"{url}/api/models/meta-llama/Llama-3.1-8B-Instruct/tree/main").json()
        deep = http.get(
            f"{url}/api/models/meta-llama/Llama-3.1-8B-Instruct/tree/main", params={"recursive": "true"}
        ).json()
    assert [e["path"] for e in flat if e["type"] == "directory"] == ["original"]
    assert "original/consolidated.00.pth" in {e["path"] for e in deep}


def test_the_command_serves_the_shipped_models_on_loopback() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "isvc_testing.standin_hub", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            url = line.split(" on ")[1].split(" ")[0]
            assert url.startswith("http://127.0.0.1:")
            info = httpx.get(f"{url}/api/models/Qwen/Qwen2.5-7B-Instruct", params={"blobs": "true"}).json()
            assert info["safetensors"]["total"] == 7_615_616_512
            assert json.dumps(info)  # plain JSON
        finally:
            proc.terminate()


def test_a_local_file_is_served_whole_past_the_header_limit(tmp_path: Path) -> None:
    # a real model a test made (2 MiB here): the runtime that downloads it loads every byte
    data = bytes(range(256)) * (8 * 1024)
    (tmp_path / "model.gguf").write_bytes(data)
    hub = StandinHub(
        [
            FixtureModel(
                repo="o/real-GGUF",
                format="gguf",
                parameters=1,
                library_name=None,
                local_files={"model.gguf": tmp_path / "model.gguf"},
            )
        ]
    )
    url = hub.start()
    try:
        answer = httpx.get(f"{url}/o/real-GGUF/resolve/main/model.gguf")
        info = httpx.get(f"{url}/api/models/o/real-GGUF?blobs=true").json()
    finally:
        hub.stop()
    assert answer.status_code == 200 and answer.content == data
    assert {s["rfilename"]: s["size"] for s in info["siblings"]}["model.gguf"] == len(data)


def test_files_served_whole_carry_the_hubs_hashes_and_lfs_ones_redirect_to_storage() -> None:
    """Issue 46: a download checks a file against the hash the Hub publishes; the stand-in publishes the real
    ones (git's blob id of a small file, the sha256 of an LFS file) and answers an LFS file of a repository
    with `lfs_storage` as the Hub does: a 302 to storage carrying X-Linked-Etag and X-Linked-Size."""
    model = FixtureModel.model_validate(
        {"repo": "o/tiny", "parameters": 1000, "config": {"model_type": "qwen2"}, "lfs_storage": True}
    )
    hub = StandinHub([model])
    url = hub.start()
    try:
        with httpx.Client() as http:
            config = http.get(f"{url}/o/tiny/resolve/main/config.json")
            blob = b"blob %d\0" % len(config.content) + config.content
            assert config.headers["ETag"] == f'"{hashlib.sha1(blob).hexdigest()}"'
            weights = http.head(f"{url}/o/tiny/resolve/main/model.safetensors")
            assert weights.status_code == 302
            content = http.get(f"{url}/o/tiny/resolve/main/model.safetensors", follow_redirects=True).content
            sha = hashlib.sha256(content).hexdigest()
            assert (weights.headers["X-Linked-Etag"], weights.headers["X-Linked-Size"]) == (
                f'"{sha}"',
                str(len(content)),
            )
            assert weights.headers["Location"].endswith(f"/_lfs/{sha}")
            served = http.get(f"{url}/_control/served").json()
        assert served == {"o/tiny/config.json": len(config.content), "o/tiny/model.safetensors": len(content)}
    finally:
        hub.stop()
