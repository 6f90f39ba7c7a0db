"""A training trace's collectives timed by NCCL's own cost model on a cluster (``check TRACE --topology``).

Each call of the profiled steps the trace measured (its collective, group size, bytes and kernel duration) is
priced as ``zerocalc table`` prices a phase's call (:mod:`zerocalc.nccl.steps`): NCCL's model of the release
the trace states (``distributedInfo.nccl_version`` of a PyTorch profiler trace) or ``--nccl-version`` (where
neither states one, the last release whose kernels are named as the trace's, :func:`release_by_kernel_names`,
else the latest modelled), on ``--topology`` with the group placed on its nodes (below), the pair NCCL picks
for the call's size under ``NCCL_ALGO`` / ``NCCL_PROTO``, all-to-all by zerocalc's model of NCCL's
point-to-point path. Each distinct (category, collective, group, size) is one line: the calls per rank and
step, the mean measured duration, NCCL's predicted time and the pair, and their ratio (measured / predicted,
as the trace's α-β timing states it). The step's total is the sum over the priced calls of its gradient and
parameter traffic (the check's category "step", :mod:`zerocalc.validate.classify`); the steps' other NCCL
calls (model buffers, scalars, a tensor-parallel group's, all-to-all) are timed beside it, and every call is
summed per group too.

A group is placed on the nodes its members' global ranks fall on (rank r on node r // G, as torchrun and
Slurm's block distribution number them, G = ``--gpus-per-node``): a tensor-parallel group of a node's 8 GPUs
runs on NVLink, the data-parallel group of the same run one rank a node over the network. The ranks are
the call's ``Process Group Ranks`` (or ``Global rank start`` / ``stride``) where the trace records them,
else those ``distributedInfo.pg_config`` lists for its group (:mod:`zerocalc.traces.kineto_groups`), else,
for a group of the world size the trace states, the world's. A group whose ranks are not known, or fall
unevenly on nodes, is placed packed: its ranks filling nodes.

A kernel's duration in a profiler trace runs from its launch on the rank to the end of the collective,
so it includes the wait for the slowest rank: a measured / predicted ratio above 1 is the links plus that
skew, below 1 a cluster faster than the model. Calls on gloo (CPU) are not NCCL's and are refused; RCCL's
per-call pricing of traces is not modelled.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerocalc.errors import ConfigError

#: A measured / predicted ratio above which the text says the durations hold waiting, not the links.
SKEW_RATIO = 2.0

#: The collectives of a trace NCCL's model prices per call (send / receive and barriers are left out).
PRICED_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


@dataclass(frozen=True)
class NcclTiming:
    """A trace's step collectives against NCCL's model (module docstring): ``model`` names it (release,
    topology, restrictions); ``predicted_step_time_s`` / ``measured_step_time_s`` per rank and step over
    the priced calls of the step's gradient and parameter traffic (category "step"), ``ratio`` measured /
    predicted; ``calls`` one record per (category, collective, group, bytes), the steps' other NCCL calls
    too (model buffers, scalars, other groups, all-to-all: :data:`zerocalc.validate.classify.CATEGORIES`);
    ``unpriced`` what was left out and why."""

    model: str
    predicted_step_time_s: float
    measured_step_time_s: float
    ratio: float
    calls: tuple[dict, ...]
    unpriced: tuple[str, ...] = ()
    #: per rank and step, each call timed by its fastest rank (:func:`_fastest`; NaN with one rank)
    fastest_step_time_s: float = math.nan
    #: the NCCL release whose model priced the calls (``2.30.7``)
    release: str = ""

    @property
    def groups(self) -> tuple[dict, ...]:
        """The steps' NCCL time per group, every category (:func:`by_group`): where a tensor-parallel
        group's calls and a data-parallel group's across nodes each spend theirs."""
        return by_group(self.calls)

    @property
    def other(self) -> dict:
        """The steps' other NCCL calls (not category "step"), per rank and step: predicted, mean measured
        and fastest-rank seconds, and the calls."""
        return _summed([r for r in self.calls if r["category"] != "step"])

    @property
    def fastest_ratio(self) -> float:
        """The fastest ranks' time over NCCL's."""
        p = self.predicted_step_time_s
        return self.fastest_step_time_s / p if p > 0 else math.nan

    def as_dict(self) -> dict:
        return {"model": self.model, "predicted_step_time_s": self.predicted_step_time_s,
                "measured_step_time_s": self.measured_step_time_s, "ratio": _finite(self.ratio),
                "fastest_rank_step_time_s": _finite(self.fastest_step_time_s),
                "fastest_rank_ratio": _finite(self.fastest_ratio),
                "calls": [{k: _finite(v) for k, v in r.items()} for r in self.calls],
                "groups": [{k: _finite(v) for k, v in r.items()} for r in self.groups],
                "other_calls": {k: _finite(v) for k, v in self.other.items()},
                "unpriced": list(self.unpriced)}


def by_group(calls: tuple[dict, ...]) -> tuple[dict, ...]:
    """The records ``calls`` summed per group (its size, name, nodes, ranks a node and placement), in order of
    first appearance: per rank and step the predicted, mean measured and fastest-rank seconds, their ratio
    (measured / predicted) and the calls."""
    fields = ("group_size", "group_name", "nodes", "ranks_per_node", "placement")
    groups: dict[tuple, list[dict]] = {}
    for r in calls:
        groups.setdefault(tuple(r.get(f) for f in fields), []).append(r)
    out = []
    for key, rows in groups.items():
        g = {**dict(zip(fields, key, strict=True)), **_summed(rows)}
        g["ratio"] = g["measured_s"] / g["predicted_s"] if g["predicted_s"] > 0 else math.nan
        out.append(g)
    return tuple(out)


def _summed(records: list[dict]) -> dict:
    """Records summed per rank and step: their calls, and the predicted, mean measured and fastest-rank
    seconds each weighted by its calls."""
    k = [r["calls_per_rank_per_step"] for r in records]
    return {"calls_per_rank_per_step": float(sum(k)),
            **{f: float(sum(r[f] * n for r, n in zip(records, k, strict=True)))
               for f in ("predicted_s", "measured_s", "fastest_rank_s")}}


def _finite(x):
    """``None`` for a NaN (JSON has none), else ``x``."""
    return None if isinstance(x, float) and math.isnan(x) else x


def nccl_timing(m, topology, *, nccl_version: str | None = None, nccl_algo: str | None = None,
                nccl_proto: str | None = None, gpus_per_node: int | None = None,
                backend: str | None = None) -> NcclTiming | None:
    """The step calls of measurement ``m`` (:class:`zerocalc.validate.measure.Measurement`) timed by NCCL
    ``nccl_version``'s model (default: the latest modelled) on ``topology`` (module docstring); ``None``
    where the trace has no durations. A topology of AMD GPUs, or calls the trace ran on gloo, are a
    :class:`ConfigError` naming ``--topology``."""
    from zerocalc.nccl import LATEST, release_for
    from zerocalc.nccl.env import settings
    from zerocalc.nccl.env_given import OPTION
    from zerocalc.nccl.graph import REQUIRED_FIELDS
    from zerocalc.topology.machine import require_all
    from zerocalc.traces.kineto_groups import MAX_LISTED_RANKS
    from zerocalc.validate.classify import ONE_OFF, STEP

    if topology.gpu_arch is not None:
        raise ConfigError(f"topology {topology.name!r} is of AMD GPUs: zerocalc prices a trace's calls with "
                          "NCCL's model, not RCCL's", option="--topology")
    if backend == "gloo":
        raise ConfigError("the trace's collectives ran on gloo (CPU), not NCCL: there are no NCCL calls to "
                          "price", option="--topology")
    require_all(topology, REQUIRED_FIELDS, "NCCL's cost model")
    c = m.columns
    step = np.flatnonzero((c.cat == STEP) & (c.step_id >= 0))
    if not len(step) or np.all(np.isnan(c.duration_s[step])):
        return None
    step = np.flatnonzero((c.cat != ONE_OFF) & (c.step_id >= 0))  # every call of the profiled steps
    version = nccl_version or LATEST.tag.lstrip("v").split("-")[0]
    release, _ = release_for(version)
    calls = _fastest(_calls_frame(c, step))
    env = settings(topology, version, nccl_algo, nccl_proto, where=OPTION,
                   p2p=bool((calls["op"] == "all_to_all").any()))
    g = int(gpus_per_node or topology.gpus_per_node)
    why = np.select([calls["dur"].isna(), ~calls["op"].isin(PRICED_OPS), calls["group_size"] < 2,
                     ~(calls["bytes"] > 0)],
                    ["no duration", "not priced per call (" + calls["op"] + ")", "a group of one rank",
                     "no size"], "")
    unpriced = pd.Series(why[why != ""]).value_counts(sort=False)
    priced = calls[why == ""]
    per_rank_step = len(m.ranks) * m.steps
    unstated = (priced["group_size"] == m.world_size) & (priced["ranks"] == "")
    if m.world_size and m.world_size <= MAX_LISTED_RANKS and unstated.any():
        # a call of the world's size without its ranks is on the world: ranks 0 to world - 1
        priced = priced.assign(ranks=priced["ranks"].mask(unstated, ",".join(map(str, range(m.world_size)))))
    priced = _placed(priced, g)
    tunings: dict = {}  # one communicator's table per group size and node fill
    records = _records(priced, per_rank_step, lambda op, group, size, per_node, algorithm=None, kernel=None:
                       _call_time(op, group, size, topology, release, version, env, per_node, tunings,
                                  algorithm, kernel))
    pred = sum(r["predicted_s"] * r["calls_per_rank_per_step"] for r in records if r["category"] == "step")
    ours = priced[priced["category"] == "step"]
    meas = float(ours["dur"].sum()) / per_rank_step
    fast = float(ours["fastest"].sum()) / per_rank_step if len(m.ranks) > 1 else math.nan
    restricted = [f"NCCL_{k}={v}" for k, v in (("ALGO", nccl_algo), ("PROTO", nccl_proto)) if v]
    model = (f"NCCL {release.name}'s own cost model ({release.tag} tuning.cc) on {topology.name}, "
             f"{g} GPUs a node" + (f" under {', '.join(restricted)}" if restricted else ""))
    return NcclTiming(model, pred, meas, meas / pred if pred > 0 else math.nan, tuple(records),
                      tuple(f"{k}: {v} call(s)" for k, v in unpriced.items()), fast, version)


#: The algorithm of a call whose kernels are NCCL's symmetric ones (as a sweep's row priced on one names it,
#: :data:`zerocalc.validate.symmetric.ALGORITHM`).
SYMK = "SYMK"
_KERNEL_ALGOS = {"RING": "Ring", "TREE": "Tree", "COLLNET_DIRECT": "CollNetDirect",
                 "COLLNET_CHAIN": "CollNetChain", "NVLS": "NVLS", "NVLS_TREE": "NVLSTree", "PAT": "PAT"}
_KERNEL_ALGO = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)_"
                          r"(?:LL128|LL|SIMPLE)(?:_|$)")


#: The last NCCL release whose collective kernels are named ``ncclKernel_…`` (``ncclKerns``,
#: ``src/enqueue.cc`` v2.8-v2.18.6); from v2.19.3 they are ``ncclDevKernel_…`` (``src/device/generate.py``).
LAST_NCCLKERNEL_RELEASE = "2.18.6"
#: The last NCCL release whose symmetric kernels are named ``ncclSymDevKernel_…`` (v2.27.3-v2.27.7); from
#: v2.28.3 they are ``ncclSymkDevKernel_…`` (``kernel_cname``, ``src/device/symmetric/generate.py``).
LAST_NCCLSYMDEVKERNEL_RELEASE = "2.27.7"
#: What names a release :func:`release_by_kernel_names` gives, as a note says it.
KERNEL_NAMING = {
    LAST_NCCLKERNEL_RELEASE: "its NCCL kernels are named ncclKernel_… (ncclDevKernel_… from NCCL 2.19)",
    LAST_NCCLSYMDEVKERNEL_RELEASE: "its symmetric kernels are named ncclSymDevKernel_… (NCCL 2.27; "
                                   "ncclSymkDevKernel_… from 2.28)",
}


def release_by_kernel_names(m) -> str | None:
    """The release a trace that states none is priced as by its NCCL kernels' names, as a table in
    nccl-tests' layout before v2.13 is priced as the last release of that layout:
    :data:`LAST_NCCLKERNEL_RELEASE` where each is ``ncclKernel_…`` (NCCL 2.18 or before),
    :data:`LAST_NCCLSYMDEVKERNEL_RELEASE` where a symmetric kernel is ``ncclSymDevKernel_…`` (NCCL 2.27);
    ``None`` otherwise (``ncclDevKernel_…``, ``ncclSymkDevKernel_…``: 2.19 or later, priced as the latest
    modelled). :data:`KERNEL_NAMING` says each."""
    rows = m.columns.rows
    if not rows.has("kernel"):
        return None
    names = rows.codes("kernel").present()  # NCCL's kernels alone: the reader links no other
    if any(n.startswith("ncclSymDevKernel_") for n in names):
        return LAST_NCCLSYMDEVKERNEL_RELEASE
    return LAST_NCCLKERNEL_RELEASE if names and all(n.startswith("ncclKernel_") for n in names) else None


def kernel_algorithm(name: str) -> str | None:
    """The algorithm an NCCL kernel's name states, ``None`` where it states none. No name states the
    protocol: NCCL builds a collective's kernel for LL alone and runs the call's own protocol (and reduction
    operator) inside it through its table of device functions. Up to NCCL 2.18 there is one such kernel per
    algorithm (``ncclKerns``, ``src/enqueue.cc`` v2.8-v2.18: every protocol of (collective, algorithm, type)
    → ``ncclKernel_<coll>_<ALGO>_LL_Sum_<type>``), so ``ncclKernel_AllReduce_RING_LL_Sum_float`` is Ring at
    any protocol. From 2.19 the kernels are those of ``best_kernel`` (``src/device/generate.py`` v2.19-v2.30):
    a reduction's is ``…_TREE_LL`` for Tree and ``…_RING_LL`` for every other algorithm (Ring, NVLS, NVLS
    Tree, CollNet, PAT), an all-gather's or broadcast's ``…_RING_LL`` for all: only Tree is stated.
    Send / receive (all-to-all) names no ring it runs. A symmetric kernel (NCCL 2.27 on, buffers registered
    as a symmetric window) is none of the tuning model's algorithms: :data:`SYMK`, the kernel itself
    :func:`zerocalc.nccl.symmetric.kernel_of`'s."""
    from zerocalc.nccl.symmetric import kernel_of

    name = str(name or "")
    if kernel_of(name) is not None:
        return SYMK
    m = _KERNEL_ALGO.search(name)
    if m is None or "SendRecv" in name:
        return None
    if name.startswith("ncclKernel_"):
        return _KERNEL_ALGOS[m.group(1)]
    return "Tree" if m.group(1) == "TREE" else None


