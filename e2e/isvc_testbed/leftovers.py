"""What a real node left on this machine, read from outside the process that ran it: its processes, mounts,
network namespace and link, cgroups, container log links and work dir (the demo's teardown test, issue 45)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path

from isvc_testbed.realnode import NodeNames, cgroup_roots, node_names

__all__ = ["command", "node_processes", "node_traces", "process_start"]

LOG_LINKS = Path("/var/log/containers")


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (to tell it from a later one with its pid), or None
    when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def _names(netns: str) -> NodeNames:
    """The host's names of the real node whose network namespace is `netns`."""
    m = re.fullmatch(r"isvc-tb-(\d+)-(\d+)", netns)
    if m is None:
        raise ValueError(f"{netns!r} is not a real node's network namespace (isvc-tb-<index>-<pid>)")
    return node_names(int(m[1]), int(m[2]))


def _cgroups(netns: str) -> list[Path]:
    """The node's cgroup in each hierarchy that still has it."""
    cgroup = _names(netns).cgroup
    return [root / cgroup for root in cgroup_roots() if (root / cgroup).is_dir()]


def node_processes(workdir: Path, netns: str) -> dict[int, int]:
    """Live processes whose command line names the work dir (the control plane, containerd and its shims, the
    kubelet, the module's processes) or that run in the node's cgroups (the pods): pid → start time."""
    pids = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()} - {os.getpid()}
    named = {pid for pid in pids if re.search(re.escape(bytes(workdir)) + rb"(/|\0)", _cmdline(pid))}
    for top in _cgroups(netns):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                named |= {int(p) for p in procs.read_text().split()}
    return {pid: start for pid in sorted(named) if (start := process_start(pid)) is not None}


def command(pid: int) -> str:
    """The process's command line, as ps shows it (cut at 160 characters)."""
    return _cmdline(pid).replace(b"\0", b" ").decode(errors="replace").strip()[:160]


def _mounts(workdir: Path, netns: str) -> list[str]:
    """Mount points under the work dir (containerd's rootfs, shm, the pods' volumes) and the namespace's own."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
        if point == str(workdir) or point.startswith(f"{workdir}/") or point == f"/run/netns/{netns}":
            points.append(f"mount {point}")
    return points


def node_traces(workdir: Path, netns: str) -> dict[str, list[str]]:
    """Every trace of the real node of `workdir` (the cluster's work dir) whose namespace is `netns`, by kind:
    all empty once its teardown did its work."""
    host_link = _names(netns).host_link
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    log_links = [
        f"log link {link}"
        for link in (LOG_LINKS.iterdir() if LOG_LINKS.is_dir() else [])
        if link.is_symlink() and str(link.readlink()).startswith(f"{workdir}/")
    ]
    return {
        "process": [f"process {pid}: {command(pid)}" for pid in node_processes(workdir, netns)],
        "mount": _mounts(workdir, netns),
        "netns": [f"netns {netns}"] if netns in {ln.split()[0] for ln in listed.splitlines() if ln} else [],
        "link": [f"link {host_link}"] if re.search(rf"^\d+: {host_link}[@:]", links, re.M) else [],
        "cgroup": [f"cgroup {d}" for d in _cgroups(netns)],
        "log link": log_links,
        "work dir": [f"work dir {workdir}"] if workdir.exists() else [],
    }
