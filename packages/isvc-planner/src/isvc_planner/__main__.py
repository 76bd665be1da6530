"""`python -m isvc_planner serve --port P [--kubeconfig K]`."""

from isvc_planner._cli import main

raise SystemExit(main())
