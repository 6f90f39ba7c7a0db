"""RCCL's cost model: what ROCm's fork of NCCL chooses on AMD Instinct GPUs, and how long it takes.

RCCL (github.com/ROCm/rccl) keeps NCCL's ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` / the choice of
``topoGetAlgoInfo`` but replaces NCCL's tables under ``__HIP_PLATFORM_AMD__`` (``src/graph/tuning.cc``)
by ``rcclTuningModel[system->tuning]``: per model, hop latencies per link kind (``hwLat``), a
bus-bandwidth ratio per algorithm × protocol for 1-2 nodes and for more (``bwRatio``, in place of NCCL's
protocol factors and caps), and per-size correction factors for Tree, and for Ring across nodes
(``treeCorrectionFactor`` / ``ringCorrectionFactor``, powers of two from 64 B, the 27th entry standing
for every larger size). The model a machine gets is the ``tuning=`` option of the preset topology
("rome model") its GPUs match in ``src/graph/rome_models.cc``: 8 gfx942 GPUs fully connected by xGMI
(``nLinks = 7``: MI300X, MI325X) match ``rome_model_79`` (no NIC: one node, NCCL's topology trims the
NICs when every rank is local) or ``rome_model_81`` / ``rome_model_84`` (8 or 16 NICs), all
``tuning=5`` from RCCL 2.18.6 (ROCm 6.1) on; with fewer GPUs per node no rome model matches and
``system->tuning`` stays 0 (``tuning_model_0``), whose graph zerocalc takes at the same total bandwidth (the
search's own result is not modelled). Modelled releases (:data:`RCCL_RELEASES`): RCCL 2.20.5
(tag ``rocm-6.2.0``), 2.21.5 (branch ``release-staging/rocm-rel-6.3``, ROCm 6.3; 2.22 kept its tables) and
2.26.6 (ROCm 7.0, the tables of ROCm/rccl after the NCCL 2.23 merge, from 2.25 on); 2.21.5 changed model
5's figures (a 320 µs network hop for Ring/Simple, Tree bandwidth ratios of 0.06-0.59); 2.25 on force the
protocol across nodes by size and enable LL128 there (:mod:`zerocalc.nccl.rccl_net`).

What the model reads of the machine (gfx942, from the same sources):

* a rome model's graphs carry ``bwIntra = bwInter = totalBw / nChannels`` (``rome_models.cc``
  ``parseGraph``), so every algorithm's bus bandwidth is ``totalBw``, the largest sum of one GPU's xGMI
  links (``search.cc`` ``getTotalBw``): 7 peers × 48 GB/s (``topo.h`` ``GFX94X_XGMI_WIDTH``, "after
  protocol and error correction overheads, the max theoretical per-direction bandwidth for gfx94 devices
  is 48GB/s", RCCL's maintainer in ROCm/rccl issue 1210) = 336 GB/s; with fewer GPUs per node, 48 × (GPUs
  − 1) (the 4-GPU dump of issue 1210: ``totalBw 144.0``);
* xGMI is RCCL's ``LINK_NVL`` (``topo.cc`` ``ncclTopoAddXGMI``): the NVLink row of ``hwLat``;
* Tree/Simple is skipped on gfx94 when every rank is on one node (``tuning.cc``); LL128 is off on gfx942
  (enabled only on gfx90a with ``ll128Enabled`` when built with ``ENABLE_LL128``; ``enqueue.cc`` skips it
  unless the topology is ``RCCL_TOPO_XGMI_ALL``); CollNet (no ``collNetSupport``), NVLS and NVLS Tree (no
  NVSwitch) are never enabled;
* the network overhead of an inter-node ring step is ``getNetOverhead``: 1 µs on Intel hosts, 2 on AMD,
  × 3 for Simple; the network plugin reports no latency (``latencyInter`` 0, RCCL's IB transport).

MSCCL (``src/misc/msccl/``): on one node of 8 gfx942 GPUs (``rome_model_79``: ``mscclEnabled=1``;
``RCCL_MSCCL_ENABLE`` defaults to 1; in 2.20.5 only where each process holds one of the communicator's ranks,
:attr:`RcclRelease.msccl_single_process`) an all-reduce runs one of the MSCCL programs shipped in
``tools/msccl-algorithms/`` when its element count divides the program's ``nchunksperloop`` and its byte
count lies in ``[minBytes, maxBytes]``, with separate programs for in-place and out-of-place calls
(``msccl_lifecycle.cc`` ``mscclSchedulerSelectAlgo``); RCCL's table does not price those calls. Their
"allpairs" programs reduce-scatter and then all-gather in one step each, every GPU exchanging ``1/p`` of
the buffer with each of its ``p − 1`` peers at once over its own xGMI link; zerocalc times such a call as
RCCL's base latency and two xGMI hops of the program's protocol (``baseLat`` + 2 × ``hwLat[NVLINK][RING]``)
plus two transfers of ``n/p`` bytes on one link (48 GB/s, half of it for LL, whose 8-byte lines carry 4
bytes of data). That timing is zerocalc's reading of the program, not a figure RCCL states. The
"1pass" programs of 2.20.5 (up to 25,599 B) are not timed: their calls are priced as RCCL's table would
price them, and a note says so.

Other GPUs (:func:`_model_and_total_bw`): gfx950 (MI350X, MI355X) matches the same 8-GPU rome models, whose
match RCCL then gives ``tuning = 6`` (ROCm/rccl develop after the NCCL 2.23 merge: :data:`MODEL_6`, priced
whatever the release, the releases modelled here predating gfx950), 48 GB/s a link (``GFX95X_XGMI_WIDTH``),
Tree/Simple skipped and MSCCL's programs run as on gfx942 (``rome_model_79``'s ``mscclEnabled=1`` is kept;
only the tuning is replaced). gfx90a: the 8 GCDs of an HPE Cray EX235a node (4 MI250X: OLCF's Frontier,
LUMI-G) match ``rome_model_73`` on one node (no tuning option: model 0) and ``rome_model_74`` across nodes
(4 NICs, ``tuning=3``: :data:`MODEL_3`), ``totalBw`` its best GCD's 4 + 2 + 1 links × 36 GB/s
(``MI200_XGMI_WIDTH``); no MSCCL, LL128 off (``ll128Enabled`` unset), Tree/Simple kept within a node.
4 MI300A APUs (gfx942, HPE Cray EX255a: El Capitan) match ``rome_model_80`` across nodes, which sets no
tuning (model 0), with two xGMI links between each pair (:data:`MI300A_LINKS_PER_PEER`): 288 GB/s.

Across nodes RCCL's table picks the pair but does not time it (its ratios and corrections steer the
choice): :mod:`zerocalc.nccl.rccl_net` times the pair as its data moves. RCCL's rome-model graphs carry the
xGMI bandwidth between nodes too, so its table never sees the NICs; where one node's NICs carry less (an
MI250X node's 4 × 200 Gb/s against 252 GB/s of xGMI) the call takes its bytes on the NICs
(:func:`network_floor_us`). The 8 × 400 Gb/s of the MI300X / MI355X platforms are never that bound.

Not modelled: other gfx90a layouts (MI250 boxes of 2 CPUs: rome models of tuning 2 and 4), RCCL's MSCCL++
path, MSCCL's all-gather programs of 2.20.5, 2.26.6's one-node MSCCL programs (2.21.5's are used), RCCL's
channel-count thresholds across nodes (``channelThresholds``), and RCCL releases other than the three above
(a version between or past them takes the tables of the latest modelled before it, and a note says so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zerocalc.errors import ConfigError, RestrictedOpError
from zerocalc.nccl.rccl_net import STEERING_HOP_US, forced_protocol, wire_time_us
from zerocalc.nccl.rccl_releases import (  # noqa: F401  (re-exported: the tables keep these names here)
    MODEL_0,
    MODEL_3,
    MODEL_6,
    RCCL_LATEST,
    RCCL_RELEASES,
    V2_20,
    V2_21,
    V2_26,
    MscclProgram,
    RcclRelease,
    TuningModel,
    rccl_default_for,
    rccl_release_for,
)
from zerocalc.nccl.release import Algorithm, Collective, Protocol
from zerocalc.nccl.trees import busiest_node_sends
from zerocalc.topology import Topology

A, P, C = Algorithm, Protocol, Collective
_PROTOS = (P.LL, P.LL128, P.SIMPLE)
#: The algorithm a call run by an MSCCL program is reported (and calibrated, ``fit --out``) under.
MSCCL = "MSCCL"
#: ``baseLat`` (µs), Tree and Ring rows (LL, LL128, Simple): RCCL ``tuning.cc``, 2.20.5 and 2.21.5.
BASE_LAT_US = {A.TREE: (12.0, 12.0, 17.0), A.RING: (12.0, 12.0, 17.0)}
#: RCCL's bandwidth of one xGMI link, GB/s each way, by GPU architecture (``topo.h`` ``ncclTopoXGMISpeed``):
#: ``MI200_XGMI_WIDTH`` 36 (gfx90a, MI250X / MI250), ``GFX94X_XGMI_WIDTH`` 48 (gfx942), ``GFX95X_XGMI_WIDTH``
#: 48 (gfx950, MI355X / MI350X; ROCm/rocm-systems ``projects/rccl/src/graph/topo.h``).
XGMI_GBPS = {"gfx90a": 36.0, "gfx942": 48.0, "gfx950": 48.0}
#: The xGMI link units of the best-connected GCD of an MI250X node (``rome_models.cc`` ``rome_model_73`` /
#: ``rome_model_74``, HPE Cray EX235a: GCDs at bus 0xc1000 … 0xde000, as OLCF's Frontier and LUMI-G print
#: them): 4 to the other GCD of its package, 2 and 1 to GCDs of two other packages (``connMatrix`` row 0,
#: link bandwidth / ``MI200_XGMI_WIDTH``). ``search.cc`` ``getTotalBw`` sums one GPU's xGMI links: 7 × 36.
MI250X_LINK_UNITS = 4 + 2 + 1
#: xGMI links between each pair of MI300A APUs (gfx942) of an HPE Cray EX255a node (El Capitan, Tuolumne,
#: RZAdams): ``rome_models.cc`` ``rome_model_80`` (4 GPUs at bus 0x2000 … 0xc2000, 4 NICs, ``connMatrix`` 2
#: between every pair, no tuning option) and LLNL's El Capitan systems page ("Each processor is fully
#: connected to its peers using two AMD Infinity Fabric links").
MI300A_LINKS_PER_PEER = 2
#: Architectures whose Tree/Simple RCCL skips within one node and whose Ring/LL broadcast and reduce it
#: prices 1.65× there (``tuning.cc``: gfx942 in 2.20.5 and 2.21.5, gfx942 and gfx950 after the NCCL 2.23
#: merge).
_GFX94_LIKE = ("gfx942", "gfx950")
#: ``getNetOverhead`` (µs) by host CPU vendor (``tuning.cc``).
_NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
#: The ``why_disabled`` of a pair the user's restriction turned off (:func:`rccl_tune`).
_USER_RESTRICTIONS = ("NCCL_ALGO", "NCCL_PROTO")


def _log2i(n: int) -> int:
    return int(n).bit_length() - 1 if n > 0 else -1


@dataclass(frozen=True)
class RcclEntry:
    """One (algorithm, protocol) of one collective: RCCL's latency (µs) and algorithm bandwidth (GB/s)."""

    algorithm: Algorithm
    protocol: Protocol
    latency_us: float
    bandwidth_GBps: float
    enabled: bool
    why_disabled: str = ""
    #: the latency :func:`zerocalc.nccl.rccl_net.wire_time_us` times a call across nodes with: this one, a
    #: steering network hop (above :data:`zerocalc.nccl.rccl_net.STEERING_HOP_US`) taken at 2.20.5's model 5
    #: figure for the pair
    timed_latency_us: float = 0.0


