"""One real node beside the KWOK fleet: kubelet + containerd + runc, confined to a network namespace.

Network rule: the node's address sits on a veth inside a network namespace the test bed makes
(`isvc-tb-<id>`); kubelet and containerd run in that namespace (nsenter --net, no other namespace changes),
so the CNI bridge, the pods and the kubelet's port 10250 all live there. The kubelet reaches the API server
through `_nsbridge` (a listener inside the namespace relaying to the host's 127.0.0.1); the API server reaches
the kubelet on the node's InternalIP (never by name). No masquerade; forwarded traffic leaving the namespace
is dropped; pods get a resolv.conf without nameservers. Images are local: busybox and the pause image are
built from local files with umoci and imported with ctr, never pulled.

The node is tainted `isvc-testbed/real-node=true:NoSchedule` and labelled `isvc-testbed/real-node=true`:
only pods that tolerate the taint (and select the label) land there; KWOK never manages it. `untainted()`
lifts the taint for a while: the planner counts the devices of a tainted node as closed, and an order's pods
carry no toleration, so an order placed on this node's card needs it lifted.

DRA: the fake GPU driver's kubelet plugin (`isvc-dra-plugin`, e2e/tools/dra-plugin) registers with this
kubelet as `gpu.nvidia.com` and publishes the node's simulated card itself (the kubelet deletes the slices of
a driver whose plugin is not registered), in the KWOK fleet's shape (`Fleet.render_devices`): one shareable
`NVIDIA T4` (ConsumableShares N=100, 16Gi) by default. It prepares a claim by writing a CDI spec into the
directory containerd reads (`enable_cdi`): the container gets `ISVC_TESTBED_GPU_0_UUID` and
`NVIDIA_VISIBLE_DEVICES` set to the card's uuid; unpreparing removes the spec and the plugin's record.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Self

import yaml
from kubernetes import client as k8s

from isvc_testbed._errors import BinariesMissing, StartTimeout, TestbedError
from isvc_testbed._kube import api_client
from isvc_testbed.fleet import DRIVER, Device, Fleet, GpuGroup, Installation, NodeSpec

__all__ = [
    "REAL_NODE_DRIVER",
    "REAL_NODE_GPU",
    "REAL_NODE_GPU_SELECTOR",
    "REAL_NODE_LABEL",
    "REAL_NODE_NAME",
    "REAL_NODE_TAINT",
    "REAL_NODE_TOLERATION",
    "NodeNames",
    "OrderForwarder",
    "PodForwarder",
    "RealNode",
    "build_image",
    "busybox_image",
    "cgroup_roots",
    "gpu_pool",
    "llama_server_image",
    "node_names",
    "port_forward",
]

REAL_NODE_NAME = "isvc-real-node"
REAL_NODE_LABEL = "isvc-testbed/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
REAL_NODE_TOLERATION = {"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
BUSYBOX_IMAGE = "localhost/busybox:isvc-testbed"
PAUSE_IMAGE = "localhost/isvc-pause:isvc-testbed"
REALNODE_BINS = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "isvc-pause", "isvc-dra-plugin")
# The real node's simulated card, in the fleet's shape. NVIDIA T4: 16 GB GDDR6 (NVIDIA T4 datasheet,
# https://www.nvidia.com/en-us/data-center/tesla-t4/), compute capability 7.5
# (https://developer.nvidia.com/cuda-gpus). No fleet file has it, so a productName selector keeps to it.
REAL_NODE_GPU = GpuGroup(
    product="NVIDIA T4", count=1, memory="16Gi", architecture="Turing", compute_capability="7.5"
)
# The driver installation the real node's plugin stands for: the default fleet's (main, consumableShares 100).
REAL_NODE_DRIVER = Installation(release="main", consumable_shares="100")
REAL_NODE_GPU_SELECTOR = (
    f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].productName == '{REAL_NODE_GPU.product}'"
)
DEBIAN_TOOLS = {
    "runc": "/usr/sbin/runc",
    "umoci": "/usr/bin/umoci",
    "bridge": "/usr/lib/cni/bridge",
    "busybox": "/bin/busybox",
    "nsenter": "/usr/bin/nsenter",
    "ip": "/usr/sbin/ip",
    "iptables": "/usr/sbin/iptables",
}
CNI_BIN_DIR = "/usr/lib/cni"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service (cluster.SERVICE_CIDR's first address)
_MNT_DETACH = 2


def require_realnode_bins(bin_dir: Path) -> None:
    """Raise BinariesMissing unless the real node's binaries and Debian tools are there."""
    missing = [n for n in REALNODE_BINS if not (bin_dir / n).is_file()]
    missing += [path for path in DEBIAN_TOOLS.values() if not Path(path).exists()]
    if missing:
        script = Path(__file__).resolve().parent.parent / "tools" / "build-bins.sh"
        raise BinariesMissing(
            f"the real node needs {', '.join(missing)}; run `bash {script} realnode` "
            "(as root: it installs runc, CNI plugins, umoci, busybox-static with apt-get)"
        )


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout}")
    return proc


