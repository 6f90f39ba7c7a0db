"""The model's numbers behind the volume table and figures 1 to 3, and the symbolic derivations.

Each function returns a tidy DataFrame (or list) computed from the public model
(:func:`zerocalc.evaluate.evaluate`, :mod:`zerocalc.schemes`, :mod:`zerocalc.memory`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

import numpy as np
import pandas as pd

from zerocalc.report.config import (
    ReportConfig,
    figure_gpus_per_node,
    figure_topologies,
    node_fill,
    topology_label,
)
from zerocalc.topology import Topology

#: Schemes drawn in the sweep figures (the table and the derivations show every scheme).
#: DeepSpeed ZeRO-1 sends what ZeRO-2 sends at one micro-batch (the sweeps' k = 1), so deepspeed-zero2
#: stands for both here; the gradient-accumulation section draws them apart.
FIGURE_SCHEMES: tuple[str, ...] = ("dp", "zero2", "zero3", "colocated", "deepspeed-zero2", "fsdp-hybrid",
                                   "zeropp")


#: Schemes of the time-vs-Ψ figure (one line style each) and the algorithms drawn for them.
TIME_SCHEMES: tuple[str, ...] = ("zero2", "deepspeed-zero2", "colocated")


N_SWEEP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


PSI_SWEEP: tuple[float, ...] = tuple(float(x) for x in np.logspace(6, 12, 25))


#: ZeRO (Rajbhandari et al., SC20, arXiv 1910.02054) Table 1, 7.5B-parameter column: model-state
#: memory per device in GB (1e9 bytes) as printed (rounded), K = 12, for P_os, P_os+g, P_os+g+p.
ZERO_TABLE1_7P5B: pd.DataFrame = pd.DataFrame(
    [(1, 120, 120, 120), (4, 52.5, 41.3, 30), (16, 35.6, 21.6, 7.5), (64, 31.4, 16.6, 1.88),
     (256, 30.4, 15.4, 0.47), (1024, 30.1, 15.1, 0.12)],
    columns=["n", "zero1", "zero2", "zero3"],
)


#: The configuration ZeRO Table 1's 7.5B column is printed for: Ψ = 7.5e9 parameters, K = 12 bytes of
#: optimizer state per parameter (mixed-precision Adam), fp16 parameters and gradients (ZeRO §5).
TABLE1_PSI, TABLE1_K = 7.5e9, 12.0
_TABLE1_LABELS = {"zero1": "ZeRO Table 1, P_os", "zero2": "ZeRO Table 1, P_os+g",
                  "zero3": "ZeRO Table 1, P_os+g+p"}


def n_sweep_nodes(config: ReportConfig, n_values: Sequence[int] = N_SWEEP) -> np.ndarray:
    """The GPUs a node holds at each N of figures 1 and 3 (:func:`~zerocalc.report.config.node_fill` of the
    report's node size): the report's nodes wherever they divide N, as the model prices only whole nodes
    (N = 128 on 72-GPU NVL72 racks refused the report of N = 72)."""
    return np.array([node_fill(config.gpus_per_node, int(n)) for n in n_values], dtype=float)


def _evaluate(config: ReportConfig, *, psi, n, schemes=None, topology: str | None = None,
              gpus_per_node=None, **run) -> pd.DataFrame:
    from zerocalc.evaluate import evaluate

    return evaluate(schemes, psi=psi, n=n,
                    gpus_per_node=config.gpus_per_node if gpus_per_node is None else gpus_per_node,
                    topology=topology or config.topology, comm_dtype=config.comm_dtype, k=config.k, **run)


def volume_table(config: ReportConfig) -> pd.DataFrame:
    """Every scheme at the report's configuration, per optimizer step of its micro-batches, at its wire dtypes
    and on the data-parallel group of its tp / pp: the model's tidy DataFrame (one row per scheme)."""
    return _evaluate(config, psi=config.psi, n=config.n, micro_batches=config.micro_batches,
                     param_dtype=config.param_dtype, grad_dtype=config.grad_dtype, tp=config.tp,
                     pp=config.pp).reset_index(drop=True)


def _nccl_options(config: ReportConfig) -> dict:
    """The report's NCCL options as :func:`zerocalc.nccl_pricing.price_rows` takes them."""
    return dict(nccl_version=config.nccl_version, nccl_algo=config.nccl_algo, nccl_proto=config.nccl_proto,
                nccl_env=dict(config.nccl_env), call_bytes=config.bucket_bytes)


def _notes(priced_notes: list[str], leave_out: str = "") -> list[str]:
    """The pricing's notes without the CLI table's ``t NCCL: `` / ``t RCCL: `` label (and any holding
    ``leave_out``, which the section says itself), each a sentence."""
    from zerocalc.collectives import Collective
    from zerocalc.schemes import SCHEMES

    notes = [n.removeprefix("t NCCL: ").removeprefix("t RCCL: ") for n in priced_notes
             if not (leave_out and leave_out in n)]

    def as_written(n: str) -> bool:  # a scheme's name (zero1, not Zero1), or a collective's before a colon
        first = re.match(r"[\w-]*", n)[0]
        return first in SCHEMES or (first in set(Collective) and n[len(first):len(first) + 1] == ":")

    return [n if as_written(n) else n[:1].upper() + n[1:] for n in notes]


def nccl_priced(config: ReportConfig, table: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every scheme of the volume table (``table``, default :func:`volume_table`) priced with NCCL's cost
    model on the report's cluster under the report's NCCL options, as ``zerocalc table`` prices it with the
    same options (:func:`zerocalc.nccl_pricing.price_rows`; RCCL's model on AMD GPUs,
    :func:`zerocalc.rccl_pricing.price_rows_rccl`). One row per scheme: ``scheme``, ``nccl_choice``,
    ``time_s_nccl`` and the textbook ring's ``time_s_ring``; and the notes that say what they were priced
    under (release, restrictions, the variables priced and those not). A version not modelled, a
    restriction that leaves a collective no pair, or a topology without the fields NCCL's model needs is a
    :class:`~zerocalc.errors.ConfigError`."""
    from zerocalc.topology import get_topology

    table = volume_table(config) if table is None else table
    topo = get_topology(config.topology)
    opts = _nccl_options(config)
    if topo.gpu_arch is not None:
        from zerocalc.rccl_pricing import price_rows_rccl

        priced = price_rows_rccl(table, topo, rccl_version=opts.pop("nccl_version"), **opts)
    else:
        from zerocalc.nccl_pricing import price_rows

        priced = price_rows(table, topo, **opts)
    frame = pd.DataFrame({"scheme": table["scheme"].to_numpy(), "nccl_choice": priced.choices,
                          "time_s_nccl": priced.times, "time_s_ring": table["time_s_ring"].to_numpy()})
    return frame, _notes(priced.notes)


def nccl_under_tuner(config: ReportConfig,
                     table: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every scheme of the volume table (``table``, default :func:`volume_table`) priced with NCCL's cost
    model on the report's cluster (:func:`zerocalc.nccl_pricing.price_rows`, under the report's NCCL
    options, as ``zerocalc table`` prices it): by itself and under the tuner rules of ``config.nccl_tuner``,
    or under aws-ofi-nccl's tuner plugin ``config.ofi_tuner`` (the pairs it chose marked ``^``). One row per
    scheme: ``scheme``, ``nccl_choice``, ``time_s_nccl``, ``tuned_choice``, ``time_s_tuned``; and the notes
    that say what they were priced under (NCCL release, the topology's NCCL environment, what the aws-ofi-nccl
    plugin chose). A rule the cluster cannot run, a plugin NCCL cannot load or whose answer there zerocalc
    does not model, or a topology without the fields NCCL's model needs, is a
    :class:`~zerocalc.errors.ConfigError` naming the option."""
    from zerocalc.nccl_pricing import price_rows
    from zerocalc.topology import get_topology

    if config.nccl_tuner is None and config.ofi_tuner is None:
        raise ValueError("nccl_under_tuner needs config.nccl_tuner or config.ofi_tuner")
    table = volume_table(config) if table is None else table
    topo = get_topology(config.topology)
    opts = _nccl_options(config)
    own = price_rows(table, topo, **opts)
    tuned = price_rows(table, topo, tuner=config.nccl_tuner, ofi_tuner=config.ofi_tuner, **opts)
    frame = pd.DataFrame({"scheme": table["scheme"].to_numpy(), "nccl_choice": own.choices,
                          "time_s_nccl": own.times, "tuned_choice": tuned.choices,
                          "time_s_tuned": tuned.times})
    # the tuner's own note left out: the section names it
    return frame, _notes(tuned.notes, "under the tuner rules of")


def bytes_vs_n(config: ReportConfig, n_values: Sequence[int] = N_SWEEP,
               schemes: Sequence[str] = FIGURE_SCHEMES) -> pd.DataFrame:
    """Bytes sent per rank per step against N at the report's Ψ (figure 1's data), each N on whole nodes of
    the report's size or the largest fill of them that divides N (:func:`n_sweep_nodes`)."""
    df = _evaluate(config, psi=config.psi, n=np.asarray(n_values, dtype=float), schemes=list(schemes),
                   gpus_per_node=n_sweep_nodes(config, n_values))
    return df[["scheme", "psi", "n", "bytes_per_rank", "bytes_per_rank_over_psi"]].reset_index(drop=True)


def time_vs_psi(config: ReportConfig, psi_values: Sequence[float] = PSI_SWEEP,
                topologies: Sequence[str | Topology] | None = None,
                schemes: Sequence[str] = TIME_SCHEMES) -> pd.DataFrame:
    """Step communication time against Ψ per topology and algorithm at the report's N (figure 2's data),
    each topology with its node size (:func:`~zerocalc.report.config.figure_gpus_per_node`), per optimizer
    step of the report's micro-batches, at its wire dtypes and on the data-parallel group of its tp / pp, as
    :func:`volume_table` prices the run (``n``: that group's ranks).

    Long form: one row per (topology, algorithm, scheme, Ψ) with ``time_s``. By default the report's
    own topology when it is not a preset (one read from a TOML file), then every preset.
    """
    from zerocalc.collectives import Algorithm

    if topologies is None:
        topologies = figure_topologies(config)
    frames = []
    for topo in topologies:
        df = _evaluate(config, psi=np.asarray(psi_values, dtype=float), n=config.n, schemes=list(schemes),
                       topology=topo, gpus_per_node=figure_gpus_per_node(config, topo),
                       micro_batches=config.micro_batches, param_dtype=config.param_dtype,
                       grad_dtype=config.grad_dtype, tp=config.tp, pp=config.pp)
        for alg in Algorithm:
            col = f"time_s_{alg.value}"
            if col not in df.columns:
                continue
            part = df[["scheme", "psi", "n"]].copy()
            if "dp_size" in df.columns:  # the data-parallel group's ranks (n under tp = pp = 1)
                part["n"] = df["dp_size"].to_numpy()
            part["topology"] = topology_label(topo)
            part["algorithm"] = alg.value
            part["time_s"] = df[col].to_numpy()
            frames.append(part)
    return pd.concat(frames, ignore_index=True)[["topology", "algorithm", "scheme", "psi", "n", "time_s"]]


def memory_vs_n(config: ReportConfig, n_values: Sequence[int] = N_SWEEP,
                schemes: Sequence[str] = ("dp", "zero1", "zero2", "zero3")) -> pd.DataFrame:
    """Model-state memory per GPU against N at the report's Ψ and K (figure 3's data), on the nodes
    :func:`n_sweep_nodes` gives."""
    df = _evaluate(config, psi=config.psi, n=np.asarray(n_values, dtype=float), schemes=list(schemes),
                   gpus_per_node=n_sweep_nodes(config, n_values))
    return df[["scheme", "psi", "n", "memory_bytes_per_rank"]].reset_index(drop=True)


def zero_table1_points() -> pd.DataFrame:
    """ZeRO Table 1 (7.5B column) in long form, in bytes.

    Columns ``scheme``, ``n``, ``memory_bytes_per_rank``, ``label``.
    """
    long = ZERO_TABLE1_7P5B.melt(id_vars="n", var_name="scheme", value_name="memory_GB")
    long["memory_bytes_per_rank"] = long["memory_GB"] * 1e9
    long["label"] = long["scheme"].map(_TABLE1_LABELS)
    return long[["scheme", "n", "memory_bytes_per_rank", "label"]]


def table1_overlay(config: ReportConfig) -> pd.DataFrame:
    """The ZeRO Table 1 points figure 3 overlays on the model's lines: all of
    :func:`zero_table1_points` when the report is at the table's Ψ and K (:data:`TABLE1_PSI`,
    :data:`TABLE1_K`), none otherwise (the table's cells are for that model only)."""
    points = zero_table1_points()
    if config.psi == TABLE1_PSI and config.k == TABLE1_K:
        return points
    return points.iloc[0:0]


def scheme_derivations() -> list[dict[str, object]]:
    """Per scheme: the symbolic per-rank volume (ring), step time (ring) and model-state memory.

    The time is split into its cases (one node; several nodes) and collected by latency,
    reduction and bandwidth terms, so each line reads as α-terms + γ-terms + bytes/bandwidth.
    """
    import sympy

    from zerocalc import symbols as S
    from zerocalc.memory import model_state_bytes
    from zerocalc.schemes import SCHEME_NAMES, SCHEMES

    collect_by = [S.alpha_intra, S.alpha_inter, S.gamma]
    # sympy.collect factors every factor of every term on its way (n_mb, Ψ, b_g... over a thousand calls,
    # some eighty distinct expressions): each is factored once, to the same expression
    factor = cache(sympy.factor)
    out = []
    for name in SCHEME_NAMES:
        scheme = SCHEMES[name]
        # HSDP's shard group is a node here (H = G), as in the report's cluster
        time = sympy.piecewise_fold(scheme.time_s().subs(S.H, S.G))
        pieces = time.args if isinstance(time, sympy.Piecewise) else ((time, sympy.true),)
        cases = []
        for expr, cond in pieces:
            expr = sympy.collect(sympy.expand(expr), collect_by, func=factor)
            cases.append((expr, _condition_text(cond, len(pieces))))
        out.append({"scheme": name, "title": scheme.title, "equivalent_to_dp": scheme.equivalent_to_dp,
                    "volume": factor(scheme.bytes_per_rank().subs(S.H, S.G)), "time_cases": cases,
                    "memory": factor(model_state_bytes(name).subs(S.H, S.G))})
    return out


def _condition_text(cond, n_pieces: int) -> str:
    import sympy

    from zerocalc import symbols as S

    if cond is sympy.true:
        return "N > G" if n_pieces > 1 else "any N"
    if cond == (S.G >= S.N) or cond == (S.N <= S.G):
        return "N ≤ G"
    return str(cond)


def checked_identities() -> list[tuple[str, bool]]:
    """The identities the verdict rests on, each checked here by ``sympy.simplify(a - b) == 0``."""
    import sympy

    from zerocalc import symbols as S
    from zerocalc.schemes import SCHEMES, one_wire_width

    v = {name: one_wire_width(s.bytes_per_rank()) for name, s in SCHEMES.items()}
    bound = (S.N - 1) / S.N * S.Psi * S.b_comm
    checks = [
        ("V(zero2) = V(dp)", v["zero2"] - v["dp"]),
        ("V(colocated) = V(dp) / 2", v["colocated"] - v["dp"] / 2),
        ("V(zero3) = 3/2 · V(dp)", v["zero3"] - v["dp"] * 3 / 2),
        ("V(deepspeed-zero1) = 3/2 · V(dp)", v["deepspeed-zero1"] - v["dp"] * 3 / 2),
        ("V(deepspeed-zero2) = V(deepspeed-zero1) at one micro-batch",
         v["deepspeed-zero2"] - v["deepspeed-zero1"]),
        ("V(colocated) = (N−1)/N · Ψ · b_comm: all of it is the parameter all-gather, "
         "nothing is left for the gradient reduction", v["colocated"] - bound),
    ]
    return [(text, sympy.simplify(expr) == 0) for text, expr in checks]

