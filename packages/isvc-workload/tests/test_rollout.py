"""Which applies recreate a set's pods on the devices they hold, and when a set has finished rolling."""

from __future__ import annotations

from typing import Any

from isvc_api import Constraints
from isvc_workload import WorkloadSettings, recreates_pods, resource_claim_template, set_rolling, statefulset
from workload_builders import make_inputs

SETTINGS = WorkloadSettings(public_domain_template="%s.example.com", cluster_issuer_name="letsencrypt")


def _pair(**overrides: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs = make_inputs(**overrides)
    return statefulset(inputs, SETTINGS), resource_claim_template(inputs)


def _templates(*templates: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["metadata"]["name"]: t for t in templates}


def test_a_new_priority_class_recreates_the_pods_on_the_same_devices() -> None:
    """The claim template carries the priority too, so it is renamed; its device request is the same."""
    held, held_template = _pair(
        constraints=Constraints(min_replicas=1, max_replicas=1, priority_class_name="low"), priority=1
    )
    wanted, wanted_template = _pair(
        constraints=Constraints(min_replicas=1, max_replicas=1, priority_class_name="high"), priority=2
    )
    assert held_template["metadata"]["name"] != wanted_template["metadata"]["name"]
    assert recreates_pods(held, wanted, _templates(held_template, wanted_template))
    assert not recreates_pods(held, held, _templates(held_template))  # nothing changes
    assert not recreates_pods(None, wanted, _templates(wanted_template))  # nothing held: nothing to recreate


def test_switching_the_model_cache_on_recreates_the_pods_on_the_same_devices() -> None:
    """Issue 46: the download step changes with the module's model cache; the pods are recreated, so the
    operator paces the roll like any other on the same devices."""
    fetching = SETTINGS.model_copy(update={"model_fetch_image": "fetch"})
    cached = fetching.model_copy(update={"model_cache_endpoint": "http://isvc-model-cache.d8-isvc.svc:8080"})
    inputs = make_inputs()
    held, wanted = statefulset(inputs, fetching), statefulset(inputs, cached)
    template = _templates(resource_claim_template(inputs))
    assert recreates_pods(held, wanted, template)
    assert not recreates_pods(wanted, statefulset(inputs, cached), template)


def test_a_move_to_other_devices_is_not_a_roll_on_the_same_devices() -> None:
    held, held_template = _pair()
    moved = make_inputs().placement.model_copy(update={"device_uuids": ["GPU-2"]})
    wanted, wanted_template = _pair(placement=moved)
    assert not recreates_pods(held, wanted, _templates(held_template, wanted_template))
    assert not recreates_pods(held, wanted, {})  # templates not known: never taken for the same devices


def test_a_set_rolls_until_every_replica_is_on_its_latest_template() -> None:
    base: dict[str, Any] = {"metadata": {"generation": 3}}
    assert set_rolling(
        {**base, "status": {"observedGeneration": 2, "currentRevision": "a", "updateRevision": "a"}}
    )
    assert set_rolling(
        {**base, "status": {"observedGeneration": 3, "currentRevision": "a", "updateRevision": "b"}}
    )
    assert not set_rolling(
        {**base, "status": {"observedGeneration": 3, "currentRevision": "b", "updateRevision": "b"}}
    )
    assert not set_rolling(None)
