"""The real node's tiny GGUF chat model: what llama.cpp needs to load it and serve chat, and how it is cut."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
from gguf import GGUFReader
from isvc_api import CompiledRuntime, EndpointType, ModelFacts, ModelFormat, Placement, PlacementMode
from isvc_catalog import HubClient
from isvc_planner import estimate, memory_need
from isvc_runtime_recipes import load_recipes
from isvc_testbed.tinymodel import (
    CHAT_TEMPLATE,
    GGUF_FILE,
    OTHER_VARIANT,
    TinyModel,
    hub_fixture,
    tiny_chat_model,
    truncated,
)
from isvc_testing.standin_hub import StandinHub, load_fixtures


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


def test_the_hub_fixture_is_a_gguf_repository_of_whose_variants_the_catalog_chooses_the_served_file(
    tmp_path: Path,
) -> None:
    """The repository names its variants as the Hub's GGUF repositories do (no `model.gguf`): the catalog
    chooses the F32 file, the one served whole, and the recipe loads that file under its own name."""
    whole = tiny_chat_model(cache=tmp_path)
    [model] = load_fixtures(hub_fixture(tmp_path / "hub", {"o/a-GGUF": whole}))
    assert (model.repo, model.local_files) == ("o/a-GGUF", {GGUF_FILE: whole})
    hub = StandinHub([model])
    url = hub.start()
    try:
        with HubClient(url) as client:
            facts = client.resolve("o/a-GGUF")
        info = httpx.get(f"{url}/api/models/o/a-GGUF?blobs=true").json()
    finally:
        hub.stop()
    assert {s["rfilename"] for s in info["siblings"]} >= {GGUF_FILE, OTHER_VARIANT}
    assert isinstance(facts, ModelFacts), facts
    assert (facts.format, facts.family, facts.gguf_files) == (ModelFormat.GGUF, "llama", [GGUF_FILE])
    assert facts.weight_bytes == TinyModel().parameters * 4  # sized by the F32 header: four bytes a weight
    need = memory_need(facts)
    assert need is not None
    placement = Placement(
        placement_mode=PlacementMode.WHOLE_DEVICE,
        device_count=1,
        node_name="n",
        device_class_name="gpu.nvidia.com",
        driver="gpu.nvidia.com",
        accelerator_product_name="Tesla T4",
        accelerator_memory_gi_b=15.0,
        accelerator_compute_capability="7.5",
    )
    runtime = load_recipes().compile(facts, EndpointType.CHAT, placement, estimate(facts, need), "o/a-GGUF")
    assert isinstance(runtime, CompiledRuntime), runtime
    assert runtime.args[runtime.args.index("-m") + 1] == f"{runtime.model_dir}/{GGUF_FILE}"