def _cache_dir() -> Path:
    cache = Path(os.environ.get("ISVC_CACHE_DIR") or Path.home() / ".cache" / "isvc-testbed")
    return cache / "realnode-images"


def build_image(
    name: str,
    files: dict[str, Path],
    symlinks: dict[str, str],
    cmd: Sequence[str],
    entrypoint: Sequence[str] = (),
) -> Path:
    """An OCI archive (cached by content) of a one-layer image made of local files with umoci; no registry.

    `files` maps a path in the image to a local file, `symlinks` a path in the image to its target.
    """
    recipe = [name, sorted(symlinks.items()), list(cmd), list(entrypoint)]
    digest = hashlib.sha256(json.dumps(recipe).encode())
    for dest, src in sorted(files.items()):
        digest.update(dest.encode())
        digest.update(src.read_bytes())
    out = _cache_dir() / f"{name.replace('/', '_').replace(':', '_')}-{digest.hexdigest()[:16]}.tar"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = name.rsplit(":", 1)[1]
    with tempfile.TemporaryDirectory(prefix="isvc-image-") as tmp:
        layout, bundle = Path(tmp) / "layout", Path(tmp) / "bundle"
        _run(["umoci", "init", "--layout", str(layout)])
        _run(["umoci", "new", "--image", f"{layout}:{tag}"])
        _run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)])
        root = bundle / "rootfs"
        for dest, src in files.items():
            target = root / dest.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        for dest, link in symlinks.items():
            target = root / dest.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(link)
        for d in ("tmp", "etc", "proc", "sys", "dev"):
            (root / d).mkdir(exist_ok=True)
        (root / "tmp").chmod(0o1777)
        _run(["umoci", "repack", "--image", f"{layout}:{tag}", str(bundle)])
        config = ["umoci", "config", "--image", f"{layout}:{tag}", "--os", "linux", "--architecture", "amd64"]
        for c in cmd:
            config += ["--config.cmd", c]
        for e in entrypoint:
            config += ["--config.entrypoint", e]
        _run(config)
        _run(["umoci", "gc", "--layout", str(layout)])
        partial = out.with_suffix(".partial")
        _run(["tar", "-C", str(layout), "-cf", str(partial), "."])
        partial.rename(out)
    return out


def busybox_image() -> Path:
    """busybox-static's binary with its applets as symlinks, `sh` by default (BUSYBOX_IMAGE)."""
    applets = _run([DEBIAN_TOOLS["busybox"], "--list-full"]).stdout.split()
    links = {f"/{a}": "/bin/busybox" for a in applets if a != "bin/busybox"}
    return build_image(BUSYBOX_IMAGE, {"/bin/busybox": Path(DEBIAN_TOOLS["busybox"])}, links, ["sh"])


def llama_server_image(bin_dir: Path, name: str, command: Sequence[str]) -> Path:
    """llama.cpp's server (`build-bins.sh realnode`: static, CPU only) as the image `name`, at the path the
    recipe's `command` runs (e.g. /app/llama-server): the image the llamacpp-chat recipe names, made here.

    With busybox's `sh` and `sleep`, as the published image (Ubuntu) has them: a runtime on a share of a card
    starts behind the module's start gate, a few lines of sh."""
    binary = bin_dir / "llama-server"
    if not binary.is_file():
        script = Path(__file__).resolve().parent.parent / "tools" / "build-bins.sh"
        raise BinariesMissing(f"no {binary}; run `bash {script} realnode` (builds llama.cpp's server)")
    files = {command[0]: binary, "/bin/busybox": Path(DEBIAN_TOOLS["busybox"])}
    links = {"/bin/sh": "/bin/busybox", "/bin/sleep": "/bin/busybox"}
    return build_image(name, files, links, [], list(command))


