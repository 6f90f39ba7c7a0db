"""Cold start: what a command costs before and apart from its work, against ``python -c pass``.

Each command runs in a fresh process, as a user runs it: ``python -c pass`` (the baseline),
``import zerocalc``, ``zerocalc --help``, ``zerocalc table`` and ``zerocalc check`` on small logs
(the bundled 128-rank Ray log, 1.6 KB, and a synthetic 128-rank log of ``--small-kb`` KB written
by benchmarks/synth_nccl_log.py), where nearly all of the time is the fixed cost: the interpreter,
the imports, the worker start, what follows the read. Reports wall time and CPU time (user + system
of the child: less sensitive to a busy machine), best and median of ``--runs`` runs.

``--against DIR`` (another source tree, its ``zerocalc/`` package) or ``--against-rev REV`` (that git
revision's ``zerocalc/``, extracted to a temporary directory) runs every command with that tree too,
the two trees alternately, and gives this tree's time over that one's. Every tree runs with its
bytecode compiled once beforehand (in a temporary ``PYTHONPYCACHEPREFIX``, one untimed run per
command), as an installed package has it, whatever ``PYTHONDONTWRITEBYTECODE`` says.

    python benchmarks/bench_cold_start.py [--runs 5] [--against-rev main] [--small-kb 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sources import synth, tree_at

ROOT = Path(__file__).resolve().parent.parent
RAY = ROOT / "tests" / "data" / "traces" / "nccl-debug" / "ddp-allreduce-128ranks-L4-ray.txt"


def _env(tree: Path | None, pycache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def _run(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``cmd`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _line(name: str, runs: list[tuple[float, float]], base: float) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return (f"  {name:34s} wall best {min(walls):6.3f} s  median {statistics.median(walls):6.3f} s   "
            f"CPU best {min(cpus):6.3f} s  median {statistics.median(cpus):6.3f} s   "
            f"(+{min(walls) - base:.3f} s over python -c pass)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--small-kb", type=float, default=300.0, help="size of the synthetic small log")
    ap.add_argument("--against", help="another source tree (its zerocalc/ package)")
    ap.add_argument("--against-rev", help="a git revision whose zerocalc/ runs the same commands")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        small = tmp / "small.txt"
        synth().build(small, args.small_kb * 1000)
        zc = [sys.executable, "-m", "zerocalc"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import zerocalc": [sys.executable, "-c", "import zerocalc"],
            "zerocalc --help": [*zc, "--help"],
            "zerocalc table": [*zc, "table"],
            f"zerocalc check {RAY.name[:13]}..": [*zc, "check", str(RAY)],
            f"zerocalc check {args.small_kb:g} KB log": [*zc, "check", str(small)],
            f"zerocalc check {args.small_kb:g} KB, json": [*zc, "check", str(small), "--format", "json"],
        }
        other = Path(args.against).resolve() if args.against else (
            tree_at(args.against_rev, tmp) if args.against_rev else None)
        trees = {"this tree": (ROOT, _env(ROOT, tmp / "pyc-this"))}
        if other is not None:
            trees[args.against or args.against_rev] = (other, _env(other, tmp / "pyc-other"))
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for tree, env in trees.values():  # bytecode compiled, untimed
            for cmd in commands.values():
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=tree)
        for _ in range(args.runs):
            for name, cmd in commands.items():
                for label, (tree, env) in trees.items():  # alternately: a busy spell hits both
                    times.setdefault((label, name), []).append(_run(cmd, env, tree))
        print(f"cold start, {args.runs} runs each, {os.cpu_count()} CPUs")
        for label in trees:
            print(f"{label}:")
            base = min(w for w, _ in times[(label, 'python -c pass')])
            for name in commands:
                print(_line(name, times[(label, name)], base))
        if other is not None:
            this, that = list(trees)
            print(f"{this} / {that}:")
            for name in commands:
                a, b = times[(this, name)], times[(that, name)]
                print(f"  {name:34s} wall {min(w for w, _ in a) / min(w for w, _ in b):5.2f}x (best), "
                      f"{statistics.median(w for w, _ in a) / statistics.median(w for w, _ in b):5.2f}x "
                      f"(median); CPU {min(c for _, c in a) / min(c for _, c in b):5.2f}x (best)")


if __name__ == "__main__":
    main()
