"""`python -m isvc_testing.standin_hub --port P --models DIR`: a Hub-shaped server for tests."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from isvc_testing._hostile import (
    HOSTILE_CONFIG,
    HOSTILE_PARAMETERS,
    gguf_repository,
    hostile_repositories,
    json_values,
)
from isvc_testing._hub import StandinHub
from isvc_testing._repos import FixtureModel, load_fixtures, packaged_fixtures

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


def main(argv: Sequence[str] | None = None) -> None:
    """Serve fixture models as a Hub on 127.0.0.1 until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m isvc_testing.standin_hub", description=main.__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--models",
        type=Path,
        default=packaged_fixtures(),
        help="directory of YAML model descriptions (default: the shipped fixtures)",
    )
    parser.add_argument(
        "--extra-models",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="another directory of YAML model descriptions served beside --models "
        "(repeatable), e.g. the test bed's hostile repositories",
    )
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="also serve a repository just under and one just over each read limit of the platform "
        "(isvc_testing.standin_hub.hostile_repositories)",
    )
    args = parser.parse_args(argv)
    models = [m for d in (args.models, *args.extra_models) for m in load_fixtures(d)]
    if args.hostile:
        models += hostile_repositories()
    hub = StandinHub(models)
    server = hub.server(args.host, args.port)
    print(
        f"stand-in Hub on http://{args.host}:{server.server_address[1]} serving {len(hub.repos)} repositories",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
