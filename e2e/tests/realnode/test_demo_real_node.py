"""`nox -s up -- --real-node --orders 2` as a user runs it (issue 45): both orders `Ready` and answering a chat
completion, then SIGTERM to nox alone, which hands it on to the demo; when nox has ended, nothing of the demo is
left: no process of the run, no mount under its work dir, no network namespace, link or cgroup of its node.

The demo starts a real node of its own, and the machine holds one at a time: this file runs before any test
asks for the session's `cluster` (conftest.py, `own_real_node`). The nox is the one running this session
(`ISVC_NOX_PYTHON`, set by `nox -s realnode`; else the `nox` on PATH); its `up` session builds its own
environment and the model fetcher image (cached by its inputs: the archive `nox -s realnode` just built).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from isvc_testbed.helpers import wait_for
from isvc_testbed.leftovers import command, node_processes, node_traces, process_start
from isvc_workload import AUTH_SECRET_KEY, auth_secret_name
from kubernetes import client as k8s
from kubernetes import config as k8s_config

pytestmark = pytest.mark.own_real_node

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "team-a"
ORDERS = ("tiny-chat", "tiny-chat-2")  # the demo's names for two orders
UP_TIMEOUT = 900.0  # nox's up session (environment, wheels, the cached image) and the demo's two orders
TEARDOWN_BOUND = 120.0  # from SIGTERM to nox's end and nothing left; measured 31-39 s (e2e/README.md)


def _nox() -> list[str]:
    python = os.environ.get("ISVC_NOX_PYTHON")
    if python:
        return [python, "-m", "nox"]
    found = shutil.which("nox")
    if found is None:
        pytest.fail("no nox to run `nox -s up -- --real-node` with: set ISVC_NOX_PYTHON or put nox on PATH")
    return [found]


def _shell_env() -> dict[str, str]:
    """This process's environment without this session's virtualenv: what the shell gave nox."""
    venv_bin = str(Path(sys.prefix) / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "ISVC_IMAGES_MANIFEST")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-60:])


def _serving(nox: subprocess.Popen[bytes], log: Path) -> str | None:
    """The demo's output once it serves (None before); fails when nox ended first."""
    text = log.read_text(errors="replace")
    if "Serving until Ctrl-C" in text:
        return text
    if nox.poll() is not None:
        raise AssertionError(f"nox ended ({nox.returncode}) before the demo served:\n{_tail(log)}")
    return None


def _descendants(root: int) -> dict[int, int]:
    """`root` and every process under it: pid → start time."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return {pid: start for pid in tree if (start := process_start(pid)) is not None}


def _left(workdir: Path, netns: str, seen: dict[int, int]) -> list[str]:
    """What is left of the run: a process it had (the same pid and start time), or any trace of its node."""
    alive = [f"process {pid}: {command(pid)}" for pid, start in seen.items() if process_start(pid) == start]
    traces = [t for kind in node_traces(workdir, netns).values() for t in kind]
    return sorted(set(alive) | set(traces))


def _answers(kubeconfig: Path, port: int) -> dict[str, Any]:
    """Each order `Ready` (as the API server has it) and its llama-server's chat completion through the demo's
    forwarder on 127.0.0.1, with the order's token: the reply by order."""
    replies = {}
    with k8s_config.new_client_from_config(config_file=str(kubeconfig)) as api:
        for name in ORDERS:
            order: Any = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
                "ai.deckhouse.io", "v1alpha1", NAMESPACE, "inferenceservices", name
            )
            status = order.get("status", {})
            assert status.get("phase") == "Ready", f"{name}: {status}"
            secret: Any = k8s.CoreV1Api(api).read_namespaced_secret(auth_secret_name(name), NAMESPACE)
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/{NAMESPACE}/{name}/v1",
                api_key=base64.b64decode(secret.data[AUTH_SECRET_KEY]).decode(),
                max_retries=0,
                timeout=60,
            )
            replies[name] = client.chat.completions.create(
                model=status["resolved"]["servedModel"],
                max_tokens=8,
                temperature=0,
                seed=13,
                messages=[{"role": "user", "content": "Say something."}],
            )
    return replies


