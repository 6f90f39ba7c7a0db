"""An nccl-tests sweep against NCCL's cost model: per size, measured and predicted time; the fit.

Pure: rows in (as :mod:`zerocalc.traces.nccl_tests` reads them), a comparison out. The measured
time is the out-of-place ``time`` column; the prediction is :func:`zerocalc.nccl.predict.predict`
for the row's ``size`` (nccl-tests' ``size`` is NCCL's ``nBytes``: the whole buffer of an
all-reduce, the gathered output of an all-gather, the input of a reduce-scatter).
``ratio = predicted / measured``. Each row also carries ``textbook_s``, zerocalc's textbook ring
time on the same topology (the α-β model before NCCL's own), the in-place time ``in_place_s`` when the
file has one, and ``unsteady``: the out-of-place and in-place times of the size differ by more than
:data:`UNSTEADY` ×. NCCL prices the two runs alike (``ncclTopoGetAlgoTime`` reads the byte count, the
collective and the communicator, not the buffers), and nccl-tests times them back to back with the same
iterations, so such a gap is the run's, not the model's. ``wrong`` is the out-of-place ``#wrong`` cell
(:func:`_checked`): a size whose result failed nccl-tests' check did not run as NCCL's collective does.
:func:`fit_calibration` fits the α-β pairs ``zerocalc fit --out`` writes.

When one thread drives several GPUs (nccl-tests ``-g G``), the prediction is NCCL's time plus the stagger of
the thread's G kernel launches, :func:`launch_stagger_s`, and no less than the thread's floor per call,
:func:`host_floor_s` (both in :mod:`zerocalc.validate.host_launch`; ``nccl_s`` keeps NCCL's time,
``launch_stagger_s`` and ``host_floor_s`` the two launch terms, per row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from zerocalc.errors import ConfigError
from zerocalc.nccl.datatype import for_type
from zerocalc.nccl.env import channel_limits
from zerocalc.nccl.launch import LaunchEnv
from zerocalc.nccl.model import Tuning, tune
from zerocalc.nccl.ofi_tuner import OfiTuner, loaded_api, require_coverage
from zerocalc.nccl.p2p import ALGORITHM as P2P
from zerocalc.nccl.p2p import NCCL_TESTS_P2P, UNPRICED, P2pOp, op_time, p2p_comm
from zerocalc.nccl.predict import ANY, as_nccl_collective, predict
from zerocalc.nccl.tables import Algorithm, Collective, parse_version, release_for
from zerocalc.nccl.tuner import TunerConfig, check_rules, tuner_api
from zerocalc.topology import Calibration, Topology, placement, series_calibration, shape_calibration
from zerocalc.validate.host_launch import (  # noqa: F401 (re-exported: launch terms' public names)
    HOST_US_PER_CALL,
    HOST_US_PER_CHANNEL,
    HOST_US_PER_GPU,
    LAUNCH_STAGGER_US_PER_GPU,
    P2P_HOST_US_PER_TASK,
    channels_note,
    host_channels_s,
    host_floor_s,
    launch_note,
    launch_stagger_s,
    one_gpu_channels_note,
    one_gpu_channels_s,
    p2p_host_floor_s,
    p2p_tasks,
)
from zerocalc.validate.sweep_info import _stated_graphs, stated_p2p_notes
from zerocalc.validate.sweep_notes import size_words, sweep_notes
from zerocalc.validate.sweep_summary import median_size_row, passed_rows

if TYPE_CHECKING:  # imported when a sweep ran with -R (compare_sweep)
    from zerocalc.validate.symmetric import SymmetricRun

P2P_OPS = tuple(o.value for o in P2pOp)
"""The ops :func:`compare_sweep` prices with :mod:`zerocalc.nccl.p2p` (as :func:`sweep_op` names them)."""


UNSTEADY = 1.25
"""Out-of-place over in-place time (either way) beyond which a row is ``unsteady``: the upper edge of the
0.8–1.25× band this project holds NCCL's model to at a sweep's median size (issue 11)."""


def sweep_op(row: Mapping) -> str | None:
    """The op a sweep row is checked as: NCCL's collective (``all_reduce`` …), else the point-to-point
    pattern of its nccl-tests test (:data:`zerocalc.nccl.p2p.NCCL_TESTS_P2P`: ``all_to_all``,
    ``sendrecv``, ``gather``, ``scatter``, ``hypercube``), else the test's own name (``alltoallv``,
    recognised but not priced); ``None`` when the row names neither."""
    test = row.get("nccl_test")
    if test in NCCL_TESTS_P2P:
        return NCCL_TESTS_P2P[test].value
    if test in UNPRICED:
        return test
    op = row.get("op")
    if op in ("send", "recv"):
        return P2pOp.SENDRECV.value
    return None if op in (None, "other") else str(op)


def textbook_ring_s(topo: Topology, coll: Collective | str, n_bytes: float, p: int) -> float:
    """zerocalc's textbook ring time (:mod:`zerocalc.collectives`, REFERENCE §4) on ``topo``:
    α of the slowest tier the group spans, β of its slowest link (the 'before' of the NCCL model)."""
    from zerocalc.collectives import time_s

    nodes = math.ceil(p / topo.gpus_per_node)
    alpha = topo.inter.alpha_s if nodes > 1 else topo.intra.alpha_s
    beta = max(1 / topo.intra.bw_Bps, 1 / topo.inter.bw_Bps) if nodes > 1 else 1 / topo.intra.bw_Bps
    return float(time_s(str(coll), n_bytes, p, "ring", alpha=alpha, beta=beta))


@dataclass(frozen=True)
class SweepComparison:
    """One sweep: op, group size, the version priced, and one row per size (JSON contract); ``library``:
    the collective library whose model priced it, ``NCCL``, or ``RCCL`` on AMD GPUs (its version is then
    in ``nccl_version``, the field's name kept: JSON fields are added, never renamed)."""

    op: str
    group_size: int
    nccl_version: str
    release: str
    notes: tuple[str, ...]
    rows: tuple[dict, ...]
    library: str = "NCCL"

    def as_dict(self) -> dict:
        return {"op": self.op, "group_size": self.group_size, "nccl_version": self.nccl_version,
                "nccl_tables": self.release, "notes": list(self.notes), "rows": [dict(r) for r in self.rows],
                "library": self.library}

    @property
    def ratios(self) -> np.ndarray:
        return np.array([r["ratio"] for r in self.rows], dtype=float)

    def median_size_ratio(self) -> float:
        """The ratio at the median size (the lower middle row when the count is even) of the sizes that
        passed nccl-tests' check (:func:`zerocalc.validate.sweep_summary.passed_rows`)."""
        row = median_size_row(passed_rows(self.rows))
        return float(row["ratio"]) if row is not None else math.nan


def compare_sweep(rows: Sequence[Mapping], topo: Topology, *, op: str, group_size: int, nccl_version: str,
                  dtype: str | None = None, redop: str | None = None, **options) -> SweepComparison:
    """Every timed row of one sweep against the model on ``topo`` (:func:`priced_sweep`, whose options
    ``options`` are), on the pairs of the topology's calibration that price the sweep: its series'
    (``dtype`` / ``redop``, :func:`zerocalc.topology.series_calibration`) and its shape's, the nodes and
    ranks per node the sweep is placed on (:func:`zerocalc.topology.shape_calibration`; where the
    calibration holds only other shapes of ``op`` on ``group_size`` ranks, none, said in a note)."""
    shape_note = ""
    if topo.nccl_calibration:
        fits, shape_note = shape_calibration(series_calibration(topo.nccl_calibration, dtype, redop), op,
                                             group_size, placement(topo.gpus_per_node, group_size))
        topo = replace(topo, nccl_calibration=() if shape_note else fits)
    cmp = priced_sweep(rows, topo, op=op, group_size=group_size, nccl_version=nccl_version, dtype=dtype,
                       redop=redop, **options)
    notes = [t for t in (shape_note, _scaled_note(topo.nccl_calibration, cmp)) if t]
    return replace(cmp, notes=(*cmp.notes, *notes)) if notes else cmp


def _scaled_note(fits: Sequence[Calibration], cmp: SweepComparison) -> str:
    """The note on the rows a calibration's scaled pairs priced (``model_scale``, :func:`_scaled_pairs`);
    '' where none did."""
    scaled = {(c.algorithm, c.protocol): c.model_scale for c in fits
              if c.model_scale and (c.op, c.ranks) == (cmp.op, cmp.group_size)}
    used = sorted({k for r in cmp.rows
                   if r.get("calibrated") and (k := (r["algorithm"], r["protocol"])) in scaled})
    whole = scaled.get((ANY, ANY))
    if whole and any(r.get("calibrated") for r in cmp.rows):
        # a sweep of one timed size: its calibration scales the model (fit_calibration), pairs without
        # a table of their own priced by it
        fitted = {(c.algorithm, c.protocol) for c in fits if (c.op, c.ranks) == (cmp.op, cmp.group_size)}
        rest = sorted({(r["algorithm"], r["protocol"]) for r in cmp.rows if r.get("calibrated")} - fitted)
        if rest:
            return (f"{', '.join(f'{a}/{p}' for a, p in rest)} calls priced by the library's own model × "
                    f"{whole:.3g}, measured over the model's time at the one size the calibration's sweep "
                    "timed")
    if not used:
        return ""
    return (f"{', '.join(f'{a}/{p}' for a, p in used)} calls (chosen at too few sizes of the calibration's "
            "sweep for a fit of their own) priced by the library's own model × "
            f"{', '.join(f'{scaled[k]:.3g}' for k in used)}, the fitted pairs' time over the model's at "
            "the sizes next to them")


def priced_sweep(rows: Sequence[Mapping], topo: Topology, *, op: str, group_size: int,
                  nccl_version: str, algo_enable=None, proto_enable=None, nvls_enable: bool = True,
                  tuner: TunerConfig | None = None, gpus_per_thread: int | None = None,
                  agg_iters: int | None = None, graph: int | None = None,
                  channels: tuple[int | None, int | None] | None = None,
                  launch_env: LaunchEnv | None = None, ofi_tuner: OfiTuner | None = None,
                  stated_channels: tuple[int, int] | None = None,
                  stated_graphs: Mapping[str, Sequence] | None = None, stated_p2p: Sequence | None = None,
                  stated_nvls: Sequence | None = None, p2p_env: Sequence = (),
                  stated_chunk: Sequence | None = None,
                  cuda_build: tuple[int, int] | None = None, dtype: str | None = None,
                  redop: str | None = None, local_register: int | None = None) -> SweepComparison:
    """Every timed row of one sweep against NCCL's model on ``topo`` at ``nccl_version``, under the
    ``NCCL_ALGO`` / ``NCCL_PROTO`` / ``NCCL_NVLS_ENABLE`` given (:func:`zerocalc.nccl.env.settings`),
    the channel bounds given (``channels``: ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``, each
    ``None`` when unset; by default those of the topology's profile,
    :func:`zerocalc.nccl.env.channel_limits`) and, when
    given, a tuner plugin's rules (:mod:`zerocalc.nccl.tuner`); with ``gpus_per_thread`` (nccl-tests
    ``-g``) above 1, NCCL's time plus the stagger of the thread's launches and no less than its floor
    (:func:`launch_stagger_s`, :func:`host_floor_s`, in nccl-tests' default launch mode: ``agg_iters``
    (``-a``) and ``graph`` (``-G``) as the file prints them); each call on the channels NCCL launches it
    on under the thread thresholds and counts ``launch_env`` sets (:mod:`zerocalc.nccl.launch`); with
    ``ofi_tuner``, under aws-ofi-nccl's tuner plugin of that release (:func:`zerocalc.nccl.predict.ofi_pair`;
    a :class:`ConfigError` where NCCL could not load it: before NCCL 2.19, or under ``NCCL_ALGO`` /
    ``NCCL_PROTO`` with tuner API v1, whose ``init`` the plugin fails); with ``stated_channels`` (the
    ``comm->nChannels`` an INFO line states and that line's number, :mod:`zerocalc.traces.nccl_info`), on
    that count where it differs from the derived one (:func:`zerocalc.nccl.channels.stated_graph_channels`),
    said in a note; with ``stated_graphs`` (``ring_graph`` / ``tree_graph``: ``[[nChannels, bwIntra, bwInter],
    line]`` from the GRAPH lines; ``nvls_graph`` too, NVLS and NVLS Tree's), on those graphs where they
    differ from the derived ones, said in a note; with ``stated_p2p`` (``[[p2pnChannels, p2pnChannelsPerPeer],
    line]``), a point-to-point sweep on those channels (:func:`_compare_p2p`); with ``stated_nvls``
    (``[nvlsChannels, line]``), NCCL's NVLS channels where they differ from the derived count
    (:func:`zerocalc.nccl.model.tune`'s ``stated_nvls``, :func:`stated_nvls_notes`); ``p2p_env``: the p2p
    variables the file sets (:attr:`zerocalc.nccl.env.Settings.p2p`), read by a point-to-point sweep, and
    ``stated_chunk`` (``[p2pChunkSize, line]``) the p2p step its INFO line states; ``cuda_build``: the CUDA
    release the NCCL that ran was built with (its version line, :func:`zerocalc.nccl.predict.
    cuda_build_from_text`), which :func:`zerocalc.nccl.model.tune` reads; ``dtype`` / ``redop``: the sweep's
    element type (canonical, :mod:`zerocalc.dtypes`) and nccl-tests reduction, which NCCL's choice reads
    (:func:`zerocalc.nccl.datatype.for_type`; ``None``: not known, the model unchanged);
    ``local_register``: nccl-tests ``-R`` (2: symmetric registration, whose all-reduce, all-gather and
    reduce-scatter rows are priced with NCCL's symmetric kernels where NCCL runs them,
    :mod:`zerocalc.validate.symmetric`; ``None``: not known, as 0). On AMD GPUs (``gpu_arch``) the sweep
    is RCCL's (:mod:`zerocalc.validate.rccl`). ``topo``'s calibration is taken as it is
    (:func:`compare_sweep` chooses its pairs)."""
    if topo.gpu_arch is not None:
        from zerocalc.validate.rccl import compare_rccl_rows

        return compare_rccl_rows(rows, topo, op, group_size, nccl_version, algo_enable, proto_enable,
                                 gpus_per_thread, agg_iters, graph)
    if op in P2P_OPS:
        return _compare_p2p(rows, topo, P2pOp(op), group_size, nccl_version, gpus_per_thread, agg_iters,
                            graph, channels, stated_channels, stated_p2p, p2p_env, stated_chunk)
    if op in UNPRICED:
        raise ConfigError(UNPRICED[op] + "; zerocalc prices the other nccl-tests ops", option="op")
    coll = as_nccl_collective(op)
    release, note = release_for(nccl_version)
    lo, hi = channels if channels is not None else channel_limits(topo, nccl_version)
    tuning = tune(topo, group_size, release, algo_enable=algo_enable, proto_enable=proto_enable,
                  nvls_enable=nvls_enable, min_channels=lo, max_channels=hi,
                  stated_channels=stated_channels[0] if stated_channels else None,
                  stated_graphs=_stated_graphs(stated_graphs),
                  stated_nvls=stated_nvls[0] if stated_nvls else None, cuda_build=cuda_build)
    api = _plugin_api(tuning, topo, nccl_version, tuner, ofi_tuner,
                      restricted=algo_enable is not None or proto_enable is not None)
    # the call's type after the communicator's: a tuner rule for NVLS suits the communicator, and NCCL's
    # cost table leaves NVLS out of an int8 call (NCCL_ALGO_PROTO_IGNORE, which the plugin skips)
    tuning, type_note = for_type(tuning, coll, dtype, redop)
    symk, symk_notes = _symmetric(tuning, coll, group_size, nccl_version, local_register, nvls_enable, dtype,
                                  redop, gpus_per_thread, agg_iters)
    fallbacks: dict[str, int] = {}
    out = _priced_rows(rows, tuning, topo, coll, group_size, nccl_version, api=api, tuner=tuner,
                       ofi_tuner=ofi_tuner, launch_env=launch_env, gpus_per_thread=gpus_per_thread,
                       agg_iters=agg_iters, graph=graph, symk=symk, fallbacks=fallbacks)
    head = [t for t in (note, type_note) if t] + symk_notes + (symk.notes(out, fallbacks) if symk else [])
    notes = head + sweep_notes(tuning, topo, coll, group_size, out, api=api, tuner=tuner, ofi_tuner=ofi_tuner,
                                stated=(stated_graphs, stated_channels, stated_nvls),
                                launch=(gpus_per_thread, agg_iters, graph))
    return SweepComparison(coll.value, group_size, nccl_version, release.name, tuple(notes), tuple(out))


def _plugin_api(tuning: Tuning, topo: Topology, nccl_version: str, tuner: TunerConfig | None,
                ofi_tuner: OfiTuner | None, *, restricted: bool) -> int:
    """The tuner API a plugin is loaded with (3 when none is): the example tuner's rules checked against the
    communicator, aws-ofi-nccl's tuner refused where NCCL could not load it or it does not cover the nodes."""
    api = 3
    if tuner is not None:
        api = tuner_api(nccl_version)
        check_rules(tuning, tuner, topo.name)
    if ofi_tuner is not None:
        api = loaded_api(ofi_tuner, nccl_version, restricted)
        require_coverage(ofi_tuner, tuning.machine.n_nodes)
    return api


def _symmetric(tuning: Tuning, coll: Collective, group_size: int, nccl_version: str,
               local_register: int | None, nvls_enable: bool, dtype: str | None, redop: str | None,
               gpus_per_thread: int | None, agg_iters: int | None) -> tuple[SymmetricRun | None, list[str]]:
    """:func:`zerocalc.validate.symmetric.symmetric_run` for a sweep run with nccl-tests ``-R`` (its
    modules imported only then); ``(None, [])`` for the others."""
    if not local_register:
        return None, []
    from zerocalc.validate.symmetric import symmetric_run

    return symmetric_run(tuning, coll, group_size, parse_version(nccl_version), local_register=local_register,
                         nvls_enable=nvls_enable, dtype=dtype, redop=redop, gpus_per_thread=gpus_per_thread,
                         agg_iters=agg_iters)


def _priced_rows(rows: Sequence[Mapping], tuning: Tuning, topo: Topology, coll: Collective, group_size: int,
                 nccl_version: str, *, api: int, tuner: TunerConfig | None, ofi_tuner: OfiTuner | None,
                 launch_env: LaunchEnv | None, gpus_per_thread: int | None, agg_iters: int | None,
                 graph: int | None, symk: SymmetricRun | None = None,
                 fallbacks: dict[str, int] | None = None) -> list[dict]:
    """Each timed row measured against its prediction: the JSON row of :func:`compare_sweep`; with
    ``symk``, on the symmetric kernel NCCL runs the size on (``symk_kernel``, ``symk_blocks``), where it
    runs one (``fallbacks`` counts the others by why not)."""
    calibration = topo.nccl_calibration or ()
    version = parse_version(nccl_version)
    floor = host_floor_s(gpus_per_thread, agg_iters, graph)
    stagger = launch_stagger_s(gpus_per_thread, agg_iters, graph, version)
    out = []
    for r, measured in _timed(rows):
        pr = predict(tuning, coll, r["size_bytes"], calibration, tuner, api, version, launch_env, ofi_tuner)
        full = None if pr.calibrated else pr.all_channels_s
        channels = pr.launch.channels if pr.launch is not None and not pr.calibrated else None
        row_floor = (None if floor is None or pr.calibrated else
                     floor + host_channels_s(gpus_per_thread, channels, tuning.release.era, agg_iters, graph))
        work = one_gpu_channels_s(gpus_per_thread, channels, version, agg_iters, graph)
        row = {"bytes": int(r["size_bytes"]), "measured_s": measured,
               **_launched(pr.time_s, measured, stagger, row_floor, full, work),
               "algorithm": pr.algorithm.value,
               "protocol": pr.protocol.value, "calibrated": pr.calibrated,
               "launch_channels": pr.launch.channels if pr.launch is not None else None,
               "textbook_s": textbook_ring_s(topo, coll, r["size_bytes"], group_size)}
        if symk is not None and not pr.calibrated:
            from zerocalc.validate.symmetric import wire_s

            symk.apply(row, int(r["size_bytes"]), partial(_launched, measured=measured, stagger=stagger,
                                                          floor=floor), fallbacks,
                       wire_s(tuning, coll, pr.algorithm, pr.protocol, r["size_bytes"]))
        row.update(_in_place(measured, r.get("inplace_duration_s")))
        row.update(_checked(r))
        if tuner is not None:
            row["channels"], row["tuner_line"] = pr.channels, pr.tuner_line
        if ofi_tuner is not None:
            row["ofi_tuner"] = pr.ofi_chose
        out.append(row)
    return out


def _timed(rows: Sequence[Mapping]):
    """``(row, measured seconds)`` of each row with a size and a positive time, smallest size first."""
    for r in sorted(rows, key=lambda r: r["size_bytes"]):
        measured = r.get("duration_s")
        if measured is not None and measured > 0 and r["size_bytes"] > 0:
            yield r, float(measured)


def _launched(model_s: float, measured: float, stagger: float | None, floor: float | None,
              all_channels_s: float | None = None, work_s: float = 0.0) -> dict:
    """A row's prediction from the model's time: plus the ``-g`` launch stagger, no less than the host
    floor (:func:`launch_stagger_s`, :func:`host_floor_s`), with the JSON fields that say so.

    ``all_channels_s``: NCCL's time of the call on all its channels, when it launches fewer
    (:mod:`zerocalc.nccl.launch`; ``model_s`` is then the time on those it launches). Under a stagger the
    narrow launch's extra time runs while the thread launches the later GPUs, up to the stagger's length:
    the GPUs already launched stream their channels' data into their peers' buffers, which take it before
    the peers' kernels start (each connection's FIFO has ``NCCL_STEPS`` slots of credit), so the call takes
    the later of ``all_channels_s`` + stagger and ``model_s``. The same host's -g 8 run takes 9-11 µs more
    than its mpirun -np 8 run from 32 to 128 KiB, where NCCL launches 1-4 of 24 channels, and 17-20 µs
    (the stagger) at the sizes it launches all (``tests/data/traces``, 8x A100-80GB).

    ``work_s``: what the call's channels add to NCCL's time with one GPU per thread up to NCCL 2.12
    (:func:`one_gpu_channels_s`; ``channel_work_s``), ``nccl_s`` keeping NCCL's own."""
    launched = model_s + work_s + (stagger or 0.0)
    if stagger and all_channels_s is not None:
        launched = max(all_channels_s + stagger, model_s) + work_s
    t = max(launched, floor or 0.0)
    return {"predicted_s": t, "ratio": t / measured, "nccl_s": model_s, "launch_stagger_s": stagger,
            "channel_work_s": work_s, "host_floor_s": floor,
            "host_bound": floor is not None and floor > launched,
            "nccl_all_channels_s": all_channels_s if all_channels_s is not None else model_s}


def _compare_p2p(rows: Sequence[Mapping], topo: Topology, op: P2pOp, group_size: int, nccl_version: str,
                 gpus_per_thread: int | None, agg_iters: int | None, graph: int | None,
                 channels: tuple[int | None, int | None] | None,
                 stated_channels: tuple[int, int] | None = None,
                 stated_p2p: Sequence | None = None, p2p_env: Sequence = (),
                 stated_chunk: Sequence | None = None) -> SweepComparison:
    """A point-to-point sweep against :mod:`zerocalc.nccl.p2p` (NCCL has no cost table for it): rows as
    :func:`compare_sweep`'s, ``algorithm`` ``P2P`` and the protocol NCCL's p2p path picks; a calibration
    fitted for the op and group size replaces the model's time (:func:`fit_calibration`). The p2p
    channels start from the communicator's (``comm->nChannels``) under the channel bounds given, as
    ``ncclTopoComputeP2pChannels`` reads it after ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS``, or from
    the count an INFO line states (``stated_channels``); the p2p channels and channels per peer an INFO
    line states (``stated_p2p``: ``[[p2pnChannels, p2pnChannelsPerPeer], line]``) are priced in place of the
    derived ones where they differ (:func:`stated_p2p_notes`). ``p2p_env``: the ``(keyword, value)`` of each
    p2p variable the file sets (:data:`zerocalc.nccl.env.STATED_P2P`), passed to
    :func:`~zerocalc.nccl.p2p.p2p_comm`; ``stated_chunk``: the ``comm->p2pChunkSize`` an INFO line states
    (``[bytes, line]``), the Simple step in place of the derived one. The Ring graph handed to
    :func:`~zerocalc.nccl.p2p.p2p_comm` is the one the stated count implies (:func:`tune`), which bounds
    the network through host memory (:func:`~zerocalc.nccl.p2p.host_path_GBps`)."""
    release, note = release_for(nccl_version)
    lo, hi = channels if channels is not None else channel_limits(topo, nccl_version)
    tuning = tune(topo, group_size, release, min_channels=lo, max_channels=hi,
                  stated_channels=stated_channels[0] if stated_channels else None)
    n_channels = derived_channels = (tuning.stated_channels or (0, tuning.comm_channels))[1]
    if stated_channels:
        n_channels = stated_channels[0]
    comm = p2p_comm(topo, group_size, release, nccl_version, n_channels,
                    max_peers=2 if op == P2pOp.SENDRECV else None,
                    ring=tuning.machine.graphs[Algorithm.RING], **dict(p2p_env))
    derived = comm
    if stated_p2p:
        (told, per_peer), _ = stated_p2p
        comm = replace(comm, p2p_channels=int(told), per_peer=int(per_peer))
    if stated_chunk and stated_chunk[0] > 0:
        comm = replace(comm, chunk_bytes=int(stated_chunk[0]))
    fits = [c for c in (topo.nccl_calibration or ()) if c.op == op.value and c.ranks == group_size]
    floor = p2p_host_floor_s(op, group_size, gpus_per_thread, agg_iters, graph)
    stagger = launch_stagger_s(gpus_per_thread, agg_iters, graph, parse_version(nccl_version))
    out = []
    for r, measured in _timed(rows):
        n = int(r["size_bytes"])
        pr = op_time(comm, op, n)
        fit = next((c for c in fits if (c.algorithm, c.protocol) == (P2P, pr.protocol.value)),
                   next((c for c in fits if c.algorithm == ANY), None))
        model_s = pr.time_s if fit is None else fit.time_s(n, pr.time_s)
        row = {"bytes": n, "measured_s": measured,
               **_launched(model_s, measured, stagger, None if fit is not None else floor),
               "algorithm": P2P, "protocol": pr.protocol.value, "calibrated": fit is not None,
               "textbook_s": (textbook_ring_s(topo, op.value, n, group_size) if op == P2pOp.ALL_TO_ALL
                              else None)}
        row.update(_in_place(measured, r.get("inplace_duration_s")))
        row.update(_checked(r))
        out.append(row)
    notes = [note] if note else []
    notes += wrong_notes(out)
    notes += stated_p2p_notes(derived_channels, stated_channels, derived, comm, stated_p2p, stated_chunk)
    if comm.version < (2, 14):
        notes.append(f"NCCL {nccl_version}'s p2p path predates the per-transport p2p chunk sizes of 2.14 "
                     "(NCCL_P2P_NET/NVL/PCI_CHUNKSIZE); priced with the p2p rules of 2.14-2.19")
    notes.append(f"{op.value}: NCCL has no cost model for point-to-point; priced by zerocalc's p2p model "
                 f"(grouped ncclSend/ncclRecv over {comm.p2p_channels} p2p channels, {comm.per_peer} per "
                 "peer; zerocalc.nccl.p2p)")
    if fits and not any(r["calibrated"] for r in out):
        notes.append(f"the topology's calibration does not cover {op.value} on {group_size} ranks")
    g = gpus_per_thread or 0
    extra = p2p_tasks(op, group_size, g) - g if floor is not None else 0
    if extra > 0:
        notes.append(f"{op.value}: the thread issues {extra + g} sends and receives per call for its {g} "
                     f"GPUs, {extra} more than a collective's one per GPU, each "
                     f"{P2P_HOST_US_PER_TASK:g} µs of host time: no call is priced under "
                     f"{HOST_US_PER_CALL:g} + {g} × {HOST_US_PER_GPU:g} + {extra} × "
                     f"{P2P_HOST_US_PER_TASK:g} = "
                     f"{floor * 1e6:.1f} µs (the thread's floor below, raised)")
    return SweepComparison(op.value, group_size, nccl_version, release.name, tuple(notes), tuple(out))


def _checked(r: Mapping) -> dict:
    """``wrong``: the elements nccl-tests' check found wrong in the row's out-of-place result, its ``#wrong``
    cell (the layouts since nccl-tests' Aug 2022 "Resync with NCCL 2.13": ``src/common.cu`` counts the
    elements that differ from the expected result, ``wrongElts``, and prints the count; 0 when all match);
    ``None`` where the file has no count: ``N/A`` under ``-c 0`` (no check), the older layouts' ``error``
    column (the largest deviation, not a count) and nccl-tests' JSON. A count above 0 is a run whose data
    came out corrupted (as on Slingshot under LL128, NVIDIA/nccl issue 2001): its time is not a measurement
    of the collective NCCL's model prices."""
    from zerocalc.traces.nccl_tests_rows import counts_wrong

    w = r.get("wrong")
    if not counts_wrong(r.get("layout")) or not isinstance(w, (int, float)) or math.isnan(w):
        return {"wrong": None}
    return {"wrong": int(w)}


WRONG_MEANS = ("those calls did not compute the collective NCCL's model prices, and their times are the "
               "failed runs'")
"""What :func:`wrong_notes` says of the sizes that failed nccl-tests' check, unless told otherwise."""


def wrong_notes(out: Sequence[Mapping], means: str = WRONG_MEANS) -> list[str]:
    """The sweep note naming the sizes whose results failed nccl-tests' check (:func:`_checked`), then
    ``means``, what that is to the reader: one, or none where every size passed."""
    bad = [r for r in out if r.get("wrong")]
    if not bad:
        return []
    sizes = ", ".join(size_words(r["bytes"]) for r in bad)
    return [f"{len(bad)} of {len(out)} sizes failed nccl-tests' check (#wrong above 0: {sizes}): {means}"]


def _in_place(out_of_place: float, in_place) -> dict:
    """``in_place_s`` and ``unsteady`` of a row (module docstring)."""
    if in_place is None or not in_place > 0:
        return {"in_place_s": None, "unsteady": False}
    gap = max(out_of_place / in_place, in_place / out_of_place)
    return {"in_place_s": float(in_place), "unsteady": bool(gap > UNSTEADY)}


def _scaled_pairs(rows: Sequence[Mapping], fitted: Mapping[tuple[str, str], tuple[float, float]]
                  ) -> dict[tuple[str, str], float]:
    """The scale of each pair NCCL chose at too few sizes for a fit of its own, where other pairs have
    one: the fitted time over the model's own (``nccl_s``) at the sweep's nearest sizes on either side of
    the pair's that a fitted pair priced (geometric mean of the one or two). The pair is then priced by the
    model, whose shape over sizes it keeps, times how far the fitted pairs found the cluster from the model
    next to it: the sweep-wide fit, a line through the other pairs' sizes, misses such a pair by up to 3×
    at a protocol switch (NVIDIA H100 2 × 8 sweeps: Tree/LL128 at 256-512 KiB priced at 0.68× and 0.34×
    of its time), the model alone keeps the whole cluster's distance from it."""
    near = sorted((r["bytes"], (fitted[k][0] + fitted[k][1] * r["bytes"]) / r["nccl_s"]) for r in rows
                  if (k := (r["algorithm"], r["protocol"])) in fitted and (r.get("nccl_s") or 0) > 0)
    out = {}
    for a, p in sorted({(r["algorithm"], r["protocol"]) for r in rows} - set(fitted)):
        sizes = [r["bytes"] for r in rows if (r["algorithm"], r["protocol"]) == (a, p)]
        below = [s for n, s in near if n < min(sizes)][-1:]
        above = [s for n, s in near if n > max(sizes)][:1]
        if below or above:
            out[(a, p)] = float(np.exp(np.mean(np.log(below + above))))
    return out


def _fit_pair(n: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """α (s) and β (s/byte) of ``t = α + β n``, least absolute relative error (Σ |(α + β n) / t - 1|, α ≥ 0,
    β > 0): the median of predicted / measured is 1, however the sizes bend off a line (a latency floor,
    a protocol switch inside one pair). The sum is linear in (α, β), so its least is at a vertex: the line
    through two sizes, or through one with α = 0; else (no rise in the sweep) a flat line."""
    cands = [(t[i] - (t[j] - t[i]) / (n[j] - n[i]) * n[i], (t[j] - t[i]) / (n[j] - n[i]))
             for i in range(len(n)) for j in range(i + 1, len(n)) if n[j] != n[i]]
    cands = [(a, b) for a, b in cands if a >= 0 and b > 0]
    cands += [(0.0, ti / ni) for ni, ti in zip(n, t, strict=True) if ni > 0]
    if not cands:
        beta = float(np.min(t / n)) * 1e-3  # latency-bound: bandwidth not seen in the sweep
        return float(np.median(t - beta * n)), beta
    cost = [float(np.sum(np.abs((a + b * n) / t - 1))) for a, b in cands]
    alpha, beta = cands[int(np.argmin(cost))]
    return float(alpha), float(beta)


def fit_calibration(cmp: SweepComparison, *, min_sizes: int = 3) -> list[Calibration]:
    """α-β per (algorithm, protocol) NCCL chose, where at least ``min_sizes`` sizes chose it; for a pair
    chosen at fewer, the model's own time scaled as :func:`_scaled_pairs` says; and one pair over the whole
    sweep (``algorithm = protocol = 'any'``) for the pairs the sweep did not show. A sweep of one timed
    size (``-b 8G -e 8G``, a bandwidth check) holds no line: its calibration is the model's time scaled by
    measured over model at that size (``any``, ``model_scale``), every pair and size alike.

    What is fitted is the collective's own time: a sweep run with several GPUs per thread (``-g G``) has
    each row's launch stagger (``launch_stagger_s``, :func:`launch_stagger_s`) taken off its measured
    time first, since ``check`` adds it back to the calibrated time (and a training step's calls, one
    GPU per process, carry none).

    A size whose result failed nccl-tests' check (``wrong`` above 0, :func:`_checked`) is left out: its
    time is a failed run's, not the collective's (:func:`wrong_notes`), and a pair fitted on it would carry
    that into every size it prices."""
    passed = passed_rows(cmp.rows)
    rows = [dict(r, measured_s=r["measured_s"] - (r.get("launch_stagger_s") or 0.0)) for r in passed]
    rows = [r for r in rows if r["measured_s"] > 0]
    if len(rows) == 1 and (rows[0].get("nccl_s") or 0) > 0:
        # one timed size (a bandwidth check at one size): no line through it, the model's time scaled
        # to it at every size and pair
        (r,) = rows
        return [Calibration(cmp.op, cmp.group_size, ANY, ANY, 0.0, 0.0, cmp.nccl_version,
                            model_scale=r["measured_s"] / r["nccl_s"])]
    if len(rows) < 2:
        failed = len(cmp.rows) - len(passed)
        passing = f" that passed nccl-tests' check ({failed} failed it)" if failed else ""
        raise ConfigError(f"{cmp.op} on {cmp.group_size} ranks: " + (
            f"no timed size{passing}: nothing to fit" if not rows else
            f"1 timed size{passing}, which the model does not price: a fit needs at least 2"), option="fit")
    out = []
    pairs = sorted({(r["algorithm"], r["protocol"]) for r in rows})
    fitted: dict[tuple[str, str], tuple[float, float]] = {}
    for a, p in pairs:
        sub = [r for r in rows if (r["algorithm"], r["protocol"]) == (a, p)]
        if len({r["bytes"] for r in sub}) < min_sizes:
            continue
        alpha, beta = fitted[(a, p)] = _fit_pair(np.array([r["bytes"] for r in sub], float),
                                                 np.array([r["measured_s"] for r in sub], float))
        out.append(Calibration(cmp.op, cmp.group_size, a, p, alpha * 1e6, 1 / beta / 1e9, cmp.nccl_version))
    out += [Calibration(cmp.op, cmp.group_size, a, p, 0.0, 0.0, cmp.nccl_version, model_scale=s)
            for (a, p), s in _scaled_pairs(rows, fitted).items()]
    alpha, beta = _fit_pair(np.array([r["bytes"] for r in rows], float),
                            np.array([r["measured_s"] for r in rows], float))
    out.append(Calibration(cmp.op, cmp.group_size, ANY, ANY, alpha * 1e6, 1 / beta / 1e9, cmp.nccl_version))
    return out
