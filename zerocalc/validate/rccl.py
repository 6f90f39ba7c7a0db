"""An rccl-tests sweep on AMD Instinct GPUs against RCCL's cost model (:mod:`zerocalc.nccl.rccl`).

rccl-tests is nccl-tests' fork for ROCm and prints the same table (:mod:`zerocalc.traces.nccl_tests`); its
rows are compared here as :func:`zerocalc.validate.sweep.compare_sweep` compares nccl-tests' with NCCL's
model, with the same JSON row (``bytes``, ``measured_s``, ``predicted_s``, ``ratio``, ``algorithm``,
``protocol``, …): the measured time is the out-of-place one (the in-place one under ``-O 0``), the
prediction RCCL's choice and time for the row's ``size``, or, where RCCL runs the call with an MSCCL
program, that program's time (``algorithm`` ``MSCCL``); an ``alltoall_perf``, ``sendrecv_perf``,
``gather_perf``, ``scatter_perf`` or ``hypercube_perf`` sweep, RCCL's grouped sends
(:mod:`zerocalc.nccl.rccl_p2p`, ``algorithm`` ``P2P``). One thread driving G GPUs (rccl-tests ``-g G``, its
default launch mode) adds the stagger of its launches, :func:`rccl_launch_stagger_s` (``nccl_s`` keeps
RCCL's time, ``launch_stagger_s`` the stagger), as :func:`zerocalc.validate.host_launch.launch_stagger_s`
does on NVIDIA GPUs with NVIDIA's figure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from zerocalc.errors import UnpricedOpError
from zerocalc.nccl.rccl import (
    RcclTuning,
    forced_words,
    price_call,
    rccl_calibration,
    rccl_release_for,
    rccl_tune,
)
from zerocalc.nccl.rccl_net import STEERING_HOP_US, forced_protocol
from zerocalc.nccl.release import Algorithm
from zerocalc.topology import Topology

RCCL_LAUNCH_US_PER_GPU = 3.74
"""Host time (µs) of one asynchronous HIP kernel launch on an AMD Instinct node: PETSc's benchmark of HIP's
launch time, ``src/sys/objects/device/tests/ex1hip.hip.cpp`` (petsc/petsc), on OLCF's Crusher (MI250X):
"Average asynchronous HIP kernel launch time = 3.74 microseconds" (a null kernel launched back to back from
one thread; 6.66 µs synchronously). RCCL does more on the host per launch (its plan and arguments), so this
is the least one GPU's launch delays the next. See :func:`rccl_launch_stagger_s`."""


def rccl_launch_stagger_s(gpus_per_thread: int | None, agg_iters: int | None = None,
                          graph: int | None = None) -> float | None:
    """How much later than the first the last of a thread's ``gpus_per_thread`` RCCL kernels starts,
    (G - 1) × :data:`RCCL_LAUNCH_US_PER_GPU`; ``None`` for one GPU per thread and outside rccl-tests'
    default launch mode (``-a`` above 1, ``-G``; :func:`zerocalc.validate.host_launch.host_floor_s`).

    rccl-tests (nccl-tests' fork, ``src/common.cu``) issues each call as one group of G collectives, which
    RCCL launches in turn from that thread ("ROCm serializes kernel launches on multiple GPUs from one
    process", AMD's ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", Mar
    2025); no all-reduce completes before every rank's kernel runs, so a call lasts from the first launch to
    the last plus what RCCL prices for one rank's call, the argument
    :func:`zerocalc.validate.host_launch.launch_stagger_s` makes with NVIDIA's per-GPU figure."""
    from zerocalc.validate.host_launch import default_launch_mode

    if not default_launch_mode(gpus_per_thread, agg_iters, graph):
        return None
    return (gpus_per_thread - 1) * RCCL_LAUNCH_US_PER_GPU * 1e-6


