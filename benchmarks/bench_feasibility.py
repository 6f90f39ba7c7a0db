"""The feasibility simulation of every scheme against single-process training, same run, median of runs.

Run: ``python benchmarks/bench_feasibility.py [--n 4] [--steps 20] [--runs 5]``.
Baseline: the reference alone (one process training the MLP on the global batch, ``steps`` Adam steps).
Measured: ``run_feasibility`` for all 12 schemes, which also simulates the reference, the colocated
conditions (N = 1, shared micro-batch), the shard-wise local training and three schemes with in-network
reduction (the evidence of the plan's in-network items). Reports seconds and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

from zerocalc.feasibility import FeasibilityConfig, run_feasibility, simulate_reference


def _median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cfg = FeasibilityConfig(n=args.n, steps=args.steps)
    run_feasibility(cfg)  # warm imports (sympy, the model) out of the measurement
    base = _median_s(lambda: simulate_reference(cfg), args.runs)
    full = _median_s(lambda: run_feasibility(cfg), args.runs)
    print(f"reference training, N = {args.n}, {args.steps} steps: {base * 1e3:.1f} ms")
    print(f"run_feasibility, all 12 schemes:             {full * 1e3:.1f} ms "
          f"({full / base:.0f}x the reference)")


if __name__ == "__main__":
    main()
