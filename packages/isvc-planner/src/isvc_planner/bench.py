"""`python -m isvc_planner.bench`: plan latency, a sequence of orders, packing against the optimum."""

from isvc_planner._bench import main

if __name__ == "__main__":
    raise SystemExit(main())
