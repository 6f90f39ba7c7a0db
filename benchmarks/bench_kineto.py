"""Kineto trace parse time and peak memory: zerocalc vs ``json.load`` vs HolisticTraceAnalysis.

Each contender runs in fresh subprocesses on the same decompressed trace: one loads it once
and reports its peak memory, the child's maximum RSS (``resource.getrusage``) minus the RSS
it had after its imports (a second load in the same process would measure the allocator's
reuse, not the loader); another reports the best time of ``--repeat`` loads. Contenders:
``read_traces`` (the public API: file → canonical table), ``kineto.parse_bytes`` (the Kineto
parser on the file's bytes, plus the rows as a DataFrame), ``json.load`` and
HolisticTraceAnalysis (``TraceAnalysis``). Targets: at least 5x faster than
HolisticTraceAnalysis with no more peak memory, within 1.5x of ``json.load``.
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
if which == "read_traces":
    from zerocalc.traces import read_traces
    run = lambda: read_traces(path, workers=1)
elif which == "parse_bytes":
    from zerocalc.traces import kineto
    run = lambda: pandas.DataFrame.from_records(kineto.parse_bytes(open(path, "rb").read(), path).rows)
elif which == "json.load":
    run = lambda: json.load(open(path))
elif which == "hta":
    import logging, os
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    run = lambda: TraceAnalysis(trace_dir=os.path.dirname(path))
import pandas, orjson, msgspec  # every contender may use them: count their import in the baseline
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


def measure(which: str, path: Path, repeat: int) -> dict | None:
    """Peak memory of one load (fresh process), time of the best of ``repeat`` (another one)."""
    once = child(which, path, 1)
    timed = child(which, path, repeat) if once and repeat > 1 else once
    if not once or not timed:
        return None
    return {"time_s": timed["time_s"], "extra_MB": once["peak_rss_MB"] - once["import_rss_MB"]}


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
        res = {w: measure(w, path, args.repeat) for w in ("read_traces", "parse_bytes", "json.load", "hta")}
    for w, r in res.items():
        if r is None:
            continue
        print(f"  {w:12s} {r['time_s']:6.3f} s  {mb / r['time_s']:6.1f} MB/s"
              f"  peak +{r['extra_MB']:5.1f} MB over imports")
    for z in ("read_traces", "parse_bytes"):
        if res[z] is None:
            continue
        zt, zm = res[z]["time_s"], res[z]["extra_MB"]
        ratios = [f"{b}: {res[b]['time_s'] / zt:.2f}x faster, {zm / res[b]['extra_MB']:.2f}x the memory"
                  for b in ("json.load", "hta") if res[b] is not None]
        print(f"  {z:12s} vs " + "; ".join(ratios))
    if res["hta"] is None:
        print("  HolisticTraceAnalysis not measured (pip install -e .[bench])")


if __name__ == "__main__":
    main()
