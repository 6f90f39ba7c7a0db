"""Vectorised sweep vs sympy subs/evalf: configuration-schemes evaluated per second, as a ratio.

Run: ``python benchmarks/bench_sweep.py [--configs 1000000] [--sample 24]``.
Each configuration-scheme is the full set of model quantities zerocalc reports: bytes per
rank, model-state memory and the step time under the four algorithms (6 expressions).
The baseline evaluates the same sympy expressions with ``subs(...).evalf()`` on a random
sample, in the same process; the two are also checked to agree.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm
from zerocalc.evaluate import evaluate_arrays
from zerocalc.memory import model_state_bytes
from zerocalc.schemes import SCHEME_NAMES, SCHEMES
from zerocalc.topology import get_topology


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=200_000)
    ap.add_argument("--sample", type=int, default=24)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    psi = 10 ** rng.uniform(8, 12, args.configs)
    n = 8 * rng.integers(1, 513, args.configs)  # whole DGX nodes, 8 … 4096 ranks

    t0 = time.perf_counter()
    evaluate_arrays(psi=1e9, n=8)  # builds the expressions and lambdifies them once (cached)
    t_compile = time.perf_counter() - t0

    t0 = time.perf_counter()
    checksum = 0.0
    kept = {}
    for lo in range(0, args.configs, args.chunk):
        _, per = evaluate_arrays(psi=psi[lo:lo + args.chunk], n=n[lo:lo + args.chunk])
        checksum += sum(float(v.sum()) for cols in per.values() for v in cols.values())
        if lo == 0:
            kept = per
    t_vec = time.perf_counter() - t0
    pairs = args.configs * len(SCHEME_NAMES)
    vec_rate = pairs / t_vec

    topo = get_topology("dgx-a100").values()
    rnd = random.Random(0)
    first = min(args.chunk, args.configs)
    sample = [(rnd.randrange(first), rnd.choice(SCHEME_NAMES)) for _ in range(args.sample)]
    t0 = time.perf_counter()
    worst = 0.0
    for i, name in sample:
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
    t_sym = time.perf_counter() - t0
    sym_rate = args.sample / t_sym

    print(f"configurations: {args.configs:,} × {len(SCHEME_NAMES)} schemes = {pairs:,} "
          "configuration-schemes (6 quantities each)")
    print(f"lambdify (once, all schemes): {t_compile:.2f} s")
    print(f"vectorised numpy: {t_vec:.2f} s → {vec_rate:,.0f} configuration-schemes/s")
    print(f"sympy subs/evalf on {args.sample} samples: {t_sym:.2f} s → "
          f"{sym_rate:,.1f} configuration-schemes/s")
    print(f"speed-up ratio (vectorised / sympy): {vec_rate / sym_rate:,.0f}×")
    print(f"max relative difference on the sample: {worst:.1e}   (checksum {checksum:.6e})")


if __name__ == "__main__":
    main()
