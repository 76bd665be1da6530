"""`python -m isvc_testing.bench`: plan latency, a sequence of orders, packing against the optimum."""

from isvc_testing._bench import main

if __name__ == "__main__":
    raise SystemExit(main())
