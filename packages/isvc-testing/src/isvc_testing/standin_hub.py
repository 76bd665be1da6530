"""`python -m isvc_testing.standin_hub --port P --models DIR`: a Hub-shaped server for tests."""

from isvc_testing._hub import FixtureModel, StandinHub, load_fixtures, main, packaged_fixtures

__all__ = ["FixtureModel", "StandinHub", "load_fixtures", "main", "packaged_fixtures"]

if __name__ == "__main__":
    main()
