"""`python -m isvc_model_cache serve ...`."""

from isvc_model_cache._cli import main

raise SystemExit(main())
