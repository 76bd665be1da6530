"""A stand-in volume provisioner: every claim of the test bed's StorageClass gets a matching volume.

The real PV controller binds the claim to it and the real scheduler places the pod, as a CSI provisioner would
have them do; the volume is a hostPath no KWOK node ever mounts. Run it as `python -m isvc_testbed.volumes
--kubeconfig PATH` (the module's processes start it) or as a thread (`Provisioner(api).start()`).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

__all__ = ["PROVISIONER", "STORAGE_CLASS", "Provisioner", "ensure_storage_class", "volume_for"]

STORAGE_CLASS = "isvc-testbed"
PROVISIONER = "volumes.isvc-testbed.local"  # no driver of that name exists: nothing else provisions these
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
WATCH_SECONDS = 60

log = logging.getLogger(__name__)


def ensure_storage_class(api: k8s.ApiClient) -> None:
    """The test bed's StorageClass (Immediate binding: a claim is bound before its pod is scheduled)."""
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
    try:
        k8s.StorageV1Api(api).create_storage_class(cast(Any, body))
    except ApiException as exc:
        if exc.status != 409:
            raise


def _volume_name(claim: dict[str, Any]) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def volume_for(claim: dict[str, Any], host_dir: Path | None = None) -> dict[str, Any]:
    """The PersistentVolume for a claim: its size and access modes, pre-bound to it (as provisioners do).

    With `host_dir` (a real node runs the pods) the volume is a directory made there beforehand, writable by
    any user: a hostPath gets no fsGroup, and the workload's containers run as a non-root user.
    """
    meta, spec = claim["metadata"], claim["spec"]
    path = f"/var/lib/isvc-testbed/{_volume_name(claim)}"
    if host_dir is not None:
        path = str(host_dir / _volume_name(claim))
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": _volume_name(claim), "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": path, "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


class Provisioner:
    """Watches claims of the test bed's class: a volume for each unbound one, deleted with its claim."""

    def __init__(self, api: k8s.ApiClient, host_dir: Path | None = None) -> None:
        self.core = k8s.CoreV1Api(api)
        self.host_dir = host_dir
        self.api = api
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.provisioned = 0

    def start(self) -> Provisioner:
        ensure_storage_class(self.api)
        self._thread = threading.Thread(target=self.run, name="isvc-testbed-volumes", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WATCH_SECONDS + 5)

    def run(self) -> None:
        """Watch until stopped; a broken watch lists again (every claim is looked at once more)."""
        while not self._stop.is_set():
            try:
                self._watch()
            except Exception as exc:  # the API server restarts in some tests: list and watch again
                log.warning("volume provisioner: %s; watching again", exc)
                self._stop.wait(1.0)

    def _watch(self) -> None:
        listed = self.core.list_persistent_volume_claim_for_all_namespaces()
        for claim in listed.items:
            self._on("ADDED", self.api.sanitize_for_serialization(claim))
        stream = watch.Watch().stream(
            self.core.list_persistent_volume_claim_for_all_namespaces,
            resource_version=cast(Any, listed.metadata).resource_version,
            timeout_seconds=WATCH_SECONDS,
        )
        for event in stream:
            self._on(event["type"], event["raw_object"])
            if self._stop.is_set():
                return

    def _on(self, kind: str, claim: dict[str, Any]) -> None:
        if (claim.get("spec") or {}).get("storageClassName") != STORAGE_CLASS:
            return
        if kind == "DELETED":
            self._delete(_volume_name(claim))
            if self.host_dir is not None:
                shutil.rmtree(self.host_dir / _volume_name(claim), ignore_errors=True)
        elif not claim["spec"].get("volumeName") and not claim["metadata"].get("deletionTimestamp"):
            if self.host_dir is not None:
                made = self.host_dir / _volume_name(claim)
                made.mkdir(parents=True, exist_ok=True)
                made.chmod(0o1777)
            try:
                self.core.create_persistent_volume(cast(Any, volume_for(claim, self.host_dir)))
                self.provisioned += 1
            except ApiException as exc:
                if exc.status != 409:
                    raise

    def _delete(self, name: str) -> None:
        """The claim went: its volume goes too (reclaim policy Delete; pv-protection waits for unbinding)."""
        try:
            self.core.delete_persistent_volume(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m isvc_testbed.volumes --kubeconfig PATH`: provision until SIGTERM."""
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.volumes", description=__doc__)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument(
        "--host-dir",
        type=Path,
        default=None,
        help="make each volume a directory here (a real node mounts them), writable by any user",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    provisioner = Provisioner(k8s_config.new_client_from_config(config_file=args.kubeconfig), args.host_dir)
    signal.signal(signal.SIGTERM, lambda *_: provisioner._stop.set())
    provisioner.start()
    while provisioner._thread is not None and provisioner._thread.is_alive():
        provisioner._thread.join(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
