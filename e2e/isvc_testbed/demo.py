"""`nox -s up` / `nox -s down`: the local cluster, the module installed, and the README order to Ready.

`nox -s up -- --real-node` (root) shows alice's order served for real instead: a real node (kubelet,
containerd, runc) beside KWOK, a generated tiny GGUF chat model, llama.cpp's server answering a chat
completion (isvc_testbed.llamabed, the bed of the real-node order test). It stays in the foreground until
Ctrl-C or SIGTERM and then tears everything down itself: `nox -s down` cannot undo a real node (its network
namespace, cgroups and mounts) from a state file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from isvc_runtime_recipes import load_recipes
from isvc_workload import AUTH_SECRET_KEY, FETCH_CONTAINER_NAME, HF_TOKEN_ENV, auth_secret_name
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed._bins import bin_dir, require_bins
from isvc_testbed._errors import BinariesMissing, ImagesMissing
from isvc_testbed.cluster import Cluster, ClusterState, install_crds, stop_recorded
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.images import image_archive
from isvc_testbed.llamabed import CLASS, ORDER, RECIPE, REPO, llama_bed
from isvc_testbed.module import (
    NAMESPACE,
    ROOT,
    ModuleProcesses,
    chart_flags,
    conditions_line,
    install_chart,
    order_status,
)
from isvc_testbed.orders import hf
from isvc_testbed.realnode import require_realnode_bins
from isvc_testbed.standin import StandIn

README_ORDER: dict[str, Any] = {
    "apiVersion": "ai.deckhouse.io/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "support-llm"},
    "spec": {
        "inferenceServiceClassName": "default-llm",
        "model": {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen2.5-7B-Instruct"}},
    },
}
STATE = "demo.json"


def say(text: str) -> None:
    print(text, flush=True)


def serves_line(resolved: dict[str, Any]) -> str:
    """What the order serves, as status.resolved says it (issue 42): requests of a typical length at once, its
    KV cache in tokens, the longest request."""
    at_once, typical = resolved.get("concurrentRequests"), resolved.get("requestTokens") or 0
    kv, longest = resolved.get("kvCacheTokens") or 0, resolved.get("contextLength") or 0
    return (
        f"It serves {at_once} requests of {typical:,} tokens at once, a KV cache of {kv:,} tokens, requests of "
        f"up to {longest:,} tokens (status.resolved: concurrentRequests, requestTokens, kvCacheTokens, "
        "contextLength)"
    )


def _start_standin(cluster: Cluster, log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    with (log_dir / "standin.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "isvc_testbed.standin", "--kubeconfig", str(cluster.admin_kubeconfig)],
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    assert proc.stdout is not None
    template = proc.stdout.readline().decode().strip()
    if not template:
        raise RuntimeError("the stand-in server did not start; see " + str(log_dir / "standin.log"))
    return proc, template


def _leading(cluster: Cluster, pid: int, timeout: float) -> None:
    """Wait until the controller process `pid` holds the leader Lease (its identity is `<host>_<pid>`)."""
    with cluster.api_client("admin") as api:
        leases = k8s.CoordinationV1Api(api)

        def held() -> bool:
            try:
                lease = leases.read_namespaced_lease("isvc-controller", NAMESPACE)
            except ApiException as e:
                if e.status == 404:
                    return False
                raise
            holder = (lease.spec.holder_identity or "") if lease.spec else ""
            return holder.endswith(f"_{pid}")

        wait_for(held, timeout, interval=0.1, what="the controller leading")


class Stages:
    """Seconds each stage of `up` took, printed as it ends: where a newcomer's wait goes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.monotonic()

    def done(self, stage: str, what: str) -> float:
        now = time.monotonic()
        self.seconds[stage] = now - self._mark
        self._mark = now
        say(f"[{self.seconds[stage]:5.1f}s] {stage}: {what}")
        return self.seconds[stage]