def _msccl_words(t: RcclTuning, rows: Sequence[Mapping]) -> list[str]:
    """The notes on the MSCCL programs the rows ran."""
    used = sorted({r["msccl_program"] for r in rows if r.get("msccl_program")})
    untimed = sorted({r["msccl_untimed"] for r in rows if r.get("msccl_untimed")})
    out = []
    if used:
        out.append(
            f"RCCL {t.release.name} runs {len([r for r in rows if r.get('msccl_program')])} of these sizes "
            f"with MSCCL programs ({', '.join(u.rsplit('/', 1)[-1] for u in used)}; one node of 8 {t.arch} "
            "GPUs, element count dividing the program's chunks): timed as two all-pairs steps over "
            "xGMI (zerocalc's reading of the program, zerocalc.nccl.rccl)"
        )
    if untimed:
        out.append(
            f"MSCCL programs not timed ({', '.join(u.rsplit('/', 1)[-1] for u in untimed)}): those sizes "
            "priced by RCCL's table"
        )
    return out


def compare_rccl_sweep(
    rows: Sequence[Mapping],
    topo: Topology,
    *,
    op: str,
    group_size: int,
    rccl_version: str | None,
    algo_enable=None,
    proto_enable=None,
    in_place: bool = False,
    gpus_per_thread: int | None = None,
    agg_iters: int | None = None,
    graph: int | None = None,
):
    """Every timed row of one sweep against RCCL's model on ``topo`` (an AMD machine), at the RCCL release
    ``rccl_version`` maps to (:func:`zerocalc.nccl.rccl.rccl_release_for`; ``None``: the file states none).
    ``in_place``: the rows' times are in-place ones (rccl-tests ``-O 0``), which MSCCL runs with its
    in-place programs. ``gpus_per_thread`` / ``agg_iters`` / ``graph``: rccl-tests' ``-g`` / ``-a`` / ``-G``
    as the file prints them (:func:`rccl_launch_stagger_s`; the process's G ranks also gate MSCCL,
    :func:`zerocalc.nccl.rccl.rccl_tune`). Returns a :class:`zerocalc.validate.sweep.SweepComparison`."""
    from zerocalc.nccl.predict import as_nccl_collective
    from zerocalc.nccl.rccl_p2p import P2P_OPS as RCCL_P2P
    from zerocalc.validate.sweep import P2P_OPS, SweepComparison, _timed, wrong_notes

    priced = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
    if op not in ("all_to_all", *RCCL_P2P) and (op in P2P_OPS or op not in priced):
        raise UnpricedOpError(
            f"{op} under RCCL is not modelled (zerocalc prices RCCL's all_reduce, all_gather, "
            "reduce_scatter, broadcast, reduce, all_to_all, sendrecv, gather, scatter and hypercube)",
            option="op",
        )
    release, note = rccl_release_for(rccl_version)
    tuning = rccl_tune(topo, group_size, release, algo_enable=algo_enable, proto_enable=proto_enable,
                       ranks_per_process=gpus_per_thread or 1)
    stagger = rccl_launch_stagger_s(gpus_per_thread, agg_iters, graph)
    if op in ("all_to_all", *RCCL_P2P):
        return _compare_p2p(rows, topo, tuning, op, note, rccl_version, in_place, stagger, gpus_per_thread)
    coll = as_nccl_collective(op)
    out = [_priced_row(r, measured, tuning, topo, coll, group_size, in_place, stagger)
           for r, measured in _timed(rows)]
    version = rccl_version or release.name
    notes = _model_notes(topo, tuning, release, note, out, coll, group_size, gpus_per_thread, stagger)
    notes += wrong_notes(out)
    for r in out:
        r.pop("msccl_untimed", None)
        r.pop("net_bound", None)
    return SweepComparison(coll.value, group_size, version, f"RCCL {release.name}", tuple(notes), tuple(out),
                           library="RCCL")