@dataclass(frozen=True)
class RcclTuning:
    """RCCL's tuned table for one communicator of AMD Instinct GPUs (gfx90a, gfx942, gfx950)."""

    release: RcclRelease
    #: the ``rcclTuningModel`` entry priced: 5 (8 gfx942 GPUs per node, the rome models), 6 (8 gfx950), 3
    #: (8 gfx90a GCDs across nodes) or 0 (any other count; 8 gfx90a GCDs on one node)
    model_index: int
    n_ranks: int
    n_nodes: int
    total_bw_GBps: float
    msccl: bool
    entries: Mapping[tuple[Collective, Algorithm, Protocol], RcclEntry]

    #: the GPUs' architecture (gfx90a, gfx942, gfx950)
    arch: str = "gfx942"
    #: the bandwidth (GB/s) of one node's NICs that RCCL's rings and trees cross between nodes (``None`` on
    #: one node): :func:`network_floor_us`
    net_GBps: float | None = None
    #: ``NCCL_PROTO`` set: RCCL then forces no protocol by size
    #: (:func:`zerocalc.nccl.rccl_net.forced_protocol`)
    user_proto: bool = False
    #: LL128 enabled (across nodes, where :attr:`RcclRelease.ll128_across_nodes`)
    ll128: bool = False

    @property
    def model(self) -> TuningModel:
        return _MODELS.get(self.model_index, self.release.model)

    @property
    def source_words(self) -> str:
        """Where its tables come from (:func:`tables_words`)."""
        return tables_words(self.release, {self.model_index})

    @property
    def model_words(self) -> str:
        """Which ``rcclTuningModel`` entry prices it, and why (:func:`_model_and_total_bw`)."""
        ppn = self.n_ranks // self.n_nodes
        return {
            5: "tuning model 5 of the 8-GPU xGMI rome models",
            6: "tuning model 6, gfx950's on the 8-GPU xGMI rome models (ROCm/rccl develop after the NCCL "
               "2.23 merge, whatever the release)",
            3: "tuning model 3 of rome_model_74 (8 MI250X GCDs and 4 NICs a node)",
        }.get(self.model_index) or (
            "tuning model 0 (rome_model_73, 8 MI250X GCDs on one node, sets no tuning)"
            if self.arch == "gfx90a" and ppn == 8 else
            f"tuning model 0 (no rome model of RCCL's holds {ppn} GPUs per node)")

    def _correction(
        self, table: tuple[tuple[float, ...], ...], p: Protocol, log_size: int, before: float
    ) -> float:
        pi = _PROTOS.index(p)
        if log_size >= 27:
            return table[pi][26]
        if log_size >= 0:
            return table[pi][log_size]
        return table[pi - 1][26] if pi > 0 else before  # [p][-1]: the entry before the row (TuningModel)

    @property
    def restricted(self) -> bool:
        """``NCCL_ALGO`` / ``NCCL_PROTO`` turned off a pair the table would otherwise hold."""
        return any(e.why_disabled in _USER_RESTRICTIONS for e in self.entries.values())

    def correction(self, coll: Collective, a: Algorithm, p: Protocol, n_bytes: int) -> float:
        """The size correction RCCL's table applies to the pair's bandwidth at ``n_bytes``
        (``treeCorrectionFactor`` for Tree, ``ringCorrectionFactor`` for Ring across nodes; 1 otherwise)."""
        m = self.model
        log_size = _log2i(int(n_bytes) >> 6)
        if a == A.TREE:
            return self._correction(m.tree_correction, p, log_size, m.before_tree)
        if a == A.RING and self.n_nodes > 1:
            return self._correction(m.ring_correction, p, log_size, m.tree_correction[2][26])
        return 1.0

    def time_us(self, coll: Collective, a: Algorithm, p: Protocol, n_bytes: int, *, corrected: bool = True,
                unrestricted: bool = False) -> float | None:
        """``ncclTopoGetAlgoTime`` (RCCL's branch; numPipeOps = 1); ``None`` when the pair is disabled or has
        no bandwidth after its correction. ``corrected`` false: without the size correction
        (:meth:`correction`); ``unrestricted``: a pair only ``NCCL_ALGO`` / ``NCCL_PROTO`` turned off counts
        as enabled."""
        e = self.entries.get((coll, a, p))
        if e is None or e.bandwidth_GBps <= 0 or not (
                e.enabled or (unrestricted and e.why_disabled in _USER_RESTRICTIONS)):
            return None
        bw = e.bandwidth_GBps * (self.correction(coll, a, p, n_bytes) if corrected else 1.0)
        if bw <= 0:
            return None
        return e.latency_us + n_bytes / (1000.0 * bw)

    def choose(self, coll: Collective, n_bytes: int, *,
               unrestricted: bool = False) -> tuple[Algorithm, Protocol, float]:
        """The pair RCCL picks: least time, first in (algorithm, protocol) index order on a tie (Tree before
        Ring, ``topoGetAlgoInfo``), and its time in µs; ``unrestricted``: the pair it would pick without
        ``NCCL_ALGO`` / ``NCCL_PROTO``."""
        best = None
        for a in (A.TREE, A.RING):
            for p in _PROTOS:
                t = self.time_us(coll, a, p, n_bytes, unrestricted=unrestricted)
                if t is not None and (best is None or t < best[2]):
                    best = (a, p, t)
        if best is None:
            raise RestrictedOpError(
                f"no algorithm/protocol that NCCL_ALGO / NCCL_PROTO allow can run {coll.value} "
                "under RCCL here",
                option="NCCL_ALGO",
            )
        return best

    def msccl_program(
        self, coll: Collective, n_bytes: int, elem_bytes: int | None, in_place: bool
    ) -> MscclProgram | None:
        """The MSCCL program RCCL runs this call with (``mscclSchedulerSelectAlgo``), or ``None``."""
        if not self.msccl or coll != C.ALL_REDUCE or not elem_bytes:
            return None
        count = n_bytes // elem_bytes
        for prog in self.release.msccl_all_reduce:
            if (
                prog.in_place == in_place
                and count > 0
                and count % prog.chunks_per_loop == 0
                and prog.min_bytes <= n_bytes <= prog.max_bytes
            ):
                return prog
        return None

    def msccl_time_us(self, prog: MscclProgram, n_bytes: int) -> float | None:
        """An allpairs program's time (module docstring): ``baseLat`` + steps × (xGMI hop + n/p bytes on one
        link at the protocol's share of 48 GB/s); ``None`` for a program not timed."""
        if prog.steps is None:
            return None
        pi = _PROTOS.index(prog.protocol)
        hop = self.model.hw_lat["xgmi"][A.RING][pi]
        link = XGMI_GBPS["gfx942"] * (0.5 if prog.protocol == P.LL else 1.0)
        return BASE_LAT_US[A.RING][pi] + prog.steps * (hop + n_bytes / self.n_ranks / (1000.0 * link))


