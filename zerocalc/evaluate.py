"""The one bridge from the symbolic model to numbers: lambdify once, evaluate vectorised.

Model expressions (bytes per rank, time, memory) are turned into numpy functions of
:data:`zerocalc.symbols.ARGUMENTS` and cached: one per (scheme, quantity, algorithm, gradient-sync
mode) in :func:`compiled`, one per requested list of them in :func:`compiled_many` (what
:func:`evaluate` uses); sweeps pass numpy arrays and broadcast.

The parallel layout is applied here, numerically: ``n`` is the world of GPUs, the data-parallel
group is N = world/(tp·pp) ranks carrying Ψ/(tp·pp) parameters (Megatron-LM's rank order
tp-dp-pp: tensor-parallel ranks adjacent, pipeline stages outermost), so G/tp ranks of one
data-parallel group share a node, and the tp groups of a node share its network bandwidth
(the model's ``bw_inter`` becomes bw_inter·(G/tp)/G). REFERENCE: issue 10, "Parallel layout".
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
import sympy

from zerocalc import dtypes
from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, as_algorithm
from zerocalc.errors import ConfigError
from zerocalc.schemes import SCHEME_NAMES, SCHEMES, GradSync, as_grad_sync, get_scheme
from zerocalc.topology import DEFAULT_TOPOLOGY, Topology, get_topology

#: DeepSpeed's default ``stage3_max_reuse_distance`` (deepspeed/runtime/zero/config.py: 1e9 elements).
DEFAULT_REUSE_DISTANCE = 1e9

#: What the kernels are lambdified with: the numpy module itself, not its name. sympy prints the same code
#: for either (its NumPyPrinter, chosen by the module's ``__name__``) and the code's names find the same
#: numpy functions in the module's namespace; the name makes sympy build its own namespace first with
#: ``from numpy import *`` (sympy/utilities/lambdify.py, MODULES["numpy"]), which under numpy 2 imports
#: numpy.f2py, numpy.testing and unittest: about 0.1 s at the first kernel of every process.
_NUMPY = np


def _expression(scheme: str, quantity: str, algorithm: str,
                grad_sync: str = GradSync.EVERY.value, shard_is_node: bool = False) -> sympy.Expr:
    """The model expression; with ``shard_is_node`` HSDP's shard group is the node (H = G), which
    folds its one-node-or-not cases away (a cheaper numpy function for the default layout). G goes in
    for H in one pass (``xreplace``: for every scheme the expression ``subs`` gives, at a fifth of its
    cost; tests/test_evaluate.py compares the two)."""
    sch = get_scheme(scheme)
    if quantity == "bytes":
        expr = sch.bytes_per_rank(algorithm, grad_sync)
    elif quantity == "time":
        expr = sch.time_s(algorithm, grad_sync)
    elif quantity == "memory":
        from zerocalc.memory import model_state_bytes

        expr = model_state_bytes(scheme, grad_sync)
    else:
        raise ValueError(f"unknown quantity {quantity!r}")
    return expr.xreplace({S.H: S.G}) if shard_is_node else expr


@cache
def compiled(scheme: str, quantity: str, algorithm: str = Algorithm.RING.value,
             grad_sync: str = GradSync.EVERY.value):
    """The numpy function of :data:`ARGUMENTS` for ``quantity`` ∈ {bytes, time, memory} of ``scheme``."""
    return sympy.lambdify(S.ARGUMENTS, _expression(scheme, quantity, algorithm, grad_sync), modules=_NUMPY,
                          cse=True)


@cache
def compiled_many(keys: tuple[tuple[str, ...], ...]):
    """One numpy function returning the list of quantities named by ``(scheme, quantity, algorithm[,
    grad_sync])`` keys.

    A single ``lambdify`` (one code string, common subexpressions shared across schemes) is
    several times cheaper to build than one per quantity, which matters for CLI start-up.
    """
    exprs = [_expression(*key) for key in keys]
    return sympy.lambdify(S.ARGUMENTS, exprs, modules=_NUMPY, cse=True)


#: A sweep of at least this many configurations is evaluated by a kernel specialised on the inputs that
#: are the same for all of them (:func:`compiled_fixed`): its one-time build (about a second for every
#: scheme) is repaid when the sweep is this large or its kernel is reused (chunks of one sweep).
SPECIALISE_FROM = 100_000


def _number(value: float) -> sympy.Expr:
    """A constant for an expression: an Integer when whole (so that ``n_mb = 1``, ``b_p = b_g`` and
    ``1/G`` fold exactly), else the same double as a Float."""
    v = float(value)
    return sympy.Integer(int(v)) if v.is_integer() else sympy.Float(v)


@cache
def compiled_fixed(keys: tuple[tuple[str, ...], ...], fixed: tuple[tuple[str, float], ...]):
    """:func:`compiled_many` with the inputs named in ``fixed`` set to their values: a numpy function of
    the other :data:`~zerocalc.symbols.ARGUMENTS` only (in their order).

    With the constants in the expressions, sympy folds what they decide before the common
    subexpressions are taken: one micro-batch drops its ``n_mb·`` factors, equal wire widths merge the
    parameter- and gradient-side terms, the topology's scalars combine, a case split on constants
    alone is decided, so the kernel runs fewer array operations per configuration
    (``benchmarks/bench_sweep.py``).
    """
    values = dict(fixed)
    subs = {s: _number(values[s.name]) for s in S.ARGUMENTS if s.name in values}
    live = [s for s in S.ARGUMENTS if s.name not in values]
    exprs = [_expression(*key).xreplace(subs) for key in keys]
    return sympy.lambdify(live, exprs, modules=_NUMPY, cse=True)


def _kernel(keys: tuple[tuple[str, ...], ...], args: list, size: int):
    """The function for ``keys`` and the arguments to pass it: :func:`compiled_many` with every
    argument, or, for a sweep of :data:`SPECIALISE_FROM` configurations or more, :func:`compiled_fixed`
    with only the arguments that vary over it (an array of one repeated value counts as fixed)."""
    if size < SPECIALISE_FROM:
        return compiled_many(keys), args
    fixed, live = [], []
    for sym, a in zip(S.ARGUMENTS, args, strict=True):
        arr = np.asarray(a, dtype=float)
        first = arr.flat[0]
        if arr.ndim == 0 or bool(np.all(arr == first)):
            fixed.append((sym.name, float(first)))
        else:
            live.append(a)
    return compiled_fixed(keys, tuple(fixed)), live


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
    param_bytes: float | None = None,
    grad_bytes: float | None = None,
    micro_batches: int = 1,
    grad_sync: GradSync | str = GradSync.EVERY,
    hsdp_shard_size: int | None = None,
    reuse_distance: float = DEFAULT_REUSE_DISTANCE,
) -> float:
    """Bytes one rank sends per optimizer step for ``scheme`` (ring algorithms by default), as a float.

    ``n`` is the data-parallel degree; ``param_bytes`` / ``grad_bytes`` (the widths of the parameter-
    and gradient-side collectives) default to ``comm_bytes``; ``hsdp_shard_size`` to the GPUs per node.
    """
    if not psi > 0:
        raise ConfigError(f"must be positive, got {psi!r}", option="--psi")
    g = check_layout(n, gpus_per_node)
    mb = _micro_batches(micro_batches)
    h = g if hsdp_shard_size is None else _shard_size(hsdp_shard_size, n)
    f = compiled(get_scheme(scheme).name, "bytes", as_algorithm(algorithm).value,
                 as_grad_sync(grad_sync).value)
    values = {s.name: 1.0 for s in S.ARGUMENTS}
    values.update(Psi=float(psi), N=float(n), G=float(g), b_comm=float(comm_bytes),
                  b_p=float(comm_bytes if param_bytes is None else param_bytes),
                  b_g=float(comm_bytes if grad_bytes is None else grad_bytes),
                  n_mb=float(mb), H=float(h), D_reuse=float(reuse_distance))
    return float(f(*(values[s.name] for s in S.ARGUMENTS)))


def _micro_batches(value) -> int:
    if isinstance(value, bool) or not float(value) >= 1 or float(value) != int(value):
        raise ConfigError(f"must be a whole number ≥ 1, got {value!r}", option="--micro-batches")
    return int(value)


def _shard_size(h, n_dp) -> np.ndarray:
    """HSDP's shard-group size: a whole number ≥ 1 that divides the data-parallel degree."""
    h_a = np.asarray(h, dtype=float)
    if np.any(h_a < 1) or np.any(h_a != np.floor(h_a)):
        raise ConfigError(f"must be a whole number of ranks ≥ 1, got {h!r}", option="--hsdp-shard-size")
    if np.any(np.asarray(n_dp) % h_a != 0):
        raise ConfigError(f"{h!r} does not divide the data-parallel degree N = world/(tp·pp); HSDP needs "
                          "whole replicas", option="--hsdp-shard-size")
    return h_a


