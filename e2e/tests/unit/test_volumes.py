"""The stand-in provisioner's volume for a claim: its size, modes and class, pre-bound to that claim."""

from __future__ import annotations

from pathlib import Path

from isvc_testbed.volumes import PROVISIONER, STORAGE_CLASS, volume_for


def test_a_claim_gets_a_volume_of_its_size_pre_bound_to_it() -> None:
    claim = {
        "metadata": {"name": "models-1a2b3c4d-llm-0", "namespace": "team-a", "uid": "u-1"},
        "spec": {
            "storageClassName": STORAGE_CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "18Gi"}},
        },
    }
    volume = volume_for(claim)
    spec = volume["spec"]
    assert volume["metadata"]["name"] == "pvc-u-1"
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    assert (spec["capacity"], spec["accessModes"], spec["storageClassName"]) == (
        {"storage": "18Gi"},
        ["ReadWriteOnce"],
        STORAGE_CLASS,
    )
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "team-a",
        "name": "models-1a2b3c4d-llm-0",
        "uid": "u-1",
    }
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"


def test_on_a_real_node_the_volume_is_a_directory_under_the_given_one(tmp_path: Path) -> None:
    claim = {
        "metadata": {"name": "models-1a2b3c4d-llm-0", "namespace": "team-a", "uid": "u-2"},
        "spec": {"storageClassName": STORAGE_CLASS, "resources": {"requests": {"storage": "2Gi"}}},
    }
    assert volume_for(claim, tmp_path)["spec"]["hostPath"]["path"] == str(tmp_path / "pvc-u-2")
    assert volume_for(claim)["spec"]["hostPath"]["path"] == "/var/lib/isvc-testbed/pvc-u-2"