def _end(nox: subprocess.Popen[bytes], signalled: bool, seen: dict[int, int]) -> None:
    """After a failure, what the run left: nox asked to stop (once) and given the bound, a demo that outlived it
    SIGTERMed (its own teardown) and given the bound, then whatever of the run is still there killed."""
    if nox.poll() is None and not signalled:
        nox.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        nox.wait(timeout=TEARDOWN_BOUND)
    demos = [
        p for p, start in seen.items() if process_start(p) == start and "isvc_testbed.demo" in command(p)
    ]
    for pid in demos:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + TEARDOWN_BOUND
    while time.monotonic() < deadline and any(process_start(p) == seen[p] for p in demos):
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(nox.pid, signal.SIGKILL)
    nox.wait()
    for pid, start in seen.items():
        if process_start(pid) == start:
            os.kill(pid, signal.SIGKILL)


def test_sigterm_to_nox_up_real_node_with_two_answering_orders_leaves_nothing(tmp_path: Path) -> None:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    own = [
        ln.split()[0]
        for ln in listed.splitlines()
        if ln.split() and ln.split()[0].endswith(f"-{os.getpid()}")
    ]
    assert own == [], f"the session's real node is up ({own}): this file must run before it (own_real_node)"
    log = tmp_path / "nox-up.log"
    argv = [
        *_nox(),
        "-f",
        str(ROOT / "noxfile.py"),
        "-s",
        "up",
        "--",
        "--real-node",
        "--orders",
        str(len(ORDERS)),
    ]
    t0 = time.monotonic()
    with log.open("wb") as out:  # nox and the demo in a process group of their own, as a terminal's job
        nox = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=_shell_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    seen: dict[int, int] = {}
    signalled = False
    try:
        text = wait_for(
            lambda: _serving(nox, log), UP_TIMEOUT, interval=1, what="the demo serving both orders"
        )
        up_seconds = time.monotonic() - t0
        kubeconfig = Path(re.findall(r"--kubeconfig (\S+/admin\.kubeconfig)", text)[-1])
        workdir = kubeconfig.parent
        [netns] = re.findall(r"\(netns (isvc-tb-\d+-\d+);", text)
        port = int(re.findall(r"already on 127\.0\.0\.1:(\d+) under", text)[-1])
        replies = _answers(kubeconfig, port)
        assert {n: r.usage.completion_tokens > 0 for n, r in replies.items()} == dict.fromkeys(ORDERS, True)
        # what the checks below must find gone, seen here first: they can fail
        before = node_traces(workdir, netns)
        assert [k for k in ("process", "mount", "netns", "link", "cgroup", "work dir") if not before[k]] == []
        seen = _descendants(nox.pid) | node_processes(workdir, netns)
        t1 = time.monotonic()
        nox.send_signal(signal.SIGTERM)  # to nox alone, which hands it on to the demo
        signalled = True
        code = nox.wait(timeout=TEARDOWN_BOUND)
        nox_seconds = time.monotonic() - t1
        left = _left(workdir, netns, seen)
        while left and time.monotonic() - t1 < TEARDOWN_BOUND:
            time.sleep(0.5)
            left = _left(workdir, netns, seen)
        clean_seconds = time.monotonic() - t1
        demo_ready = float(re.findall(r"Ready in ([0-9.]+)s", text)[-1])
        print(
            f"nox -s up -- --real-node --orders 2: serving after {up_seconds:.1f}s (both orders Ready "
            f"{demo_ready:.1f}s after the demo began; replies "
            f"{ {n: r.choices[0].message.content for n, r in replies.items()} }); before SIGTERM: {len(seen)} "
            f"processes, {len(before['mount'])} mounts, {len(before['cgroup'])} cgroups; SIGTERM to nox: nox "
            f"ended ({code}) after {nox_seconds:.1f}s, "
            + (f"nothing left after {clean_seconds:.1f}s" if not left else f"{len(left)} traces left")
        )
        assert left == [], (
            f"{TEARDOWN_BOUND:.0f}s after SIGTERM to nox, left:\n" + "\n".join(left) + f"\n{_tail(log)}"
        )
        assert code == 0, f"nox ended with {code}:\n{_tail(log)}"
        assert "SIGINT: stopped alice's order" in log.read_text(errors="replace"), _tail(log)
    finally:
        _end(nox, signalled, seen)
