"""The module's model cache in front of the Hub, on the bed (issue 46).

The chart is installed with the cache on (its Deployment and volume, which KWOK and the stand-in provisioner
take) and tells the controller where the cache is; the cache itself runs here as a module process in front of
the stand-in Hub (`ModuleProcesses.start_cache`), as the controller and the planner do, and the controller is
told its loopback address. The orders' pods are simulated, so the test plays the kubelet for their download
step (`isvc_testbed.fetchstep`): the init container the API server holds, run with the host's `hf`. The
stand-in Hub counts the bytes of each file it sends (`GET /_control/served`), which shows a file crossing.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from isvc_testbed.cluster import Cluster
from isvc_testbed.fetchstep import FetchStep, fetch_step
from isvc_testbed.helpers import user_namespace, wait_for
from isvc_testbed.module import IMAGES, ModuleProcesses, chart_flags, install_chart
from isvc_testbed.orders import Orders, hf
from isvc_testbed.volumes import STORAGE_CLASS
from kubernetes import client as k8s

REPO = "isvc-testbed/tiny-cached"  # e2e/hub/downloadable.yaml
GATED = "isvc-testbed/tiny-cached-gated"
TOKENS = ("hf_cache_token_a", "hf_cache_token_b")  # the two the stand-in accepts for GATED
TWO = "cache-two-replicas"
SECOND = "cache-b"


@dataclass
class Bed:
    cluster: Cluster
    module: ModuleProcesses
    a: Orders  # alice in team-a
    b: Orders  # alice in cache-b
    chart_flags: tuple[str, ...]
    volumes: Path

    def step(self, orders: Orders, pod: str) -> FetchStep:
        def present() -> FetchStep | None:
            try:
                return fetch_step(orders.admin_api, orders.ns, pod)
            except k8s.ApiException as e:
                if e.status == 404:
                    return None
                raise

        return wait_for(present, 60, what=f"pod {orders.ns}/{pod}")

    def files(self, repo: str, token: str | None = None) -> dict[str, int]:
        """The repository's files and sizes, as the stand-in Hub lists them."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        info = httpx.get(f"{self.module.hub_url}/api/models/{repo}?blobs=true", headers=headers).json()
        return {f"{repo}/{s['rfilename']}": int(s["size"]) for s in info["siblings"]}

    def crossed(self, before: dict[str, int], repo: str) -> dict[str, int]:
        """Bytes of each file of `repo` the stand-in Hub sent since `before`."""
        after = self.module.hub_served()
        return {name: after.get(name, 0) - before.get(name, 0) for name in self.files(repo, TOKENS[0])}


@pytest.fixture(scope="module")
def bed(
    cluster: Cluster,
    module: ModuleProcesses,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    team_a: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Bed]:
    """The chart with its cache on, the cache running, the controller sending download steps to it, and alice
    in two namespaces; afterwards the chart and the controller as the session had them."""
    install_chart(cluster, {"modelCache": {"storageClassName": STORAGE_CLASS, "size": "1Gi"}})
    flags = chart_flags(cluster, "--model-cache-endpoint")
    second = user_namespace(admin_api, SECOND)
    try:
        module.start_cache()
        module.restart_controller(
            "--model-fetch-image", IMAGES["modelFetcher"], "--model-cache-endpoint", module.cache_url
        )
        with (
            Orders(module, admin_api, alice_api, team_a, timeout=90) as a,
            Orders(module, admin_api, alice_api, second, timeout=90) as b,
        ):
            a.create_class(
                TWO,
                {
                    "modelPolicy": {"allowedEndpointTypes": ["Chat"]},
                    "exposure": {"type": "ClusterLocal", "authentication": "Token"},
                    "scalingPolicy": {"minReplicas": 2, "maxReplicas": 2},
                },
            )
            yield Bed(cluster, module, a, b, flags, tmp_path_factory.mktemp("volumes"))
    finally:
        module.kill("cache")
        module.restart_controller()
        install_chart(cluster)


def _secret(orders: Orders, name: str, token: str) -> None:
    core = k8s.CoreV1Api(orders.admin_api)
    core.create_namespaced_secret(
        orders.ns, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=name), string_data={"token": token})
    )
    orders.cleanup.append(lambda: core.delete_namespaced_secret(name, orders.ns))


def _run_together(bed: Bed, steps: list[FetchStep], **env: str) -> list[Any]:
    with concurrent.futures.ThreadPoolExecutor(len(steps)) as pool:
        return list(pool.map(lambda s: s.run(bed.volumes / s.pod, **env), steps))


def _conditions(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in status["conditions"]]


def _files(volume: Path) -> dict[str, int]:
    return {
        str(p.relative_to(volume)): p.stat().st_size
        for p in volume.rglob("*")
        if p.is_file() and ".cache" not in p.parts
    }


