"""`nox -s up` / `nox -s down`: the local cluster, the module installed, and the README order to Ready."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from isvc_testbed._bins import bin_dir
from isvc_testbed.cluster import Cluster, ClusterState, stop_recorded
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.module import ROOT, ModuleProcesses, conditions_line, install_chart, order_status

README_ORDER: dict[str, Any] = {
    "apiVersion": "ai.deckhouse.io/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "support-llm"},
    "spec": {"inferenceServiceClassName": "default-llm",
             "model": {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"}}},
}
STATE = "demo.json"


def say(text: str) -> None:
    print(text, flush=True)


def _start_standin(cluster: Cluster, log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with (log_dir / "standin.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "isvc_testbed.standin", "--kubeconfig", str(cluster.admin_kubeconfig)],
            stdout=subprocess.PIPE, stderr=log, start_new_session=True,
        )
    assert proc.stdout is not None
    template = proc.stdout.readline().decode().strip()
    if not template:
        raise RuntimeError("the stand-in server did not start; see " + str(log_dir / "standin.log"))
    return proc, template


def up(state_dir: Path, timeout: float) -> int:
    """Start everything in the background, create the README order as alice, wait for Ready."""
    state_file = state_dir / STATE
    if state_file.exists():
        say(f"already up (state in {state_file}); run `nox -s down` first")
        return 1
    state_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    cluster = Cluster(die_with_parent=False).start()
    extra: dict[str, int] = {}
    try:
        say(f"control plane up in {cluster.startup_seconds:.1f}s: {cluster.server}")
        with cluster.api_client("admin") as admin:
            Fleet.load(ROOT / "e2e" / "fleets" / "default.yaml").publish(admin)
            say("fleet published: simulated GPU nodes and their ResourceSlices")
            install_chart(cluster)
            say("module chart installed: CRDs, RBAC, default-llm, controller and planner Deployments")
            user_namespace(admin, "team-a", user="alice", cluster_role="d8:user-authz:isvc:editor")
            # and the usual rights of a namespace user (read Secrets, e.g. the endpoint token)
            user_namespace(admin, "team-a", user="alice", cluster_role="edit")
        logs = cluster.workdir / "module-logs"
        logs.mkdir(exist_ok=True)
        standin, template = _start_standin(cluster, logs)
        extra["standin"] = standin.pid
        module = ModuleProcesses(cluster, template).start()
        extra.update(module.state()["pids"])
        state = cluster.state()
        state_file.write_text(json.dumps({"cluster": json.loads(state.to_json()), "extra": extra,
                                          "admin": str(cluster.admin_kubeconfig),
                                          "alice": str(cluster.alice_kubeconfig)}, indent=2))
        say(f"controller and planner running as the chart's ServiceAccounts (logs: {logs})")
        with cluster.api_client("alice") as alice:
            k8s.CustomObjectsApi(alice).create_namespaced_custom_object(
                "ai.deckhouse.io", "v1alpha1", "team-a", "inferenceservices", README_ORDER)
            say("alice created team-a/support-llm; its conditions:")
            last = ""

            def ready() -> dict[str, Any] | None:
                nonlocal last
                module.check()
                status = order_status(alice, "team-a", "support-llm")
                line = f"  phase={status.get('phase', '-')} {conditions_line(status)}"
                blocking = next((c for c in status.get("conditions", []) if c["status"] == "False"), None)
                if blocking:
                    line += f"\n    {blocking['type']}: {blocking['message']}"
                if line != last:
                    say(line)
                    last = line
                return status if status.get("phase") == "Ready" else None

            status = wait_for(ready, timeout, interval=0.5, what="support-llm Ready")
    except BaseException:
        _stop_extra(extra)
        cluster.stop()
        state_file.unlink(missing_ok=True)
        raise
    resolved = status.get("resolved", {})
    say(f"Ready in {time.monotonic() - t0:.1f}s: {status['endpoint']['url']} "
        f"({status['model']['endpointType']}, {resolved.get('placementMode')} "
        f"{resolved.get('acceleratorProductName')}, runtime {resolved.get('runtime')})")
    kubectl = bin_dir() / "kubectl"
    say(f"export KUBECONFIG={cluster.alice_kubeconfig}   # as alice")
    say(f"{kubectl} get inferenceservice support-llm -n team-a -o yaml")
    say("The endpoint's address is simulated; its stand-in answers on loopback:")
    say(f"  TOKEN=$({kubectl} get secret {status['authSecretName']} -n team-a -o jsonpath='{{.data.token}}' "
        "| base64 -d)")
    say(f"  curl -sS {template.format(namespace='team-a', name='support-llm')}/v1/models "
        "-H \"Authorization: Bearer $TOKEN\"")
    say("Tear down: nox -s down")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _ours(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return b"isvc_" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _stop_extra(pids: dict[str, int]) -> None:
    live = {n: p for n, p in pids.items() if _alive(p) and _ours(p)}
    for pid in live.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in live.values()):
        time.sleep(0.1)
    for pid in live.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def down(state_dir: Path) -> int:
    """Stop every process `up` started, by recorded pid, and remove the cluster's directory."""
    state_file = state_dir / STATE
    if not state_file.exists():
        say("nothing is up")
        return 0
    state = json.loads(state_file.read_text())
    _stop_extra(state["extra"])
    stopped = stop_recorded(ClusterState(**state["cluster"]))
    state_file.unlink()
    say(f"stopped: {', '.join(sorted([*stopped, *state['extra']]))}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.demo", description=__doc__)
    p.add_argument("command", choices=["up", "down"])
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    return up(args.state_dir, args.timeout) if args.command == "up" else down(args.state_dir)


if __name__ == "__main__":
    raise SystemExit(main())