def _compare_p2p(rows: Sequence[Mapping], topo: Topology, tuning: RcclTuning, op: str, note: str | None,
                 rccl_version: str | None, in_place: bool, stagger: float | None,
                 gpus_per_thread: int | None):
    """An ``alltoall_perf`` / ``sendrecv_perf`` / ``gather_perf`` / ``scatter_perf`` / ``hypercube_perf``
    sweep against RCCL's grouped sends (:mod:`zerocalc.nccl.rccl_p2p`): rows as :func:`compare_rccl_sweep`'s,
    ``algorithm`` ``P2P``."""
    from zerocalc.nccl.p2p import ALGORITHM as P2P
    from zerocalc.nccl.rccl_p2p import all_to_all_us, msccl_all_to_all, p2p_op_us
    from zerocalc.validate.sweep import (
        SweepComparison,
        _checked,
        _in_place,
        _timed,
        textbook_ring_s,
        wrong_notes,
    )

    a2a = op == "all_to_all"
    merged = (gpus_per_thread or 1) > 1  # rccl-tests' own group around the call (hypercube's nest in it)
    out = []
    for r, measured in _timed(rows):
        n = int(r["size_bytes"])
        t_us, proto, bound = (all_to_all_us(tuning, n) if a2a
                              else p2p_op_us(tuning, op, n, topo.nics_per_node, merged=merged))
        fit = rccl_calibration(topo, op, tuning.n_ranks, P2P, proto.value)  # fit --out's pair
        if fit is not None:
            t_us = fit.time_s(n, t_us * 1e-6) * 1e6
        t = t_us * 1e-6 + (stagger or 0.0)
        row = {"bytes": n, "measured_s": measured, "predicted_s": t, "ratio": t / measured,
               "nccl_s": t_us * 1e-6, "launch_stagger_s": stagger, "host_floor_s": None, "host_bound": False,
               "nccl_all_channels_s": t_us * 1e-6, "algorithm": P2P, "protocol": proto.value,
               "calibrated": fit is not None, "launch_channels": None,
               "textbook_s": textbook_ring_s(topo, "all_to_all", n, tuning.n_ranks) if a2a else None}
        row.update(_in_place(measured, r.get("inplace_duration_s")))
        row.update(_checked(r))
        row["msccl_unread"] = a2a and msccl_all_to_all(tuning, n, in_place)
        row["net_bound"] = bound
        out.append(row)
    notes = ([note] if note else []) + wrong_notes(out) + _p2p_words(tuning, op, out)
    if op == "hypercube" and merged:
        notes.append("hypercube: rccl-tests wraps each call of a thread driving several GPUs in its own "
                     "group (src/common.cu startColl), in which the log2(n) exchange groups nest and run as "
                     "one: priced as every exchange at once")
    g = gpus_per_thread or 1
    if g > 1 and stagger is not None:
        notes.append(f"one thread drives {g} GPUs (rccl-tests -g {g}): each call priced at that time plus "
                     f"the last kernel's launch delay, {g - 1} × {RCCL_LAUNCH_US_PER_GPU:g} µs = "
                     f"{stagger * 1e6:.1f} µs")
    release = tuning.release
    return SweepComparison(op, tuning.n_ranks, rccl_version or release.name, f"RCCL {release.name}",
                           tuple(notes), tuple(out), library="RCCL")


