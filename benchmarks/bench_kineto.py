"""Kineto trace parse time and peak memory: zerocalc vs ``json.load`` vs HolisticTraceAnalysis.

Each contender runs in a fresh subprocess on the same decompressed trace; peak memory is
the child's maximum RSS (``resource.getrusage``), minus that of a child that only imports
the same modules. Targets (issue 4): at least 5x faster than HolisticTraceAnalysis
(``TraceAnalysis``) with no more peak memory, within 1.5x of ``json.load``.
HolisticTraceAnalysis is the optional ``bench`` extra: ``pip install -e .[bench]``.

    python benchmarks/bench_kineto.py [TRACE.json.gz] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = (Path(__file__).resolve().parent.parent / "tests" / "data" / "traces" / "kineto"
           / "ddp-resnet50-a100-rank0-of-2.json.gz")

CHILD = r"""
import json, resource, sys, time
which, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
if which == "zerocalc":
    from zerocalc.traces import read_traces
    run = lambda: read_traces(path, workers=1)
elif which == "json.load":
    run = lambda: json.load(open(path))
elif which == "hta":
    import logging, os
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    run = lambda: TraceAnalysis(trace_dir=os.path.dirname(path))
import pandas, orjson  # every contender may use them: count their import in the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best = float("inf")
for _ in range(repeat):
    t0 = time.perf_counter(); run(); best = min(best, time.perf_counter() - t0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"time_s": best, "peak_rss_MB": peak / 1024, "import_rss_MB": base / 1024}))
"""


def child(which: str, path: Path, repeat: int) -> dict | None:
    proc = subprocess.run([sys.executable, "-c", CHILD, which, str(path), str(repeat)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"  {which}: failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '?'}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank0.json"
        with gzip.open(args.trace, "rb") as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        mb = path.stat().st_size / 1e6
        print(f"Kineto trace {Path(args.trace).name}: {mb:.1f} MB decompressed")
        res = {w: child(w, path, args.repeat) for w in ("zerocalc", "json.load", "hta")}
    z = res["zerocalc"]
    for w, r in res.items():
        if r is None:
            continue
        extra = r["peak_rss_MB"] - r["import_rss_MB"]
        line = f"  {w:10s} {r['time_s']:6.3f} s  {mb / r['time_s']:6.1f} MB/s"
        line += f"  peak RSS {r['peak_rss_MB']:6.0f} MB"
        line += f" (+{extra:.0f} MB over imports)"
        if z and w != "zerocalc":
            line += f"  zerocalc is {r['time_s'] / z['time_s']:.2f}x faster"
        print(line)
    if res["hta"] is None:
        print("  HolisticTraceAnalysis not measured (pip install -e .[bench])")


if __name__ == "__main__":
    main()
