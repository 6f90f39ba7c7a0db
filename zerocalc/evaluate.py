"""The one bridge from the symbolic model to numbers: lambdify once, evaluate vectorised.

Every model expression (bytes per rank, time, memory) is turned into a numpy function of
:data:`zerocalc.symbols.ARGUMENTS` once per (scheme, quantity, algorithm) and cached;
sweeps pass numpy arrays and broadcast.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, as_algorithm
from zerocalc.errors import ConfigError
from zerocalc.schemes import get_scheme

#: dtype name → bytes per element on the wire
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}


@cache
def compiled(scheme: str, quantity: str, algorithm: str = Algorithm.RING.value):
    """The numpy function of :data:`ARGUMENTS` for ``quantity`` ∈ {bytes, time, memory} of ``scheme``."""
    sch = get_scheme(scheme)
    if quantity == "bytes":
        expr = sch.bytes_per_rank(algorithm)
    elif quantity == "time":
        expr = sch.time_s(algorithm)
    elif quantity == "memory":
        from zerocalc.memory import model_state_bytes

        expr = model_state_bytes(scheme)
    else:
        raise ValueError(f"unknown quantity {quantity!r}")
    return sympy.lambdify(S.ARGUMENTS, expr, modules="numpy", cse=True)


def check_layout(n, gpus_per_node):
    """Validate N and G and return G as used by the model.

    N < G is one partial node (G becomes N); N > G must be a whole number of nodes, else
    :class:`ConfigError`. Works on scalars and numpy arrays.
    """
    n = np.asarray(n)
    g = np.asarray(gpus_per_node)
    if np.any(n < 1) or np.any(n != np.floor(n)):
        raise ConfigError("must be a whole number of ranks ≥ 1", option="--n")
    if np.any(g < 1) or np.any(g != np.floor(g)):
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    g_eff = np.minimum(g, n)
    partial = n % g_eff != 0
    if np.any(partial):
        shape = np.broadcast(n, g_eff).shape
        bad = np.broadcast_to(n, shape)[np.broadcast_to(partial, shape)].flat[0]
        raise ConfigError(
            f"N = {int(bad)} is not a multiple of the GPUs per node; zerocalc models whole nodes "
            "(or fewer GPUs than one node): pick N as a multiple of --gpus-per-node",
            option="--n",
        )
    return g_eff


def model_bytes_per_rank(
    scheme: str,
    *,
    psi: float,
    n: int,
    gpus_per_node: int = 8,
    comm_bytes: float = 2.0,
    algorithm: Algorithm | str = Algorithm.RING,
) -> float:
    """Bytes one rank sends per step for ``scheme`` (ring algorithms by default), as a float."""
    if not psi > 0:
        raise ConfigError(f"must be positive, got {psi!r}", option="--psi")
    g = check_layout(n, gpus_per_node)
    f = compiled(get_scheme(scheme).name, "bytes", as_algorithm(algorithm).value)
    values = {s.name: 1.0 for s in S.ARGUMENTS}
    values.update(Psi=float(psi), N=float(n), G=float(g), b_comm=float(comm_bytes))
    return float(f(*(values[s.name] for s in S.ARGUMENTS)))