@dataclass(frozen=True)
class RcclCall:
    """One call as RCCL runs it (:meth:`RcclTuning.price`): the pair (``MSCCL`` and the program's protocol
    where an MSCCL program runs it), its time in µs, the program's file (``program``) or the program chosen
    but not timed (``untimed``, the call then priced by RCCL's table)."""

    algorithm: str
    protocol: str
    time_us: float
    program: str | None = None
    untimed: str | None = None
    #: the time is the node's NICs' (:func:`network_floor_us`), above RCCL's own estimate
    net_bound: bool = False
    #: on one node, a pair RCCL runs only because ``NCCL_ALGO`` / ``NCCL_PROTO`` leave it no other: the size
    #: correction its table steers away from it with (:meth:`RcclTuning.correction`), left out of the time;
    #: ``None`` otherwise
    forced_correction: float | None = None
    #: the pair RCCL's table would pick without the restriction (``"Ring/Simple"``), where
    #: ``forced_correction`` is set
    unrestricted: str | None = None


def price_call(
    tuning: RcclTuning, coll: Collective, n_bytes: int, elem_bytes: int | None, in_place: bool
) -> RcclCall:
    """The pair RCCL runs one call of ``n_bytes`` with and its time: on one node the MSCCL program its
    scheduler picks first, whatever ``NCCL_ALGO`` / ``NCCL_PROTO`` say (``msccl_lifecycle.cc``
    ``mscclSchedulerSelectAlgo`` reads neither), timed as the module docstring says, else RCCL's table's
    choice and time (:meth:`RcclTuning.choose`); across nodes the table's algorithm with the protocol RCCL
    forces by size, timed as its data moves (:mod:`zerocalc.nccl.rccl_net`).

    On one node a pair RCCL runs only because ``NCCL_ALGO`` / ``NCCL_PROTO`` leave it no other is timed
    without the size correction its table gives it (:attr:`RcclCall.forced_correction`): the corrections are
    how the table steers RCCL away from a pair (model 6's Tree/LL all-reduce ×0.1 from 8 KiB), which is the
    choice RCCL makes, not how long the pair takes once it runs (the rule :mod:`zerocalc.nccl.rccl_net`
    follows across nodes); with it, an 8 GiB all-reduce forced to Tree on 8 MI355X was priced at 8.5 s."""
    a, p, t_us = tuning.choose(coll, n_bytes)
    if tuning.n_nodes > 1:
        p = forced_protocol(tuning, coll, n_bytes) or p
        t_us, bound = wire_time_us(tuning, coll, a, p, n_bytes)
        return RcclCall(a.value, p.value, t_us, net_bound=bound)
    prog = tuning.msccl_program(coll, n_bytes, elem_bytes, in_place)
    if prog is None:
        if tuning.restricted:
            free = tuning.choose(coll, n_bytes, unrestricted=True)
            factor = tuning.correction(coll, a, p, n_bytes)
            if free[:2] != (a, p) and factor != 1.0:
                return RcclCall(a.value, p.value, tuning.time_us(coll, a, p, n_bytes, corrected=False),
                                forced_correction=factor, unrestricted=f"{free[0].value}/{free[1].value}")
        return RcclCall(a.value, p.value, t_us)
    m_us = tuning.msccl_time_us(prog, n_bytes)
    if m_us is None:
        return RcclCall(a.value, p.value, t_us, untimed=prog.file)
    return RcclCall(MSCCL, prog.protocol.value, m_us, program=prog.file)