def data_parallel_layout(n, gpus_per_node, tp: int = 1, pp: int = 1):
    """``(N, G of one data-parallel group, G of the node)`` for ``n`` GPUs in the world.

    N = n/(tp·pp) (must divide); with tensor-parallel ranks adjacent (Megatron-LM order tp-dp-pp),
    G/tp ranks of one data-parallel group share a node when tp divides G, one when G divides tp;
    the group must cover whole nodes (or lie in one). :class:`ConfigError` names the option.
    """
    for value, option in ((tp, "--tp"), (pp, "--pp")):
        if isinstance(value, bool) or not float(value) >= 1 or float(value) != int(value):
            raise ConfigError(f"must be a whole number ≥ 1, got {value!r}", option=option)
    tp, pp = int(tp), int(pp)
    g_node = check_layout(n, gpus_per_node)
    n = np.asarray(n, dtype=float)
    if np.any(n % (tp * pp) != 0):
        raise ConfigError(f"the world of {n.flat[0]:g} GPUs is not a multiple of tp·pp = {tp * pp}",
                          option="--n")
    n_dp = n / (tp * pp)
    g_full = np.asarray(gpus_per_node, dtype=float)
    if np.any((g_full % tp != 0) & (tp % g_full != 0)):
        raise ConfigError(f"tp = {tp} neither divides nor is a multiple of the {int(g_full.flat[0])} "
                          "GPUs per node", option="--tp")
    g_dp = np.minimum(np.where(g_full % tp == 0, g_full // tp, 1), n_dp)
    if np.any(n_dp % g_dp != 0):
        raise ConfigError(f"the data-parallel group of N = {n_dp.flat[0]:g} ranks, {g_dp.flat[0]:g} per "
                          "node, does not cover whole nodes; pick tp, pp and --n so that it does",
                          option="--n")
    return n_dp, g_dp, g_node


def _positive(value, option: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ConfigError(f"must be positive and finite, got {value!r}", option=option)
    return arr


def dtype_bytes(comm_dtype: str | float, option: str = "--dtype") -> float:
    """Bytes per element of a dtype name or alias (``fp16`` → 2.0, :mod:`zerocalc.dtypes`);
    numbers pass through."""
    if isinstance(comm_dtype, int | float) and not isinstance(comm_dtype, bool):
        return float(_positive(comm_dtype, option))
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
    param_dtype: str | float | None = None,
    grad_dtype: str | float | None = None,
    micro_batches: int = 1,
    grad_sync: GradSync | str = GradSync.EVERY,
    tp: int = 1,
    pp: int = 1,
    hsdp_shard_size: int | None = None,
    reuse_distance: float = DEFAULT_REUSE_DISTANCE,
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """The numeric core of :func:`evaluate` without the DataFrame: ``(config columns, {scheme: columns})``.

    Configuration columns are flat arrays of one value per configuration (``psi``, ``n`` the
    world, ``dp_size`` = N, ``gpus_per_node`` as modelled, ``gpus_per_node_dp`` of one
    data-parallel group, ``hsdp_shard_size``, ``b_comm``, ``b_p``, ``b_g`` wire widths); per scheme
    the arrays ``bytes_per_rank`` (per optimizer step), ``memory_bytes_per_rank`` and
    ``time_s_<algorithm>``. ``param_bytes`` / ``grad_bytes`` are the STORED widths of the memory
    model; ``param_dtype`` / ``grad_dtype`` the wire dtypes of the parameter- and gradient-side
    collectives (default ``comm_dtype``).
    """
    topo = get_topology(topology)
    names = _scheme_list(schemes)
    algs = [as_algorithm(a) for a in algorithms]
    sync = as_grad_sync(grad_sync).value
    mb = _micro_batches(micro_batches)
    layout = _layout(psi, n, topo.gpus_per_node if gpus_per_node is None else gpus_per_node, tp, pp,
                     hsdp_shard_size)
    k, reuse = _state_and_reuse(k, reuse_distance)
    b_comm = dtype_bytes(comm_dtype)
    b_p = b_comm if param_dtype is None else dtype_bytes(param_dtype, "--param-dtype")
    b_g = b_comm if grad_dtype is None else dtype_bytes(grad_dtype, "--grad-dtype")
    values = _symbol_values(topo, layout, tp, pp, b_comm=b_comm, b_p=b_p, b_g=b_g, k=k, mb=mb,
                            reuse=reuse, param_bytes=param_bytes, grad_bytes=grad_bytes)
    shape = layout.psi.shape
    per_scheme = _run_kernel(names, algs, sync, hsdp_shard_size is None, values, shape)
    config = {"psi": layout.psi, "n": layout.n, "gpus_per_node": layout.g_node,
              "b_comm": np.full(shape, b_comm), "dp_size": np.broadcast_to(layout.n_dp, shape),
              "gpus_per_node_dp": layout.g_dp, "hsdp_shard_size": layout.h, "b_p": np.full(shape, b_p),
              "b_g": np.full(shape, b_g)}
    return config, per_scheme


def _scheme_list(schemes) -> list[str]:
    """The canonical names of ``schemes`` (one name, a list, or None for all); an empty list is a
    :class:`ConfigError` for ``--schemes``."""
    schemes = None if schemes is None else ([schemes] if isinstance(schemes, str) else list(schemes))
    if schemes is not None and not schemes:
        raise ConfigError("no scheme given; name at least one, e.g. dp,zero2 (or omit it for all)",
                          option="--schemes")
    return [get_scheme(s).name for s in (SCHEME_NAMES if schemes is None else schemes)]


class _Layout(NamedTuple):
    """The configurations as flat arrays of one shape: Ψ and the world n as given, the data-parallel
    degree N, G of the node and of one data-parallel group, and HSDP's shard size H."""

    psi: np.ndarray
    n: np.ndarray
    n_dp: np.ndarray
    g_node: np.ndarray
    g_dp: np.ndarray
    h: np.ndarray


def _layout(psi, n, g, tp: int, pp: int, hsdp_shard_size) -> _Layout:
    """Ψ and n broadcast together and laid out in parallel groups (:func:`data_parallel_layout`)."""
    psi_a, n_a = np.broadcast_arrays(_positive(psi, "--psi"), np.asarray(n, dtype=float))
    psi_a, n_a = psi_a.ravel(), n_a.ravel()
    n_dp, g_dp, g_node = data_parallel_layout(n_a, g, tp, pp)
    g_a = np.broadcast_to(g_node.astype(float), n_a.shape)
    g_dp = np.broadcast_to(g_dp.astype(float), n_a.shape)
    h_a = g_dp if hsdp_shard_size is None else np.broadcast_to(_shard_size(hsdp_shard_size, n_dp), n_a.shape)
    return _Layout(psi_a, n_a, n_dp, g_a, g_dp, h_a)


def _state_and_reuse(k, reuse_distance) -> tuple[float, float]:
    """``k`` (optimizer-state bytes per parameter) and ``reuse_distance`` as checked floats."""
    k = float(np.asarray(k))
    if not (np.isfinite(k) and k >= 0):
        raise ConfigError(f"must be a non-negative number, got {k!r}", option="--k")
    reuse = float(reuse_distance)
    if not (np.isfinite(reuse) and reuse >= 0):
        raise ConfigError(f"must be a non-negative number of elements, got {reuse_distance!r}",
                          option="--reuse-distance")
    return k, reuse


def _symbol_values(topo: Topology, layout: _Layout, tp: int, pp: int, *, b_comm: float, b_p: float,
                   b_g: float, k: float, mb: int, reuse: float, param_bytes: float,
                   grad_bytes: float) -> dict:
    """The value of every symbol of :data:`zerocalc.symbols.ARGUMENTS` by name: the data-parallel
    group's Ψ/(tp·pp) on N ranks, G of one group, the topology's links; under tensor parallelism the
    node's network shared by its tp data-parallel groups (module docstring)."""
    share = tp * pp
    values = dict(topo.values(), Psi=layout.psi / share if share > 1 else layout.psi, N=layout.n_dp,
                  G=layout.g_dp, b_comm=b_comm, b_param=float(param_bytes), b_grad=float(grad_bytes), K=k,
                  b_p=b_p, b_g=b_g, n_mb=float(mb), H=layout.h, D_reuse=reuse)
    if tp > 1:
        values["bw_inter"] = group_inter_bandwidth(values["bw_inter"], layout.g_dp, layout.g_node)
    return values


def group_inter_bandwidth(bw_inter, g_dp, g_node):
    """A data-parallel group's share of its node's network under tensor parallelism: the node's tp
    groups, G of the group each, share it (module docstring): ``bw_inter · G_dp / G_node``."""
    return bw_inter * g_dp / g_node


def _run_kernel(names: list[str], algs: list[Algorithm], sync: str, default_shard: bool, values: dict,
                shape: tuple[int, ...]) -> dict[str, dict[str, np.ndarray]]:
    """Per scheme, its ``bytes_per_rank``, ``memory_bytes_per_rank`` and ``time_s_<algorithm>`` arrays
    from one cached kernel (:func:`_kernel`) over the configurations."""
    args = [values[s.name] for s in S.ARGUMENTS]
    ring = Algorithm.RING.value
    columns = [("bytes_per_rank", "bytes", ring), ("memory_bytes_per_rank", "memory", ring)]
    columns += [(f"time_s_{a.value}", "time", a.value) for a in algs]
    keys = tuple((name, q, alg, sync, default_shard) for name in names for _, q, alg in columns)
    kernel, kernel_args = _kernel(keys, args, int(np.prod(shape)))
    results = iter(kernel(*kernel_args))
    return {
        name: {col: np.broadcast_to(np.asarray(next(results), dtype=float), shape) for col, _, _ in columns}
        for name in names
    }


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
    param_dtype: str | float | None = None,
    grad_dtype: str | float | None = None,
    micro_batches: int = 1,
    grad_sync: GradSync | str = GradSync.EVERY,
    tp: int = 1,
    pp: int = 1,
    hsdp_shard_size: int | None = None,
    reuse_distance: float = DEFAULT_REUSE_DISTANCE,
):
    """Evaluate schemes over one configuration or a sweep; a tidy ``pandas.DataFrame``.

    ``psi`` (parameters, all of the model) and ``n`` (GPUs in the world; the data-parallel degree
    when ``tp = pp = 1``) are scalars or arrays that broadcast together; ``gpus_per_node``
    defaults to the topology's. One row per (configuration, scheme), with columns ``scheme, psi,
    n, gpus_per_node, nodes, topology, comm_bytes_per_element, bytes_per_rank`` (bytes one rank
    sends per optimizer step, ring algorithms), ``bytes_per_rank_over_psi`` (÷ Ψ·b with Ψ the
    data-parallel group's parameters: 2(N-1)/N for dp at one micro-batch), ``memory_bytes_per_rank``
    (model states), ``time_s`` (the ``default_algorithm``, Ring like NCCL for large messages, per
    optimizer step), ``time_s_<algorithm>`` for every algorithm, ``equivalent_to_dp`` (at that
    row's N: :meth:`zerocalc.schemes.Scheme.equivalent_at`), then ``micro_batches``,
    ``bytes_per_rank_per_micro_batch`` (per step ÷ micro-batches), ``grad_sync``, ``tp``, ``pp``,
    ``dp_size`` (N), ``hsdp_shard_size`` (H), ``param_comm_bytes_per_element`` (b_p) and
    ``grad_comm_bytes_per_element`` (b_g). At one micro-batch, tp = pp = 1 and one dtype the
    earlier columns keep their meaning. An empty ``schemes`` list is a :class:`ConfigError` for
    ``--schemes``.
    """
    import pandas as pd

    topo = get_topology(topology)
    sync = as_grad_sync(grad_sync).value
    config, per_scheme = evaluate_arrays(
        schemes, psi=psi, n=n, gpus_per_node=gpus_per_node, topology=topo, comm_dtype=comm_dtype,
        k=k, param_bytes=param_bytes, grad_bytes=grad_bytes, param_dtype=param_dtype, grad_dtype=grad_dtype,
        micro_batches=micro_batches, grad_sync=sync, tp=tp, pp=pp, hsdp_shard_size=hsdp_shard_size,
        reuse_distance=reuse_distance,
    )
    default = as_algorithm(default_algorithm).value
    mb = _micro_batches(micro_batches)
    psi_dp = config["psi"] / (int(tp) * int(pp))
    frames = [pd.DataFrame(_scheme_columns(name, cols, config, topology=topo.name, default=default, mb=mb,
                                           sync=sync, tp=int(tp), pp=int(pp), psi_dp=psi_dp))
              for name, cols in per_scheme.items()]
    return pd.concat(frames, ignore_index=True)


def _scheme_columns(name: str, cols: dict, config: dict, *, topology: str, default: str, mb: int,
                    sync: str, tp: int, pp: int, psi_dp) -> dict:
    """One scheme's columns of :func:`evaluate`'s frame, in its order, from :func:`evaluate_arrays`'
    configuration and per-scheme arrays."""
    frame = {
        "scheme": name,
        "psi": config["psi"],
        "n": config["n"].astype(np.int64),
        "gpus_per_node": config["gpus_per_node"].astype(np.int64),
        "nodes": np.ceil(config["n"] / config["gpus_per_node"]).astype(np.int64),
        "topology": topology,
        "comm_bytes_per_element": config["b_comm"],
        "bytes_per_rank": cols["bytes_per_rank"],
        "bytes_per_rank_over_psi": cols["bytes_per_rank"] / (psi_dp * config["b_comm"]),
        "memory_bytes_per_rank": cols["memory_bytes_per_rank"],
        "time_s": cols[f"time_s_{default}"],
    }
    frame.update({k_: v for k_, v in cols.items() if k_.startswith("time_s_")})
    frame["equivalent_to_dp"] = np.broadcast_to(SCHEMES[name].equivalent_at(config["dp_size"]),
                                                config["n"].shape)
    frame.update({
        "micro_batches": mb,
        "bytes_per_rank_per_micro_batch": cols["bytes_per_rank"] / mb,
        "grad_sync": sync,
        "tp": tp,
        "pp": pp,
        "dp_size": config["dp_size"].astype(np.int64),
        "hsdp_shard_size": config["hsdp_shard_size"].astype(np.int64),
        "param_comm_bytes_per_element": config["b_p"],
        "grad_comm_bytes_per_element": config["b_g"],
    })
    return frame


def phase_records(scheme: str, *, psi: float, n: int, gpus_per_node: int, param_bytes: float,
                  grad_bytes: float, micro_batches: int = 1, grad_sync: GradSync | str = GradSync.EVERY,
                  hsdp_shard_size: int | None = None, reuse_distance: float = DEFAULT_REUSE_DISTANCE,
                  algorithm: Algorithm | str = Algorithm.RING) -> list[dict]:
    """The phases of ``scheme`` as numbers, in step order, for one data-parallel configuration.

    ``psi`` and ``n`` are the data-parallel group's parameters and ranks (N), ``gpus_per_node`` its
    ranks per node. Each record: ``collective``, ``purpose``, ``side`` (param / grad / fixed),
    ``elem_bytes``, ``group`` (:class:`~zerocalc.schemes.Group` value), ``group_size``, ``cadence``,
    ``runs_per_step`` (micro-batches or 1 under ``grad_sync``), ``calls`` and ``elements`` of one run,
    ``bytes_per_rank`` per optimizer step.
    """
    sch = get_scheme(scheme)
    g = float(check_layout(n, gpus_per_node))
    h = g if hsdp_shard_size is None else float(_shard_size(hsdp_shard_size, n))
    vals = {S.Psi: psi, S.N: n, S.G: g, S.H: h, S.b_p: param_bytes, S.b_g: grad_bytes, S.b_comm: grad_bytes,
            S.n_mb: _micro_batches(micro_batches), S.D_reuse: reuse_distance}
    out = []
    for ph in sch.phases:
        out.append({
            "collective": ph.collective.value, "purpose": ph.purpose, "side": ph.side.value,
            "elem_bytes": float(ph.elem_bytes.subs(vals)), "group": ph.group.value,
            "group_size": float(ph.group.size.subs(vals)), "cadence": ph.cadence.value,
            "runs_per_step": float(ph.runs(grad_sync).subs(vals)),
            "calls": float(sympy.sympify(ph.calls).subs(vals)),
            "elements": float(sympy.sympify(ph.elements).subs(vals)),
            "bytes_per_rank": float(ph.bytes_per_rank(algorithm, grad_sync).subs(vals)),
        })
    return out
