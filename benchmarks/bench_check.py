"""``check`` time on the 8-rank DLRM Kineto directory, as ratios against baselines timed in the same run.

Baselines: reading the same traces (``read_traces``), and optionally the same check run by another
source tree (``--against DIR``, e.g. an older checkout), each in a fresh subprocess so that neither
warms the other's caches. Reports the best of ``--repeat`` runs of ``check()`` on the table already
read, and of read + check.

    python benchmarks/bench_check.py [TRACE_DIR] [--repeat 5] [--against OTHER_SOURCE_TREE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "data" / "traces" / "kineto" / "dlrm-v100-8ranks"

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from zerocalc.traces import read_traces
from zerocalc.validate import check
path, repeat = sys.argv[2], int(sys.argv[3])
ts = read_traces(path)
check(ts.table, meta=ts.meta)
out = {"read_s": float("inf"), "check_s": float("inf"), "read_check_s": float("inf")}
for _ in range(repeat):
    t0 = time.perf_counter(); ts = read_traces(path); t1 = time.perf_counter()
    check(ts.table, meta=ts.meta); t2 = time.perf_counter()
    out["read_s"] = min(out["read_s"], t1 - t0)
    out["check_s"] = min(out["check_s"], t2 - t1)
    out["read_check_s"] = min(out["read_check_s"], t2 - t0)
print(json.dumps(out))
"""


def run(tree: Path, path: Path, repeat: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(path), str(repeat)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", help="another source tree (its zerocalc/ package) to time the same check")
    args = ap.parse_args()
    here = run(ROOT, Path(args.traces), args.repeat)
    print(f"{args.traces}: read {here['read_s'] * 1e3:.0f} ms, check {here['check_s'] * 1e3:.0f} ms "
          f"(check / read = {here['check_s'] / here['read_s']:.2f})")
    if args.against:
        other = run(Path(args.against).resolve(), Path(args.traces), args.repeat)
        print(f"  against {args.against}: check {other['check_s'] * 1e3:.0f} ms, read + check "
              f"{other['read_check_s'] * 1e3:.0f} ms; ratio this / that: check "
              f"{here['check_s'] / other['check_s']:.2f}, read + check "
              f"{here['read_check_s'] / other['read_check_s']:.2f}")


if __name__ == "__main__":
    main()
