"""`python -m isvc_planner serve [--port P] [--metrics-port M] [--kubeconfig K]`."""

from isvc_planner._cli import main

raise SystemExit(main())
