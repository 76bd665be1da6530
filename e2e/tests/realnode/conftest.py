"""The real-node suite's cluster: the control plane, KWOK and one real kubelet + containerd node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from isvc_testbed import BinariesMissing
from isvc_testbed.cluster import Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A fresh control plane with the real node Ready (overrides the suite's cluster for this directory)."""
    try:
        c = Cluster(real_node=True).start()
    except BinariesMissing as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield c
        c.check()
    finally:
        c.stop()
