"""`python -m isvc_testing.standin_hub --port P --models DIR`: a Hub-shaped server for tests."""

from isvc_testing._hostile import (
    HOSTILE_CONFIG,
    HOSTILE_PARAMETERS,
    gguf_repository,
    hostile_repositories,
    json_values,
)
from isvc_testing._hub import FixtureModel, StandinHub, load_fixtures, main, packaged_fixtures

__all__ = [
    "HOSTILE_CONFIG",
    "HOSTILE_PARAMETERS",
    "FixtureModel",
    "StandinHub",
    "gguf_repository",
    "hostile_repositories",
    "json_values",
    "load_fixtures",
    "main",
    "packaged_fixtures",
]

if __name__ == "__main__":
    main()