def _fastest(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` with ``fastest``: each call's shortest duration over the ranks that made it (the k-th call
    of a step on every rank, where every rank made the same calls in that step; the rank that joined
    last waits least, so its duration is the nearest to the collective's own), NaN where the ranks'
    calls differ or one rank alone is traced."""
    k = calls.groupby(["rank", "step"], sort=False).cumcount()
    keyed = calls.assign(k=k)
    by_call = keyed.groupby(["step", "k"], sort=False)
    same = (by_call["op"].transform("nunique") == 1) & (by_call["bytes"].transform("nunique") == 1) & (
        by_call["rank"].transform("nunique") > 1)
    return calls.assign(fastest=by_call["dur"].transform("min").where(same))


def _calls_frame(c, step: np.ndarray) -> pd.DataFrame:
    """The step calls ``step`` of columns ``c`` (:class:`zerocalc.validate.measure.CallColumns`): op, group
    size, bytes (the nccl-tests size), duration, rank, step, the algorithm its kernel's name states (and the
    symmetric kernel, where it is one: ``symk``), its group's global ranks as the trace states them
    (``"0,8"``; ``""``: not stated) and its process group's description (``mesh_shard``, ``default_pg``;
    ``""``: none, or PyTorch's ``undefined``)."""
    kernels = c.rows.codes("kernel").take(step).labels("") if c.rows.has("kernel") else [""] * len(step)
    from zerocalc.nccl.symmetric import kernel_of
    from zerocalc.validate.classify import CATEGORIES

    read = {k: (kernel_algorithm(k), kernel_of(k)) for k in set(kernels)}  # each distinct name once

    ranks = c.rows.codes("group_ranks").take(step).labels("") if c.rows.has("group_ranks") else ""
    desc = c.rows.codes("group_desc").take(step).labels("") if c.rows.has("group_desc") else ""
    names = np.array(list(CATEGORIES))
    return pd.DataFrame({"category": names[c.cat[step]], "op": c.ops.take(step).labels("?"),
                         "group_size": np.nan_to_num(c.group_size[step], nan=0).astype(int),
                         "bytes": c.full_elements[step] * c.elem_bytes[step], "dur": c.duration_s[step],
                         "rank": c.rank_idx[step], "step": c.step_id[step],
                         "kernel_algorithm": [read[k][0] for k in kernels],
                         "symk": [read[k][1] for k in kernels], "ranks": ranks,
                         "name": pd.Series(desc, index=range(len(step)), dtype=object).replace("undefined",
                                                                                                "")})


def node_fill(ranks: str, group: int, gpus_per_node: int) -> tuple[int, bool]:
    """How many of a group's ``group`` ranks share a node of ``gpus_per_node`` GPUs, and whether its global
    ``ranks`` (``"0,8"``) said so (module docstring); packed (``min(G, group)``, ``False``) where they are
    not stated or fall unevenly on nodes."""
    members = [int(r) for r in ranks.split(",")] if ranks else []
    if len(members) == group:
        per_node = pd.Series(members).floordiv(gpus_per_node).value_counts()
        if per_node.nunique() == 1:
            return int(per_node.iloc[0]), True
    return min(gpus_per_node, group), False


def _placed(priced: pd.DataFrame, gpus_per_node: int) -> pd.DataFrame:
    """``priced`` with ``per_node`` (the group's ranks a node) and ``placed`` (from the trace's ranks or
    packed), by :func:`node_fill`, once per distinct group."""
    fills = {(r, n): node_fill(r, n, gpus_per_node) for r, n in
             priced[["ranks", "group_size"]].drop_duplicates().itertuples(index=False)}
    keys = list(zip(priced["ranks"], priced["group_size"], strict=True))
    return priced.assign(per_node=[fills[k][0] for k in keys], placed=[fills[k][1] for k in keys])


def _records(priced: pd.DataFrame, per_rank_step: int, price) -> list[dict]:
    """One record per distinct (category, collective, group, its ranks a node, bytes) of the ``priced``
    calls, in order of first appearance: calls per rank and step, the mean and fastest-rank durations,
    ``price(op, group, bytes, ranks a node)``'s time and pair, their ratio, the algorithm the kernels ran
    where their names state it (:func:`kernel_algorithm`) and ``price(..., that algorithm)``'s pair and time
    (``ran_pair``, ``ran_predicted_s``: the protocol NCCL's model picks within it; where the model picks
    another algorithm, whether the links run the one NCCL ran as the model times it; for NCCL's symmetric
    kernels, :data:`SYMK`, the kernel that ran, ``ran_kernel``, and ``price(..., SYMK, kernel)``'s time of
    it), the group's name, its nodes and whether the trace's ranks placed it (``placement`` "ranks", else
    "packed"). ``ran``, which stated a pair read off the kernels' names, is kept and ``None``: no name
    states the protocol."""
    records = []
    keys = ["category", "op", "group_size", "name", "per_node", "bytes"]
    for (category, op, group, name, per_node, size), rows in priced.groupby(keys, sort=False):
        t, pair = price(op, int(group), float(size), int(per_node))
        measured, fastest = float(rows["dur"].mean()), float(rows["fastest"].mean())
        ran = rows["kernel_algorithm"].dropna()
        ran = ran.mode().iloc[0] if len(ran) else None
        kernel = rows["symk"].dropna().mode().iloc[0] if ran == SYMK else None
        if ran is None:
            t_ran, ran_pair = None, None
        elif kernel is not None:
            t_ran, ran_pair = price(op, int(group), float(size), int(per_node), SYMK, kernel)
        elif pair.startswith(f"{ran}/"):  # the model's own choice is of that algorithm
            t_ran, ran_pair = t, pair
        else:
            t_ran, ran_pair = price(op, int(group), float(size), int(per_node), ran)
        records.append({"op": op, "group_size": int(group), "bytes": float(size), "category": category,
                        "group_name": name or None,
                        "nodes": -(-int(group) // int(per_node)), "ranks_per_node": int(per_node),
                        "placement": "ranks" if rows["placed"].all() else "packed",
                        "calls_per_rank_per_step": len(rows) / per_rank_step, "measured_s": measured,
                        "fastest_rank_s": fastest, "predicted_s": t, "pair": pair,
                        "ratio": measured / t if t > 0 else math.nan,
                        "ran": None, "ran_algorithm": ran, "ran_pair": ran_pair, "ran_predicted_s": t_ran,
                        "ran_kernel": kernel})
    return records


def _call_time(op: str, group: int, n_bytes: float, topology, release, version: str, env,
               per_node: int, tunings: dict, algorithm: str | None = None,
               kernel: str | None = None) -> tuple[float | None, str | None]:
    """One call of ``op`` on ``group`` ranks, ``per_node`` of them a node, of ``n_bytes`` (the nccl-tests
    size: the whole buffer, the gathered one for all-gather and reduce-scatter) as NCCL's model prices it:
    seconds and the pair (``Ring/Simple``, ``P2P/Simple``); with ``algorithm`` (``Ring``, the one the
    trace's kernels ran), the pair of it NCCL's model picks and its time (``None``, ``None`` where the
    machine cannot run it); with :data:`SYMK` and the symmetric ``kernel`` that ran, its time
    (:func:`_symmetric_time`)."""
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.p2p import P2pOp, op_time, p2p_comm
    from zerocalc.nccl.predict import as_nccl_collective, predict
    from zerocalc.nccl.steps import phase_calibration
    from zerocalc.nccl.tables import Algorithm

    topo_g = topology.with_gpus_per_node(per_node)
    if (group, per_node) not in tunings:
        tunings[group, per_node] = tune(topo_g, group, release, algo_enable=env.algo_enable,
                                        proto_enable=env.proto_enable, nvls_enable=env.nvls_enable,
                                        min_channels=env.min_channels, max_channels=env.max_channels)
    tuning = tunings[group, per_node]
    if algorithm == SYMK:
        return _symmetric_time(tuning, as_nccl_collective(op), group, n_bytes, version, kernel)
    if op == "all_to_all":
        comm = p2p_comm(topo_g, group, release, version, tuning.comm_channels,
                        ring=tuning.machine.graphs[Algorithm.RING], **dict(env.p2p))
        pt = op_time(comm, P2pOp.ALL_TO_ALL, int(n_bytes))
        return pt.time_s, f"P2P/{pt.protocol.value}"
    coll = as_nccl_collective(op)
    fits, _ = phase_calibration(topology, coll.value, group, topo_g)
    forced = None
    if algorithm is not None:
        algo = Algorithm(algorithm)
        if not any(a == algo for a, _, _ in tuning.times(coll, n_bytes)):
            return None, None
        forced = tuning.choose(coll, n_bytes, algo)[:2]
    pr = predict(tuning, coll, n_bytes, fits, launch_env=env.launch, pair=forced)
    return pr.time_s, f"{pr.algorithm.value}/{pr.protocol.value}"


def _symmetric_time(tuning, coll, group: int, n_bytes: float, version: str,
                    kernel: str) -> tuple[float | None, str]:
    """A call that ran on NCCL's symmetric ``kernel`` (``AllReduce_RSxLD_AGxST``) timed by NCCL
    ``version``'s model of that kernel (:func:`zerocalc.nccl.symmetric.kernel_time_s`), no less than the
    links take for its bytes (the bandwidth term of the pair the tuning model picks, as a sweep's row on a
    symmetric kernel is priced: :meth:`zerocalc.validate.symmetric.SymmetricRun.apply`), and its pair
    ``SYMK/<kernel after its collective>``; no time for a kernel that model does not hold (TMA, network)."""
    from zerocalc.nccl.symmetric import Call, kernel_time_s
    from zerocalc.nccl.tables import parse_version
    from zerocalc.validate.symmetric import wire_s

    pair = f"{SYMK}/{kernel.split('_', 1)[1]}"
    m = tuning.machine
    call = Call(coll, int(n_bytes), group, m.compute_capability, bool(m.nvls))
    t = kernel_time_s(kernel, call, parse_version(version))
    if t is None:
        return None, pair
    algo, proto = tuning.choose(coll, n_bytes)[:2]
    return max(t, wire_s(tuning, coll, algo, proto, n_bytes)), pair


def ran_elsewhere(r: dict) -> str | None:
    """The algorithm a call's kernels ran (:func:`kernel_algorithm`) where it is not the one of the pair
    NCCL's model picks (record ``r`` of :attr:`NcclTiming.calls`), else ``None``; for NCCL's symmetric
    kernels, which the tuning model never picks, the kernel's pair (``SYMK/RSxLD_AGxST``)."""
    ran = r.get("ran_algorithm")
    if ran == SYMK:
        return r.get("ran_pair") or SYMK
    return ran if ran and not r["pair"].startswith(f"{ran}/") else None


def _ran_words(r: dict, format_seconds) -> str:
    """What a line says of the algorithm the call's kernels ran, where their names state one the model did
    not pick: that algorithm and the model's time of it."""
    ran, pair = ran_elsewhere(r), r.get("ran_pair")
    if ran is None:
        return ""
    t_ran = r.get("ran_predicted_s")
    if ran.startswith(SYMK):
        return (f"; the trace's kernels are NCCL's symmetric kernel {r['ran_kernel']} (buffers registered as "
                "a symmetric window, NCCL 2.27 on), which "
                + (f"NCCL's model of it times at {format_seconds(t_ran)} ({pair})" if t_ran is not None else
                   "zerocalc does not time (NCCL's TMA and network symmetric kernels)"))
    timed = (f", which NCCL's model times at {format_seconds(t_ran)} ({pair})"
             if pair and t_ran is not None else "")
    return f"; the trace's kernels ran {ran} (their names state no protocol){timed}"


def timing_lines(t: NcclTiming, format_seconds, format_bytes, limit: int = 6) -> list[str]:
    """The text of ``check``: the step's total and the largest lines (by measured time per step)."""
    from zerocalc.nccl.steps import _SHORT

    fastest = not math.isnan(t.fastest_step_time_s)
    lines = [f"timing by {t.model}: predicted {format_seconds(t.predicted_step_time_s)}, measured (sum of "
             f"durations) {format_seconds(t.measured_step_time_s)} per rank per step"
             + (f", {format_seconds(t.fastest_step_time_s)} on each call's fastest rank" if fastest else "")
             + f"; measured / predicted {t.ratio:.3g}"
             + (f" ({t.fastest_ratio:.3g} fastest)" if fastest else "")]
    top = sorted(t.calls, key=lambda r: -r["measured_s"] * r["calls_per_rank_per_step"])
    for r in top[:limit]:
        tag = "" if r["category"] == "step" else f"[{CATEGORY_WORDS.get(r['category'], r['category'])}] "
        lines.append(f"  {tag}{_SHORT.get(r['op'], r['op'])} of {format_bytes(r['bytes'])} on "
                     f"{r['group_size']} ranks ({_nodes_words(r)}) ×{r['calls_per_rank_per_step']:g} a step: "
                     f"measured {format_seconds(r['measured_s'])}, NCCL {r['pair']} "
                     f"{format_seconds(r['predicted_s'])}, ratio {r['ratio']:.3g}"
                     + (f" (fastest rank {format_seconds(r['fastest_rank_s'])})" if fastest else "")
                     + _ran_words(r, format_seconds))
    if len(top) > limit:
        lines.append(f"  … and {len(top) - limit} more (--format json lists them all)")
    other = t.other
    if other["calls_per_rank_per_step"]:
        lines.append(f"  the steps' other NCCL calls ({other['calls_per_rank_per_step']:g} a rank a step: "
                     "model buffers, scalars, other groups, all-to-all), not in the total: measured "
                     f"{format_seconds(other['measured_s'])}"
                     + (f" ({format_seconds(other['fastest_rank_s'])} fastest)" if fastest
                        and not math.isnan(other["fastest_rank_s"]) else "")
                     + f", NCCL {format_seconds(other['predicted_s'])}")
    groups = t.groups
    if len(groups) > 1:
        lines.append("  by group, per rank per step: " + "; ".join(
            f"{g['group_size']} ranks ({_nodes_words(g)}): measured {format_seconds(g['measured_s'])}, NCCL "
            f"{format_seconds(g['predicted_s'])}, ratio {g['ratio']:.3g}" for g in groups))
    if t.unpriced:
        lines.append(f"  not priced: {'; '.join(t.unpriced)}")
    if t.ratio > SKEW_RATIO:
        lines.append(f"  the calls took {t.ratio:.3g}× NCCL's time: a call's measured time runs from its "
                     "start on the rank (its kernel's launch, or a host timer's start: DeepSpeed's comms "
                     "logger) to the end of the collective, so it holds the wait for the slowest rank and "
                     "any overlap with compute; "
                     + ("each call's fastest rank is the nearer measure of the links" if fastest else
                        "traces of every rank tell the wait apart (each call's fastest rank)"))
    return lines


#: How the text tags a call that is not the step's gradient and parameter traffic (its category).
CATEGORY_WORDS = {"buffers": "buffers", "scalar": "scalar", "unexplained": "other"}


def _nodes_words(r: dict) -> str:
    """Where a record's group ran: ``1 node``, ``2 nodes × 1``; ``packed: 1 node`` where the trace did not
    say and the group was placed filling nodes; after the group's name where the trace gives one
    (``mesh_replicate, 2 nodes × 1``)."""
    where = "1 node" if r["nodes"] == 1 else f"{r['nodes']} nodes × {r['ranks_per_node']}"
    where = where if r["placement"] == "ranks" else f"packed: {where}"
    return f"{r['group_name']}, {where}" if r.get("group_name") else where
