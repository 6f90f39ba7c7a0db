"""``zerocalc report``: the time to compute and to write the design-review PDF, as a ratio against a
baseline timed in the same run.

Each run is a fresh process that does what ``zerocalc report`` does, timing its two stages apart:
``collect`` (the model computations behind the figures) and ``render`` (laying the pages out and
writing the PDF), with the CPU time of the process (user + system: less sensitive to a busy machine
than the wall time). Reports the best and the median of ``--runs`` runs.

``--against DIR`` (another source tree, its ``zerocalc/`` package) or ``--against-rev REV`` (that git
revision's ``zerocalc/``, extracted to a temporary directory) runs the same report with that tree too,
the two trees alternately, gives this tree's time over that one's, and says whether the two PDFs are
the same bytes. Every tree runs once untimed first, so that its bytecode and matplotlib's font cache
exist, as they do for a user.

    python benchmarks/bench_report.py [--runs 1] [--against-rev main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from sources import tree_at

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
from zerocalc.report import collect, render
t1 = time.perf_counter()
data = collect()
t2 = time.perf_counter()
pages = render(data, sys.argv[2])
t3 = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"import_s": t1 - t0, "collect_s": t2 - t1, "render_s": t3 - t2, "total_s": t3 - t0,
                  "cpu_s": usage.ru_utime + usage.ru_stime, "pages": pages}))
"""

STAGES = ("collect_s", "render_s", "total_s", "cpu_s")


def run(tree: Path, pdf: Path, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(pdf)], capture_output=True,
                          text=True, check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _line(label: str, runs: list[dict]) -> str:
    parts = [f"{s[:-2]} best {min(r[s] for r in runs):6.2f} s "
             f"median {statistics.median(r[s] for r in runs):6.2f} s" for s in STAGES]
    return f"  {label}: {runs[0]['pages']} pages; " + "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--against", help="another source tree (its zerocalc/ package)")
    ap.add_argument("--against-rev", help="a git revision whose zerocalc/ writes the same report")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        other = Path(args.against).resolve() if args.against else (
            tree_at(args.against_rev, tmp) if args.against_rev else None)
        trees = {"this tree": ROOT}
        if other is not None:
            trees[args.against or args.against_rev] = other
        envs = {}
        for k, (label, tree) in enumerate(trees.items()):
            env = {key: v for key, v in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(tmp / f"pyc-{k}")
            envs[label] = env
            run(tree, tmp / f"warm-{k}.pdf", env)  # bytecode and font cache, untimed
        times: dict[str, list[dict]] = {label: [] for label in trees}
        for _ in range(args.runs):
            for k, (label, tree) in enumerate(trees.items()):  # alternately: a busy spell hits both
                times[label].append(run(tree, tmp / f"report-{k}.pdf", envs[label]))
        print(f"zerocalc report, {args.runs} run(s) each, {os.cpu_count()} CPUs")
        for label in trees:
            print(_line(label, times[label]))
        if other is not None:
            this, that = list(trees)
            best = {label: {s: min(r[s] for r in times[label]) for s in STAGES} for label in trees}
            ratios = ", ".join(f"{s[:-2]} {best[this][s] / best[that][s]:.2f}x" for s in STAGES)
            same = (tmp / "report-0.pdf").read_bytes() == (tmp / "report-1.pdf").read_bytes()
            print(f"  {this} / {that} (best): {ratios}; "
                  f"the PDFs are {'the same' if same else 'different'} bytes")


if __name__ == "__main__":
    main()
