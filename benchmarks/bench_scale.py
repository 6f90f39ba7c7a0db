"""NCCL logs of any size: ``zerocalc check`` and ``trace summary`` in MB/s and peak memory.

Generates the synthetic 128-rank DDP ``COLL`` log (benchmarks/synth_nccl_log.py: the layout of
the bundled Ray log) at each size asked for, in a temporary directory (deleted at the end), and
measures on each, in the same run:

- ``grep -c opCount`` (the floor: reading the bytes and finding the marker),
- the field extraction alone, single-threaded, by ``re`` (the scanner zerocalc had first, the
  fallback), by polars' regex extraction (``polars-regex``) and by polars reading fields by position
  (``polars``, the default; zerocalc.traces.nccl_polars), as CPU seconds (less sensitive to a busy
  machine),
- ``zerocalc trace summary`` and ``zerocalc check`` as a user runs them, each in a fresh process:
  wall time, MB/s, peak RSS (the child's ``ru_maxrss``) and peak RSS over the file's size,

best of ``--repeat`` runs each (and the median); the ratios to ``grep -c`` are taken within the run.
``--against DIR`` (another source tree, its ``zerocalc/`` package) or ``--against-rev REV`` (that git
revision's ``zerocalc/``, extracted to the temporary directory) times the same two commands with that
tree too, the two trees run alternately on the same log, and gives the ratio of this tree's time to
that one's (best and median). With two sizes or more, how the peak RSS of each command grows per GB
of log (the slope between the smallest and largest size). ``--log FILE`` (repeatable) measures an
existing log instead of generating one. Targets (issue 13): ``check`` >= 150 MB/s on 2 cores, under
600 MB of peak RSS at 0.5 and 1.5 GB.
``--kineto-ranks K`` also times ``check`` on K copies of the bundled Kineto trace, each given its
own rank (HolisticTraceAnalysis on the same set when it is installed, as bench_kineto.py does).

    nice python benchmarks/bench_scale.py [--sizes 500,1500] [--repeat 3] [--kineto-ranks 1024]
        [--against-rev main] [--log FILE] [--engines re,polars-regex,polars]
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sources import synth, tree_at

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT / "tests" / "data" / "traces" / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"


def tree_env(tree: Path) -> dict:
    """The environment of a child process that imports ``zerocalc`` from ``tree`` (run in ``tree``:
    ``python -m`` puts the working directory first on the path)."""
    return dict(os.environ, PYTHONPATH=str(tree))


def run(cmd: list[str], tree: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of a command in a fresh process (importing
    ``zerocalc`` from ``tree`` if given)."""
    env, cwd = (tree_env(tree), tree) if tree is not None else (None, None)
    # output to a file, not /dev/null: grep stops at the first match when it writes to /dev/null
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=errf, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        errf.seek(0)
        err = errf.read().decode(errors="replace").strip()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        print(f"    {' '.join(cmd[:4])}...: exit {proc.returncode}: {err.splitlines()[-1] if err else ''}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def cpu_scan(path: Path, engine: str) -> float:
    """CPU seconds of the field extraction alone (one process, one thread)."""
    code = ("import sys, time; from zerocalc.traces import nccl_log; nccl_log.ENGINE = sys.argv[2];"
            "__import__('polars') if sys.argv[2] != 're' else None;"  # its import is not the scan's
            "t = time.process_time(); nccl_log.scan(open(sys.argv[1], 'rb'), sys.argv[1]);"
            "print(time.process_time() - t)")
    env = dict(tree_env(ROOT), POLARS_MAX_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, str(path), engine], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def best(fn, repeat: int):
    results = [fn() for _ in range(repeat)]
    return min(results, key=lambda r: r[0] if isinstance(r, tuple) else r)


def nccl_sizes(sizes_mb: list[float], logs: list[Path], repeat: int, tmp: Path,
               trees: dict[str, Path], engines: list[str]) -> None:
    gen = synth()
    zc = [sys.executable, "-m", "zerocalc"]
    peaks: dict[str, list[tuple[float, float]]] = {}  # command -> (GB, peak RSS MB) per size
    for source in [*logs, *sizes_mb]:
        if isinstance(source, Path):
            path = source
            print(f"log {path.name}: {path.stat().st_size / 1e6:.0f} MB, {os.cpu_count()} CPUs")
        else:
            path = tmp / f"ray-{source:g}MB.log"
            calls, steps = gen.build(path, source * 1e6)
            print(f"synthetic 128-rank COLL log: {path.stat().st_size / 1e6:.0f} MB, {calls} calls, "
                  f"{steps} steps, {os.cpu_count()} CPUs")
        mb = path.stat().st_size / 1e6
        grep = best(lambda path=path: run(["grep", "-c", "opCount", str(path)]), repeat)
        print(f"  grep -c opCount        {grep[0]:7.2f} s  {mb / grep[0]:8.1f} MB/s  (baseline)")
        for engine in engines:
            try:
                cpu = best(lambda engine=engine, path=path: cpu_scan(path, engine), repeat)
            except subprocess.CalledProcessError:
                print(f"  scan, {engine}: not measured (polars not installed?)")
                continue
            print(f"  scan by {engine:12s} (1 core) {cpu:7.2f} CPU s  {mb / cpu:6.1f} MB/s per core")
        for name, args in (("trace summary", ["trace", "summary"]), ("check", ["check", "--format", "json"])):
            # the trees alternately, run after run: a busy spell of the machine falls on both
            runs: dict[str, list[tuple[float, float, int]]] = {label: [] for label in trees}
            for _ in range(repeat):
                for label, tree in trees.items():
                    runs[label].append(run([*zc, *args, str(path.resolve())], tree))
            walls = {}
            for label, got in runs.items():
                if any(rc for _, _, rc in got):
                    continue
                wall, rss, _ = min(got)
                walls[label] = (wall, statistics.median(w for w, _, _ in got))
                print(f"  zerocalc {name:14s} {wall:7.2f} s  {mb / wall:8.1f} MB/s  peak RSS {rss:6.0f} MB "
                      f"({rss / mb:.2f}x the file)  {wall / grep[0]:6.0f}x grep's time"
                      + (f"  [{label}]" if len(trees) > 1 else ""))
                if label == "this tree":
                    peaks.setdefault(name, []).append((mb / 1e3, rss))
            if len(walls) == 2:
                (b0, m0), (b1, m1) = walls.values()
                print(f"    this tree / the other: {b0 / b1:.2f}x the time (best of {repeat}), "
                      f"{m0 / m1:.2f}x (median)")
        if not isinstance(source, Path):
            path.unlink()
    for name, points in peaks.items():
        if len(points) > 1:
            (gb0, rss0), (gb1, rss1) = points[0], points[-1]
            print(f"zerocalc {name}: peak RSS grows {(rss1 - rss0) / (gb1 - gb0):.0f} MB per GB of log "
                  f"({gb0:.2f} -> {gb1:.2f} GB)")


def kineto_set(ranks: int, repeat: int, tmp: Path) -> None:
    """``ranks`` copies of the bundled Kineto trace, each with its own rank and the world size."""
    text = gzip.decompress(KINETO.read_bytes()).decode()
    folder = tmp / f"kineto-{ranks}"
    folder.mkdir()
    for r in range(ranks):
        one = re.sub(r'"rank": 0, "world_size": 2', f'"rank": {r}, "world_size": {ranks}', text, count=1)
        one = re.sub(r'"pg_size": 2, "ranks": \[0, 1\]', f'"pg_size": {ranks}, "ranks": '
                     f'[{", ".join(map(str, range(ranks)))}]', one, count=1)
        (folder / f"rank{r}.json").write_text(one)
    gb = sum(f.stat().st_size for f in folder.iterdir()) / 1e9
    print(f"Kineto set: {ranks} ranks, {gb:.1f} GB")
    wall, rss, rc = best(lambda: run([sys.executable, "-m", "zerocalc", "check", "--format", "json",
                                      str(folder)], ROOT), repeat)
    if not rc:
        print(f"  zerocalc check          {wall:7.2f} s  peak RSS {rss:6.0f} MB")
    try:
        import hta  # noqa: F401
    except ImportError:
        print("  HolisticTraceAnalysis not installed (pip install -e '.[bench]'): not measured")
        return
    code = ("import logging, sys; logging.disable(logging.WARNING);"
            "from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])")
    wall, rss, rc = run([sys.executable, "-c", code, str(folder)])
    if not rc:
        print(f"  HolisticTraceAnalysis   {wall:7.2f} s  peak RSS {rss:6.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1500", help="log sizes, MB, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kineto-ranks", type=int, default=0, help="also a Kineto set of this many ranks")
    ap.add_argument("--log", type=Path, action="append", default=[], help="also an existing log (repeatable)")
    ap.add_argument("--against", type=Path, help="another source tree to time the same commands")
    ap.add_argument("--against-rev", help="a git revision whose zerocalc/ times the same commands")
    ap.add_argument("--engines", default="re,polars-regex,polars",
                    help="the field extractions timed alone (comma-separated; empty for none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT}
        if args.against or args.against_rev:
            label = str(args.against or args.against_rev)
            trees[label] = args.against.resolve() if args.against else tree_at(args.against_rev, Path(tmp))
        nccl_sizes([float(s) for s in args.sizes.split(",") if s], args.log, args.repeat, Path(tmp), trees,
                   [e for e in args.engines.split(",") if e])
        if args.kineto_ranks:
            kineto_set(args.kineto_ranks, args.repeat, Path(tmp))


if __name__ == "__main__":
    main()
