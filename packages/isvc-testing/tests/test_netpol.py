"""The NetworkPolicy judge of isvc_testing follows networking.k8s.io/v1: selection, peers and ports."""

from __future__ import annotations

from typing import Any

import pytest
from isvc_testing import Endpoint, admits


def _policy(namespace: str, selector: dict[str, str], *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Ingress"],
            "ingress": list(rules),
        },
    }


DEST = Endpoint("a", {"app": "web"}, {"team": "a"}, ports={"http": 80})


def test_a_pod_no_policy_selects_admits_everyone() -> None:
    policy = _policy("a", {"app": "db"})
    assert admits([policy], Endpoint("b"), DEST, 80)


def test_a_selected_pod_with_no_rule_admits_no_one() -> None:
    assert not admits([_policy("a", {"app": "web"})], Endpoint("a"), DEST, 80)


@pytest.mark.parametrize(
    ("peer", "source", "admitted"),
    [
        ({"podSelector": {"matchLabels": {"role": "x"}}}, Endpoint("a", {"role": "x"}), True),
        ({"podSelector": {"matchLabels": {"role": "x"}}}, Endpoint("b", {"role": "x"}), False),  # another ns
        ({"namespaceSelector": {"matchLabels": {"team": "b"}}}, Endpoint("b", {}, {"team": "b"}), True),
        (
            {"namespaceSelector": {"matchLabels": {"team": "b"}}, "podSelector": {"matchLabels": {"r": "1"}}},
            Endpoint("b", {"r": "2"}, {"team": "b"}),
            False,
        ),
        ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}, Endpoint(None, ip="10.2.0.1"), True),
        (
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
            Endpoint(None, ip="10.1.0.1"),
            False,
        ),
        ({"podSelector": {}}, Endpoint(None, ip="10.2.0.1"), False),  # a host is no pod
    ],
)
def test_peers(peer: dict[str, Any], source: Endpoint, admitted: bool) -> None:
    assert admits([_policy("a", {"app": "web"}, {"from": [peer]})], source, DEST, 80) == admitted


def test_ports_by_number_or_by_the_destinations_port_name() -> None:
    by_name = _policy("a", {"app": "web"}, {"ports": [{"protocol": "TCP", "port": "http"}]})
    by_number = _policy("a", {"app": "web"}, {"ports": [{"port": 81}]})
    assert admits([by_name], Endpoint("b"), DEST, 80) and not admits([by_name], Endpoint("b"), DEST, 81)
    assert admits([by_number], Endpoint("b"), DEST, 81) and not admits([by_number], Endpoint("b"), DEST, 80)


def test_policies_add_up() -> None:
    one = _policy("a", {"app": "web"}, {"from": [{"podSelector": {"matchLabels": {"r": "1"}}}]})
    two = _policy("a", {"app": "web"}, {"from": [{"podSelector": {"matchLabels": {"r": "2"}}}]})
    assert admits([one, two], Endpoint("a", {"r": "2"}), DEST, 80)


def test_a_selector_it_cannot_judge_is_refused() -> None:
    policy = _policy("a", {"app": "web"}, {"from": [{"podSelector": {"matchExpressions": [{"key": "x"}]}}]})
    with pytest.raises(NotImplementedError):
        admits([policy], Endpoint("a"), DEST, 80)
