"""The model cache on the real node (issue 46): the chart's cache Deployment runs there from the module's image,
and the tiny GGUF order made again downloads its model from it instead of from the Hub.

The bed is `isvc_testbed.llamabed` with `model_cache=True`: the cache pod on the node's bridge, in front of the
stand-in Hub relayed at the node's address; the controller sends the orders' download steps to the pod's
address. Both download times are printed (`-s`): the first from the Hub through the cache, the second from
the cache; each from the download step's own first and last log lines (CRI timestamps).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from isvc_api import LABEL_ORDER
from isvc_testbed.cluster import Cluster
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import wait_for
from isvc_testbed.llamabed import CLASS, ORDER, REPO, Bed, llama_bed
from isvc_testbed.module import NAMESPACE
from isvc_testbed.orders import hf
from isvc_testbed.standin import StandIn
from isvc_testbed.tinymodel import GGUF_FILE
from isvc_workload import FETCH_CONTAINER_NAME
from kubernetes import client as k8s


@pytest.fixture(scope="module")
def bed(
    cluster: Cluster,
    admin_api: k8s.ApiClient,
    alice_api: k8s.ApiClient,
    fleet: Fleet,
    standin: StandIn,
    team_a: str,
    catalog_crds: list[str],
) -> Iterator[Bed]:
    """The llama.cpp bed with the chart's model cache on the real node; nothing dialled out meanwhile."""
    with llama_bed(cluster, admin_api, alice_api, standin.url_template, team_a, model_cache=True) as bed:
        yield bed
    assert cluster.node.forward_dropped() == bed.dropped, "a pod dialled out of the real node's namespace"


def _stamp(line: str) -> datetime:
    stamp = line.split(" ", 1)[0]  # RFC 3339 with nanoseconds; Python reads microseconds
    head, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(fraction + '000000')[:6]}+00:00")


def _download(bed: Bed) -> tuple[float, str]:
    """Seconds from the download step's first log line to its last, and its log."""
    log = bed.core.read_namespaced_pod_log(
        f"{ORDER}-0", bed.orders.ns, container=FETCH_CONTAINER_NAME, timestamps=True
    )
    lines = [line for line in log.splitlines() if line.strip()]
    return (_stamp(lines[-1]) - _stamp(lines[0])).total_seconds(), log


def _cache_metric(bed: Bed, name: str, **labels: str) -> float:
    """A sample of the cache pod's /metrics, through the API server's pod proxy."""
    assert bed.cache_pod is not None
    text = bed.core.connect_get_namespaced_pod_proxy_with_path(f"{bed.cache_pod}:9090", NAMESPACE, "metrics")
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(wanted + " ")), 0.0)


def test_the_tiny_gguf_order_made_again_downloads_its_model_from_the_cache_on_the_real_node(bed: Bed) -> None:
    size = bed.good_model.stat().st_size
    times: list[float] = []
    for attempt in ("first", "again"):
        hub_bytes = _cache_metric(bed, "isvc_model_cache_hub_bytes_total")
        hits = _cache_metric(bed, "isvc_model_cache_downloads_total", result="Hit")
        bed.orders.create(ORDER, hf(REPO), CLASS)
        try:
            bed.orders.wait_ready(ORDER, timeout=180)
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{bed.diagnosis(ORDER)}") from None
        seconds, log = _download(bed)
        times.append(seconds)
        assert "downloading through the model cache" in log and "from the Hub" not in log, log
        assert (bed.model_dir(ORDER, REPO) / GGUF_FILE).read_bytes() == bed.good_model.read_bytes()
        from_hub = _cache_metric(bed, "isvc_model_cache_hub_bytes_total") - hub_bytes
        from_cache = _cache_metric(bed, "isvc_model_cache_downloads_total", result="Hit") - hits
        # the first time the cache fetched the file from the Hub; made again, the order got it from the cache
        assert (from_hub, from_cache) == ((size, 0) if attempt == "first" else (0, 1)), attempt
        bed.gone(ORDER)
        wait_for(
            lambda: (
                not bed.core.list_namespaced_persistent_volume_claim(
                    bed.orders.ns, label_selector=f"{LABEL_ORDER}={ORDER}"
                ).items
            ),
            60,
            what=f"the model volume of {ORDER} gone",
        )
    print(
        f"\ndownload step of {ORDER} ({size} bytes) on the real node: first (the Hub through the cache) "
        f"{times[0]:.2f} s, made again (from the cache) {times[1]:.2f} s"
    )