def pause_image(bin_dir: Path) -> Path:
    """The sandbox image: the test bed's own static pause binary (e2e/tools/pause)."""
    return build_image(PAUSE_IMAGE, {"/pause": bin_dir / "isvc-pause"}, {}, [], ["/pause"])


@contextlib.contextmanager
def port_forward(
    kubeconfig: Path, namespace: str, pod: str, port: int, timeout: float = 30.0
) -> Iterator[int]:
    """`kubectl port-forward` to a pod's port through the API server, listening on 127.0.0.1 only; yields
    the local port (the host reaches the real node's pods this way, never by their addresses)."""
    from isvc_testbed._bins import bin_dir

    proc = subprocess.Popen(
        [
            str(bin_dir() / "kubectl"),
            f"--kubeconfig={kubeconfig}",
            "-n",
            namespace,
            "port-forward",
            "--address",
            "127.0.0.1",
            f"pod/{pod}",
            f":{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise TestbedError(f"kubectl port-forward to {namespace}/{pod}:{port} ended: {''.join(seen)}")
            seen.append(line)
            found = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) ->", line)
            if found:
                yield int(found.group(1))
                return
        raise TestbedError(
            f"kubectl port-forward to {namespace}/{pod}:{port} did not listen: {''.join(seen)}"
        )
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class PodForwarder:
    """127.0.0.1:<port> on the host, each connection carried to `pod:port` by the API server's port-forward.

    Unlike `port_forward` it listens before the pod exists and outlives its restarts: every connection asks
    for the pod anew (a connection while there is none is closed at once, as a refused dial would be). How
    a controller running on the host probes a real pod through the API server (its own Authorization header
    goes to the runtime untouched, which a service proxy would not allow).
    """

    def __init__(self, api: k8s.ApiClient, namespace: str, pod: str, port: int) -> None:
        self.api, self.namespace, self.pod, self.target = api, namespace, pod, port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"forward-{pod}")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        from kubernetes.stream import portforward

        # a client of its own: the port-forward call swaps its client's call_api while it runs (kubernetes.stream),
        # so a client shared with other threads would send their requests down a websocket
        own = k8s.ApiClient(self.api.configuration)
        core = k8s.CoreV1Api(own)
        with conn, own:
            try:
                pod = core.read_namespaced_pod(self.pod, self.namespace)
                if pod.status is None or pod.status.phase != "Running":
                    return  # nothing to forward to: the caller sees its connection closed
                forward: Any = portforward(
                    core.connect_get_namespaced_pod_portforward,
                    self.pod,
                    self.namespace,
                    ports=str(self.target),
                )
            except (k8s.ApiException, OSError, ValueError):
                return
            _carry_over(conn, forward, self.target)


def _carry_over(conn: socket.socket, forward: Any, target: int, first: bytes = b"") -> None:
    """Carry `conn` both ways through a kubernetes client port-forward to `target` (after sending `first`) until
    either side stops sending, then release the forward."""
    try:
        try:
            remote: socket.socket = forward.socket(target)
            remote.setblocking(True)
            remote.sendall(first)
        except OSError:
            return  # the server ended the stream (the pod's port not open yet): the caller sees its connection close
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            done.set()

        threading.Thread(target=pump, args=(conn, remote), daemon=True).start()
        threading.Thread(target=pump, args=(remote, conn), daemon=True).start()
        done.wait()
    finally:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)  # the caller sees the end now, not after the release
        _release(forward)


def _release(forward: Any, timeout: float = 5.0) -> None:
    """Close a kubernetes client port-forward without racing its proxy thread.

    The client's `close()` closes only our half of each socket pair; its proxy thread then closes its own half
    and the websocket (kubernetes/stream/ws_client.py PortForward._proxy). It returns without closing the
    websocket when the server ended the stream, and closing the websocket while the thread still selects on it
    kills the thread (ValueError) with its halves left open, so: wait for the thread to close its halves and the
    websocket, then close whatever it left.
    """
    forward.close()
    ports = list(forward.local_ports.values())
    deadline = time.monotonic() + timeout
    while any(p.python.fileno() != -1 for p in ports) and time.monotonic() < deadline:
        time.sleep(0.02)
    settle = time.monotonic() + 1.0  # from its halves to the websocket the thread takes one more turn
    while forward.websocket.connected and time.monotonic() < min(settle, deadline):
        time.sleep(0.02)
    for p in ports:
        p.python.close()
    with contextlib.suppress(Exception):
        forward.websocket.shutdown()


