"""Each Deployment's arguments, as the chart renders them, parse with that binary's own parser (issue 11).

The shipped planner used to exit 2 on the chart's arguments; the test bed ran it with its own. Here the
rendered `args` go through `isvc_planner`'s and `isvc_operator`'s argparse parsers, so a flag the chart
passes and the binary lacks (or a value it refuses) fails CI, in every rendering that changes the args.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import isvc_model_cache
import isvc_operator
import pytest
from isvc_planner._cli import parser as planner_parser

VALUES = Path(__file__).resolve().parents[2] / "module" / "tests" / "values"
PLAIN = VALUES / "plain.yaml"
DECKHOUSE = VALUES / "deckhouse.yaml"

PARSERS = {
    "controller": isvc_operator.parser,
    "planner": planner_parser,
    "model-cache": isvc_model_cache.parser,
}
RENDERINGS = {
    "plain defaults": ((), PLAIN),
    "Deckhouse, every optional API": ((), DECKHOUSE),
    "catalog off, own domain, fetch image, Warn": (
        (
            'isvc.catalog={"mode":"None"}',
            'isvc.publicDomainTemplate="%s.ai.example.com"',
            'isvc.modelFetchImage="registry.example.com/isvc/model-fetcher@sha256:0"',
            'isvc.logLevel="Warn"',
            'isvc.modelVolume={"storageClassName":"local-path"}',
        ),
        PLAIN,
    ),
    "Debug, health tuned": (
        ('isvc.logLevel="Debug"', 'isvc.health={"periodSeconds":5,"failureThreshold":7}'),
        PLAIN,
    ),
    "model cache of 2Ti on a class, a mirror": (
        (
            'isvc.modelCache={"storageClassName":"local-path","size":"2Ti"}',
            'isvc.huggingFace={"endpoint":"https://hf-mirror.example.com"}',
        ),
        PLAIN,
    ),
}
# the renderings where a StorageClass for the model cache is known (Deckhouse's values name its default)
CACHED = {"Deckhouse, every optional API", "model cache of 2Ti on a class, a mirror"}
APIS = ("cert-manager.io/v1/Certificate", "monitoring.coreos.com/v1/ServiceMonitor")


def _containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Component → its own container (named after the component), over every Deployment."""
    found = {}
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            if container["name"] in PARSERS:
                found[container["name"]] = container
    return found


def _parse(component: str, args: list[str]) -> argparse.Namespace:
    try:
        return PARSERS[component]().parse_args(args)
    except SystemExit as exc:  # argparse exits 2 on an unknown flag or a refused value
        pytest.fail(f"isvc-{component} refuses the chart's arguments {args}: exit {exc.code}")


@pytest.mark.parametrize("rendering", list(RENDERINGS), ids=str)
def test_every_deployment_has_arguments_its_binary_parses(render: Any, rendering: str) -> None:
    sets, values = RENDERINGS[rendering]
    containers = _containers(render(*sets, values=values, api_versions=APIS))

    assert set(containers) == set(PARSERS) - (set() if rendering in CACHED else {"model-cache"})
    for component, container in containers.items():
        _parse(component, container.get("args", []))


def test_the_planner_serves_on_the_ports_its_service_and_probes_name(render: Any) -> None:
    docs = render(values=DECKHOUSE)
    planner = _containers(docs)["planner"]
    args = _parse("planner", planner["args"])
    ports = {p["name"]: p["containerPort"] for p in planner["ports"]}

    assert (args.command, args.port, args.metrics_host) == ("serve", ports["https"], "127.0.0.1")
    proxy = next(
        c
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "isvc-planner"
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["name"] == "kube-rbac-proxy"
    )
    upstream = next(e["value"] for e in proxy["env"] if e["name"] == "KUBE_RBAC_PROXY_CONFIG")
    assert f"http://127.0.0.1:{args.metrics_port}/metrics" in upstream


