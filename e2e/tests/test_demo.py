"""`nox -s up` as a newcomer meets it (issue 31): the module configured as its chart configures it — the order's
pod downloads the model through the chart's fetch image from the stand-in Hub on loopback — each stage's
time printed, and the stand-in answering the completions a client sends.

The demo starts a control plane of its own (its state directory here), so this test runs it as a user does
(`python -m isvc_testbed.demo up`, then `down`), next to the suite's cluster and sharing nothing with it.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from isvc_testbed.module import IMAGES
from kubernetes import client as k8s
from kubernetes import config as k8s_config

pytestmark = pytest.mark.e2e

STAGES = ["control plane", "fleet", "chart", "module processes", "controller leading", "order Ready"]


def _demo(state: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "isvc_testbed.demo", command, "--state-dir", str(state), "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    state = tmp_path_factory.mktemp("demo")
    done = _demo(state, "up")
    try:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield done.stdout, json.loads((state / "demo.json").read_text())
    finally:
        _demo(state, "down")


def test_up_prints_how_long_each_stage_took(demo: tuple[str, dict[str, str]]) -> None:
    out, _ = demo
    took = {m.group(2): float(m.group(1)) for m in re.finditer(r"^\[\s*([\d.]+)s\] ([a-zA-Z ]+):", out, re.M)}
    assert list(took) == STAGES, out
    assert re.search(r"the order took [\d.]+s after the controller led, everything [\d.]+s", out), out


def test_the_demos_order_downloads_through_the_charts_fetch_image_from_the_standin_hub(
    demo: tuple[str, dict[str, str]],
) -> None:
    out, state = demo
    api = k8s_config.new_client_from_config(config_file=state["admin"])
    with api:
        pod = k8s.AppsV1Api(api).read_namespaced_stateful_set("support-llm", "team-a").spec.template.spec
        status = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
            "ai.deckhouse.io", "v1alpha1", "team-a", "inferenceservices", "support-llm"
        )["status"]
        deployment = k8s.AppsV1Api(api).read_namespaced_deployment("isvc-controller", "d8-isvc")
    chart = deployment.spec.template.spec.containers[0].args
    [fetch] = pod.init_containers
    env = {e.name: e.value for e in fetch.env}
    assert fetch.image == IMAGES["modelFetcher"]  # the chart's image, as its Deployment passes it
    assert f"--model-fetch-image={IMAGES['modelFetcher']}" in chart
    assert f"--huggingface-endpoint={env['HF_ENDPOINT']}" in chart
    hub = env["HF_ENDPOINT"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", hub)  # loopback: the stand-in Hub
    command = fetch.command
    assert command[:3] == ["hf", "download", "Qwen/Qwen2.5-7B-Instruct"]
    revision = command[command.index("--revision") + 1]
    # What the step downloads, the stand-in Hub serves at that very commit (the files the plan was sized for).
    info = httpx.get(f"{hub}/api/models/Qwen/Qwen2.5-7B-Instruct/revision/{revision}", timeout=10).json()
    assert info["sha"] == revision
    names = [s["rfilename"] for s in info["siblings"]]
    for name in ("config.json", "model-00001-of-00004.safetensors"):
        assert name in names
        assert (
            httpx.head(f"{hub}/Qwen/Qwen2.5-7B-Instruct/resolve/{revision}/{name}", timeout=10).status_code
            == 200
        )
    assert "init container fetch-model" in out and hub in out and "HF_TOKEN" in out
    assert status["resolved"]["servedModel"] == "Qwen/Qwen2.5-7B-Instruct"


def test_the_standin_answers_the_completions_the_demo_shows(demo: tuple[str, dict[str, str]]) -> None:
    out, state = demo
    [base] = re.findall(r"curl -sS (http://127\.0\.0\.1:\d+/team-a/support-llm)/v1/completions", out)
    api = k8s_config.new_client_from_config(config_file=state["alice"])
    with api:
        secret = k8s.CoreV1Api(api).read_namespaced_secret("support-llm-auth", "team-a")
    token = base64.b64decode(secret.data["token"]).decode()
    reply = httpx.post(
        f"{base}/v1/completions",
        headers={"Authorization": f"Bearer {token}"},
        json={"model": "Qwen/Qwen2.5-7B-Instruct", "prompt": "Hello", "max_tokens": 16},
        timeout=10,
    ).json()
    assert (reply["object"], reply["choices"][0]["text"]) == ("text_completion", "echo: Hello")


def test_the_demos_order_reads_what_it_serves_issue_42(demo: tuple[str, dict[str, str]]) -> None:
    """The README's order in default-llm serves the chat default: 16 requests of 2,048 tokens at once at least,
    as its status says and the demo prints."""
    out, state = demo
    api = k8s_config.new_client_from_config(config_file=state["admin"])
    with api:
        resolved = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
            "ai.deckhouse.io", "v1alpha1", "team-a", "inferenceservices", "support-llm"
        )["status"]["resolved"]
    assert resolved["requestTokens"] == 2048 and resolved["concurrentRequests"] >= 16, resolved
    assert resolved["kvCacheTokens"] >= 16 * 2048 and resolved["contextLength"] >= 8192, resolved
    line = (
        f"It serves {resolved['concurrentRequests']} requests of 2,048 tokens at once, a KV cache of "
        f"{resolved['kvCacheTokens']:,} tokens, requests of up to {resolved['contextLength']:,} tokens"
    )
    assert line in out, out
