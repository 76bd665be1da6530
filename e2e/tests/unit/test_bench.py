"""The pure parts of the controller bench and the chaos run: metrics text, write counts, percentiles,
/proc parsing, and the verdict on an object set."""

from __future__ import annotations

import math
from collections import Counter

from isvc_testbed.bench import (
    BENCH_NS,
    controller_writes,
    cpu_seconds,
    parse_metrics,
    percentile,
    rss_bytes,
    writes,
)
from isvc_testbed.chaos import judge


def _line(verb: str, group: str, resource: str, subresource: str, value: int, dry_run: str = "") -> str:
    """One apiserver_request_total line as the API server writes it."""
    return (
        f'apiserver_request_total{{code="200",component="apiserver",dry_run="{dry_run}",group="{group}",'
        f'resource="{resource}",scope="resource",subresource="{subresource}",verb="{verb}",'
        f'version="v1"}} {value}'
    )


METRICS = (
    "\n".join(
        [
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
            "# TYPE apiserver_request_total counter",
            _line("POST", "ai.deckhouse.io", "inferenceservices", "", 3),
            _line("APPLY", "ai.deckhouse.io", "inferenceservices", "status", 7),
            _line("APPLY", "apps", "statefulsets", "", 2),
            _line("PUT", "apps", "statefulsets", "status", 9),
            _line("LIST", "", "pods", "", 40),
            _line("APPLY", "apps", "statefulsets", "", 5, dry_run="All"),
            'apiserver_request_duration_seconds_bucket{le="0.1",verb="GET"} 12',
        ]
    )
    + "\n"
)


def test_metrics_text_parses_into_name_labels_and_value() -> None:
    sample = parse_metrics(METRICS, ["apiserver_request_total"])
    assert len(sample) == 6
    key = next(k for k in sample if dict(k[1]).get("verb") == "PUT")
    labels = dict(key[1])
    assert (labels["resource"], labels["subresource"], sample[key]) == ("statefulsets", "status", 9.0)


def test_metrics_of_other_names_are_left_out_when_names_are_given() -> None:
    only = parse_metrics(METRICS, ["apiserver_request_total"])
    assert all(name == "apiserver_request_total" for name, _ in only)
    assert any(name.endswith("_bucket") for name, _ in parse_metrics(METRICS))


def test_writes_count_only_write_verbs_between_two_samples_and_no_dry_runs() -> None:
    before = parse_metrics(METRICS)
    after = parse_metrics(
        METRICS.replace("} 7\n", "} 10\n").replace("} 40\n", "} 90\n").replace("} 3\n", "} 4\n")
    )
    assert writes(before, after) == {"APPLY inferenceservices/status": 3, "POST inferenceservices": 1}
    assert writes({}, before) == {
        "APPLY statefulsets": 2,
        "APPLY inferenceservices/status": 7,
        "POST inferenceservices": 3,
        "PUT statefulsets/status": 9,
    }


def test_the_controllers_writes_leave_out_other_components_and_the_benchs_own_creates() -> None:
    counts = writes({}, parse_metrics(METRICS))
    # status 7 + statefulsets 2 + POST inferenceservices 3 - 3 creates by the bench; kcm's status left out
    assert controller_writes(counts, bench_creates=3) == 9


def test_percentiles_interpolate_between_ranks() -> None:
    values = [float(v) for v in range(1, 11)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (5.5, 9.55, 10.0)
    assert percentile([3.0], 95) == 3.0
    assert math.isnan(percentile([], 50))


def test_cpu_and_rss_come_from_proc_stat_and_status() -> None:
    stat = "4242 (python -m x) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 150 0 0 20 0 5 0 100 0 0"
    assert cpu_seconds(stat, ticks=100) == 4.0
    assert rss_bytes("Name:\tpython\nVmRSS:\t  153600 kB\nThreads:\t5\n") == 150 * 2**20


def test_an_object_set_as_expected_is_ok() -> None:
    children = {"StatefulSet": Counter({"a": 1}), "ResourceClaim": Counter({"a": 1})}
    assert judge({"a": "default-llm"}, {"a": ("default-llm", "Ready")}, children).ok


def test_lost_left_over_duplicate_orphaned_and_leaked_are_each_named() -> None:
    expected = {"a": "default-llm", "b": "chaos-alt", "c": "default-llm"}
    found = {"a": ("default-llm", "Ready"), "b": ("default-llm", "Ready"), "x": ("default-llm", "Ready")}
    children = {
        "StatefulSet": Counter({"a": 2, "gone": 1}),
        "ResourceClaim": Counter({"gone": 1}),
        "ResourceClaimTemplate": Counter({"a": 2}),
    }
    v = judge(expected, found, children)
    assert (v.lost, v.left_over, v.duplicate, v.orphaned, v.leaked_claims, v.wrong_class) == (
        ["c"],
        ["x"],
        ["StatefulSet/a"],
        ["StatefulSet/gone"],
        ["ResourceClaim/gone"],
        ["b"],
    )
    assert not v.ok


def test_a_reservation_whose_order_is_gone_is_leaked_and_one_whose_order_exists_is_not() -> None:
    found = {"a": ("default-llm", "Ready")}
    assert judge({"a": "default-llm"}, found, {}, [(BENCH_NS, "a")]).ok
    v = judge({"a": "default-llm"}, found, {}, [(BENCH_NS, "a"), (BENCH_NS, "gone"), ("team-x", "a")])
    assert v.leaked_reservations == [f"{BENCH_NS}/gone", "team-x/a"]
    assert not v.ok