def forced_words(call: RcclCall) -> str:
    """The note on a call :func:`price_call` timed without its size correction (``forced_correction``)."""
    return (f"RCCL runs {call.algorithm}/{call.protocol} on one node only because NCCL_ALGO / "
            f"NCCL_PROTO leave it no other (its table would pick {call.unrestricted}); timed without the "
            "size correction its table steers RCCL away from it with (×"
            f"{call.forced_correction:g} here): RCCL's latency + the bytes at its bandwidth "
            "(zerocalc.nccl.rccl.price_call)")


def rccl_calibration(topo: Topology, coll: Collective | str, ranks: int, algo: str, proto: str):
    """The fitted α-β pair (``zerocalc fit --out``) that prices a call of RCCL's pair ``algo``/``proto``: the
    pair's own, else the sweep-wide one (``any``), as :func:`zerocalc.nccl.predict.predict` takes them;
    ``None`` when none covers it. ``coll``: a collective of RCCL's tables, or ``'all_to_all'``."""
    fits = [c for c in topo.nccl_calibration or () if c.op == str(coll) and c.ranks == ranks]
    own = [c for c in fits if c.algorithm == algo and c.protocol == proto]
    return (own or [c for c in fits if c.algorithm == "any"] or [None])[0]


def _nsteps(coll: Collective, nr: int, nn: int) -> tuple[int, int]:
    """(steps, inter-node steps) of a ring: ``tuning.cc``'s ``nsteps`` / ``nInterSteps``."""
    if coll == C.ALL_REDUCE:
        return 2 * (nr - 1), (2 * nn if nn > 1 else 0)
    if coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        return nr - 1, nn - 1
    return nr, nn


