"""Cold start of ``zerocalc table`` against ``python -c pass``, same interpreter, median of runs.

Run: ``python benchmarks/bench_cold_start.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _median_s(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    base = _median_s([sys.executable, "-c", "pass"], args.runs)
    table = _median_s([sys.executable, "-m", "zerocalc", "table"], args.runs)
    imp = _median_s([sys.executable, "-c", "import zerocalc"], args.runs)
    print(f"python -c pass:       {base:.3f} s")
    print(f"python -c 'import zerocalc': {imp:.3f} s")
    print(f"zerocalc table:       {table:.3f} s  (ratio {table / base:.1f}× python -c pass; "
          f"{table - base:.3f} s of zerocalc)")


if __name__ == "__main__":
    main()