def _p2p_words(tuning: RcclTuning, op: str, out: list[dict]) -> list[str]:
    """What a point-to-point sweep's rows rest on (:func:`_compare_p2p`); pops the rows' working flags."""
    release = tuning.release
    if op == "all_to_all":
        notes = [f"all_to_all: RCCL {release.name} runs it as one ncclSend and one ncclRecv per rank in a "
                 "group (src/collectives.cc), which its tuning.cc does not price; timed as one Ring step of "
                 "its table (the protocol's) plus the rank's bytes on its xGMI links and on its share of the "
                 "node's NICs (zerocalc.nccl.rccl_p2p)"]
    else:
        notes = [f"{op}: rccl-tests groups ncclSend / ncclRecv calls (src/{op}.cu), which RCCL "
                 f"{release.name}'s tuning.cc does not price; timed per group as one Ring step of its table "
                 "(the protocol's) plus the busiest rank's bytes on its xGMI paths and its NIC "
                 "(zerocalc.nccl.rccl_p2p)"]
    bound = sum(1 for r in out if r.pop("net_bound"))
    if bound and op == "all_to_all":
        notes.append(f"{bound} of these sizes are bound by the nodes' NICs ({tuning.net_GBps:g} GB/s a node, "
                     f"{tuning.net_GBps / (tuning.n_ranks // tuning.n_nodes):g} GB/s a rank)")
    elif bound:
        notes.append(f"{bound} of these sizes are bound by the NICs ({tuning.net_GBps:g} GB/s a node): a "
                     "rank sends across nodes on its own NIC (NCCL_PXN_DISABLE defaults to 1 in RCCL), or on "
                     "its share of its node's where all its node's ranks send at once")
    unread = sum(1 for r in out if r.pop("msccl_unread"))
    if unread:
        notes.append(f"RCCL {release.name} runs {unread} of these sizes with its one-node MSCCL all-to-all "
                     "programs (tools/msccl-algorithms/alltoall-8n-*.xml), not read: priced as the grouped "
                     "sends")
    return notes


def _priced_row(r: Mapping, measured: float, tuning, topo: Topology, coll, group_size: int, in_place: bool,
                stagger: float | None = None) -> dict:
    """One timed row against RCCL's choice and time for it (or the topology's fitted α-β pair), plus the
    launch ``stagger`` of a thread driving several GPUs (:func:`rccl_launch_stagger_s`)."""
    from zerocalc.validate.sweep import _checked, _in_place, textbook_ring_s

    n = int(r["size_bytes"])
    call = price_call(tuning, coll, n, r.get("elem_bytes"), in_place)
    algo, proto = call.algorithm, call.protocol
    extra: dict = ({"msccl_program": call.program} if call.program else {}) | (
        {"msccl_untimed": call.untimed} if call.untimed else {}) | (
        {"net_bound": True} if call.net_bound else {})
    t, calibrated = call.time_us * 1e-6, False
    fit = rccl_calibration(topo, coll, group_size, algo, proto)
    if fit is not None:
        t, calibrated = fit.time_s(n, t), True
    elif call.forced_correction is not None:
        extra["forced"] = forced_words(call)
    launched = t + (stagger or 0.0)
    row = {
        "bytes": n,
        "measured_s": measured,
        "predicted_s": launched,
        "ratio": launched / measured,
        "nccl_s": t,
        "launch_stagger_s": stagger,
        "host_floor_s": None,
        "host_bound": False,
        "nccl_all_channels_s": t,
        "algorithm": algo,
        "protocol": proto,
        "calibrated": calibrated,
        "launch_channels": None,
        "textbook_s": textbook_ring_s(topo, coll, n, group_size),
    }
    row.update(_in_place(measured, r.get("inplace_duration_s")))
    row.update(_checked(r))
    row.update(extra)
    return row