def rccl_tune(
    topo: Topology,
    n_ranks: int,
    release: RcclRelease,
    *,
    algo_enable: Mapping[Collective, set[Algorithm]] | None = None,
    proto_enable: Mapping[Collective, set[Protocol]] | None = None,
    ranks_per_process: int = 1,
) -> RcclTuning:
    """RCCL's tuned table for ``n_ranks`` ranks on ``topo`` (a gfx942 machine) at ``release``
    (``ncclTopoTuneModel``'s RCCL branch; module docstring). ``algo_enable`` / ``proto_enable``: the
    ``NCCL_ALGO`` / ``NCCL_PROTO`` restrictions (:func:`zerocalc.nccl.env.parse_list`), which RCCL reads
    as NCCL does; ``ranks_per_process``: the communicator's ranks one process holds (rccl-tests ``-g``),
    which turn MSCCL off where the release does not run it so (:attr:`RcclRelease.msccl_single_process`)."""
    arch = topo.gpu_arch
    if arch not in XGMI_GBPS:
        raise ConfigError(
            f"topology {topo.name!r}: RCCL's model prices gfx90a, gfx942 and gfx950 GPUs (MI250X, MI300X, "
            f"MI325X, MI350X, MI355X), not {arch!r}",
            option="--topology",
        )
    if n_ranks < 2:
        raise ConfigError("RCCL's model needs at least 2 ranks", option="--n")
    ppn = min(topo.gpus_per_node, n_ranks)
    nn = math.ceil(n_ranks / topo.gpus_per_node)
    model_index, total = _model_and_total_bw(arch, ppn, nn,
                                             MI300A_LINKS_PER_PEER if topo.gpu == "MI300A" else 1)
    m = _MODELS.get(model_index, release.model)
    idx = 0 if nn <= 2 else 1
    net_over = _NET_OVERHEAD_US.get(topo.cpu_vendor or "", 1.0) if nn > 1 else 0.0
    # rome_model_81 / 84 (8 GPUs, NICs): options "ll128Enabled=1" from the release that sets it
    ll128 = nn > 1 and ppn == 8 and arch in _GFX94_LIKE and release.ll128_across_nodes
    entries: dict[tuple[Collective, Algorithm, Protocol], RcclEntry] = {}
    for coll in C:
        if coll.value not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
            continue
        for a in (A.TREE, A.RING):
            if a == A.TREE and coll != C.ALL_REDUCE:
                continue  # tuning.cc: broadcast, reduce, all-gather, reduce-scatter: Ring (no NVLS/CollNet)
            for pi, p in enumerate(_PROTOS):
                why = ""
                if a == A.TREE and p == P.SIMPLE and nn == 1 and arch in _GFX94_LIKE:
                    why = f"Tree/Simple skipped on {arch} within one node"
                elif p == P.LL128 and not ll128:
                    why = f"LL128 off on {arch}" + (" within one node" if nn == 1 else "")
                elif algo_enable is not None and a not in algo_enable.get(coll, set()):
                    why = "NCCL_ALGO"
                elif proto_enable is not None and p not in proto_enable.get(coll, set()):
                    why = "NCCL_PROTO"
                nsteps, _ = _nsteps(coll, n_ranks, nn)
                bus = total * m.bw_ratio[idx][a][pi]
                if (a == A.RING and p == P.LL and coll in (C.BROADCAST, C.REDUCE) and nn == 1
                        and arch in _GFX94_LIKE):
                    bus *= 1.65  # gfx942 / gfx950, every rank on the node
                bw = bus * (n_ranks / nsteps if a == A.RING else 0.5)
                lat = _latency(m, coll, a, pi, n_ranks, nn, net_over)
                timed = _timed_latency(m, coll, a, pi, n_ranks, nn, net_over) if nn > 1 else lat
                why = why or ("" if bw > 0 else "zero bandwidth ratio")
                entries[(coll, a, p)] = RcclEntry(a, p, lat, bw, not why, why, timed)
    msccl = (arch in _GFX94_LIKE and nn == 1 and n_ranks == 8
             and (ranks_per_process <= 1 or release.msccl_single_process))
    net = None
    if nn > 1 and topo.nics_per_node and topo.nic_Gbps:
        net = min(topo.nics_per_node, ppn) * topo.nic_Gbps / 8.0
    return RcclTuning(release, model_index, n_ranks, nn, total, msccl, entries, arch, net,
                      user_proto=proto_enable is not None, ll128=ll128)


