"""Where the pinned control-plane binaries live; mirrors the path logic of e2e/tools/build-bins.sh."""

from __future__ import annotations

import os
from pathlib import Path

from isvc_testbed._errors import BinariesMissing

K8S_VERSION = os.environ.get("ISVC_K8S_VERSION", "1.36.3")

REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kwok-stages.yaml",
)
BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "build-bins.sh"


def bin_dir() -> Path:
    """The build script's output: $ISVC_BIN_DIR, else $ISVC_CACHE_DIR/bin (~/.cache/isvc-testbed/bin)."""
    explicit = os.environ.get("ISVC_BIN_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("ISVC_CACHE_DIR") or Path.home() / ".cache" / "isvc-testbed") / "bin"


def require_bins(directory: Path | None = None) -> Path:
    """Return the bin dir when every binary the cluster needs is there, else say how to build them."""
    d = directory or bin_dir()
    missing = [name for name in REQUIRED if not (d / name).is_file()]
    if missing:
        raise BinariesMissing(
            f"missing in {d}: {', '.join(missing)}; build them with `bash {BUILD_SCRIPT}` "
            "(about 30 minutes cold, needs go and the Go module proxy)"
        )
    return d
