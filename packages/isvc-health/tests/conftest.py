"""The stand-in inference server as a fixture; its module goes on the import path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from health_standin import StandIn, serve


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    with serve() as server:
        yield server


@pytest.fixture
def kept_alive() -> Iterator[StandIn]:
    with serve(keep_alive=True) as server:
        yield server
