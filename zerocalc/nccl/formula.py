"""NCCL's cost model as formulas: the Ring and Tree times of ``ncclTopoTuneModel`` (v2.30.7) in sympy.

The numbers of :mod:`zerocalc.nccl.model` come from these expressions with NCCL's tables filled in;
here they stay symbolic so ``zerocalc derive --nccl`` can show them. Symbols (all positive):

- ``n``: bytes of the call (NCCL's ``nBytes``), ``p``: ranks, ``m``: nodes (``p/m`` ranks per node);
- ``c``: channels, ``B``: bandwidth of one channel (GB/s; ``bwIntra`` on up to two nodes, else ``bwInter``);
- ``L_0``: base latency, ``l_intra`` / ``l_inter``: latency of one hop inside a node / over the network
  (µs, per algorithm and protocol);
- ``f``: the protocol's bandwidth factor (Simple 1, LL128 0.92, Ring LL 0.5; Tree LL 1/3.8), Tree's
  0.92 and its per-channel cap ``B_tree`` (``perChMaxTreeBws``).

Time in µs: ``latency + n / (1000 · algorithm bandwidth)``, with bus → algorithm bandwidth
``× p / nsteps`` for Ring and ``× 1/2`` for Tree (``tuning.cc``). Ring's latency counts
``nsteps - nInterSteps`` NVLink/PCI hops and ``nInterSteps`` network hops (2(m−1) for all-reduce,
m−1 for all-gather / reduce-scatter); Tree's ``2((p/m − 1) l_intra + log2(m) l_inter)``. Ring's
network-overhead floor, the LL cap ``llMaxBw`` and Tree's size-dependent correction factors are
left to the numeric model.
"""

from __future__ import annotations

import sympy

from zerocalc.symbols import SymbolInfo

n, p, m, c, B, L0, l_intra, l_inter, f, B_tree = sympy.symbols(
    "n p m c B L_0 l_intra l_inter f B_tree", positive=True)

#: The symbols above with their meaning and unit, for a legend (``zerocalc derive --nccl``).
SYMBOLS: dict[str, SymbolInfo] = {s.symbol.name: s for s in (
    SymbolInfo(n, "bytes of one call (NCCL's nBytes)", "bytes"),
    SymbolInfo(p, "ranks of the call's communicator", "ranks"),
    SymbolInfo(m, "nodes of the communicator (p/m ranks per node)", "nodes"),
    SymbolInfo(c, "channels the call runs on", "channels"),
    SymbolInfo(B, "bandwidth of one channel (bwIntra on up to two nodes, else bwInter)", "GB/s"),
    SymbolInfo(L0, "base latency of the algorithm and protocol (baseLat)", "µs"),
    SymbolInfo(l_intra, "latency of one hop inside a node (hwLat of NVLink or PCI)", "µs"),
    SymbolInfo(l_inter, "latency of one hop over the network (hwLat of NET)", "µs"),
    SymbolInfo(f, "the protocol's bandwidth factor (Simple 1, LL128 0.92, Ring LL 0.5, Tree LL 1/3.8)", "1"),
    SymbolInfo(B_tree, "Tree's per-channel bandwidth cap (perChMaxTreeBws)", "GB/s"),
)}

_STEPS = {"all_reduce": (2 * (p - 1), 2 * (m - 1)), "all_gather": (p - 1, m - 1),
          "reduce_scatter": (p - 1, m - 1)}


def ring_time_us(collective: str) -> sympy.Expr:
    """NCCL's Ring time (µs) for all-reduce, all-gather or reduce-scatter."""
    nsteps, inter = _STEPS[collective]
    latency = L0 + (nsteps - inter) * l_intra + inter * l_inter
    algbw = c * B * f * p / nsteps
    return latency + n / (1000 * algbw)


def tree_time_us() -> sympy.Expr:
    """NCCL's Tree all-reduce time (µs): bus bandwidth min(0.92·f·c·B, c·B_tree), halved."""
    latency = L0 + 2 * ((p / m - 1) * l_intra + sympy.log(m, 2) * l_inter)
    algbw = sympy.Min(sympy.Rational(92, 100) * f * c * B, c * B_tree) / 2
    return latency + n / (1000 * algbw)


def formulas(collective: str) -> dict[str, sympy.Expr]:
    """The algorithms with a closed form for ``collective`` (Tree: all-reduce only), by name."""
    out = {"Ring": ring_time_us(collective)} if collective in _STEPS else {}
    if collective == "all_reduce":
        out["Tree"] = tree_time_us()
    return out
