"""Errors of the test bed.

TestbedError
├── BinariesMissing      permanent: build them with e2e/tools/build-bins.sh
├── ImagesMissing        permanent: build the module's images with `nox -s images`
├── ComponentDied        permanent: a control-plane process exited; the message carries its log tail
├── StartTimeout         temporary: a component did not become ready in time (a slow machine may pass later)
└── FleetError           permanent: the fleet file or a fleet operation is invalid
"""

from __future__ import annotations


class TestbedError(Exception):
    """Base class of every test-bed error."""

    __test__ = False  # not a pytest test class


class BinariesMissing(TestbedError):
    """The pinned control-plane binaries are not built."""


class ImagesMissing(TestbedError):
    """The module's image archives (`nox -s images`) are not built."""


class ComponentDied(TestbedError):
    """A control-plane process exited while it should run."""

    def __init__(self, component: str, returncode: int | None, log_tail: str) -> None:
        self.component = component
        self.returncode = returncode
        self.log_tail = log_tail
        super().__init__(f"{component} exited with code {returncode}; last log lines:\n{log_tail}")


class StartTimeout(TestbedError):
    """A component did not become ready in time."""


class FleetError(TestbedError):
    """The fleet description or a fleet operation is invalid."""
