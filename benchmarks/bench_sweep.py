"""Vectorised sweep vs sympy subs/evalf: configuration-schemes evaluated per second, as a ratio.

Run: ``python benchmarks/bench_sweep.py [--configs 1000000] [--sample 24] [--against DIR]``.
Each configuration-scheme is the full set of model quantities zerocalc reports: bytes per
rank, model-state memory and the step time under the four algorithms (6 expressions).
The baseline evaluates the same sympy expressions with ``subs(...).evalf()`` on a random
sample, in the same process; the two are also checked to agree.

``--against DIR`` also times the same vectorised sweep with the zerocalc source tree in DIR (an
earlier revision, e.g. ``git worktree add DIR REV`` or ``git archive REV | tar -x -C DIR``), each
tree in its own process, alternately ``--repeat`` times in this run, and prints the throughput
ratio (this tree / DIR, of the best runs and of the medians). The one-time build of the numpy
kernels is timed apart ("lambdify") in both: the sweep is evaluated once, on its first chunk,
before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def _inputs(configs: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    psi = 10 ** rng.uniform(8, 12, configs)
    n = 8 * rng.integers(1, 513, configs)  # whole DGX nodes, 8 … 4096 ranks
    return psi, n


def vectorised(configs: int, chunk: int) -> dict:
    """Time ``evaluate_arrays`` over the sweep in chunks (the kernels built first, timed apart)."""
    from zerocalc.evaluate import evaluate_arrays
    from zerocalc.schemes import SCHEME_NAMES

    psi, n = _inputs(configs)
    first = min(chunk, configs)
    t0 = time.perf_counter()
    evaluate_arrays(psi=1e9, n=8)  # builds the expressions and the generic kernel once (cached)
    evaluate_arrays(psi=psi[:first], n=n[:first])  # and the sweep's own, where one is built
    t_compile = time.perf_counter() - t0

    t0 = time.perf_counter()
    checksum = 0.0
    kept = {}
    for lo in range(0, configs, chunk):
        _, per = evaluate_arrays(psi=psi[lo:lo + chunk], n=n[lo:lo + chunk])
        checksum += sum(float(v.sum()) for cols in per.values() for v in cols.values())
        if lo == 0:
            kept = per
    t_vec = time.perf_counter() - t0
    pairs = configs * len(SCHEME_NAMES)
    return {"schemes": len(SCHEME_NAMES), "pairs": pairs, "t_compile": t_compile, "t_vec": t_vec,
            "rate": pairs / t_vec, "checksum": checksum, "kept": kept}


def _sympy_baseline(kept: dict, configs: int, chunk: int, sample: int) -> tuple[float, float]:
    """(configuration-schemes per second by sympy subs/evalf, worst relative difference)."""
    from zerocalc import symbols as S
    from zerocalc.collectives import Algorithm
    from zerocalc.memory import model_state_bytes
    from zerocalc.schemes import SCHEME_NAMES, SCHEMES
    from zerocalc.topology import get_topology

    psi, n = _inputs(configs)
    topo = get_topology("dgx-a100").values()
    rnd = random.Random(0)
    first = min(chunk, configs)
    picks = [(rnd.randrange(first), rnd.choice(SCHEME_NAMES)) for _ in range(sample)]
    t0 = time.perf_counter()
    worst = 0.0
    for i, name in picks:
        s = SCHEMES[name]
        subs = {S.Psi: float(psi[i]), S.N: int(n[i]), S.G: 8, S.b_comm: 2, S.b_param: 2, S.b_grad: 2,
                S.K: 12, S.b_p: 2, S.b_g: 2, S.n_mb: 1, S.H: 8, S.D_reuse: 1e9,
                S.alpha_intra: topo["alpha_intra"], S.alpha_inter: topo["alpha_inter"],
                S.bw_intra: topo["bw_intra"], S.bw_inter: topo["bw_inter"], S.gamma: topo["gamma"]}
        exprs = {"bytes_per_rank": s.bytes_per_rank(), "memory_bytes_per_rank": model_state_bytes(name)}
        exprs |= {f"time_s_{a.value}": s.time_s(a) for a in Algorithm}
        for col, expr in exprs.items():
            ref = float(expr.subs(subs).evalf())
            got = float(kept[name][col][i])
            worst = max(worst, abs(got - ref) / max(abs(ref), 1e-300))
    return sample / (time.perf_counter() - t0), worst


def _run_tree(tree: Path, configs: int, chunk: int) -> dict:
    """The vectorised sweep in a process of its own that imports zerocalc from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, __file__, "--configs", str(configs), "--chunk", str(chunk),
                          "--vectorised-only"], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _against(other: Path, configs: int, chunk: int, repeat: int) -> None:
    here = Path(__file__).resolve().parent.parent
    runs: dict[str, list[dict]] = {"this": [], "against": []}
    for _ in range(repeat):  # alternate, so that both see the same load
        runs["against"].append(_run_tree(other, configs, chunk))
        runs["this"].append(_run_tree(here, configs, chunk))
    best = {k: max(r["rate"] for r in v) for k, v in runs.items()}
    median = {k: statistics.median(r["rate"] for r in v) for k, v in runs.items()}
    for k, label in (("against", f"{other}"), ("this", "this tree")):
        r = runs[k]
        print(f"  {label}: {r[0]['schemes']} schemes, lambdify {min(x['t_compile'] for x in r):.2f} s, "
              f"configuration-schemes/s per run: " + ", ".join(f"{x['rate']:,.0f}" for x in r))
    print(f"throughput ratio (this tree / {other}), best of {repeat} each: "
          f"{best['this'] / best['against']:.2f}×; median of each: {median['this'] / median['against']:.2f}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=200_000)
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--against", type=Path, default=None,
                    help="another zerocalc source tree to time the same sweep with, in this run")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tree with --against")
    ap.add_argument("--vectorised-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.vectorised_only:
        res = vectorised(args.configs, args.chunk)
        res.pop("kept")
        print(json.dumps(res))
        return
    res = vectorised(args.configs, args.chunk)
    sym_rate, worst = _sympy_baseline(res["kept"], args.configs, args.chunk, args.sample)
    print(f"configurations: {args.configs:,} × {res['schemes']} schemes = {res['pairs']:,} "
          "configuration-schemes (6 quantities each)")
    print(f"lambdify (once per sweep, all schemes): {res['t_compile']:.2f} s")
    print(f"vectorised numpy: {res['t_vec']:.2f} s → {res['rate']:,.0f} configuration-schemes/s")
    print(f"sympy subs/evalf on {args.sample} samples → {sym_rate:,.1f} configuration-schemes/s")
    print(f"speed-up ratio (vectorised / sympy): {res['rate'] / sym_rate:,.0f}×")
    print(f"max relative difference on the sample: {worst:.1e}   (checksum {res['checksum']:.6e})")
    if args.against is not None:
        _against(args.against, args.configs, args.chunk, args.repeat)


if __name__ == "__main__":
    main()
