"""The real node's tiny GGUF chat model: what llama.cpp needs to load it and serve chat, and how it is cut."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from isvc_testbed.tinymodel import CHAT_TEMPLATE, TinyModel, hub_fixture, tiny_chat_model, truncated


def _field(reader: GGUFReader, key: str) -> object:
    field = reader.fields[key]
    value = field.parts[field.data[0]]
    return bytes(value).decode() if value.dtype == np.uint8 else value.tolist()[0]


def test_the_file_is_a_llama_model_with_a_byte_vocabulary_and_the_chatml_template(tmp_path: Path) -> None:
    model = TinyModel()
    path = tiny_chat_model(cache=tmp_path)
    reader = GGUFReader(path)
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "llama.context_length") == model.context
    assert _field(reader, "llama.block_count") == model.layers
    assert _field(reader, "tokenizer.ggml.model") == "llama"
    assert _field(reader, "tokenizer.chat_template") == CHAT_TEMPLATE
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert len(tokens.data) == len(model.tokens) and "<0x0A>" in model.tokens  # every byte has a token
    assert sum(int(t.n_elements) for t in reader.tensors) == model.parameters
    assert path.stat().st_size < 1024 * 1024


def test_the_file_is_made_once_per_recipe(tmp_path: Path) -> None:
    first = tiny_chat_model(cache=tmp_path)
    mtime = first.stat().st_mtime_ns
    assert tiny_chat_model(cache=tmp_path) == first and first.stat().st_mtime_ns == mtime
    assert tiny_chat_model(cache=tmp_path, model=TinyModel(seed=14)) != first


def test_a_cut_copy_keeps_the_header_and_loses_the_end(tmp_path: Path) -> None:
    whole = tiny_chat_model(cache=tmp_path)
    cut = truncated(whole, missing=4096)
    assert cut.read_bytes() == whole.read_bytes()[:-4096]


def test_the_hub_fixture_serves_each_file_whole_as_model_gguf(tmp_path: Path) -> None:
    whole = tiny_chat_model(cache=tmp_path)
    directory = hub_fixture(tmp_path / "hub", {"o/a-GGUF": whole})
    [fixture] = json.loads((directory / "tiny-chat.yaml").read_text())
    assert fixture["repo"] == "o/a-GGUF" and fixture["local_files"] == {"model.gguf": str(whole)}
    assert fixture["gguf"]["architecture"] == "llama"