def _download_step(api: k8s.ApiClient, namespace: str, name: str) -> list[str]:
    """What the order's pod does before its runtime starts, from its pod template: the lines `up` prints."""
    workload: Any = k8s.AppsV1Api(api).read_namespaced_stateful_set(name, namespace)
    pod = workload.spec.template.spec
    fetch = next((c for c in pod.init_containers or [] if c.name == FETCH_CONTAINER_NAME), None)
    if fetch is None:
        return ["  no download step: the controller runs without a model fetch image"]
    env = {e.name: e for e in fetch.env or []}
    endpoint = env["HF_ENDPOINT"].value if "HF_ENDPOINT" in env else "the Hub"
    token = env.get(HF_TOKEN_ENV)
    ref = token.value_from.secret_key_ref if token is not None and token.value_from else None
    return [
        f"  init container {fetch.name} ({fetch.image}): {' '.join(fetch.command or [])}",
        f"    from {endpoint} (the stand-in Hub on loopback, the chart's huggingFace.endpoint)",
        f"    {HF_TOKEN_ENV}: Secret {ref.name}, key {ref.key}"
        if ref is not None
        else f"    {HF_TOKEN_ENV}: none — an order naming spec.model.authSecretRef gets its token here, and only "
        "here",
        "    (KWOK simulates the pod: the step is configured as in a cluster; no container runs it here)",
    ]


def up(state_dir: Path, timeout: float) -> int:
    """Start everything in the background, create the README order as alice, wait for Ready; print how long
    each stage took."""
    state_file = state_dir / STATE
    if state_file.exists():
        say(f"already up (state in {state_file}); run `nox -s down` first")
        return 1
    state_dir.mkdir(parents=True, exist_ok=True)
    stages = Stages()
    cluster = Cluster(die_with_parent=False).start()
    extra: dict[str, int] = {}
    try:
        stages.done(
            "control plane", f"etcd, kube-apiserver, controller-manager, scheduler, KWOK at {cluster.server}"
        )
        with cluster.api_client("admin") as admin:
            Fleet.load(ROOT / "e2e" / "fleets" / "default.yaml").publish(admin)
            stages.done("fleet", "simulated GPU nodes, DeviceClasses and the driver's ResourceSlices")
            logs = cluster.workdir / "module-logs"
            logs.mkdir(exist_ok=True)
            standin, template = _start_standin(cluster, logs)
            extra["standin"] = standin.pid
            module = ModuleProcesses(cluster, template)
            # the chart's settings a cluster would have: the module downloads from the (stand-in) Hub
            install_chart(cluster, {"huggingFace": {"endpoint": module.hub_url}})
            user_namespace(admin, "team-a", user="alice", cluster_role="d8:user-authz:isvc:editor")
            # and the usual rights of a namespace user (read Secrets, e.g. the endpoint token)
            user_namespace(admin, "team-a", user="alice", cluster_role="edit")
            stages.done("chart", "CRDs, RBAC, default-llm, the controller's and the planner's Deployments")
        module.controller_args = chart_flags(cluster, "--model-fetch-image", "--huggingface-endpoint")
        module.start()
        extra.update(module.state()["pids"])
        state = cluster.state()
        state_file.write_text(
            json.dumps(
                {
                    "cluster": json.loads(state.to_json()),
                    "extra": extra,
                    "admin": str(cluster.admin_kubeconfig),
                    "alice": str(cluster.alice_kubeconfig),
                },
                indent=2,
            )
        )
        stages.done(
            "module processes",
            f"volumes, stand-in Hub, planner, controller, as the chart's ServiceAccounts (logs: {logs}); "
            f"from the chart: {' '.join(module.controller_args)}",
        )
        controller = module.pid("controller")
        assert controller is not None
        _leading(cluster, controller, timeout)
        stages.done("controller leading", "it holds the Lease d8-isvc/isvc-controller")
        with cluster.api_client("alice") as alice:
            k8s.CustomObjectsApi(alice).create_namespaced_custom_object(
                "ai.deckhouse.io", "v1alpha1", "team-a", "inferenceservices", README_ORDER
            )
            say("alice created team-a/support-llm; its conditions:")
            status = _watch_order(
                lambda: order_status(alice, "team-a", "support-llm"), module.check, "support-llm", timeout
            )
            stages.done("order Ready", "from alice's create to phase Ready")
            download = _download_step(alice, "team-a", "support-llm")
    except BaseException:
        _stop_extra(extra)
        cluster.stop()
        state_file.unlink(missing_ok=True)
        raise
    resolved = status.get("resolved", {})
    total = sum(stages.seconds.values())
    say(
        f"Ready: {status['endpoint']['url']} ({status['model']['endpointType']}, {resolved.get('placementMode')} "
        f"{resolved.get('acceleratorProductName')}, runtime {resolved.get('runtime')}); the order took "
        f"{stages.seconds['order Ready']:.1f}s after the controller led, everything {total:.1f}s"
    )
    say(serves_line(resolved))
    say("Its download step (the pod's init container, as the chart configures it):")
    for line in download:
        say(line)
    kubectl = bin_dir() / "kubectl"
    served = resolved.get("servedModel")
    base = template.format(namespace="team-a", name="support-llm")
    say(f"export KUBECONFIG={cluster.alice_kubeconfig}   # as alice")
    say(f"{kubectl} get inferenceservice support-llm -n team-a -o yaml")
    say("The endpoint's address is simulated; its stand-in answers on loopback:")
    say(
        f"  TOKEN=$({kubectl} get secret {status['authSecretName']} -n team-a -o jsonpath='{{.data.token}}' "
        "| base64 -d)"
    )
    say(f'  curl -sS {base}/v1/models -H "Authorization: Bearer $TOKEN"')
    say(
        f"  curl -sS {base}/v1/completions -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' "
        f'-d \'{{"model": "{served}", "prompt": "Hello", "max_tokens": 16}}\''
    )
    say("Tear down: nox -s down")
    return 0


