"""Issue 31: `kubectl isvc estimate` printed "2 Ã 28 layers" where `kubectl apply --dry-run=server` printed
"2 × 28 layers", and a terminal that is not UTF-8 got an error instead of an answer.

The API server writes a warning's UTF-8 text as it is into the `Warning` header; Python's HTTP client
reads header bytes as ISO-8859-1. Here a loopback HTTP server answers the dry run exactly so, and the
plugin runs as kubectl runs it: a process, its kubeconfig, and the locale of its terminal.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_isvc import run
from kubectl_isvc._kube import KubeReader

P = "isvc-estimate: "
# What the estimate webhook says in English, with the typography it uses, and a class named in Russian.
WARNINGS = [
    P + "version=1",
    P + "verdict=Refused",
    P + "condition=Planned",
    P + "reason=NoAcceleratorWithEnoughMemory",
    P + "class=класс-ллм",
    P + "message=needs 17.3 GiB: weights 15.2 GiB + KV cache 2 × 28 layers × 8192 tokens → ask your "
    "administrator for a larger accelerator — or a smaller model",
]


def _header(text: str) -> str:
    """A warning as apimachinery's NewWarningHeader writes it (code, agent, quoted text), its UTF-8 bytes as
    http.server sends header text (ISO-8859-1): the bytes on the wire are the API server's."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{quoted}"'.encode().decode("latin-1")


class _ApiServer(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(201)
        for warning in WARNINGS:
            self.send_header("Warning", _header(warning))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "alice", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "alice", "namespace": "team-a"}}],
        "current-context": "c",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield path
    server.shutdown()
    server.server_close()


def _estimate(kubeconfig: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-c", "from kubectl_isvc import main; main()", "estimate", "Qwen/Qwen2.5-7B"]
    return subprocess.run(
        [*argv, "--kubeconfig", str(kubeconfig), *extra],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_the_warnings_read_back_as_the_api_server_wrote_them(kubeconfig: Path) -> None:
    _, warnings = KubeReader(str(kubeconfig)).create(
        "/apis/ai.deckhouse.io/v1alpha1/namespaces/team-a/inferenceservices", "a dry run", {"a": 1}, {}
    )
    assert warnings == WARNINGS


def test_a_utf8_terminal_shows_the_message_as_kubectl_does_in_both_languages(kubeconfig: Path) -> None:
    english = _estimate(kubeconfig, {"LANG": "C.UTF-8"})
    text = english.stdout.decode("utf-8")
    assert english.returncode == 1, english.stderr
    assert "2 × 28 layers × 8192 tokens → ask your administrator" in text and "Ã" not in text
    russian = _estimate(kubeconfig, {"LANG": "C.UTF-8"}, "--lang", "ru")
    text = russian.stdout.decode("utf-8")
    assert "2 × 28 layers" in text and "класс-ллм" in text
    assert "Заказ сообщает NoAcceleratorWithEnoughMemory" in text  # the FAQ's words, in Russian


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_a_terminal_that_is_not_utf8_gets_an_answer_it_can_show(kubeconfig: Path, lang: str) -> None:
    """The POSIX locale without UTF-8 mode: stdout is ASCII. Typography becomes plain, the rest `?`."""
    done = _estimate(
        kubeconfig, {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}, "--lang", lang
    )
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    text = done.stdout.decode("ascii")
    assert "2 x 28 layers x 8192 tokens -> ask your administrator" in text
    assert "Traceback" not in done.stderr.decode(errors="replace")
    as_json = _estimate(
        kubeconfig,
        {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
        "--lang",
        lang,
        "-o",
        "json",
    )
    record = json.loads(as_json.stdout.decode("ascii"))  # escapes keep the record whole
    assert record["className"] == "класс-ллм" and "2 × 28 layers" in record["message"]


def test_a_russian_terminal_in_koi8_r_reads_russian_and_plain_typography(recorded: Any) -> None:
    reader = recorded(warnings=WARNINGS)
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="koi8-r")
    code = run(["estimate", "Qwen/Qwen2.5-7B"], lambda args: reader, out, {"LANG": "ru_RU.KOI8-R"})
    text = raw.getvalue().decode("koi8-r")
    assert code == 1
    assert "Заказ сообщает NoAcceleratorWithEnoughMemory" in text and "класс-ллм" in text
    assert "2 x 28 layers x 8192 tokens -> ask your administrator" in text
