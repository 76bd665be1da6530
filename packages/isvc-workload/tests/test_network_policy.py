"""Issue 29: the order's runtime pods admit the controller's probes, the endpoint's callers (the ingress
controller for External, the order's namespace for ClusterLocal) and monitoring, and no one else.

The local test bed's pods are simulated (KWOK) and its real node's CNI (the reference bridge plugin) does not
enforce NetworkPolicy, so the rendered policy is judged here by the rules of networking.k8s.io/v1
(isvc_testing.admits), source by source and port by port.
"""

from __future__ import annotations

import pytest
from isvc_api import LABEL_ORDER, Exposure, ExposureType
from isvc_testing import Endpoint, admits
from isvc_workload import WorkloadSettings, network_policy
from workload_builders import make_inputs

SETTINGS = WorkloadSettings(public_domain_template="%s.example.com", controller_namespace="d8-isvc")
API, METRICS = 8000, 9100


def _ns(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


RUNTIME = Endpoint(
    "team", {LABEL_ORDER: "llm-a", "app": "x"}, _ns("team"), ports={"http": API, "metrics": METRICS}
)
SOURCES = {
    "controller": Endpoint("d8-isvc", {"app": "isvc-controller"}, _ns("d8-isvc")),
    "planner": Endpoint("d8-isvc", {"app": "isvc-planner"}, _ns("d8-isvc")),
    "ingress controller": Endpoint("d8-ingress-nginx", {"app": "controller"}, _ns("d8-ingress-nginx")),
    "monitoring": Endpoint("d8-monitoring", {"app": "prometheus"}, _ns("d8-monitoring")),
    "own namespace": Endpoint("team", {"app": "client"}, _ns("team")),
    "another tenant": Endpoint("team-b", {"app": "isvc-controller"}, _ns("team-b")),
    "a pod faking the controller's namespace label": Endpoint(
        "team-b", {"app": "isvc-controller"}, {**_ns("team-b"), "name": "d8-isvc"}
    ),
}


@pytest.mark.parametrize(
    ("exposure", "admitted"),
    [
        (ExposureType.EXTERNAL, {("controller", API), ("ingress controller", API), ("monitoring", METRICS)}),
        (ExposureType.CLUSTER_LOCAL, {("controller", API), ("own namespace", API), ("monitoring", METRICS)}),
    ],
)
def test_only_the_controller_the_callers_and_monitoring_reach_the_runtime_issue_29(
    exposure: ExposureType, admitted: set[tuple[str, int]]
) -> None:
    inputs = make_inputs(exposure=Exposure(type=exposure))
    runtime = inputs.runtime.model_copy(
        update={
            "ports": [
                p.model_copy(update={"container_port": METRICS}) if p.name == "metrics" else p
                for p in inputs.runtime.ports
            ]
        }
    )
    policy = network_policy(inputs.model_copy(update={"runtime": runtime}), SETTINGS)

    found = {
        (who, port)
        for who, src in SOURCES.items()
        for port in (API, METRICS)
        if admits([policy], src, RUNTIME, port)
    }

    assert found == admitted


def test_metrics_served_on_the_api_port_are_scraped_there() -> None:
    policy = network_policy(
        make_inputs(), SETTINGS
    )  # vLLM: /metrics on its API port, which the pod lists once
    runtime = Endpoint("team", {LABEL_ORDER: "llm-a"}, _ns("team"), ports={"http": API})

    assert admits([policy], SOURCES["monitoring"], runtime, API)
    assert not admits([policy], SOURCES["another tenant"], runtime, API)


def test_the_policy_selects_the_orders_pods_alone() -> None:
    policy = network_policy(make_inputs(), SETTINGS)
    other = Endpoint("team", {LABEL_ORDER: "llm-b"}, _ns("team"), ports={"http": API})

    assert admits([policy], SOURCES["another tenant"], other, API)  # not this policy's to judge
    assert policy["spec"]["podSelector"] == {"matchLabels": {LABEL_ORDER: "llm-a"}}
