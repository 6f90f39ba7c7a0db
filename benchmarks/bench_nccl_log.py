"""NCCL COLL log parse throughput (MB/s), against reading the same file line by line.

Builds a large log in a temporary directory by repeating the real COLL lines of
tests/data/traces/nccl-debug with varying opCount, count, comm and pid fields, then
times ``read_traces`` on it, sequentially (``workers=1``) and as by default (the file scanned
in chunks of one block, the reading process taking them from the front and a worker process
per further CPU from the back). Baseline in the same run:
iterating over the file's lines without parsing (the floor for any line parser).
Target: >= 100 MB/s. Peak memory: Python allocations (tracemalloc) of the
reading process, and of scanning the back half of the chunks in this process, as a worker does.

    python benchmarks/bench_nccl_log.py [--mb 200]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from zerocalc.traces import nccl_log, read_traces, reader

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces" / "nccl-debug"


def build(path: Path, target_mb: float) -> int:
    lines = [ln for f in sorted(DATA.glob("*.txt")) for ln in f.read_text().splitlines()
             if "opCount" in ln and not ln.startswith("#")]
    rng = random.Random(0)
    out, size, i = [], 0, 0
    with path.open("w") as fh:
        while size < target_mb * 1e6:
            ln = rng.choice(lines)
            ln = re.sub(r"opCount [0-9a-f]+", f"opCount {i:x}", ln)
            ln = re.sub(r"count \d+ datatype", f"count {rng.randrange(1, 1 << 28)} datatype", ln)
            ln = re.sub(r"comm 0x[0-9a-f]+", f"comm 0x{rng.randrange(1 << 44):x}", ln)
            ln = re.sub(r":(\d+):(\d+) \[", lambda m: f":{rng.randrange(1000, 99999)}:{m[2]} [", ln)
            out.append(ln + "\n")
            i += 1
            if len(out) == 10000:
                chunk = "".join(out)
                fh.write(chunk)
                size += len(chunk)
                out = []
    return i


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--repeat", type=int, default=3, help="timed reads of each kind (best and median shown)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nccl.log"
        n = build(path, args.mb)
        mb = path.stat().st_size / 1e6
        t_lines = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            with path.open() as fh:
                for _ in fh:
                    pass
            t_lines.append(time.perf_counter() - t0)
        import pandas  # noqa: F401 -- the timings without the one-time import (about 0.3 s)

        # interleaved, so that a slow spell of the machine does not fall on one kind only
        timings: dict[str, list[float]] = {"sequential": [], "default": []}
        for _ in range(args.repeat):
            for name, workers in (("sequential", 1), ("default", None)):
                t0 = time.perf_counter()
                ts = read_traces(path, workers=workers)
                timings[name].append(time.perf_counter() - t0)
                assert len(ts.table) == n, (len(ts.table), n)
                del ts
        peaks = {}
        for name, workers in (("sequential", 1), ("default", None)):
            tracemalloc.start()
            read_traces(path, workers=workers)
            peaks[name] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        size = path.stat().st_size
        chunks = -(-size // nccl_log.BLOCK_BYTES)
        half = multiprocessing.get_context("spawn").Array("q", [chunks // 2, chunks - 1])
        tracemalloc.start()
        reader._scan_chunks(str(path), size, False, False, half)
        worker_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    print(f"NCCL log: {mb:.0f} MB, {n} COLL lines, {os.cpu_count()} CPUs")
    print(f"  best and median of {args.repeat} runs each")
    for name, ts_ in timings.items():
        best, med = min(ts_), statistics.median(ts_)
        print(f"  read_traces {name:10s} {best:6.2f} s  {mb / best:7.1f} MB/s  (median {med:.2f} s, "
              f"{mb / med:.1f} MB/s; target >= 100 MB/s)  peak Python memory {peaks[name] / 1e6:.0f} MB")
    best = min(t_lines)
    print(f"  line iteration         {best:6.2f} s  {mb / best:7.1f} MB/s  (baseline)")
    for name, ts_ in timings.items():
        print(f"  ratio {name} parse/baseline time (best): {min(ts_) / best:.2f}")
    print(f"  peak Python memory of a worker's scan of {chunks - chunks // 2} chunks of "
          f"{nccl_log.BLOCK_BYTES / 1e6:.1f} MB: "
          f"{worker_peak / 1e6:.0f} MB (streamed; the table of {n} rows is in the reading process)")


if __name__ == "__main__":
    main()
