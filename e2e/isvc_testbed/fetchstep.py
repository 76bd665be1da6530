"""An order's download step, run on the host as the kubelet would run the pod's init container (issue 46).

KWOK runs no container, so a test that needs the bytes to move plays the kubelet for this one container: it
reads the pod's `fetch-model` init container from the API server (its command and environment as the
controller compiled them, a `secretKeyRef` read as the administrator, as the kubelet resolves it) and runs
that command here with the host's `hf` (the e2e environment's huggingface_hub, the version the model fetcher
image pins), the volume's mount path `/models` mapped to a directory of the host. The endpoints in its
environment are the bed's: the stand-in Hub and the model cache on loopback, as the controller was told.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isvc_workload import FETCH_CONTAINER_NAME, MODEL_MOUNT_PATH
from kubernetes import client as k8s

__all__ = ["FetchStep", "fetch_step"]


@dataclass
class FetchStep:
    """The download step of one pod: its command and environment, as the API server holds them."""

    pod: str
    command: list[str]
    env: dict[str, str]

    def run(self, volume: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
        """Run the step with `/models` at `volume` (a directory of the host); `env` overrides its variables."""
        volume.mkdir(parents=True, exist_ok=True)

        def mapped(text: str) -> str:
            return str(volume) + text[len(MODEL_MOUNT_PATH) :] if text.startswith(MODEL_MOUNT_PATH) else text

        values = {k: mapped(v) for k, v in {**self.env, **env}.items()}
        values["HF_HOME"] = str(volume.parent / f"{volume.name}-hf-home")  # the pod's own /tmp
        values["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return subprocess.run(
            [mapped(a) for a in self.command],
            env=values,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _value(core: k8s.CoreV1Api, namespace: str, var: Any) -> str:
    if var.value_from is None:
        return str(var.value or "")
    ref = var.value_from.secret_key_ref
    secret: Any = core.read_namespaced_secret(ref.name, namespace)
    return base64.b64decode(secret.data[ref.key]).decode()


def fetch_step(admin: k8s.ApiClient, namespace: str, pod: str) -> FetchStep:
    """The `fetch-model` init container of the pod, its environment resolved as the kubelet resolves it."""
    core = k8s.CoreV1Api(admin)
    spec: Any = core.read_namespaced_pod(pod, namespace).spec
    [init] = [c for c in spec.init_containers or [] if c.name == FETCH_CONTAINER_NAME]
    env = {var.name: _value(core, namespace, var) for var in init.env or []}
    return FetchStep(pod, list(init.command), env)
