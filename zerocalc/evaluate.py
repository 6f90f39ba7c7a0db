"""The one bridge from the symbolic model to numbers: lambdify once, evaluate vectorised.

Model expressions (bytes per rank, time, memory) are turned into numpy functions of
:data:`zerocalc.symbols.ARGUMENTS` and cached: one per (scheme, quantity, algorithm) in
:func:`compiled`, one per requested list of them in :func:`compiled_many` (what :func:`evaluate`
uses); sweeps pass numpy arrays and broadcast.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy

from zerocalc import dtypes
from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, as_algorithm
from zerocalc.errors import ConfigError
from zerocalc.schemes import SCHEME_NAMES, SCHEMES, get_scheme
from zerocalc.topology import DEFAULT_TOPOLOGY, Topology, get_topology

#: dtype name → bytes per element on the wire


def _expression(scheme: str, quantity: str, algorithm: str) -> sympy.Expr:
    sch = get_scheme(scheme)
    if quantity == "bytes":
        return sch.bytes_per_rank(algorithm)
    if quantity == "time":
        return sch.time_s(algorithm)
    if quantity == "memory":
        from zerocalc.memory import model_state_bytes

        return model_state_bytes(scheme)
    raise ValueError(f"unknown quantity {quantity!r}")


@cache
def compiled(scheme: str, quantity: str, algorithm: str = Algorithm.RING.value):
    """The numpy function of :data:`ARGUMENTS` for ``quantity`` ∈ {bytes, time, memory} of ``scheme``."""
    return sympy.lambdify(S.ARGUMENTS, _expression(scheme, quantity, algorithm), modules="numpy", cse=True)


@cache
def compiled_many(keys: tuple[tuple[str, str, str], ...]):
    """One numpy function returning the list of quantities named by ``(scheme, quantity, algorithm)`` keys.

    A single ``lambdify`` (one code string, common subexpressions shared across schemes) is
    several times cheaper to build than one per quantity, which matters for CLI start-up.
    """
    exprs = [_expression(*key) for key in keys]
    return sympy.lambdify(S.ARGUMENTS, exprs, modules="numpy", cse=True)


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
        per = np.broadcast_to(g_eff, shape)[np.broadcast_to(partial, shape)].flat[0]
        raise ConfigError(  # either option may be the one to change: the CLI names the one given
            f"N = {int(bad)} is not a multiple of the {int(per)} GPUs per node; zerocalc models whole "
            "nodes (or fewer GPUs than one node): pick N as a multiple of --gpus-per-node",
            option="--n/--gpus-per-node",
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


def _positive(value, option: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ConfigError(f"must be positive and finite, got {value!r}", option=option)
    return arr


def dtype_bytes(comm_dtype: str | float) -> float:
    """Bytes per element of a dtype name or alias (``fp16`` → 2.0, :mod:`zerocalc.dtypes`);
    numbers pass through."""
    if isinstance(comm_dtype, int | float) and not isinstance(comm_dtype, bool):
        return float(_positive(comm_dtype, "--dtype"))
    return float(dtypes.dtype_bytes(str(comm_dtype)))


def evaluate_arrays(
    schemes=None,
    *,
    psi,
    n,
    gpus_per_node: int | None = None,
    topology: str | Topology = DEFAULT_TOPOLOGY,
    comm_dtype: str | float = "fp16",
    k: float = 12.0,
    param_bytes: float = 2.0,
    grad_bytes: float = 2.0,
    algorithms=tuple(Algorithm),
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """The numeric core of :func:`evaluate` without the DataFrame: ``(config columns, {scheme: columns})``.

    Configuration columns are flat arrays of one value per configuration (``psi``, ``n``,
    ``gpus_per_node`` as modelled, ``b_comm`` bytes per element on the wire); per scheme the
    arrays ``bytes_per_rank``, ``memory_bytes_per_rank`` and ``time_s_<algorithm>``.
    """
    topo = get_topology(topology)
    schemes = None if schemes is None else ([schemes] if isinstance(schemes, str) else list(schemes))
    if schemes is not None and not schemes:
        raise ConfigError("no scheme given; name at least one, e.g. dp,zero2 (or omit it for all)",
                          option="--schemes")
    names = [get_scheme(s).name for s in (SCHEME_NAMES if schemes is None else schemes)]
    algs = [as_algorithm(a) for a in algorithms]
    psi_a, n_a = np.broadcast_arrays(_positive(psi, "--psi"), np.asarray(n, dtype=float))
    psi_a, n_a = psi_a.ravel(), n_a.ravel()
    g = topo.gpus_per_node if gpus_per_node is None else gpus_per_node
    g_a = np.broadcast_to(check_layout(n_a, g).astype(float), n_a.shape)
    k = float(np.asarray(k))
    if not (np.isfinite(k) and k >= 0):
        raise ConfigError(f"must be a non-negative number, got {k!r}", option="--k")
    values = dict(topo.values(), Psi=psi_a, N=n_a, G=g_a, b_comm=dtype_bytes(comm_dtype),
                  b_param=float(param_bytes), b_grad=float(grad_bytes), K=k)
    args = [values[s.name] for s in S.ARGUMENTS]
    shape = psi_a.shape

    ring = Algorithm.RING.value
    columns = [("bytes_per_rank", "bytes", ring), ("memory_bytes_per_rank", "memory", ring)]
    columns += [(f"time_s_{a.value}", "time", a.value) for a in algs]
    keys = tuple((name, q, alg) for name in names for _, q, alg in columns)
    results = iter(compiled_many(keys)(*args))
    per_scheme = {
        name: {col: np.broadcast_to(np.asarray(next(results), dtype=float), shape) for col, _, _ in columns}
        for name in names
    }
    config = {"psi": psi_a, "n": n_a, "gpus_per_node": g_a, "b_comm": np.full(shape, values["b_comm"])}
    return config, per_scheme


def evaluate(
    schemes=None,
    *,
    psi,
    n,
    gpus_per_node: int | None = None,
    topology: str | Topology = DEFAULT_TOPOLOGY,
    comm_dtype: str | float = "fp16",
    k: float = 12.0,
    param_bytes: float = 2.0,
    grad_bytes: float = 2.0,
    default_algorithm: Algorithm | str = Algorithm.RING,
):
    """Evaluate schemes over one configuration or a sweep; a tidy ``pandas.DataFrame``.

    ``psi`` (parameters) and ``n`` (ranks) are scalars or arrays that broadcast together;
    ``gpus_per_node`` defaults to the topology's. One row per (configuration, scheme), with
    columns ``scheme, psi, n, gpus_per_node, nodes, topology, comm_bytes_per_element,
    bytes_per_rank`` (bytes one rank sends per step, ring algorithms),
    ``bytes_per_rank_over_psi`` (÷ Ψ·b: 2(N-1)/N for dp), ``memory_bytes_per_rank``
    (model states), ``time_s`` (the ``default_algorithm``, Ring like NCCL for large
    messages), ``time_s_<algorithm>`` for every algorithm, and ``equivalent_to_dp`` (at that
    row's N: :meth:`zerocalc.schemes.Scheme.equivalent_at`). An empty ``schemes`` list is a
    :class:`ConfigError` for ``--schemes``.
    """
    import pandas as pd

    topo = get_topology(topology)
    config, per_scheme = evaluate_arrays(
        schemes, psi=psi, n=n, gpus_per_node=gpus_per_node, topology=topo, comm_dtype=comm_dtype,
        k=k, param_bytes=param_bytes, grad_bytes=grad_bytes,
    )
    default = as_algorithm(default_algorithm).value
    frames = []
    for name, cols in per_scheme.items():
        frame = {
            "scheme": name,
            "psi": config["psi"],
            "n": config["n"].astype(np.int64),
            "gpus_per_node": config["gpus_per_node"].astype(np.int64),
            "nodes": np.ceil(config["n"] / config["gpus_per_node"]).astype(np.int64),
            "topology": topo.name,
            "comm_bytes_per_element": config["b_comm"],
            "bytes_per_rank": cols["bytes_per_rank"],
            "bytes_per_rank_over_psi": cols["bytes_per_rank"] / (config["psi"] * config["b_comm"]),
            "memory_bytes_per_rank": cols["memory_bytes_per_rank"],
            "time_s": cols[f"time_s_{default}"],
        }
        frame.update({k_: v for k_, v in cols.items() if k_.startswith("time_s_")})
        frame["equivalent_to_dp"] = np.broadcast_to(SCHEMES[name].equivalent_at(config["n"]),
                                                    config["n"].shape)
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)
