"""What serves, told truly (issue 31): a serving order whose class is deleted keeps its endpoint and reads
Degraded — not Pending — with ClassNotFound on its conditions; `kubectl describe` lists its events in the
order they happened, also those of one second; `kubectl isvc why` counts it as serving."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_testbed import bin_dir
from isvc_testbed.cluster import Cluster
from isvc_testbed.orders import GROUP, VERSION, Orders, condition, hf
from isvc_testbed.standin import StandIn
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

QWEN = "Qwen/Qwen2.5-7B-Instruct"
PLUGIN = Path(sys.executable).parent / "kubectl-isvc"
# The order in which one pass reports its conditions (the controller's, and the user guide's).
ORDERED = ["ClassResolved", "ModelResolved", "Planned", "WorkloadReady", "Ready", "ScalingHealthy"]


@pytest.fixture
def bed(module: Any, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str) -> Iterator[Orders]:
    with Orders(module, admin_api, alice_api, team_a) as b:
        yield b


def _described_events(cluster: Cluster, ns: str, name: str) -> list[str]:
    """The condition each event of the order names, as the pinned `kubectl describe` lists them."""
    done = subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            str(cluster.alice_kubeconfig),
            "describe",
            "infsvc",
            name,
            "-n",
            ns,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    events = done.stdout.split("\nEvents:", 1)[1].splitlines()[3:]  # after the header and its rule
    said = [line.split(None, 4)[4] for line in events if len(line.split(None, 4)) == 5]
    return [message.split(":", 1)[0] for message in said]


def test_a_serving_order_whose_class_is_deleted_keeps_serving_and_reads_degraded(
    bed: Orders, cluster: Cluster, standin: StandIn
) -> None:
    bed.create_class(
        "truth-class",
        {
            "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
        },
    )
    name = bed.create("truth", hf(QWEN), "truth-class")
    ready = bed.wait_ready(name)

    # Events of one pass share their second: describe lists them as they were made (issue 31, point 6).
    named = _described_events(cluster, bed.ns, name)
    firsts = [named.index(c) for c in ORDERED if c in named]
    assert firsts == sorted(firsts) and named[0] == "ClassResolved", named
    assert max(i for i, c in enumerate(named) if c == "WorkloadReady") < named.index("Ready"), named

    bed.admin.delete_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", "truth-class")
    status = bed.wait(name, lambda s: s.get("phase") == "Degraded", 30, "Degraded once the class is gone")
    assert (status["reason"], condition(status, "ClassResolved")["reason"]) == (
        "ClassNotFound",
        "ClassNotFound",
    )
    assert condition(status, "Ready")["status"] == "True"  # the endpoint was asked, and answered
    assert status["endpoint"] == ready["endpoint"] and status["resolved"] == ready["resolved"]
    token = base64.b64decode(
        k8s.CoreV1Api(bed.admin_api).read_namespaced_secret(status["authSecretName"], bed.ns).data["token"]
    ).decode()
    models = httpx.get(
        f"{standin.url_for(bed.ns, name)}/v1/models", headers={"Authorization": f"Bearer {token}"}
    )
    assert [m["id"] for m in models.json()["data"]] == [status["resolved"]["servedModel"]] == [QWEN]

    done = subprocess.run(
        [str(PLUGIN), "why", name, "-n", bed.ns, "-o", "json", "--kubeconfig", str(cluster.alice_kubeconfig)],
        env={**os.environ, "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    d = json.loads(done.stdout)
    assert (done.returncode, d["verdict"], d["phase"], d["reason"]) == (
        0,
        "Serving",
        "Degraded",
        "ClassNotFound",
    )
