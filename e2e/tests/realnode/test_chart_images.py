"""The module's planner image (`nox -s images`) runs as a real pod with the chart's own container spec.

The chart is rendered with `helm template`; its planner container (args, ports, probes, security context) is
kept as is, only placed on the real node and pointed at the locally imported image. It must reach Ready, and
its /readyz must answer through the API server's pod proxy.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_testbed import bin_dir
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.helpers import wait_for
from isvc_testbed.module import chart_values
from isvc_testbed.realnode import REAL_NODE_LABEL, REAL_NODE_TOLERATION
from kubernetes import client as k8s

ROOT = Path(__file__).resolve().parents[3]
IMAGES = Path.home() / ".cache" / "isvc-testbed" / "images"


def _newest(name: str) -> Path:
    found = sorted(IMAGES.glob(f"{name}-*.oci.tar"), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.fail(f"no {name} image in {IMAGES}: build the images with `nox -s images`", pytrace=False)
    return found[-1]


def _rendered(kind: str, name: str, images: dict[str, str]) -> dict[str, Any]:
    values = chart_values({"images": images})
    values["isvc"]["internal"] = {"estimateWebhookURL": "https://127.0.0.1:1/estimate",
                                  "webhookCert": {"crt": "x", "key": "x", "ca": "x"}}
    done = subprocess.run([str(bin_dir() / "helm"), "template", "isvc", str(ROOT / "module"), "--namespace",
                           "d8-isvc", "--values", "-"], input=yaml.safe_dump(values), capture_output=True,
                          text=True, check=True)
    for doc in yaml.safe_load_all(done.stdout):
        if doc and doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return dict(doc)
    raise AssertionError(f"the chart renders no {kind} {name}")


def test_the_planner_image_runs_with_the_charts_arguments_and_answers_readyz(cluster: Cluster,
                                                                          admin_api: k8s.ApiClient) -> None:
    archive = _newest("planner")
    image = yaml.safe_load(subprocess.run(["tar", "-xOf", str(archive), "index.json"], capture_output=True,
                                          check=True).stdout)["manifests"][0]["annotations"][
        "org.opencontainers.image.ref.name"]
    cluster.node.ctr("images", "import", "--platform", "linux/amd64", str(archive))
    # the planner watches orders and classes (their priorities): the module's CRDs must be served
    crds = [p for p in (ROOT / "module" / "crds").glob("*.yaml") if not p.name.startswith("doc-ru-")]
    install_crds(admin_api, sorted(crds))
    deployment = _rendered("Deployment", "isvc-planner", {"planner": image})
    spec = deployment["spec"]["template"]["spec"]
    container = next(c for c in spec["containers"] if c["name"] == "planner")
    container["imagePullPolicy"] = "Never"
    core = k8s.CoreV1Api(admin_api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "planner"}})  # type: ignore[arg-type]
    # the chart's own ClusterRole for the planner, bound to this ServiceAccount
    rbac = k8s.RbacAuthorizationV1Api(admin_api)
    role = _rendered("ClusterRole", "d8:isvc:planner", {"planner": image})
    rbac.create_cluster_role(role)  # type: ignore[arg-type]
    rbac.create_cluster_role_binding({  # type: ignore[arg-type]
        "metadata": {"name": "d8:isvc:planner"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "d8:isvc:planner"},
        "subjects": [{"kind": "ServiceAccount", "name": "planner", "namespace": "default"}],
    })
    # the chart's pod spec as rendered (volumes, security context, probes...), placed on the real node
    spec.pop("priorityClassName", None)  # the module's PriorityClass is Deckhouse's
    spec.pop("imagePullSecrets", None)
    spec.pop("affinity", None)
    spec["serviceAccountName"] = "planner"
    spec["nodeSelector"] = {REAL_NODE_LABEL: "true"}
    spec["tolerations"] = [REAL_NODE_TOLERATION]
    spec["terminationGracePeriodSeconds"] = 1
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "planner"}, "spec": spec}
    core.create_namespaced_pod("default", pod)  # type: ignore[arg-type]

    def ready() -> bool:
        p = core.read_namespaced_pod("planner", "default")
        conds = (p.status.conditions if p.status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conds)

    try:
        wait_for(ready, 120, what="the planner pod Ready on the real node")
    except TimeoutError:
        status = core.read_namespaced_pod("planner", "default").status
        events = core.list_namespaced_event("default", field_selector="involvedObject.name=planner")
        notes = [f"{e.reason}: {e.message}" for e in events.items]
        try:
            log = core.read_namespaced_pod_log("planner", "default", tail_lines=20)
        except k8s.ApiException as e:
            log = str(e)
        states = status.container_statuses if status else None
        raise AssertionError(f"planner not Ready: {states}\nevents: {notes}\nlog: {log}") from None
    body = core.connect_get_namespaced_pod_proxy_with_path("planner:8080", "default", "readyz")
    assert "ok" in str(body)
