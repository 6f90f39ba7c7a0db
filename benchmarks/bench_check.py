"""``check`` time and memory, as ratios against baselines timed in the same run.

Baselines: reading the same traces (``read_traces``), and optionally the same check run by another
source tree (``--against DIR``, e.g. an older checkout, or ``--against-rev REV``: that revision's
``zerocalc/`` taken from git into a temporary directory), each in a fresh subprocess so that neither
warms the other's caches. Reports the best of ``--repeat`` runs of ``check()`` on the table already
read (seconds, and seconds per million calls), of read + check, and the peak of the memory the check
allocates on top of the table (tracemalloc, on a run of its own) and the process's peak RSS.

The traces are the 8-rank DLRM Kineto directory by default, or a synthetic 128-rank NCCL ``COLL`` log
of ``--synthetic-mb`` MB (benchmarks/synth_nccl_log.py) written to a temporary directory:

    python benchmarks/bench_check.py [TRACE_DIR] [--repeat 5] [--against OTHER_SOURCE_TREE]
    python benchmarks/bench_check.py --synthetic-mb 100 --repeat 3 --against-rev HEAD~3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sources import tree_at

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "data" / "traces" / "kineto" / "dlrm-v100-8ranks"

CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from zerocalc.traces import read_traces
from zerocalc.validate import check
path, repeat = sys.argv[2], int(sys.argv[3])
ts = read_traces(path)
check(ts.table, meta=ts.meta)
out = {"read_s": float("inf"), "check_s": float("inf"), "read_check_s": float("inf"), "calls": len(ts.table)}
for _ in range(repeat):
    del ts
    t0 = time.perf_counter(); ts = read_traces(path); t1 = time.perf_counter()
    check(ts.table, meta=ts.meta); t2 = time.perf_counter()
    out["read_s"] = min(out["read_s"], t1 - t0)
    out["check_s"] = min(out["check_s"], t2 - t1)
    out["read_check_s"] = min(out["read_check_s"], t2 - t0)
tracemalloc.start()
check(ts.table, meta=ts.meta)
out["check_peak_bytes"] = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
out["table_bytes"] = int(ts.table.memory_usage(deep=True).sum())
out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def run(tree: Path, path: Path, repeat: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(path), str(repeat)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _report(name: str, r: dict) -> str:
    per_m = r["check_s"] / r["calls"] * 1e6 if r["calls"] else float("nan")
    return (f"{name}: read {r['read_s']:.3f} s, check {r['check_s']:.3f} s ({per_m:.2f} s per million calls, "
            f"check / read = {r['check_s'] / r['read_s']:.2f}); check allocates "
            f"{r['check_peak_bytes'] / 1e6:.0f} MB at its peak over a table of "
            f"{r['table_bytes'] / 1e6:.0f} MB; process peak RSS {r['max_rss_bytes'] / 1e6:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="?", default=None)
    ap.add_argument("--synthetic-mb", type=float,
                    help="check a synthetic 128-rank NCCL COLL log of this many MB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", help="another source tree (its zerocalc/ package) to time the same check")
    ap.add_argument("--against-rev", help="a git revision whose zerocalc/ times the same check")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.synthetic_mb:
            traces = tmp / "synthetic-coll.txt"
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synth_nccl_log.py"), str(traces),
                            "--mb", str(args.synthetic_mb)], check=True, stdout=subprocess.DEVNULL)
        else:
            traces = Path(args.traces or DEFAULT)
        here = run(ROOT, traces, args.repeat)
        print(_report(f"{traces.name} ({here['calls']:,} calls), this tree", here))
        other_tree = Path(args.against).resolve() if args.against else (
            tree_at(args.against_rev, tmp) if args.against_rev else None)
        if other_tree is not None:
            other = run(other_tree, traces, args.repeat)
            label = args.against or args.against_rev
            print(_report(f"  against {label}", other))
            print(f"  ratio this / that: check {here['check_s'] / other['check_s']:.2f}, read + check "
                  f"{here['read_check_s'] / other['read_check_s']:.2f}, check's peak allocation "
                  f"{here['check_peak_bytes'] / other['check_peak_bytes']:.2f}")


if __name__ == "__main__":
    main()