def check_real_node(image: bool = True) -> str | None:
    """Why `up --real-node` cannot run here (not root, binaries or, with `image`, the model fetcher's image
    missing), or None."""
    if os.geteuid() != 0:
        return (
            "the real node needs root (network namespaces, cgroups, mounts): run "
            "`nox -s up -- --real-node` as root"
        )
    try:
        require_realnode_bins(require_bins())
        if image:
            image_archive("modelFetcher")
    except (BinariesMissing, ImagesMissing) as e:
        return str(e)
    return None


def _interrupt(signum: int, _frame: object) -> None:
    """The first Ctrl-C or SIGTERM ends serving; the teardown that follows is not interrupted again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _watch_order(
    read: Callable[[], dict[str, Any]], check: Callable[[], None], name: str, timeout: float
) -> dict[str, Any]:
    """Print the order's phase and conditions as they change until it is Ready; return its status."""
    last = ""

    def ready() -> dict[str, Any] | None:
        nonlocal last
        check()
        status: dict[str, Any] = read()
        line = f"  phase={status.get('phase', '-')} {conditions_line(status)}"
        blocking = next((c for c in status.get("conditions", []) if c["status"] == "False"), None)
        if blocking:
            line += f"\n    {blocking['type']}: {blocking['message']}"
        if line != last:
            say(line)
            last = line
        return status if status.get("phase") == "Ready" else None

    return wait_for(ready, timeout, interval=0.5, what=f"{name} Ready")


def up_real_node(timeout: float, serve: bool = True, orders: int = 1) -> int:
    """Alice's `orders` orders for the tiny model served by llama.cpp on a real node (shares of its one card),
    in the foreground until a signal (or, without `serve`, right after the completions), then everything torn
    down."""
    why = check_real_node()
    if why:
        say(f"cannot start the real node: {why}")
        return 2
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    t0 = time.monotonic()
    reason = "--exit-after-ready"
    try:
        with contextlib.ExitStack() as stack:
            cluster = Cluster(real_node=True)
            stack.callback(cluster.stop)  # also after a signal half-way through start()
            cluster.start()
            say(
                f"control plane and real node {cluster.node.name} up in {cluster.startup_seconds:.1f}s: "
                f"{cluster.server}"
            )
            admin = stack.enter_context(cluster.api_client("admin"))
            alice = stack.enter_context(cluster.api_client("alice"))
            Fleet.load(ROOT / "e2e" / "fleets" / "default.yaml").publish(admin)
            install_crds(admin, sorted((ROOT / "e2e" / "crds").glob("*.yaml")))
            team_a = user_namespace(admin, "team-a", user="alice", cluster_role="d8:user-authz:isvc:editor")
            standin = stack.enter_context(StandIn.from_kubeconfig(cluster.admin_kubeconfig))
            bed = stack.enter_context(llama_bed(cluster, admin, alice, standin.url_template, team_a))
            say(f"module running (logs: {bed.module.logs}); class {CLASS} admits the real node's card alone")
            names = [ORDER] + [f"{ORDER}-{i + 1}" for i in range(1, orders)]
            for name in names:
                bed.orders.create(name, hf(REPO), CLASS)
            say(
                f"alice created {', '.join(f'{team_a}/{n}' for n in names)} for {REPO} (a generated tiny GGUF model)"
            )
            for name in names:
                say(f"{name}'s conditions:")
                _serve_one(bed, name, timeout, t0)
            _how_to_reach(cluster, bed.forwarder, team_a, names)
            if serve:
                say("Serving until Ctrl-C (or SIGTERM); then the real node and everything else stop.")
                while True:
                    time.sleep(5)
                    bed.module.check()
                    cluster.check()
            say("stopping (--exit-after-ready)")
    except KeyboardInterrupt as e:
        reason = str(e) or "interrupted"
    say(
        f"{reason}: stopped alice's order, the module's processes, the real node (kubelet, containerd, its "
        "network namespace, cgroups and mounts) and the control plane"
    )
    return 0


