"""Each row of an evaluated table (:func:`zerocalc.evaluate.evaluate`) priced with RCCL's cost model on a
topology of AMD Instinct GPUs (:mod:`zerocalc.nccl.rccl`): per scheme and configuration, the step time and
the pairs RCCL runs, as :mod:`zerocalc.nccl_pricing` prices NVIDIA topologies with NCCL's. What ``zerocalc
table`` shows as ``t RCCL``.

Each phase (:func:`zerocalc.nccl.steps.phase_calls`) is ``calls`` calls of one collective on its group's
communicator (world, the node's G ranks, or one rank per node, :func:`zerocalc.nccl.steps.group_topology`),
each call priced by :func:`zerocalc.nccl.rccl.price_call`: the MSCCL program RCCL's scheduler picks, else
the pair of least time in RCCL's table; an all-reduce is in place (``torch.distributed.all_reduce`` reduces
its tensor in place: c10d's ProcessGroupNCCL passes it as both send and receive buffer), which selects
MSCCL's in-place programs. All-to-all is not in RCCL's tuning model (it runs as grouped point-to-point
sends, whose RCCL path zerocalc does not model): such a phase, and its scheme's total, is left unpriced
(NaN) and a note says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from zerocalc.errors import RestrictedOpError
from zerocalc.nccl.env import settings
from zerocalc.nccl.env_given import OPTION, on_topology
from zerocalc.nccl.predict import as_nccl_collective
from zerocalc.nccl.rccl import (
    forced_words,
    price_call,
    rccl_calibration,
    rccl_default_for,
    rccl_release_for,
    rccl_tune,
    tables_words,
)
from zerocalc.nccl.steps import (
    CALIBRATED_MARK,
    PhaseTime,
    group_topology,
    phase_calibration,
    phase_calls,
    scheme_time,
)
from zerocalc.nccl_pricing import NcclPricing, calls_words, row_sizes
from zerocalc.topology import Topology

#: The variables of ``--nccl-env`` RCCL's model reads here (:func:`rccl_phases`: its tuning's enabled pairs).
RCCL_READS = ("NCCL_ALGO", "NCCL_PROTO")


def rccl_phases(scheme: str, tunings: dict, *, topology: Topology, release, algo_enable=None,
                proto_enable=None, **sizes) -> list[PhaseTime]:
    """Each phase of ``scheme`` priced with RCCL ``release``'s model on ``topology`` (``sizes``: the
    arguments of :func:`zerocalc.nccl.steps.phase_calls`); ``tunings`` caches each communicator's table
    by (group, ranks, GPUs per node) and is filled here. An all-to-all phase is priced NaN (``unpriced``)."""
    g = min(sizes["gpus_per_node"], sizes["n"])
    out = []
    for ph, ranks, n_bytes, width, calls in phase_calls(scheme, **sizes):
        if ranks <= 1 or n_bytes <= 0:
            out.append(PhaseTime(ph.collective.value, ph.group.value, ranks, n_bytes, calls, "-", "-", 0.0))
            continue
        if ph.collective.value == "all_to_all":
            out.append(PhaseTime("all_to_all", ph.group.value, ranks, n_bytes, calls, "unpriced", "-",
                                 math.nan))
            continue
        topo_g, _ = group_topology(topology.with_gpus_per_node(g), ph.group, g)
        key = (ph.group, ranks, topo_g.gpus_per_node)
        if key not in tunings:
            tunings[key] = rccl_tune(topo_g, ranks, release, algo_enable=algo_enable,
                                     proto_enable=proto_enable)
        coll = as_nccl_collective(ph.collective.value)
        elem = int(width) if width >= 1 and width == int(width) else None  # int4 wire: no MSCCL element
        call = price_call(tunings[key], coll, int(n_bytes), elem, in_place=True)
        t = call.time_us * 1e-6
        fits, note = phase_calibration(topology, coll.value, ranks, topo_g)
        fit = rccl_calibration(replace(topology, nccl_calibration=fits), coll, ranks, call.algorithm,
                               call.protocol)
        if fit is not None:
            t = fit.time_s(n_bytes, t)
        elif call.forced_correction is not None:
            note = "; ".join(filter(None, (note, f"{coll.value}: {forced_words(call)}")))
        out.append(PhaseTime(coll.value, ph.group.value, ranks, n_bytes, calls, call.algorithm,
                             call.protocol, calls * t, note=note, calibrated=fit is not None))
    return out


def price_rows_rccl(df, topo: Topology, *, rccl_version: str | None = None, nccl_algo: str | None = None,
                    nccl_proto: str | None = None, reuse_distance: float = 1e9,
                    nccl_env: Mapping[str, str] | None = None,
                    call_bytes: float | None = None) -> NcclPricing:
    """Each row of ``df`` (an :func:`~zerocalc.evaluate.evaluate` frame) priced with RCCL ``rccl_version``'s
    model (default: :func:`zerocalc.nccl.rccl.rccl_default_for` the GPUs' architecture, 2.21.5, or 2.26.6
    on gfx950) on ``topo`` (an AMD machine), under the ``NCCL_ALGO`` / ``NCCL_PROTO`` given (RCCL reads
    them as NCCL does); under tensor parallelism the data-parallel group is the row's ``dp_size``, as
    :func:`zerocalc.nccl_pricing.price_rows` takes it. A topology RCCL's model does not price is a
    :class:`~zerocalc.errors.ConfigError`. ``nccl_env``: ``--nccl-env``'s variables, read as
    :func:`zerocalc.nccl_pricing.price_rows` reads them (RCCL's model reads ``NCCL_ALGO`` / ``NCCL_PROTO`` of
    them). ``call_bytes``: the largest call, as :func:`zerocalc.nccl_pricing.price_rows` takes it."""
    release, note = rccl_release_for(rccl_version)
    if not rccl_version:
        release = rccl_default_for(topo.gpu_arch)
        note = f"RCCL {release.name}, the default for {topo.gpu_arch} (--nccl-version to choose another)"
    version = rccl_version or release.name
    topo, stated, env_notes = on_topology(topo, nccl_env)
    read = {k: v for k, v in stated.items() if k in RCCL_READS}
    if unread := [f"{k}={v[0]}" for k, v in stated.items() if k not in RCCL_READS]:
        env_notes.append(f"--nccl-env also sets {', '.join(unread)}, which zerocalc's model of RCCL does not "
                         "price")
    env = settings(topo, version, nccl_algo, nccl_proto, stated=read, where=OPTION)
    times, choices, tunings, a2a, shapes, fitted, per_row = [], [], {}, [], [], False, []
    restricted: dict[str, list[str]] = {}
    first: RestrictedOpError | None = None
    for r in df.itertuples(index=False):
        try:
            phases = rccl_phases(r.scheme, tunings, topology=topo, release=release,
                                 algo_enable=env.algo_enable, proto_enable=env.proto_enable,
                                 **row_sizes(r, reuse_distance, call_bytes))
        except RestrictedOpError as e:  # none of the pairs NCCL_ALGO / NCCL_PROTO allow runs a phase
            first = first or e
            restricted.setdefault(e.message, []).append(r.scheme)
            times.append(math.nan)
            choices.append("n/a")
            per_row.append(None)
            continue
        shapes += [p.note for p in phases if p.note]
        fitted = fitted or any(p.calibrated for p in phases)
        a2a += [r.scheme] if any(p.algorithm == "unpriced" for p in phases) else []
        t, c = scheme_time(phases)
        times.append(t)
        choices.append(c)
        per_row.append(phases)
    if first is not None and all(p is None for p in per_row):
        raise first  # the restriction leaves no scheme priced: refused, as RCCL refuses its calls
    models = sorted({t.model_words for t in tunings.values()}, reverse=True)
    sources = tables_words(release, {t.model_index for t in tunings.values()})
    across = any(t.n_nodes > 1 for t in tunings.values())
    notes = [f"t RCCL: RCCL {release.name}'s own cost model (ROCm {release.rocm}; {sources}), the "
             "algorithm/protocol it picks per collective, MSCCL's in-place all-reduce programs where its "
             f"scheduler picks one; {calls_words(call_bytes)}"
             + (f"; {' and '.join(models)}" if models else "")
             + (f"; {note}" if note else ""),
             *(["t RCCL: across nodes RCCL's table picks the algorithm (from 2.25 its size ranges force the "
                "protocol); the call is timed as its data moves, RCCL's latency and the xGMI bandwidth its "
                "graphs carry × the protocol's payload share, no faster than the NICs "
                "(zerocalc.nccl.rccl_net; as check prices rccl-tests sweeps)"] if across else []),
             *env.notes, *env_notes,
             *[f"t RCCL: {', '.join(schemes)} not priced (n/a): {why}"
               for why, schemes in restricted.items()],
             *([f"t RCCL: {', '.join(dict.fromkeys(a2a))}: all-to-all (A2A) is not in RCCL's tuning model "
                "(grouped point-to-point sends, not modelled under RCCL): unpriced"] if a2a else []),
             *([f"t RCCL: {CALIBRATED_MARK} = timed by the topology's calibration (zerocalc fit --out: a "
                "fitted α-β pair, or RCCL's time scaled)"] if fitted else []),
             *[f"t RCCL: {t}" for t in dict.fromkeys(shapes)]]
    return NcclPricing(times, choices, notes, per_row)
