"""A stand-in Hub with the shipped fixture models, on 127.0.0.1 for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from isvc_testing.standin_hub import StandinHub, load_fixtures, packaged_fixtures


@pytest.fixture(scope="session")
def standin() -> Iterator[tuple[StandinHub, str]]:
    hub = StandinHub(load_fixtures(packaged_fixtures()))
    url = hub.start()
    yield hub, url
    hub.stop()
