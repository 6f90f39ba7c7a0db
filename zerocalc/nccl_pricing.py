"""Each row of an evaluated table (:func:`zerocalc.evaluate.evaluate`) priced with NCCL's own cost model:
per scheme and configuration, the step time and the (algorithm, protocol) pairs NCCL picks, under the
NCCL version, ``NCCL_ALGO`` / ``NCCL_PROTO`` and tuner plugin rules given (:mod:`zerocalc.nccl.steps`,
:mod:`zerocalc.nccl.env`, :mod:`zerocalc.nccl.tuner`). What ``zerocalc table`` shows as ``t NCCL`` and
the report prices under a tuner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from zerocalc.errors import RestrictedOpError, UnpricedOpError
from zerocalc.nccl import LATEST, Algorithm, release_for
from zerocalc.nccl.env import settings
from zerocalc.nccl.env_given import OPTION, on_topology
from zerocalc.nccl.graph import REQUIRED_FIELDS
from zerocalc.nccl.ofi_tuner import OfiTuner
from zerocalc.nccl.steps import CALIBRATED_MARK, OFI_MARK, scheme_phases, scheme_time
from zerocalc.nccl.tuner import TunerConfig
from zerocalc.schemes import get_scheme
from zerocalc.topology import Topology
from zerocalc.topology.machine import calibrated_version, require_all


@dataclass(frozen=True)
class NcclPricing:
    """Per row, NCCL's step time (s) and its choices (``AR NVLSTree/Simple; AG Ring/Simple``); and the
    notes that say under what they were priced."""

    times: list[float]
    choices: list[str]
    notes: list[str]
    #: per row, its phases as NCCL runs them (:class:`zerocalc.nccl.steps.PhaseTime`, in step order: calls,
    #: bytes a call, pair, time); ``None`` where the row is not priced
    phases: list = field(default_factory=list)


def missing_fields(topo: Topology) -> list[str]:
    """The topology fields NCCL's model needs that ``topo`` does not give."""
    return [f for f in REQUIRED_FIELDS if getattr(topo, f) is None]