def _mounted_secret(docs: list[Any], name: str, component: str, path: Path) -> str:
    """The Secret mounted at the directory of `path` in Deployment `name`'s container `component`."""
    [spec] = [
        d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["name"] == name
    ]
    [container] = [c for c in spec["containers"] if c["name"] == component]
    [volume] = [m["name"] for m in container["volumeMounts"] if Path(m["mountPath"]) == path]
    [secret] = [v["secret"]["secretName"] for v in spec["volumes"] if v["name"] == volume]
    return str(secret)


def test_the_controller_calls_the_planner_over_https_checked_against_the_planners_own_secret(
    render: Any,
) -> None:
    """Issue 29: the controller's token went to the planner over plain HTTP."""
    docs = render(values=DECKHOUSE)
    containers = _containers(docs)
    planner = _parse("planner", containers["planner"]["args"])
    controller = _parse("controller", containers["controller"]["args"])
    [secret] = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "isvc-planner-tls"]

    assert controller.planner_url == "https://isvc-planner.d8-isvc.svc:8080"
    assert _mounted_secret(docs, "isvc-planner", "planner", planner.tls_cert_dir) == "isvc-planner-tls"
    assert (
        _mounted_secret(docs, "isvc-controller", "controller", controller.planner_ca_file.parent)
        == "isvc-planner-tls"
    )
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"])


def test_the_controller_gets_the_settings_it_is_rendered_with(render: Any) -> None:
    sets, values = RENDERINGS["catalog off, own domain, fetch image, Warn"]
    args = _parse("controller", _containers(render(*sets, values=values))["controller"]["args"])

    actual = (args.catalog_mode, args.public_domain_template, args.log_level, args.model_fetch_image)
    assert actual == ("None", "%s.ai.example.com", "warn", "registry.example.com/isvc/model-fetcher@sha256:0")
    assert args.leader_elect is True
    assert args.model_volume_storage_class == "local-path"


def test_the_controller_sends_download_steps_to_the_model_cache_it_serves_on(render: Any) -> None:
    """Issue 46: the controller's endpoint of the cache is the cache's Service, on the port the cache listens
    on; the cache's Hub is the module's Hub endpoint, and its bound nine tenths of its volume."""
    sets, values = RENDERINGS["model cache of 2Ti on a class, a mirror"]
    docs = render(*sets, values=values)
    containers = _containers(docs)
    controller = _parse("controller", containers["controller"]["args"])
    cache = _parse("model-cache", containers["model-cache"]["args"])
    [service] = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "isvc-model-cache"]
    [claim] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]

    assert (
        controller.model_cache_endpoint
        == f"http://isvc-model-cache.d8-isvc.svc:{service['spec']['ports'][0]['port']}"
    )
    assert (cache.command, cache.host, cache.port) == ("serve", "0.0.0.0", 8080)
    assert cache.hub_endpoint == controller.huggingface_endpoint == "https://hf-mirror.example.com"
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Ti"
    assert cache.max_bytes == 2 * 2**40 * 9 // 10
    assert (
        _parse("controller", _containers(render(values=PLAIN))["controller"]["args"]).model_cache_endpoint
        is None
    )


def test_the_controller_leaves_the_model_volumes_to_the_default_class_unless_told(render: Any) -> None:
    args = _parse("controller", _containers(render(values=PLAIN))["controller"]["args"])
    assert args.model_volume_storage_class is None


def test_the_controller_serves_estimates_where_the_webhook_service_points(render: Any) -> None:
    docs = render(values=PLAIN)
    controller = _containers(docs)["controller"]
    args = _parse("controller", controller["args"])
    ports = {p["name"]: p["containerPort"] for p in controller["ports"]}
    mounts = {m["name"]: m["mountPath"] for m in controller["volumeMounts"]}
    service = next(
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "isvc-controller-webhook"
    )

    assert args.webhook_port == ports["webhook"] and service["spec"]["ports"][0]["targetPort"] == "webhook"
    assert str(args.webhook_cert_dir) == mounts["webhook-tls"]
