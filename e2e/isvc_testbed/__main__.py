"""CLI: `python -m isvc_testbed up --state-dir DIR` starts a cluster and returns; `down` stops it."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from isvc_testbed.cluster import Cluster, ClusterState, stop_recorded

STATE_FILE = "state.json"


def _up(state_dir: Path, fleet: str | None, kwok: bool = True) -> int:
    state_file = state_dir / STATE_FILE
    if state_file.exists():
        print(f"a cluster is already recorded in {state_file}; run `down` first", file=sys.stderr)
        return 1
    state_dir.mkdir(parents=True, exist_ok=True)
    # the processes must outlive this command: no parent-death signal
    cluster = Cluster(die_with_parent=False, kwok=kwok).start()
    try:
        kubeconfigs = {}
        for ident, path in cluster.kubeconfigs.items():
            kubeconfigs[ident] = str(shutil.copy(path, state_dir / f"{ident}.kubeconfig"))
        if fleet:
            from isvc_testbed.fleet import Fleet

            with cluster.api_client() as api:
                Fleet.load(fleet).publish(api)
        state = replace(cluster.state(), kubeconfigs=kubeconfigs)
        state_file.write_text(state.to_json())
    except BaseException:
        cluster.stop()
        raise
    print(f"export KUBECONFIG={kubeconfigs['admin']}")
    return 0


def _down(state_dir: Path) -> int:
    state_file = state_dir / STATE_FILE
    if not state_file.exists():
        print(f"no cluster recorded in {state_file}", file=sys.stderr)
        return 0
    state = ClusterState.from_json(state_file.read_text())
    stopped = stop_recorded(state)
    for path in state.kubeconfigs.values():
        Path(path).unlink(missing_ok=True)
    state_file.unlink()
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m isvc_testbed`."""
    p = argparse.ArgumentParser(prog="python -m isvc_testbed", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a cluster in the background and record it in the state dir")
    up.add_argument("--state-dir", required=True, type=Path)
    up.add_argument("--fleet", help="also publish this fleet file, e.g. e2e/fleets/default.yaml")
    up.add_argument(
        "--no-kwok",
        dest="kwok",
        action="store_false",
        help="no KWOK: a bare control plane, like a cluster you bring (the suite's --kubeconfig "
        "then runs KWOK itself)",
    )
    down = sub.add_parser("down", help="stop the cluster recorded in the state dir")
    down.add_argument("--state-dir", required=True, type=Path)
    args = p.parse_args(argv)
    if args.command == "up":
        return _up(args.state_dir, args.fleet, args.kwok)
    return _down(args.state_dir)


if __name__ == "__main__":
    raise SystemExit(main())
