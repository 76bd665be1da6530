"""Small typed helpers around the kubernetes client."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config


def api_client(kubeconfig: str | Path) -> k8s.ApiClient:
    """An ApiClient for a kubeconfig file (its own Configuration, never the global default)."""
    loader: Any = k8s_config  # its loader functions are untyped in some client releases
    return cast(k8s.ApiClient, loader.new_client_from_config(config_file=str(kubeconfig)))
