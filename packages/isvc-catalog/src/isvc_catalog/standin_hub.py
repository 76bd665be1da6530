"""`python -m isvc_catalog.standin_hub --port P --models DIR`: a Hub-shaped server for tests."""

from isvc_catalog._standin import FixtureModel, StandinHub, load_fixtures, main, packaged_fixtures

__all__ = ["FixtureModel", "StandinHub", "load_fixtures", "main", "packaged_fixtures"]

if __name__ == "__main__":
    main()
