"""Every sympy symbol of the model, with its assumptions, meaning and unit.

Notation follows ZeRO (Rajbhandari et al., SC20, arXiv 1910.02054, §3.1, §5) and the
Hockney α-β-γ cost model as used by Thakur, Rabenseifner & Gropp (IJHPCA 2005).
Units inside zerocalc: elements, bytes, seconds, bytes/second.

The symbol *names* are valid Python identifiers (they become ``lambdify`` argument
names); ``Psi`` and ``alpha_*`` print as Ψ and α in pretty and LaTeX output.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy


@dataclass(frozen=True)
class SymbolInfo:
    """A model symbol with its meaning and unit."""

    symbol: sympy.Symbol
    meaning: str
    unit: str


Psi = sympy.Symbol("Psi", positive=True, integer=True)
N = sympy.Symbol("N", positive=True, integer=True)
G = sympy.Symbol("G", positive=True, integer=True)
b_param = sympy.Symbol("b_param", positive=True)
b_grad = sympy.Symbol("b_grad", positive=True)
b_comm = sympy.Symbol("b_comm", positive=True)
b_p = sympy.Symbol("b_p", positive=True)
b_g = sympy.Symbol("b_g", positive=True)
n_mb = sympy.Symbol("n_mb", positive=True, integer=True)
H = sympy.Symbol("H", positive=True, integer=True)
D_reuse = sympy.Symbol("D_reuse", nonnegative=True)
K = sympy.Symbol("K", positive=True)
alpha_intra = sympy.Symbol("alpha_intra", positive=True)
alpha_inter = sympy.Symbol("alpha_inter", positive=True)
bw_intra = sympy.Symbol("bw_intra", positive=True)
bw_inter = sympy.Symbol("bw_inter", positive=True)
gamma = sympy.Symbol("gamma", nonnegative=True)

SYMBOLS: dict[str, SymbolInfo] = {
    s.symbol.name: s
    for s in (
        SymbolInfo(Psi, "parameter count Ψ (ZeRO §3.1)", "elements"),
        SymbolInfo(N, "data-parallel degree: ranks in the data-parallel group (world/(tp·pp))", "ranks"),
        SymbolInfo(G, "GPUs per node: ranks in an intra-node group", "ranks"),
        SymbolInfo(b_param, "bytes per stored parameter element (2 for fp16/bf16)", "bytes/element"),
        SymbolInfo(b_grad, "bytes per stored gradient element (2 for fp16/bf16)", "bytes/element"),
        SymbolInfo(b_comm, "one wire width for every collective (callers that set b_p = b_g = b_comm)",
                   "bytes/element"),
        SymbolInfo(K, "optimizer-state bytes per parameter (12 for mixed-precision Adam, ZeRO §3.1)",
                   "bytes/element"),
        SymbolInfo(alpha_intra, "latency per message step inside a node", "s"),
        SymbolInfo(alpha_inter, "latency per message step between nodes", "s"),
        SymbolInfo(bw_intra, "bandwidth of one GPU's intra-node link, one direction", "bytes/s"),
        SymbolInfo(bw_inter, "inter-node injection bandwidth of one whole node, one direction", "bytes/s"),
        SymbolInfo(gamma, "reduction compute time per byte", "s/byte"),
        SymbolInfo(b_p, "bytes per element of the parameter-side collectives (all-gather, broadcast of "
                   "parameters): the parameter dtype, e.g. FSDP2 MixedPrecisionPolicy.param_dtype",
                   "bytes/element"),
        SymbolInfo(b_g, "bytes per element of the gradient-side collectives (all-reduce, reduce-scatter, "
                   "reduce): the reduction dtype, e.g. MixedPrecisionPolicy.reduce_dtype", "bytes/element"),
        SymbolInfo(n_mb, "micro-batches per optimizer step (gradient accumulation steps)", "micro-batches"),
        SymbolInfo(H, "HSDP shard-group size: ranks that shard one replica (FSDP HYBRID_SHARD)", "ranks"),
        SymbolInfo(D_reuse, "DeepSpeed stage3_max_reuse_distance: parameters kept gathered when reused "
                   "within this many parameter elements", "elements"),
    )
}

#: Argument order of every lambdified model function (see :mod:`zerocalc.evaluate`).
ARGUMENTS: tuple[sympy.Symbol, ...] = tuple(s.symbol for s in SYMBOLS.values())