def tables_words(release: RcclRelease, model_indices: Iterable[int]) -> str:
    """Where the tables of ``model_indices`` come from: the release's source, which names its tuning model 5
    (:data:`zerocalc.nccl.rccl_releases.RCCL_RELEASES`), and the other models' tables under the release's
    ``tuning.cc`` rules; the release's source where none is given."""
    indices = set(model_indices)
    others = " and ".join(f"tuning_model_{i}" for i in sorted(indices - {5}))
    if not others:
        return release.source
    if 5 in indices:
        return f"{release.source}; the tables of {others}"
    return f"its tuning.cc rules, the tables of {others}"


def _timed_latency(m: TuningModel, coll: Collective, a: Algorithm, pi: int, n_ranks: int, nn: int,
                   net_over: float) -> float:
    """The latency a call across nodes is timed with (:func:`zerocalc.nccl.rccl_net.wire_time_us`): RCCL's,
    LL128 with ``tuning_model_0``'s hops (models 5 and 6 copy LL's hops into LL128's entries; model 0 is
    RCCL's one table whose LL128 hops, 1.4-2.2 µs on xGMI and 18.2-19.8 µs on the network, differ from its
    LL ones), a steering network hop (above :data:`STEERING_HOP_US`) at 2.20.5's model 5 figure."""
    if _PROTOS[pi] == P.LL128:
        return _latency(MODEL_0, coll, a, pi, n_ranks, nn, net_over)
    if m.hw_lat["net"][a][pi] > STEERING_HOP_US:
        return _latency(m, coll, a, pi, n_ranks, nn, net_over, V2_20.model.hw_lat["net"][a][pi])
    return _latency(m, coll, a, pi, n_ranks, nn, net_over)


