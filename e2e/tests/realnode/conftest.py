"""The real-node suite's cluster: the control plane, KWOK and one real kubelet + containerd node.

The machine holds one real node at a time, and the session's lives from the first test that asks for `cluster`
to the session's end: a test marked `own_real_node`, which starts a node of its own (the demo's,
test_demo_real_node.py), runs before every other.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from isvc_testbed import BinariesMissing
from isvc_testbed.cluster import Cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "own_real_node: starts a real node of its own; runs before the session's real node exists"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `own_real_node` first (a stable sort: the others keep their order)."""
    items.sort(key=lambda item: item.get_closest_marker("own_real_node") is None)


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