def _serve_one(bed: Any, name: str, timeout: float, t0: float) -> None:
    """One order of the demo watched to Ready, its placement and runtime, and a chat completion from it."""
    status = _watch_order(lambda: bed.orders.status(name), bed.module.check, name, timeout)
    plan = bed.orders.plan(name)
    assert plan is not None
    runtime = plan["spec"]["runtime"]
    resolved = status.get("resolved", {})
    say(f"Ready in {time.monotonic() - t0:.1f}s: phase={status['phase']} {conditions_line(status)}")
    say(
        f"  {resolved.get('placementMode')} {resolved.get('sharePercent') or 100}% of "
        f"{resolved.get('acceleratorProductName')} on {plan['spec']['placement']['nodeName']}, runtime "
        f"{runtime['recipe']} ({runtime['image']})"
    )
    say(f"  {serves_line(resolved)}")
    reply = bed.chat(name, runtime["servedName"])
    say(
        f"chat completion from {name}'s llama-server ({runtime['servedName']}): "
        f"{reply.choices[0].message.content!r} ({reply.usage.completion_tokens} tokens; the generated model's "
        "weights are random, so is its text)"
    )


def _how_to_reach(cluster: Cluster, forwarder: Any, namespace: str, names: list[str]) -> None:
    kubectl = f"{bin_dir() / 'kubectl'} --kubeconfig {cluster.admin_kubeconfig}"
    recipe = load_recipes().get(RECIPE)
    assert recipe is not None
    name = names[-1]
    say(f"  {kubectl} get inferenceservice -n {namespace} -o wide")
    say(
        f"  TOKEN=$({kubectl} get secret {auth_secret_name(name)} -n {namespace} "
        f"-o jsonpath='{{.data.{AUTH_SECRET_KEY}}}' | base64 -d)"
    )
    say(
        f"Each order's pod, through the API server's port-forward, already on 127.0.0.1:{forwarder.port} under "
        f"/<namespace>/<order>, e.g. {name}:"
    )
    say(
        f'  curl -sS {forwarder.url(namespace, name)}/v1/chat/completions -H "Authorization: Bearer $TOKEN" '
        f'-H \'Content-Type: application/json\' -d \'{{"model": "{REPO}", "max_tokens": 16, '
        f'"messages": [{{"role": "user", "content": "Hello"}}]}}\''
    )
    say(
        f"  or a port-forward of your own (it prints its local port): {kubectl} -n {namespace} port-forward "
        f"--address 127.0.0.1 pod/{name}-0 :{recipe.ports.http}"
    )


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
    p.add_argument("command", choices=["up", "down", "check-real-node"])
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--real-node",
        action="store_true",
        help="serve alice's order for a tiny model with llama.cpp on a real node (root), in the "
        "foreground until Ctrl-C; everything stops on exit",
    )
    p.add_argument(
        "--orders",
        type=int,
        default=1,
        help="with --real-node: this many orders for the tiny model, shares of the node's one card",
    )
    p.add_argument(
        "--exit-after-ready",
        action="store_true",
        help="with --real-node: stop right after the chat completion instead of serving",
    )
    args = p.parse_args(argv)
    if args.command == "check-real-node":
        why = check_real_node(image=False)  # `nox -s up` builds the image next
        if why:
            say(f"cannot start the real node: {why}")
        return 2 if why else 0
    if args.command == "down":
        return down(args.state_dir)
    if args.real_node:
        return up_real_node(args.timeout, serve=not args.exit_after_ready, orders=max(1, args.orders))
    return up(args.state_dir, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