def price_rows(df, topo: Topology, *, nccl_version: str | None = None, nccl_algo: str | None = None,
               nccl_proto: str | None = None, tuner: TunerConfig | None = None,
               reuse_distance: float = 1e9, ofi_tuner: OfiTuner | None = None,
               nccl_env: Mapping[str, str] | None = None, call_bytes: float | None = None) -> NcclPricing:
    """Each row of ``df`` (an :func:`~zerocalc.evaluate.evaluate` frame) priced with NCCL ``nccl_version``'s
    model (default: the release ``topo``'s calibration was fitted at, else the latest modelled) on
    ``topo``: per phase the pair NCCL picks, or the one a tuner
    rule forces (``tuner``), one call per phase. Under tensor parallelism the node's NICs are shared by
    its tp data-parallel groups. A field of ``topo`` the model needs and lacks, a bad ``NCCL_ALGO`` /
    ``NCCL_PROTO`` or a tuner rule the machine cannot run is a :class:`~zerocalc.errors.ConfigError`.
    ``ofi_tuner``: aws-ofi-nccl's tuner plugin of a release, loaded in place of ``tuner`` (one of the two:
    NCCL loads one tuner plugin); each phase's pair is the one it returns for the phase's communicator,
    where it returns one (:func:`zerocalc.nccl.steps.scheme_phases`), marked
    :data:`~zerocalc.nccl.steps.OFI_MARK` in the choices. ``nccl_env``: ``--nccl-env``'s variables
    (:func:`zerocalc.nccl.env_given.parse_given`), priced where NCCL's model reads them
    (:func:`zerocalc.nccl.env.settings`: the channel bounds, the launch's threads, ``NCCL_NVLS_ENABLE``,
    and the point-to-point variables where a scheme has an all-to-all; :func:`zerocalc.nccl.env_given.
    on_topology`), the others said in a note. ``call_bytes``: the largest call (``--bucket``), each
    phase split into equal calls no larger (:func:`zerocalc.nccl.steps.phase_calls`; ``None``: one call
    per phase)."""
    require_all(topo, REQUIRED_FIELDS, "NCCL's cost model")
    fitted = calibrated_version(topo.nccl_calibration) if topo.gpu_arch is None else None
    version = nccl_version or fitted or LATEST.tag.lstrip("v").split("-")[0]
    release, note = release_for(version)
    topo, stated, env_notes = on_topology(topo, nccl_env)
    p2p = any(ph.collective.value == "all_to_all" for s in dict.fromkeys(df["scheme"])
              for ph in get_scheme(s).phases)
    env = settings(topo, version, nccl_algo, nccl_proto, tuner_given=tuner is not None, stated=stated,
                   where=OPTION, p2p=p2p)
    times, choices, ofi_phases, shapes, calibrated, per_row = [], [], [], [], [], []
    unpriced: dict[str, list[str]] = {}
    restricted: RestrictedOpError | None = None
    later_nvls = False  # a phase's NVLS timed with the later release's figures
    for r in df.itertuples(index=False):
        tp = int(getattr(r, "tp", 1))
        topo_dp = topo if tp == 1 or not topo.nics_per_node else replace(
            topo, nics_per_node=max(1, topo.nics_per_node // tp))
        try:
            phases = scheme_phases(r.scheme, topology=topo_dp, release=release, algo_enable=env.algo_enable,
                                   proto_enable=env.proto_enable, nvls_enable=env.nvls_enable, tuner=tuner,
                                   nccl_version=version, ofi=ofi_tuner, env=env,
                                   **row_sizes(r, reuse_distance, call_bytes))
        except UnpricedOpError as e:  # a phase the release cannot run (send/receive before NCCL 2.7), or
            # none of the pairs NCCL_ALGO / NCCL_PROTO allow can (NCCL fails the call)
            restricted = restricted or (e if isinstance(e, RestrictedOpError) else None)
            times.append(math.nan)
            choices.append("n/a")
            per_row.append(None)
            unpriced.setdefault(e.message, []).append(r.scheme)
            continue
        ofi_phases += [p for p in phases if p.ofi_chose is not None]
        calibrated += [p for p in phases if p.calibrated]
        shapes += [p.note for p in phases if p.note]
        later_nvls = later_nvls or any(p.later_nvls for p in phases)
        t, c = scheme_time(phases)
        times.append(t)
        choices.append(c)
        per_row.append(phases)
    if restricted is not None and all(p is None for p in per_row):
        raise restricted  # the restriction leaves no scheme priced: refused, as NCCL refuses its calls
    notes = [f"t NCCL: NCCL {release.name}'s own cost model ({release.tag} tuning.cc), the algorithm/"
             f"protocol it picks per collective; {calls_words(call_bytes)}; all-to-all (A2A) by zerocalc's "
             "model of NCCL's grouped send/receive (P2P)" + (f"; {note}" if note else ""),
             *([f"t NCCL: NVLS / NVLS Tree calls timed with NCCL {LATEST.name}'s figures for "
                f"{nvls_corrected_for(topo)}, which NCCL 2.28.3 corrected; NCCL {release.name} chooses them "
                "with its own"]
               if later_nvls and nvls_corrected(release, topo) else []),
             *env.notes, *env_notes,
             *([f"t NCCL: under the tuner rules of {tuner.source} (NCCL's example tuner plugin)"]
               if tuner else []),
             *([ofi_tuner_note(ofi_tuner, ofi_phases, version)] if ofi_tuner is not None else []),
             *([calibrated_note(topo, calibrated)] if topo.nccl_calibration else []),
             *[f"t NCCL: {', '.join(schemes)} not priced (n/a): {why}" for why, schemes in unpriced.items()],
             *[f"t NCCL: {t}" for t in dict.fromkeys(shapes)]]
    return NcclPricing(times, choices, notes, per_row)


def calibrated_note(topo: Topology, phases: list) -> str:
    """What the calibration of ``topo`` (``fit --out``) timed: the pairs marked
    :data:`~zerocalc.nccl.steps.CALIBRATED_MARK` (``phases``: the calibrated ones), by collective and
    ranks, the others by NCCL's tables; or, where it timed none, what it holds, which no phase matched."""
    head = f"t NCCL: the calibration of topology {topo.name} (fit --out: a fitted α-β, or NCCL's time scaled)"
    if not phases:
        held = dict.fromkeys(f"{c.op} on {c.ranks}" for c in topo.nccl_calibration)
        return (f"{head} holds {', '.join(held)} ranks and times no phase here (none is one of those "
                "collectives on those ranks and nodes): every pair is timed by NCCL's tables")
    timed = dict.fromkeys(f"{p.collective} on {p.ranks}" for p in phases)
    return (f"{head} times the pairs marked {CALIBRATED_MARK}: {', '.join(timed)} ranks; the others by "
            "NCCL's tables")


def ofi_tuner_note(ofi: OfiTuner, phases: list, nccl_version: str) -> str:
    """What aws-ofi-nccl's tuner plugin did to the priced phases (:class:`~zerocalc.nccl.steps.PhaseTime`
    with ``ofi_chose`` set): how many calls' pairs it chose, which, or that it left them all to NCCL."""
    from zerocalc.nccl.tuner import tuner_api

    head = (f"t NCCL: under {ofi.name}'s tuner plugin ({ofi.kind}, {ofi.source}; loaded by NCCL "
            f"{nccl_version}, tuner API v{tuner_api(nccl_version)})"
            + (f" on {ofi.platform}" if ofi.platform else ""))
    chose = [p for p in phases if p.ofi_chose]
    if not chose:
        return f"{head}: it returned no pair for any phase's call, so each is NCCL's own choice"
    pairs = list(dict.fromkeys(f"{p.collective} {p.algorithm}/{p.protocol} on {p.ranks} ranks"
                               for p in chose))
    return (f"{head}: pairs marked {OFI_MARK} are the plugin's, not NCCL's model's ({'; '.join(pairs[:6])}"
            + (f" and {len(pairs) - 6} more" if len(pairs) > 6 else "") + ")")


def nvls_corrected_for(topo: Topology) -> str:
    """The GPUs whose NVLS figures NCCL 2.28.3 corrected, as its release notes name them."""
    if (topo.compute_capability or 0) < 100:
        return "Hopper"
    if topo.mnnvl:
        return "GB200-NV72"
    return ("Blackwell HGX nodes (across nodes on the NVLS graph at the bwIntra the GPUs' NVSwitch links "
            "hold, zerocalc.nccl.model.nvls_link_graphs)")


def nvls_corrected(release, topo: Topology) -> bool:
    """Whether ``release`` times NVLS calls on ``topo`` with the later release's figures
    (:func:`zerocalc.nccl.model.nvls_run_release`): Hopper with NVLink SHARP, a multi-node NVLink domain
    of Blackwell GPUs (GB200 / GB300 NVL72) and Blackwell HGX nodes (groups within one node), NCCL 2.17-2.27
    (no NVLS before 2.17); Blackwell HGX nodes across nodes under every release with NVLS (their NVLS graph
    at the NVLink's bwIntra). A note says so only where a call was timed that way."""
    cc = topo.compute_capability or 0
    hgx_blackwell = cc >= 100 and not topo.mnnvl
    return ((not release.nvls_efficiency_model or hgx_blackwell) and Algorithm.NVLS in release.algorithms
            and bool(topo.nvls) and (topo.nvswitch_gen or 0) >= 3 and cc >= 90)


def calls_words(call_bytes: float | str | None) -> str:
    """How a phase is called, in words: ``one call per phase``, in calls of at most the bucket, or in
    its implementation's buckets (``"implementation"``)."""
    if call_bytes is None:
        return "one call per phase"
    from zerocalc.buckets import IMPLEMENTATION, words

    if call_bytes == IMPLEMENTATION:
        return words()
    from zerocalc.units import format_bytes

    return f"each phase in equal calls of at most {format_bytes(call_bytes)} (--bucket)"


def row_sizes(r, reuse_distance: float, call_bytes: float | None = None) -> dict:
    """The data-parallel group's sizes of one evaluated row, as :func:`zerocalc.nccl.steps.phase_calls`
    takes them: under tensor / pipeline parallelism the group is the row's ``dp_size`` ranks holding
    Ψ / (tp·pp) each (:func:`dp_gpus_per_node` of them on a node)."""
    tp, dp = int(getattr(r, "tp", 1)), int(getattr(r, "dp_size", r.n))
    return dict(psi=float(r.psi) / (tp * int(getattr(r, "pp", 1))), n=dp,
                gpus_per_node=dp_gpus_per_node(int(r.gpus_per_node), tp, dp),
                comm_bytes=float(r.comm_bytes_per_element), param_bytes=float(r.param_comm_bytes_per_element),
                grad_bytes=float(r.grad_comm_bytes_per_element), micro_batches=int(r.micro_batches),
                grad_sync=r.grad_sync, hsdp_shard_size=int(r.hsdp_shard_size), reuse_distance=reuse_distance,
                call_bytes=call_bytes)


def dp_gpus_per_node(g: int, tp: int, dp: int) -> int:
    """Ranks of one data-parallel group on a node (:func:`zerocalc.evaluate.data_parallel_layout`)."""
    return min(g // tp if g % tp == 0 else 1, dp)
