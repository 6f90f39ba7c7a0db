"""A scheme's step priced with NCCL's cost model: per phase, the pair NCCL picks and its time.

Each phase of :mod:`zerocalc.schemes` is ``calls`` calls of one collective on a group (world, the
G ranks of a node, or the N/G ranks with one local rank per node); each call is priced by
:func:`zerocalc.nccl.sweep.predict` for its byte count on a communicator of that group:

- world: N ranks filling nodes of G;
- intra: G ranks on one node;
- inter: N/G ranks, one per node, each with the node's NICs shared by its G such groups
  (``nics_per_node / G`` NICs, at least one), as NCCL sees a one-GPU-per-node communicator.

All-to-all is not in NCCL's tuning model (it runs as grouped point-to-point sends): such phases are
priced by zerocalc's model of NCCL's point-to-point path (:mod:`zerocalc.nccl.p2p`, as ``check`` prices
``alltoall_perf``: a phase's elements are the rank's whole buffer, 1/N of it to each peer), named
``P2P``. Phases run one after another, as in :meth:`zerocalc.schemes.Scheme.time_s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import sympy

from zerocalc import symbols as S
from zerocalc.errors import ConfigError
from zerocalc.nccl.env import Settings, channel_limits
from zerocalc.nccl.model import tune
from zerocalc.nccl.ofi_tuner import OfiTuner, loaded_api, require_coverage
from zerocalc.nccl.p2p import P2pOp, op_time, p2p_comm
from zerocalc.nccl.predict import as_nccl_collective, predict
from zerocalc.nccl.tables import Algorithm, Release
from zerocalc.nccl.tuner import TunerConfig, check_rules, tuner_api
from zerocalc.schemes import Group, get_scheme
from zerocalc.topology import Topology, placement, shape_calibration

_SHORT = {"all_reduce": "AR", "reduce_scatter": "RS", "all_gather": "AG", "broadcast": "BC", "reduce": "R",
          "all_to_all": "A2A"}


@dataclass(frozen=True)
class PhaseTime:
    collective: str
    group: str
    ranks: int
    bytes_per_call: float
    calls: float
    algorithm: str
    protocol: str
    time_s: float  # all calls of the phase
    #: aws-ofi-nccl's tuner plugin chose the pair (None: no such plugin given; False: it left NCCL's choice)
    ofi_chose: bool | None = None
    #: NVLS / NVLS Tree timed with a later release's figures (:func:`zerocalc.nccl.model.nvls_run_release`)
    later_nvls: bool = False
    #: why the topology's calibration did not price the phase though it holds its collective and ranks
    #: (fitted on another shape: :func:`phase_calibration`); '' otherwise
    note: str = ""
    #: timed by the topology's calibration (``fit --out``: a fitted α-β, or the model scaled), not the tables
    calibrated: bool = False


def phase_calibration(topology: Topology, coll: str, ranks: int, topo_g: Topology) -> tuple[tuple, str]:
    """The pairs of ``topology``'s calibration that price ``coll`` on ``ranks`` ranks of the group placed on
    ``topo_g`` (its nodes and ranks per node, :func:`zerocalc.topology.shape_calibration`), and the note
    where the calibration was fitted on other shapes of them alone."""
    if not topology.nccl_calibration:
        return (), ""
    fits, note = shape_calibration(topology.nccl_calibration, coll, ranks,
                                   placement(topo_g.gpus_per_node, ranks))
    return (() if note else fits), note


def group_topology(topo: Topology, group: Group, g: int) -> tuple[Topology, int | None]:
    # HSDP's replicate group, with the shard group a node or more (H ≥ G), has one rank per node too
    if group is Group.INTER or group is Group.REPLICATE:
        nics = max(1, (topo.nics_per_node or 1) // max(1, g))
        return replace(topo, gpus_per_node=1, nics_per_node=nics, gpus_per_host=None), 1
    return topo, None


def phase_calls(scheme: str, *, psi: float, n: int, gpus_per_node: int, comm_bytes: float,
                param_bytes: float | None = None, grad_bytes: float | None = None, micro_batches: int = 1,
                grad_sync: str = "every", hsdp_shard_size: int | None = None, reuse_distance: float = 1e9,
                call_bytes: float | None = None):
    """Each phase of ``scheme`` at (Ψ, N, G, b) as the library sees it: ``(phase, ranks, bytes per call,
    bytes per element, calls per optimizer step)`` (:mod:`zerocalc.schemes`; the arguments as
    :func:`scheme_phases` takes them). ``call_bytes``: the largest call (a bucket, as DDP's
    ``bucket_cap_mb`` or DeepSpeed's ``reduce_bucket_size`` make them): a phase's vector above it is
    ``k = ⌈bytes / call_bytes⌉`` equal calls of ``bytes / k``; ``None``: one call per phase;
    ``"implementation"``: each phase's own implementation's default bucket
    (:func:`zerocalc.buckets.implementation_bucket`)."""
    from zerocalc.buckets import IMPLEMENTATION, implementation_bucket

    g = min(gpus_per_node, n)
    values = {S.Psi: psi, S.N: n, S.G: g, S.b_comm: comm_bytes,
              S.b_p: comm_bytes if param_bytes is None else param_bytes,
              S.b_g: comm_bytes if grad_bytes is None else grad_bytes,
              S.n_mb: micro_batches, S.H: g if hsdp_shard_size is None else hsdp_shard_size,
              S.D_reuse: reuse_distance}
    sch = get_scheme(scheme)
    for ph in sch.phases:
        ranks = int(round(float(ph.group.size.subs(values))))
        elements = float(sympy.sympify(ph.elements).subs(values))
        width = float(sympy.sympify(ph.elem_bytes).subs(values))
        calls = float(sympy.sympify(ph.calls * ph.runs(grad_sync)).subs(values))
        n_bytes = elements * width
        cap = (implementation_bucket(sch.alias_of or sch.name, ph, width) if call_bytes == IMPLEMENTATION
               else call_bytes)
        if cap is not None and n_bytes > cap:
            k = math.ceil(n_bytes / cap)
            n_bytes, calls = n_bytes / k, calls * k
        yield ph, ranks, n_bytes, width, calls


def scheme_phases(scheme: str, *, psi: float, n: int, gpus_per_node: int, comm_bytes: float,
                  topology: Topology, release: Release, algo_enable=None,
                  proto_enable=None, param_bytes: float | None = None, grad_bytes: float | None = None,
                  micro_batches: int = 1, grad_sync: str = "every", hsdp_shard_size: int | None = None,
                  reuse_distance: float = 1e9, nvls_enable: bool = True, tuner: TunerConfig | None = None,
                  nccl_version: str | None = None, ofi: OfiTuner | None = None,
                  env: Settings | None = None, call_bytes: float | None = None) -> list[PhaseTime]:
    """Each phase of ``scheme`` at (Ψ, N, G, b) priced with NCCL's model on ``topology``, per optimizer
    step: ``calls`` counts every run of the phase in the step's ``micro_batches`` (its cadence under
    ``grad_sync``, :mod:`zerocalc.schemes`); ``param_bytes`` / ``grad_bytes`` are the wire widths of the
    parameter- and gradient-side collectives (default ``comm_bytes``). ``tuner``: a tuner plugin's rules
    (:mod:`zerocalc.nccl.tuner`), loaded into NCCL ``nccl_version`` (default: the release's own); ``ofi``:
    aws-ofi-nccl's tuner plugin of a release (:mod:`zerocalc.nccl.ofi_tuner`) loaded instead, each phase's
    pair the one it returns for the phase's communicator (nodes and ranks) where it returns one
    (:func:`zerocalc.nccl.predict.ofi_pair`; a :class:`~zerocalc.errors.ConfigError` naming ``--ofi-tuner``
    where NCCL cannot load it, :func:`~zerocalc.nccl.ofi_tuner.loaded_api`, or zerocalc does not model what
    it does on a phase's nodes, :func:`~zerocalc.nccl.ofi_tuner.require_coverage`). ``env``: the
    environment NCCL runs with (:func:`zerocalc.nccl.env.settings`): its channel bounds, its launch's
    thread settings and, for an all-to-all, the point-to-point variables it read (default: the
    topology's profile's bounds, NCCL's defaults). ``call_bytes``: the largest call, a phase split into
    equal calls below it (:func:`phase_calls`; ``None``: one call per phase)."""
    version = nccl_version or release.tag.lstrip("v").split("-")[0]
    if tuner is not None and ofi is not None:
        raise ConfigError("NCCL loads one tuner plugin: give --nccl-tuner or --ofi-tuner, not both",
                          option="--ofi-tuner")
    api = tuner_api(version) if tuner is not None else 3
    if ofi is not None:
        api = loaded_api(ofi, version, algo_enable is not None or proto_enable is not None)
    lo, hi = channel_limits(topology, version) if env is None else (env.min_channels, env.max_channels)
    g = min(gpus_per_node, n)
    out, tunings = [], {}
    for ph, ranks, n_bytes, _, calls in phase_calls(
            scheme, psi=psi, n=n, gpus_per_node=gpus_per_node, comm_bytes=comm_bytes, param_bytes=param_bytes,
            grad_bytes=grad_bytes, micro_batches=micro_batches, grad_sync=grad_sync,
            hsdp_shard_size=hsdp_shard_size, reuse_distance=reuse_distance, call_bytes=call_bytes):
        if ranks <= 1 or n_bytes <= 0:
            out.append(PhaseTime(ph.collective.value, ph.group.value, ranks, n_bytes, calls, "-", "-", 0.0))
            continue
        topo_g, _ = group_topology(topology.with_gpus_per_node(g), ph.group, g)
        key = (ph.group, ranks)
        if key not in tunings:
            tunings[key] = tune(topo_g, ranks, release, algo_enable=algo_enable, proto_enable=proto_enable,
                                nvls_enable=nvls_enable, min_channels=lo, max_channels=hi)
            if tuner is not None:
                check_rules(tunings[key], tuner, topology.name)
        covered = ofi is not None and require_coverage(ofi, tunings[key].machine.n_nodes)
        if ph.collective.value == "all_to_all":
            comm = p2p_comm(topo_g, ranks, release, version, tunings[key].comm_channels,
                            ring=tunings[key].machine.graphs[Algorithm.RING],
                            **dict(env.p2p if env is not None else ()))
            pt = op_time(comm, P2pOp.ALL_TO_ALL, int(n_bytes))
            out.append(PhaseTime("all_to_all", ph.group.value, ranks, n_bytes, calls, "P2P",
                                 pt.protocol.value, calls * pt.time_s))
            continue
        coll = as_nccl_collective(ph.collective.value)
        fits, note = phase_calibration(topology, coll.value, ranks, topo_g)
        pr = predict(tunings[key], coll, n_bytes, fits, tuner, api,
                     launch_env=env.launch if env is not None else None, ofi=ofi if covered else None)
        later = tunings[key].nvls_run is not None and pr.algorithm.value in ("NVLS", "NVLSTree")
        out.append(PhaseTime(coll.value, ph.group.value, ranks, n_bytes, calls, pr.algorithm.value,
                             pr.protocol.value, calls * pr.time_s, pr.ofi_chose if ofi is not None else None,
                             later, note, pr.calibrated))
    return out


#: Marks a pair in :func:`scheme_time`'s account that aws-ofi-nccl's tuner plugin chose, not NCCL's model.
OFI_MARK = "^"
#: Marks a pair in :func:`scheme_time`'s account timed by the topology's calibration (as ``check`` marks a
#: calibrated row).
CALIBRATED_MARK = "*"


def scheme_time(phases: list[PhaseTime]) -> tuple[float, str]:
    """Total seconds and a short account of NCCL's choices (``AR NVLSTree/Simple; AG Ring/Simple``), a pair
    aws-ofi-nccl's tuner plugin chose marked :data:`OFI_MARK` (``AR Ring/LL128^``, as ``check`` marks a row
    it chose), one the topology's calibration timed :data:`CALIBRATED_MARK` (``AR Tree/Simple*``)."""
    total = math.fsum(p.time_s for p in phases)
    seen = []
    for p in phases:
        if p.algorithm == "-":
            continue
        pair = p.algorithm if p.protocol == "-" else f"{p.algorithm}/{p.protocol}"
        marks = (CALIBRATED_MARK if p.calibrated else "") + (OFI_MARK if p.ofi_chose else "")
        label = f"{_SHORT.get(p.collective, p.collective)} {pair}{marks}"
        if label not in seen:
            seen.append(label)
    return total, "; ".join(seen) or "-"