def _latency(m: TuningModel, coll: Collective, a: Algorithm, pi: int, n_ranks: int, nn: int, net_over: float,
             inter: float | None = None) -> float:
    """``tuning.cc``'s latency of ``a`` / protocol ``pi`` (µs): ``baseLat`` + the hops of ``m.hw_lat`` (the
    network hop ``inter`` where given)."""
    p = _PROTOS[pi]
    intra = m.hw_lat["xgmi"][a][pi]
    inter = m.hw_lat["net"][a][pi] if inter is None else inter
    nsteps, ninter = _nsteps(coll, n_ranks, nn)
    lat = BASE_LAT_US[a][pi]
    if a == A.RING and coll in (C.BROADCAST, C.REDUCE):
        hop = m.hw_lat["xgmi"][A.TREE if p == P.SIMPLE else a][pi] if nn == 1 else (
            m.hw_lat["net"][A.TREE][pi] if p == P.SIMPLE else inter)
        return lat + nsteps * hop  # rome-model graphs: sameChannels 0
    if a == A.RING:
        over = net_over * (3 if p == P.SIMPLE else 1)
        return lat + (nsteps - ninter) * max(intra, over) + ninter * inter
    return lat + 2 * ((n_ranks // nn - 1) * intra + _log2i(nn) * inter)


#: tuning models other than a release's model 5 (:class:`RcclRelease`): alike across the modelled releases
_MODELS: dict[int, TuningModel] = {0: MODEL_0, 3: MODEL_3, 6: MODEL_6}


def _model_and_total_bw(arch: str, ppn: int, nn: int, links_per_peer: int = 1) -> tuple[int, float]:
    """The ``rcclTuningModel`` index RCCL's rome models give ``ppn`` GPUs of ``arch`` per node on ``nn``
    nodes, and the xGMI bandwidth (GB/s) its graphs carry, ``totalBw`` (module docstring).

    * gfx942: 8 GPUs match ``rome_model_79`` / ``81`` / ``84`` (``tuning=5``), ``totalBw`` 7 × 48;
    * gfx950: the same models, ``system->tuning = 6`` for gfx950 (``rome_models.cc``, ROCm/rccl develop
      after the NCCL 2.23 merge), 7 × 48 (``GFX95X_XGMI_WIDTH``);
    * gfx90a, the 8 GCDs of an HPE Cray EX235a node (4 MI250X): across nodes ``rome_model_74`` (4 NICs,
      ``tuning=3``), on one node ``rome_model_73`` (no tuning option: model 0); ``totalBw`` the best GCD's
      links, :data:`MI250X_LINK_UNITS` × 36;
    * fewer GPUs per node match no rome model (model 0): the GPUs taken as fully connected, (ppn − 1)
      × ``links_per_peer`` links each (4 MI300A APUs: ``rome_model_80``, no tuning option, 2 links a
      pair, :data:`MI300A_LINKS_PER_PEER`).
    """
    link = XGMI_GBPS[arch] * links_per_peer
    if ppn == 8 and arch == "gfx90a":
        return (3 if nn > 1 else 0), MI250X_LINK_UNITS * XGMI_GBPS[arch]
    if ppn == 8:
        return (6 if arch == "gfx950" else 5), 7 * XGMI_GBPS[arch]
    return 0, link * (ppn - 1) if ppn > 1 else link


def network_floor_us(tuning: RcclTuning, coll: Collective, a: Algorithm, n_bytes: int) -> float | None:
    """The least time (µs, without latency) a call of ``n_bytes`` spends on one node's NICs across nodes,
    ``None`` on one node or where the topology names no NICs.

    RCCL's rome-model graphs carry the xGMI bandwidth between nodes too (``parseGraph``: ``bwIntra =
    bwInter = totalBw / nChannels``), so its table never sees the NICs; where they carry less than the
    xGMI links (an MI250X node's 4 × 200 Gb/s Slingshot NICs against 252 GB/s of xGMI) the wire time is
    the larger. Bytes a node sends on its NICs: a ring all-reduce 2(p − 1)/p × n (every ring leaves each
    node once, the rank at its end sending its whole ring share), an all-gather / reduce-scatter
    (p − 1)/p × n, a broadcast / reduce n, a tree all-reduce what its busiest node sends in RCCL's two trees
    across nodes, half the buffer to each tree neighbour (:func:`zerocalc.nccl.trees.busiest_node_sends`:
    n on two nodes, 1.5 n on three, 2 n from four on)."""
    if tuning.net_GBps is None:
        return None
    p = tuning.n_ranks
    if coll == C.ALL_REDUCE:
        sent = busiest_node_sends(tuning.n_nodes) * n_bytes if a == A.TREE else 2.0 * (p - 1) / p * n_bytes
    elif coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        sent = (p - 1) / p * n_bytes
    else:
        sent = float(n_bytes)
    return sent / (1000.0 * tuning.net_GBps)