def test_three_orders_of_one_model_in_two_namespaces_and_a_second_replica_take_each_file_from_the_hub_once(
    bed: Bed,
) -> None:
    # the chart tells its controller to send download steps to the cache's Service
    assert bed.chart_flags == ("--model-cache-endpoint=http://isvc-model-cache.d8-isvc.svc:8080",)
    two = bed.a.create("cached-two", hf(REPO), TWO)
    one = bed.a.create("cached-one", hf(REPO), "default-llm")
    other = bed.b.create("cached-other", hf(REPO), "default-llm")
    for orders, name in ((bed.a, two), (bed.a, one), (bed.b, other)):
        orders.wait_ready(name)
    steps = [
        bed.step(bed.a, f"{two}-0"),
        bed.step(bed.a, f"{two}-1"),
        bed.step(bed.a, f"{one}-0"),
        bed.step(bed.b, f"{other}-0"),
    ]
    for step in steps:  # the pods' download step asks the cache the controller was told of
        assert step.command[:2] == ["/bin/sh", "-c"], step.command
        assert step.env["ISVC_MODEL_CACHE"] == bed.module.cache_url
    before = bed.module.hub_served()  # what resolving the orders read from the Hub
    runs = _run_together(bed, steps)

    assert [r.returncode for r in runs] == [0] * 4, [r.stderr[-2000:] for r in runs]
    sizes = bed.files(REPO)
    assert bed.crossed(before, REPO) == sizes  # every file crossed the edge once, for four downloads
    wanted = {name.removeprefix(f"{REPO}/"): size for name, size in sizes.items()}
    for step in steps:
        assert _files(bed.volumes / step.pod / REPO) == wanted, step.pod
    served = {
        r: bed.module.cache_metric("isvc_model_cache_downloads_total", result=r)
        for r in ("Miss", "Hit", "Joined")
    }
    assert served["Miss"] == len(sizes) and served["Hit"] + served["Joined"] == 3 * len(sizes), served


def test_a_gated_model_is_served_from_the_cache_only_to_downloads_whose_token_the_hub_accepts(
    bed: Bed,
) -> None:
    _secret(bed.a, "hf-a", TOKENS[0])
    _secret(bed.b, "hf-b", TOKENS[1])
    first = bed.a.create("gated-a", hf(GATED, "hf-a"), "default-llm")
    second = bed.b.create("gated-b", hf(GATED, "hf-b"), "default-llm")
    bed.a.wait_ready(first)
    bed.b.wait_ready(second)
    before = bed.module.hub_served()

    one, two = bed.step(bed.a, f"{first}-0"), bed.step(bed.b, f"{second}-0")
    assert (one.env["HF_TOKEN"], two.env["HF_TOKEN"]) == TOKENS  # each namespace's own Secret
    for step in (one, two):  # one after the other: the second namespace's token reads the first one's fill
        run = step.run(bed.volumes / step.pod)
        assert run.returncode == 0, run.stderr[-2000:]
    sizes = bed.files(GATED, TOKENS[0])
    crossed = bed.crossed(before, GATED)
    # its weights crossed once for the two namespaces; its other files at most once (files are kept by content:
    # the .gitattributes every repository of the stand-in shares was in the cache already)
    assert {n: b for n, b in crossed.items() if n.endswith(".safetensors")} == {
        n: b for n, b in sizes.items() if n.endswith(".safetensors")
    }
    assert all(crossed[n] in (0, size) for n, size in sizes.items()), crossed

    # the same pod's step with a token the stand-in refuses, and with none: the cache sends not a byte
    sent = bed.module.cache_metric("isvc_model_cache_served_bytes_total")
    for who, token in (("refused", "hf_not_accepted"), ("anonymous", "")):
        volume = bed.volumes / f"{second}-{who}"
        run = two.run(volume, HF_TOKEN=token)
        assert run.returncode != 0, who
        assert "GatedRepoError" in run.stderr, run.stderr[-2000:]
        assert not [f for f in _files(volume) if f.endswith(".safetensors")], who
    assert bed.module.cache_metric("isvc_model_cache_served_bytes_total") == sent
    assert bed.crossed(before, GATED) == crossed


def test_with_the_cache_stopped_the_next_download_comes_from_the_hub_and_the_order_goes_ready(
    bed: Bed,
) -> None:
    bed.module.kill("cache")
    try:
        name = bed.a.create("cached-later", hf(REPO), "default-llm")
        status = bed.a.wait_ready(name)
        before = bed.module.hub_served()
        run = bed.step(bed.a, f"{name}-0").run(bed.volumes / "cache-stopped")
        assert run.returncode == 0, run.stderr[-2000:]
        assert "downloading the rest from the Hub" in run.stderr
        assert bed.crossed(before, REPO) == bed.files(REPO)  # from the stand-in, whole
        # the order's status says nothing of the cache: the conditions of an order made with the cache up
        assert _conditions(status) == _conditions(bed.a.status("cached-one"))
    finally:
        bed.module.start_cache()
