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

``--ranks K`` times ``zerocalc check --format json`` on a set of K copies of the trace instead, each
given its own rank and the world size K (as ``bench_scale.py --kineto-ranks`` makes it; made in a
temporary directory, or kept in ``--set DIR`` to be reused), ``--repeat`` runs in fresh processes:
wall time (best and median), CPU seconds (user + system of the command and its worker processes:
less sensitive to a busy machine) and peak RSS. ``--against-rev REV`` (that git revision's
``zerocalc/``) or ``--against DIR`` (another source tree) runs the same command with that tree too,
the two trees alternately run after run, and gives the ratios. Target (issue 13): 1,024 ranks
(~10 GB) in at most 29 s and 250 MB on an idle 2-core machine.

    python benchmarks/bench_kineto.py [TRACE.json.gz] [--repeat 3]
    nice python benchmarks/bench_kineto.py --ranks 1024 [--set DIR] [--against-rev main] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sources import tree_at

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = (ROOT / "tests" / "data" / "traces" / "kineto"
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


def rank_set(trace: Path, ranks: int, folder: Path) -> None:
    """``ranks`` copies of ``trace`` in ``folder`` (plain JSON), each with its own rank, the world
    size and its default group's ranks (bench_scale.py's set); an existing complete set is kept."""
    if folder.is_dir() and len(list(folder.glob("rank*.json"))) == ranks:
        return
    folder.mkdir(parents=True, exist_ok=True)
    text = gzip.decompress(trace.read_bytes()).decode()
    for r in range(ranks):
        one = re.sub(r'"rank": 0, "world_size": 2', f'"rank": {r}, "world_size": {ranks}', text, count=1)
        one = re.sub(r'"pg_size": 2, "ranks": \[0, 1\]', f'"pg_size": {ranks}, "ranks": '
                     f'[{", ".join(map(str, range(ranks)))}]', one, count=1)
        (folder / f"rank{r}.json").write_text(one)


def timed_run(cmd: list[str], tree: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s of the process and its waited-for children, peak RSS MB, output) of ``cmd``
    run in a fresh process importing ``zerocalc`` from ``tree``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(tree))
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=tree, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            why = err.read().decode(errors="replace").strip()[-500:]
            raise SystemExit(f"{' '.join(cmd[:5])}: failed: {why}")
        out.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read().decode()


def rank_check(folder: Path, trees: dict[str, Path], repeat: int) -> None:
    """``check --format json`` on the set with each tree, the trees alternately, run after run."""
    gb = sum(f.stat().st_size for f in folder.iterdir()) / 1e9
    files = len(list(folder.iterdir()))
    print(f"Kineto set {folder.name}: {files} files, {gb:.2f} GB, {os.cpu_count()} CPUs")
    cmd = [sys.executable, "-m", "zerocalc", "check", "--format", "json", str(folder.resolve())]
    runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label in trees}
    outputs: dict[str, set[str]] = {label: set() for label in trees}
    for _ in range(repeat):
        for label, tree in trees.items():
            wall, cpu, rss, text = timed_run(cmd, tree)
            runs[label].append((wall, cpu, rss))
            outputs[label].add(text)
    for label, got in runs.items():
        walls, cpus = [g[0] for g in got], [g[1] for g in got]
        print(f"  check [{label}]  wall best {min(walls):6.2f} s, median {statistics.median(walls):6.2f} s;"
              f"  CPU best {min(cpus):6.2f} s, median {statistics.median(cpus):6.2f} s;"
              f"  peak RSS {max(g[2] for g in got):5.0f} MB;  {gb * 1e3 / min(walls):5.0f} MB/s")
    if len(trees) == 2:
        (a, ra), (b, rb) = runs.items()
        for what, k in (("wall", 0), ("CPU", 1)):
            x, y = [g[k] for g in ra], [g[k] for g in rb]
            print(f"    {a} / {b}: {what} {min(x) / min(y):.2f}x (best), "
                  f"{statistics.median(x) / statistics.median(y):.2f}x (median)")
        same = len(outputs[a] | outputs[b]) == 1
        print(f"    output: {'the same' if same else 'DIFFERENT'} in every run of both trees")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=0, help="time check on a set of this many copies instead")
    ap.add_argument("--set", type=Path, help="where to make (or find) the set of --ranks copies, kept")
    ap.add_argument("--against", type=Path, help="another source tree to time the same command")
    ap.add_argument("--against-rev", help="a git revision whose zerocalc/ times the same command")
    args = ap.parse_args()
    if args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            trees = {"this tree": ROOT}
            if args.against or args.against_rev:
                label = str(args.against or args.against_rev)
                trees[label] = (args.against.resolve() if args.against
                                else tree_at(args.against_rev, Path(tmp)))
            folder = args.set or Path(tmp) / f"kineto-{args.ranks}"
            rank_set(Path(args.trace), args.ranks, folder)
            rank_check(folder, trees, args.repeat)
        return
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