def _model_notes(topo: Topology, tuning, release, note: str | None, out: list[dict], coll, group_size: int,
                 gpus_per_thread: int | None, stagger: float | None = None) -> list[str]:
    """What the rows rest on: RCCL's release and tuning model, MSCCL's programs, the terms not priced."""
    model = tuning.model_words
    source = tuning.source_words
    notes = [f"RCCL (AMD {topo.gpu or topo.gpu_arch}, {topo.gpu_arch}): priced by RCCL {release.name}'s cost "
             f"model (ROCm {release.rocm}; {source}), {model}, {tuning.total_bw_GBps:g} GB/s of xGMI "
             "per GPU as RCCL counts it"]
    if note:
        notes.append(note)
    notes += _msccl_words(tuning, out)
    forced = Counter(r.pop("forced") for r in out if "forced" in r)
    notes += [f"{k} of these sizes: {w}" for w, k in forced.items()]
    if tuning.n_nodes > 1:
        notes += _across_nodes_words(tuning, coll, out)
    bound = [r for r in out if r.get("net_bound")]
    if bound:
        notes.append(
            f"{len(bound)} of these sizes take longer on the nodes' NICs ({tuning.net_GBps:g} GB/s a node) "
            "than on the xGMI bandwidth RCCL's rome-model graphs carry between nodes too: priced at the "
            "NICs' wire time (zerocalc.nccl.rccl.network_floor_us)"
        )
    g = gpus_per_thread or 1
    if g > 1 and stagger is not None:
        notes.append(
            f"one thread drives {g} GPUs (rccl-tests -g {g}): RCCL's kernels are launched one after the "
            f"other from it (HIP serializes launches to several GPUs from one process), so each call is "
            f"priced at RCCL's time plus the last kernel's delay, {g - 1} × {RCCL_LAUNCH_US_PER_GPU:g} µs = "
            f"{stagger * 1e6:.1f} µs (an asynchronous HIP launch, PETSc's ex1hip benchmark)"
        )
    elif g > 1:
        notes.append(f"one thread drives {g} GPUs (rccl-tests -g {g}) outside the default launch mode (-a or "
                     "-G): no launch time is priced")
    if g > 1 and not release.msccl_single_process and tuning.n_nodes == 1 and tuning.n_ranks == 8:
        notes.append(f"RCCL {release.name} runs no MSCCL program when one process holds several of the "
                     "communicator's ranks (msccl_lifecycle.cc mscclCommCompatible): priced by its table")
    if topo.nccl_calibration and not any(r["calibrated"] for r in out):
        notes.append(f"the topology's calibration is for other collectives or group sizes; {coll.value} on "
                     f"{group_size} ranks priced by RCCL's tables")
    return notes


def _across_nodes_words(tuning: RcclTuning, coll, out: list[dict]) -> list[str]:
    """How a sweep across nodes is priced (:mod:`zerocalc.nccl.rccl_net`): RCCL's choice, the protocol it
    forces by size, and the time of the pair as its data moves."""
    m = tuning.model
    hop = m.hw_lat["net"][Algorithm.RING][2]  # Ring/Simple's network hop, µs
    words = [
        f"across nodes RCCL's tuning model {tuning.model_index} picks the algorithm (its bandwidth ratios "
        "and size corrections, down to 0.1, steer that choice"
        + (f", as its {hop:g} µs Ring/Simple network hop does" if hop > STEERING_HOP_US else "")
        + "); the pair is timed as its data moves: RCCL's latency (LL128 with tuning_model_0's hops"
        + (", Ring/Simple's network hop at 2.20.5's 19.8 µs" if hop > STEERING_HOP_US else "")
        + "), the xGMI bandwidth RCCL's graphs carry × the protocol's payload share (LL at RCCL's own LL "
        "bandwidth), no faster than the NICs (zerocalc.nccl.rccl_net)"
    ]
    forced = [r for r in out if forced_protocol(tuning, coll, r["bytes"]) is not None]
    if forced:
        words.append(
            f"RCCL {tuning.release.name} sets the protocol of {len(forced)} of these sizes by its tuning "
            "model's size ranges across nodes (llProtoRanges, rcclUpdateCollectiveProtocol)"
            + (", LL128 enabled across nodes (rome models' ll128Enabled=1)" if tuning.ll128 else "")
        )
    return words


def compare_rccl_rows(rows: Sequence[Mapping], topo: Topology, op: str, group_size: int, rccl_version: str,
                      algo_enable, proto_enable, gpus_per_thread: int | None, agg_iters: int | None,
                      graph: int | None):
    """:func:`compare_rccl_sweep` on a sweep's rows as :func:`zerocalc.validate.sweep.compare_sweep` gets
    them: a table of rccl-tests ``-O 0`` (its in-place group alone) is measured in place."""
    in_place = bool(rows) and str(rows[0].get("layout") or "").endswith("-inplace")
    return compare_rccl_sweep(rows, topo, op=op, group_size=group_size, rccl_version=rccl_version or None,
                              algo_enable=algo_enable, proto_enable=proto_enable, in_place=in_place,
                              gpus_per_thread=gpus_per_thread, agg_iters=agg_iters, graph=graph)