_HEAD_LIMIT = 64 * 1024


def _read_head(conn: socket.socket) -> bytes | None:
    """An HTTP request's head and whatever of its body came with it; None when it is not one."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None
        data += chunk
    return data


def routed(data: bytes) -> tuple[str, str, bytes] | None:
    """(namespace, order, the request for the order's pod) of a request to `/<namespace>/<order>/<path>`: its
    target without the prefix, and `Connection: close`, so that one connection carries one request to one pod."""
    head, _, rest = data.partition(b"\r\n\r\n")
    first, *fields = head.split(b"\r\n")
    parts = first.split(b" ")
    if len(parts) != 3 or not parts[1].startswith(b"/"):
        return None
    segments = parts[1].split(b"/", 3)
    if len(segments) < 3 or not segments[1] or not segments[2]:
        return None
    target = b"/" + (segments[3] if len(segments) > 3 else b"")
    kept = [f for f in fields if not f.lower().startswith(b"connection:")]
    request = b"\r\n".join([b" ".join([parts[0], target, parts[2]]), *kept, b"Connection: close"])
    return segments[1].decode(), segments[2].decode(), request + b"\r\n\r\n" + rest


class OrderForwarder(PodForwarder):
    """127.0.0.1:<port>/<namespace>/<order>/… on the host, each request carried to a running pod of that order
    (a ready one first) by the API server's port-forward: any number of orders behind one port, as the
    controller's probe URL template `http://127.0.0.1:<port>/{namespace}/{name}` and clients address them
    (issue 45: one pod's forwarder carried every order's probe to the first order's pod, and the second order
    read 401). One request a connection: the pod is told `Connection: close`."""

    def __init__(self, api: k8s.ApiClient, port: int) -> None:
        super().__init__(api, "", "", port)

    def template(self) -> str:
        """The controller's --probe-url-template for this forwarder."""
        return f"http://127.0.0.1:{self.port}/{{namespace}}/{{name}}"

    def url(self, namespace: str, order: str) -> str:
        return f"http://127.0.0.1:{self.port}/{namespace}/{order}"

    def _pod_of(self, core: k8s.CoreV1Api, namespace: str, order: str) -> str | None:
        from isvc_api import LABEL_ORDER

        pods: list[Any] = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_ORDER}={order}").items
        running = [
            p for p in pods if p.status and p.status.phase == "Running" and not p.metadata.deletion_timestamp
        ]
        ready = [
            p
            for p in running
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        chosen = sorted(ready or running, key=lambda p: str(p.metadata.name))
        return str(chosen[0].metadata.name) if chosen else None

    def _carry(self, conn: socket.socket) -> None:
        from kubernetes.stream import portforward

        own = k8s.ApiClient(self.api.configuration)
        core = k8s.CoreV1Api(own)
        with conn, own:
            try:
                data = _read_head(conn)
                found = routed(data) if data else None
                pod = self._pod_of(core, found[0], found[1]) if found else None
                if found is None or pod is None:
                    return  # nothing to forward to: the caller sees its connection closed
                forward: Any = portforward(
                    core.connect_get_namespaced_pod_portforward, pod, found[0], ports=str(self.target)
                )
            except (k8s.ApiException, OSError, ValueError):
                return
            _carry_over(conn, forward, self.target, found[2])


def gpu_pool(node: str, gpus: tuple[GpuGroup, ...]) -> tuple[Fleet, NodeSpec]:
    """A one-node fleet holding the real node's cards: what renders them in the fleet's shape."""
    spec = NodeSpec(node, "gpu", "", "", "", {}, (), gpus)
    return Fleet([spec], REAL_NODE_DRIVER), spec


class NodeNames(NamedTuple):
    """What a real node is called on the host: its network namespace, its cgroup (in every hierarchy) and the
    host's end of its veth."""

    netns: str
    cgroup: str
    host_link: str


def node_names(index: int, pid: int) -> NodeNames:
    """The names of the real node with subnet index `index` started by process `pid`."""
    return NodeNames(f"isvc-tb-{index}-{pid}", f"isvc-testbed-{index}-{pid}", f"itb{index}h{pid % 1000}")


def cgroup_roots() -> list[Path]:
    """The root of each cgroup hierarchy: cgroup v2's one, or each v1 controller's."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():  # cgroup v2: one hierarchy
        return [root]
    return [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]


def _free_subnet_index() -> int:
    """An N free for 10.253.N.0/30 (the node link) and 10.254.N.0/24 (its pods) on this host."""
    used = _run(["ip", "-4", "-o", "addr"]).stdout + _run(["ip", "-4", "route"]).stdout
    netns = _run(["ip", "netns", "list"], check=False).stdout
    candidates = list(range(1, 255))
    random.shuffle(candidates)
    for n in candidates:
        if f"10.253.{n}." not in used and f"10.254.{n}." not in used and f"isvc-tb-{n}-" not in netns:
            return n
    raise TestbedError("no free 10.253.N.0/30 for the real node")


@dataclass
class RealNode:
    """A kubelet + containerd node named `name`, registered with the cluster at `api_port` on 127.0.0.1.

    `start_component(name, argv)` is the cluster's way of running a process (own process group, log file,
    dies with the test run); the node tells it which processes are its own so that check() covers them.
    """

    workdir: Path
    bin_dir: Path
    api_port: int
    ca_cert: Path
    node_cert: tuple[Path, Path]
    admin_kubeconfig: Path
    start_component: Callable[[str, list[str]], subprocess.Popen[bytes]]
    stop_components: Callable[[Sequence[str]], None]
    name: str = REAL_NODE_NAME
    timeout: float = 120.0
    log: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))
    gpus: tuple[GpuGroup, ...] = (REAL_NODE_GPU,)

    index: int = field(init=False, default=0)
    netns: str = field(init=False, default="")
    ready_seconds: float = field(init=False, default=0.0)
    _cgroup: str = field(init=False, default="")
    _dir: Path = field(init=False)
    _relays: list[str] = field(init=False, default_factory=list)

    @property
    def node_ip(self) -> str:
        """The node's InternalIP: the veth end inside the test bed's namespace."""
        return f"10.253.{self.index}.2"

    @property
    def pod_subnet(self) -> str:
        return f"10.254.{self.index}.0/24"

    @property
    def containerd_socket(self) -> Path:
        return self._dir / "containerd" / "containerd.sock"

    @property
    def cdi_dir(self) -> Path:
        """Where the DRA plugin writes a prepared claim's CDI spec (`isvc-testbed-<claim uid>.json`)."""
        return self._dir / "cdi"

    @property
    def dra_state_dir(self) -> Path:
        """The DRA plugin's record of each prepared claim (`<claim uid>.json`)."""
        return self._dir / "dra-plugin" / "claims"

    def _gpu_fleet(self) -> tuple[Fleet, NodeSpec]:
        return gpu_pool(self.name, self.gpus)

    def devices(self) -> list[Device]:
        """The devices the DRA plugin publishes for this node (uuids, product, memory): to pin claims to."""
        fleet, _ = self._gpu_fleet()
        return fleet.devices(self.name)

    @contextlib.contextmanager
    def untainted(self) -> Iterator[None]:
        """Lift the node's NoSchedule taint for the block, then put it back: while it is lifted the planner
        counts the node's card as open and an order's pods (no toleration) may run here."""
        self._set_taint(False)
        try:
            yield
        finally:
            self._set_taint(True)

    def _set_taint(self, present: bool) -> None:
        with api_client(self.admin_kubeconfig) as api:
            core = k8s.CoreV1Api(api)
            spec = core.read_node(self.name).spec
            taints = [
                api.sanitize_for_serialization(t)
                for t in (spec.taints if spec else None) or []
                if t.key != REAL_NODE_LABEL
            ]
            taints += [REAL_NODE_TAINT] if present else []
            core.patch_node(self.name, {"spec": {"taints": taints or None}})

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ctr against this node's containerd (namespace k8s.io)."""
        ctr = str(self.bin_dir / "ctr")
        return _run([ctr, "--address", str(self.containerd_socket), "-n", "k8s.io", *args])

    def import_image(self, archive: Path, name: str) -> None:
        """Import an OCI archive as `name` (registry/repo:tag; the tag comes from the archive)."""
        base = name.rsplit(":", 1)[0]
        self.ctr("images", "import", "--base-name", base, "--platform", "linux/amd64", str(archive))

    def relay(self, name: str, listen_port: int, target_port: int) -> str:
        """`node_ip:listen_port` inside the node's namespace, relayed to the host's 127.0.0.1:target_port.

        How pods reach a stand-in that listens on the host's loopback (the Hugging Face hub, the inference
        stand-in): the address is the node's own, inside the test bed's namespace; nothing else is dialled.
        """
        component = f"realnode-relay-{name}"
        self.start_component(
            component,
            [
                sys.executable,
                "-m",
                "isvc_testbed._nsbridge",
                f"/run/netns/{self.netns}",
                str(target_port),
                f"{self.node_ip}:{listen_port}",
            ],
        )
        self._relays.append(component)
        log = self.workdir / "logs" / f"{component}.log"
        self._wait(component, lambda: log.exists() and "nsbridge:" in log.read_text(errors="replace"))
        return f"{self.node_ip}:{listen_port}"

    def forward_dropped(self) -> int:
        """Packets the namespace's FORWARD rule dropped: what its pods sent towards the host's side of the
        veth (the only address a pod could leave by). The suite expects none."""
        ipt = ["ip", "netns", "exec", self.netns, "iptables", "-w"]
        out = _run([*ipt, "-L", "FORWARD", "-v", "-x", "-n"]).stdout
        return sum(
            int(line.split()[0])
            for line in out.splitlines()[2:]
            if line.split() and line.split()[2] == "DROP"
        )

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> RealNode:
        t0 = time.monotonic()
        require_realnode_bins(self.bin_dir)
        if os.geteuid() != 0:
            raise TestbedError("the real node needs root (network namespaces, cgroups, mounts)")
        self._dir = self.workdir / "realnode"
        self._dir.mkdir()
        self.index = _free_subnet_index()
        self.netns, self._cgroup, _ = node_names(self.index, os.getpid())
        self._network()
        self._cgroups()
        self._write_configs()
        ns = ["nsenter", f"--net=/run/netns/{self.netns}", "--"]
        self.start_component(
            "realnode-bridge",
            [
                sys.executable,
                "-m",
                "isvc_testbed._nsbridge",
                f"/run/netns/{self.netns}",
                str(self.api_port),
                f"127.0.0.1:{self.api_port}",
                f"{self.node_ip}:{self.api_port}",
            ],
        )
        self.start_component(
            "containerd",
            [*ns, str(self.bin_dir / "containerd"), "--config", str(self._dir / "containerd.toml")],
        )
        self._wait(
            "containerd",
            lambda: (
                self.containerd_socket.exists()
                and _run(
                    [str(self.bin_dir / "ctr"), "--address", str(self.containerd_socket), "version"],
                    check=False,
                ).returncode
                == 0
            ),
        )
        self.import_image(pause_image(self.bin_dir), PAUSE_IMAGE)
        self.import_image(busybox_image(), BUSYBOX_IMAGE)
        self.start_component(
            "kubelet",
            [
                *ns,
                str(self.bin_dir / "kubelet"),
                f"--config={self._dir / 'kubelet.yaml'}",
                f"--kubeconfig={self._dir / 'kubelet.kubeconfig'}",
                f"--root-dir={self._dir / 'kubelet'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.node_ip}",
                f"--node-labels={REAL_NODE_LABEL}=true",
                "--v=1",
            ],
        )
        self._wait("kubelet", self._node_ready)
        t1 = time.monotonic()
        self._start_dra_plugin(ns)
        self.ready_seconds = time.monotonic() - t0
        self.log(
            f"isvc-testbed: real node {self.name} Ready in {self.ready_seconds:.1f}s at {self.node_ip} "
            f"(netns {self.netns}; DRA plugin registered, slice out in {time.monotonic() - t1:.1f}s)"
        )
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Kubelet, the pods' processes, containerd and its shims, mounts, cgroups, the namespace."""
        if not self.netns:
            return
        self.stop_components(["kubelet", "realnode-dra-plugin"])
        self._kill_cgroup_procs()
        self.stop_components(["containerd"])
        self._kill_shims()
        self._kill_cgroup_procs()
        self.stop_components(["realnode-bridge", *self._relays])
        self._relays.clear()
        self._unmount_under(self._dir)
        self._remove_cgroups()
        self._remove_log_links()
        _run(["ip", "netns", "delete", self.netns], check=False)
        self.netns = ""

    # ---- internals ------------------------------------------------------------------------------------

    def _start_dra_plugin(self, ns: list[str]) -> None:
        """The fake GPU driver's kubelet plugin; returns once the kubelet took it and its slice is out."""
        fleet, spec = self._gpu_fleet()
        devices = self._dir / "dra-plugin" / "devices.json"
        devices.parent.mkdir(parents=True, exist_ok=True)
        devices.write_text(json.dumps(fleet.render_devices(spec), indent=2))
        kubelet_root = self._dir / "kubelet"
        (kubelet_root / "plugins_registry").mkdir(parents=True, exist_ok=True)
        self.start_component(
            "realnode-dra-plugin",
            [
                *ns,
                str(self.bin_dir / "isvc-dra-plugin"),
                f"--kubeconfig={self._dir / 'kubelet.kubeconfig'}",  # the node's credential (NodeRestriction)
                f"--node-name={self.name}",
                f"--driver={DRIVER}",
                f"--devices={devices}",
                f"--registry-dir={kubelet_root / 'plugins_registry'}",
                f"--plugin-dir={kubelet_root / 'plugins' / DRIVER}",
                f"--cdi-dir={self.cdi_dir}",
                f"--state-dir={self.dra_state_dir}",
            ],
        )
        log = self.workdir / "logs" / "realnode-dra-plugin.log"
        self._wait(
            "realnode-dra-plugin",
            lambda: log.exists() and "isvc-dra-plugin: registered" in log.read_text(errors="replace"),
        )
        self._wait("realnode-dra-plugin", self._slice_published)

    def _slice_published(self) -> bool:
        with api_client(self.admin_kubeconfig) as api:
            slices = (
                k8s.ResourceV1Api(api)
                .list_resource_slice(field_selector=f"spec.nodeName={self.name},spec.driver={DRIVER}")
                .items
            )
        return sum(len(s.spec.devices or []) for s in slices) == len(self.devices())

    def _network(self) -> None:
        n, ns = self.index, self.netns
        host_if, node_if = node_names(n, os.getpid()).host_link, f"itb{n}n{os.getpid() % 1000}"
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", node_if])
        _run(["ip", "link", "set", node_if, "netns", ns])
        _run(["ip", "-n", ns, "link", "set", node_if, "name", "eth0"])
        _run(["ip", "addr", "add", f"10.253.{n}.1/30", "dev", host_if])
        _run(["ip", "link", "set", host_if, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{self.node_ip}/30", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # the host reaches the pods (the API server's pod proxy) through the namespace: without this route a
        # dial to a pod IP would follow the host's default route off the machine
        _run(["ip", "route", "add", self.pod_subnet, "via", self.node_ip, "dev", host_if])
        ipt = ["ip", "netns", "exec", ns, "iptables", "-w"]
        # nothing forwarded leaves the namespace but replies (no default route, no masquerade)
        _run(
            [
                *ipt,
                "-A",
                "FORWARD",
                "-o",
                "eth0",
                "-m",
                "conntrack",
                "--ctstate",
                "ESTABLISHED,RELATED",
                "-j",
                "ACCEPT",
            ]
        )
        _run([*ipt, "-A", "FORWARD", "-o", "eth0", "-j", "DROP"])
        # in-cluster clients (KUBERNETES_SERVICE_HOST) reach the API server through the bridge; no kube-proxy
        _run(
            [
                *ipt,
                "-t",
                "nat",
                "-A",
                "PREROUTING",
                "-d",
                f"{SERVICE_IP}/32",
                "-p",
                "tcp",
                "--dport",
                "443",
                "-j",
                "DNAT",
                "--to-destination",
                f"{self.node_ip}:{self.api_port}",
            ]
        )

    def _cgroups(self) -> None:
        """The kubelet's cgroupRoot, made in every hierarchy (kubelet requires it to exist)."""
        for ctl in cgroup_roots():
            d = ctl / self._cgroup
            d.mkdir(exist_ok=True)
            for f in ("cpuset.cpus", "cpuset.mems"):
                if (d / f).exists():
                    (d / f).write_text((ctl / f).read_text())

    def _cgroup_dirs(self) -> list[Path]:
        dirs: list[Path] = []
        for ctl in cgroup_roots():
            top = ctl / self._cgroup
            if top.is_dir():
                dirs += sorted((Path(p) for p, _, _ in os.walk(top)), key=lambda p: -len(p.parts))
        return dirs

    def _kill_cgroup_procs(self) -> None:
        for _ in range(20):
            pids = set()
            for d in self._cgroup_dirs():
                with contextlib.suppress(OSError):
                    pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _remove_cgroups(self) -> None:
        for d in self._cgroup_dirs():
            with contextlib.suppress(OSError):
                d.rmdir()

    def _kill_shims(self) -> None:
        """containerd's shims run detached; end exactly those that name this node's containerd."""
        marker = str(self._dir).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes()
                if b"containerd-shim" in cmd and marker in cmd:
                    os.kill(int(entry.name), signal.SIGKILL)

    def _remove_log_links(self) -> None:
        """The kubelet links every container log into /var/log/containers (a fixed path); drop ours."""
        links = Path("/var/log/containers")
        if not links.is_dir():
            return
        for link in links.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and os.readlink(link).startswith(str(self._dir) + "/"):
                    link.unlink()

    def _unmount_under(self, top: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        prefix = str(top) + "/"
        for _ in range(3):
            points = []
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                mp = line.split()[4].replace("\\040", " ")
                if mp.startswith(prefix):
                    points.append(mp)
            if not points:
                return
            for mp in sorted(points, key=len, reverse=True):
                libc.umount2(mp.encode(), _MNT_DETACH)

    def _write_configs(self) -> None:
        d = self._dir
        for sub in ("containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "cdi", "pod-logs"):
            (d / sub).mkdir(parents=True)
        (d / "resolv.conf").write_text("search cluster.local\noptions ndots:1\n")
        (d / "cni" / "net.d" / "10-isvc-testbed.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "isvc-testbed",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "cni0",
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": self.pod_subnet}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(d / "cni" / "ipam"),
                            },
                        }
                    ],
                },
                indent=2,
            )
        )
        c = d / "containerd"
        cri_rt = '[plugins."io.containerd.cri.v1.runtime"]'
        (d / "containerd.toml").write_text(f"""version = 3
root = "{c / "root"}"
state = "{c / "state"}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.snapshotter.v1.blockfile"]

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.containerd_socket}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

{cri_rt}
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = true
  cdi_spec_dirs = ["{d / "cdi"}"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{DEBIAN_TOOLS["runc"]}"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{d / "cni" / "net.d"}"

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
""")
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "testbed",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.api_port}",
                        "certificate-authority": str(self.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "node",
                    "user": {
                        "client-certificate": str(self.node_cert[0]),
                        "client-key": str(self.node_cert[1]),
                    },
                }
            ],
            "contexts": [{"name": "node", "context": {"cluster": "testbed", "user": "node"}}],
            "current-context": "node",
        }
        (d / "kubelet.kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        (d / "kubelet.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "address": self.node_ip,
                    "port": 10250,
                    "readOnlyPort": 0,
                    "healthzBindAddress": "127.0.0.1",
                    "healthzPort": 10248,
                    "cgroupDriver": "cgroupfs",
                    "cgroupRoot": f"/{self._cgroup}",
                    "failCgroupV1": False,
                    "failSwapOn": False,
                    "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
                    "authentication": {
                        "anonymous": {"enabled": False},
                        "webhook": {"enabled": True},
                        "x509": {"clientCAFile": str(self.ca_cert)},
                    },
                    "authorization": {"mode": "Webhook"},
                    "resolvConf": str(d / "resolv.conf"),
                    "registerWithTaints": [REAL_NODE_TAINT],
                    "podLogsDir": str(d / "pod-logs"),
                    "serializeImagePulls": False,
                    "maxPods": 30,
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "evictionHard": {
                        "memory.available": "1Mi",
                        "nodefs.available": "0%",
                        "imagefs.available": "0%",
                    },
                }
            )
        )

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout
        while not ready():
            if time.monotonic() > deadline:
                log = self.workdir / "logs" / f"{name}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""
                raise StartTimeout(f"{name} not ready after {self.timeout:.0f}s; last log lines:\n{tail}")
            time.sleep(0.3)

    def _node_ready(self) -> bool:
        with api_client(self.admin_kubeconfig) as api:
            try:
                node = k8s.CoreV1Api(api).read_node(self.name)
            except k8s.ApiException:
                return False
        conds = (node.status.conditions if node.status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conds)
