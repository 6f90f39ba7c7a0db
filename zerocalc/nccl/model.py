"""NCCL's own cost model: latency and bandwidth per (collective, algorithm, protocol), and its choice.

A transcription of ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``) and
of the choice in ``src/enqueue.cc`` (``updateCollCostTable`` / ``topoGetAlgoInfo``; ``getAlgoInfo``
before 2.19: the enabled pair of least predicted time, first in (algorithm, protocol) index order on a
tie), at the modelled releases of :mod:`zerocalc.nccl.tables`. Where the releases differ the code says
which does what, by ``Release.era`` (the minor version of the release whose formulas apply: 5, 6
and 7 for v2.5.7, v2.6.4 and v2.7.x, 9 for v2.9.9, 10 for v2.10.3, …, 17 for v2.17.1, then one a line
to 30). Time of one operation
(``numPipeOps`` = 1, as nccl-tests runs them)::

    time_us = latency_us + nBytes / (1000 · bandwidth_GBps)

with ``nBytes`` the largest of the send and receive buffers (``ncclFuncMaxSendRecvCount``: the
full vector for all-gather and reduce-scatter, as nccl-tests' ``size`` column). One triple's latency and
bandwidth formulas are :mod:`zerocalc.nccl.tune_model`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from zerocalc.errors import RestrictedOpError
from zerocalc.nccl.channels import CommChannels, comm_channels, nvls_channels, stated_graph_channels
from zerocalc.nccl.enabled import NVLS_OFF, applies, disabled_reason
from zerocalc.nccl.graph import REQUIRED_FIELDS, Machine, machine
from zerocalc.nccl.nvls_pipeline import (
    estimate_correction,
    fill_priced,
    nvls_fill_us,
    nvls_tree_fill_us,
    nvls_tree_run_correction,
)
from zerocalc.nccl.pcie import host_staged_slowdown
from zerocalc.nccl.tables import (
    BLACKWELL,
    LATEST,
    Algorithm,
    Collective,
    Protocol,
    Release,
)
from zerocalc.nccl.tcp_flows import ring_flow_scale
from zerocalc.nccl.tree_pipeline import fill_priced as tree_fill_priced
from zerocalc.nccl.tree_pipeline import tree_ll128_fill_us
from zerocalc.nccl.tune_model import (
    _PROTO_INDEX,
    _bandwidth_GBps,
    _log2i,
    _tune_one,
    ll128_run_share,
    ring_run_latency_us,
    ring_wire_floor_us,
    tree_run_latency_us,
)
from zerocalc.topology import Topology
from zerocalc.topology.machine import require_all

A, P, C = Algorithm, Protocol, Collective


@dataclass(frozen=True)
class Entry:
    """One (algorithm, protocol) of one collective: NCCL's latency (µs) and bandwidth (GB/s)."""

    algorithm: Algorithm
    protocol: Protocol
    latency_us: float
    bandwidth_GBps: float  # algorithm bandwidth after NCCL's bus→algorithm conversion; 0 = disabled
    enabled: bool = True
    why_disabled: str = ""
    #: the factor NCCL's cost table puts on the pair's time when it chooses, not when the call runs
    #: (an fp8 reduction's Ring at more than 8 ranks: :mod:`zerocalc.nccl.datatype`)
    choice_scale: float = 1.0


@dataclass(frozen=True)
class Tuning:
    """The tuned table of one communicator: every collective × algorithm × protocol."""

    release: Release
    machine: Machine
    entries: dict[tuple[Collective, Algorithm, Protocol], Entry] = field(default_factory=dict)
    channels: CommChannels | None = None  # comm->nChannels / collChannels (zerocalc.nccl.channels)
    #: the tuning whose figures time the NVLS / NVLS Tree calls this release mispredicts
    #: (:func:`nvls_run_release`)
    nvls_run: Tuning | None = None
    #: the tuning whose figures time every call where the network's own latency differs from what its
    #: plugin reports to NCCL (the topology's ``net_wire_latency_us``; :func:`tune`)
    wire_run: Tuning | None = None
    #: ``(stated, derived)``: the ``comm->nChannels`` an INFO line stated and the one derived from the
    #: topology, when they differ and the stated one is priced (:func:`stated_graph_channels`)
    stated_channels: tuple[int, int] | None = None
    #: ``(algorithm, derived, stated)``: each graph an INFO line stated (``(nChannels, bwIntra, bwInter)``)
    #: that differs from the derived one and is priced (:func:`tune`'s ``stated_graphs``)
    stated_graphs: tuple[tuple[Algorithm, tuple[float, float, float], tuple[float, float, float]], ...] = ()
    #: ``(stated, derived)``: the ``comm->nvlsChannels`` an INFO line stated and the one zerocalc derives
    #: (:func:`zerocalc.nccl.channels.nvls_channels`), where they differ (:func:`tune`'s ``stated_nvls``)
    stated_nvls: tuple[int, int] | None = None
    #: the release whose per-channel Tree caps time the Tree calls where this one's predate NCCL's
    #: GB200-NV72 data (:func:`tree_run_release`)
    tree_run: Release | None = None

    @property
    def comm_channels(self) -> int:
        """``comm->nChannels``: the communicator's channels (the ring graph's when not derived)."""
        return self.channels.n_channels if self.channels else self.machine.graphs[A.RING].n_channels

    def time_s(self, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float, *,
               channels: int | None = None, disabled_ok: bool = False, bw_scale: float = 1.0,
               share: float = 1.0, latency_us: float | None = None) -> float | None:
        """``ncclTopoGetAlgoTime`` in seconds; ``None`` when the pair is disabled (or, with
        ``disabled_ok``, when it has no bandwidth at all).

        ``channels``: the channel count a tuner plugin imposes (``nChannels`` of ``getCollInfo``):
        the bandwidth becomes ``bw / C × min(c, C)``, as NCCL 2.19-2.21's ``ncclTopoGetAlgoTime``
        prices a tuner's count (``bw = bw / comm->nChannels * info->nChannels``, v2.21.5
        ``src/graph/tuning.cc``), ``C`` the communicator's channels (:attr:`comm_channels`, from
        :mod:`zerocalc.nccl.channels`); NCCL never runs more than the communicator has (``enqueue.cc``). Later
        releases no longer price the count (the tuner edits the cost table instead) but still run
        with it, so the same scaling stands for its effect on the run.

        ``share``: the part of the communicator's channels a call launches on (:mod:`zerocalc.nccl.launch`):
        the bandwidth is NCCL's formula (:func:`_bandwidth_GBps`) on that share of the graph's channels, so
        its per-channel figures scale with them and its caps on the whole (``llMaxBw``, the bus caps of the
        releases before 2.19) stay.
        """
        e = self.entries.get((coll, algo, proto))
        if e is None or e.bandwidth_GBps <= 0 or not (e.enabled or disabled_ok):
            return None
        if share < 1.0 and algo in self.machine.graphs:
            # the call runs on this share of the graph's channels: NCCL's bandwidth formula on them, its
            # per-channel figures scaled and its caps on the whole (ll_max, bus caps) kept
            g = replace(self.machine.graphs[algo], n_channels=self.machine.graphs[algo].n_channels * share)
            m = replace(self.machine, graphs={**self.machine.graphs, algo: g})
            e = replace(e, bandwidth_GBps=_bandwidth_GBps(self.release, m, coll, algo, proto))
        scale = bw_scale
        if channels is not None and channels > 0 and algo in self.machine.graphs:
            scale *= min(channels, self.comm_channels) / self.comm_channels
        if scale != 1.0:
            e = replace(e, bandwidth_GBps=e.bandwidth_GBps * scale)
        if latency_us is not None:
            e = replace(e, latency_us=latency_us)
        return _algo_time_us(self, e, coll, int(n_bytes), plateau_share=share) / 1e6

    def capped_scale(self, algo: Algorithm) -> float:
        """The share of its channels a Ring or Tree call runs on under ``NCCL_MAX_NCHANNELS``:
        ``collChannels`` over the count before the cap (1 when not capped). NCCL prices the pair with
        its graph's channels either way (``ncclTopoTuneModel``), but ``enqueue.cc`` runs Ring and Tree on
        at most ``comm->collChannels``, which ``ncclTopoPostset`` caps (``src/graph/connect.cc``, v2.19.4
        to v2.30.7): the call's bandwidth shrinks with its channels, as a tuner's count does
        (:meth:`time_s`)."""
        ch = self.channels
        if ch is None or not ch.uncapped or algo not in (A.RING, A.TREE):
            return 1.0
        return ch.coll_channels / ch.uncapped

    def run_time_s(self, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float, *,
                   channels: int | None = None, disabled_ok: bool = False,
                   share: float = 1.0) -> float | None:
        """The time a call of the pair takes: :meth:`time_s`, but for NVLS and NVLS Tree on a release
        whose NVLS figures NCCL later corrected, that pair's time under the corrected release
        (:attr:`nvls_run`, :func:`nvls_run_release`); and on a network whose own latency is not the
        one its plugin reports, the time with the network's own (:attr:`wire_run`); a Ring or Tree call
        under ``NCCL_MAX_NCHANNELS`` on the channels it runs (:meth:`capped_scale`); a Ring broadcast or
        reduce as the chain it is, faster where the ring's idle hop shares its bottleneck link
        (``Graph.chain_speedup``, :mod:`zerocalc.nccl.pcie`), any call on NCCL's fallback graph (no ring
        found on a PCIe node) at its links' rate (``Graph.run_scale``), and a Ring/Simple all-gather,
        reduce-scatter or all-reduce through host memory with its idle steps
        (:func:`zerocalc.nccl.pcie.host_staged_slowdown`, on the channels it launches). NCCL still
        *chooses* with its own figures (:meth:`choose`). ``share``: the part of the channels' bandwidth
        the call launches on (:func:`zerocalc.nccl.launch.channel_share`; 1: all)."""
        if self.wire_run is not None:
            if self.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=disabled_ok) is None:
                return None
            return self.wire_run.run_time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=True,
                                            share=share)
        if self.nvls_run is not None and algo in (A.NVLS, A.NVLS_TREE):
            t = self.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=disabled_ok)
            if t is None:
                return None
            run = self.nvls_run
            # the graph's run-time rate as below (a network path through host memory: HOST_RELAY_SHARE)
            corr = nvls_tree_run_correction(run, coll, algo, n_bytes) * run.machine.graphs[algo].run_scale
            lat = run.nvls_tree_fill_latency_us(coll, algo, proto, n_bytes, corr, chunking=self)
            return run.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=True, bw_scale=corr,
                              latency_us=lat)
        scale = self.capped_scale(algo) if channels is None else 1.0
        scale *= nvls_tree_run_correction(self, coll, algo, n_bytes)
        scale *= self.tree_run_scale(coll, algo, proto)
        scale *= ll128_run_share(self.machine, algo, proto)  # Ring/LL128 on one Ampere node
        if algo == A.RING and coll in (C.BROADCAST, C.REDUCE):
            scale *= self.machine.graphs[A.RING].chain_speedup  # a chain, not the ring NCCL prices
        if algo in self.machine.graphs:
            scale *= self.machine.graphs[algo].run_scale  # fallback graph at its links' rate; host relay
        # the channels the call runs on: a tuner's count, else the launch's share of collChannels
        coll_channels = self.channels.coll_channels if self.channels else self.comm_channels
        run = max(1, min(channels, self.comm_channels) if channels else round(coll_channels * share))
        if algo == A.RING and proto == P.SIMPLE and self.machine.graphs[A.RING].host_staged:
            scale /= host_staged_slowdown(coll, self.machine.n_ranks, run)  # SHM: idle directions
        if algo == A.RING and self.machine.net_flows:
            m, g = self.machine, self.machine.graphs[A.RING]  # TCP: a step's messages over its flows
            scale *= ring_flow_scale(m.net_flows, m.nccl_buffsize, coll, algo, proto, n_bytes, run, m.n_ranks,
                                     m.n_nodes, g.bw_intra, g.bw_inter, m.net_flow_piece)
        ran = run / max(1, coll_channels)  # the channels' share a wire's pace is paid on
        lat = ring_run_latency_us(self.release, self.machine, coll, proto, ran) if algo == A.RING else \
            self.nvls_tree_fill_latency_us(coll, algo, proto, n_bytes, scale)
        t = self.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=disabled_ok,
                        bw_scale=scale, share=share, latency_us=lat)
        if t is not None and tree_fill_priced(coll, algo, proto, self.machine.n_nodes):
            t += self._tree_fill_s(coll, algo, proto, n_bytes, channels, scale, share, run)
        floor = ring_wire_floor_us(self.release, self.machine, coll, proto, ran) if algo == A.RING else None
        if t is not None and floor is not None:  # the wire's pace: a floor under NCCL's plateau latency
            bw_s = self.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=True,
                               bw_scale=scale, share=share, latency_us=0.0)
            t = max(t, floor / 1e6 + bw_s)
        return t

    def _tree_fill_s(self, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float,
                     channels: int | None, scale: float, share: float, run: int) -> float:
        """The seconds a Tree/LL128 all-reduce across nodes holds its first chunk at each network hop
        (:mod:`zerocalc.nccl.tree_pipeline`), on the ``run`` channels it runs, at the bandwidth it runs at."""
        bw_s = self.time_s(coll, algo, proto, n_bytes, channels=channels, disabled_ok=True, bw_scale=scale,
                           share=share, latency_us=0.0)
        if not bw_s:
            return 0.0
        m = self.machine
        return tree_ll128_fill_us(self.release, n_bytes, n_bytes / bw_s / 1e9, run, int(m.n_nodes),
                                  int(m.n_ranks)) / 1e6

    def nvls_tree_fill_latency_us(self, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float,
                                  bw_scale: float = 1.0, chunking: Tuning | None = None) -> float | None:
        """:func:`tree_run_latency_us` (``None``: the entry's own), plus, for an NVLS Tree all-reduce or a
        one-node NVLS all-reduce (Hopper, Blackwell), its pipeline's fill (:mod:`zerocalc.nccl.nvls_pipeline`)
        at the entry's bandwidth × ``bw_scale`` on ``comm->nvlsChannels``, chunked as ``chunking``'s release
        does (default: this one)."""
        lat = tree_run_latency_us(self.release, self.machine, coll, algo, proto)
        e, m, own = self.entries.get((coll, algo, proto)), self.machine, chunking or self
        if e is None or not fill_priced(coll, algo, m.n_nodes, m.compute_capability):
            return lat
        n_ch = own.stated_nvls[0] if own.stated_nvls else nvls_channels(m, own.release)
        # the rate the call runs at: the scale on NCCL's figure, and the factor its estimate holds (Blackwell)
        bw = e.bandwidth_GBps * bw_scale * estimate_correction(self.release, m, coll, algo, n_bytes)
        heads = m.graphs[algo].n_channels
        fill = nvls_fill_us(n_bytes, bw, n_ch, heads) if algo == A.NVLS else \
            nvls_tree_fill_us(own.release, n_bytes, bw, n_ch, heads, int(m.n_nodes), m.nccl_buffsize)
        return (e.latency_us if lat is None else lat) + fill

    def tree_run_scale(self, coll: Collective, algo: Algorithm, proto: Protocol) -> float:
        """The Tree bandwidth under :attr:`tree_run`'s caps over NCCL's own (1 where there is none, or for
        another algorithm): NCCL chooses with its own figures, the call runs at the corrected ones."""
        if self.tree_run is None or algo != A.TREE:
            return 1.0
        own = _bandwidth_GBps(self.release, self.machine, coll, algo, proto)
        return _bandwidth_GBps(self.tree_run, self.machine, coll, algo, proto) / own if own > 0 else 1.0

    def times(self, coll: Collective, n_bytes: float) -> list[tuple[Algorithm, Protocol, float]]:
        """Every enabled pair's time (s), in NCCL's index order."""
        out = []
        for a in self.release.algorithms:
            for p in P:
                t = self.time_s(coll, a, p, n_bytes)
                if t is not None:
                    out.append((a, p, t))
        return out

    def choose(self, coll: Collective, n_bytes: float,
               algorithm: Algorithm | None = None) -> tuple[Algorithm, Protocol, float]:
        """The pair NCCL picks: least time in its cost table (each pair's time by its ``choice_scale``), the
        first in index order on a tie (``topoGetAlgoInfo``); the time returned is the pair's own. With
        ``algorithm``, the protocol it picks for that algorithm, as under ``NCCL_ALGO`` of that one."""
        best = None
        for a, p, t in self.times(coll, n_bytes):
            if algorithm is not None and a != algorithm:
                continue
            cost = t * self.entries[(coll, a, p)].choice_scale
            if best is None or cost < best[3]:
                best = (a, p, t, cost)
        if best is None:
            reasons = sorted({f"{e.algorithm.value}/{e.protocol.value}: {e.why_disabled}"
                              for (c, _, _), e in self.entries.items()
                              if c == coll and e.why_disabled not in ("NCCL_ALGO", "NCCL_PROTO", NVLS_OFF)})
            raise RestrictedOpError(f"no algorithm/protocol that NCCL_ALGO / NCCL_PROTO allow can run "
                                    f"{coll.value} here ({'; '.join(reasons[:4]) or 'all excluded'})",
                                    option="NCCL_ALGO")
        return best[:3]


def nvls_run_release(rel: Release, m: Machine, mnnvl: bool = False) -> Release | None:
    """The release whose NVLS / NVLS Tree figures time those calls when ``rel``'s own mispredict them, or
    ``None``: on Hopper (sm90) with NVLink SHARP, releases with NVLS from before its bandwidth model was
    corrected (``nvls_efficiency_model`` false: 2.17 to 2.27) get the latest modelled release's
    figures (v2.17.1's own: 40 µs and the ring graph's bandwidth × 0.75, capped at 370 GB/s).

    Source: NCCL 2.28.3's release notes ("Improved NVLS/NVLSTree tuning prediction to improve algorithm
    and protocol selection. NVLSTree Tuning Fixes. Update tuning data for H100, GB200-NV72"), which
    brought ``nvlsEfficiency`` (0.85 on Hopper) and ``perChMaxNVLSTreeBws`` into ``tuning.cc``; 2.28.9
    raised NVLS Tree's network hop from 14 to 20.9 µs. The figures describe the hardware's NVLS, so they
    time calls under older releases too: on 8 H100 NVLS all-reduce peaks at a bus bandwidth of about 480 GB/s,
    algorithm bandwidth ~275 GB/s (NCCL's maintainers, NVIDIA/nccl-tests issues 212 and 290, NCCL 2.20-2.21
    era), which 2.30's model gives (272 GB/s; 2.19-2.26's 267 on the same NVLS graph, 8 channels of
    bwIntra 40 and bwInter 60 as NCCL 2.19.4 prints it, NVIDIA/nccl issue 1197). The notes name GB200-NV72's
    data, so a multi-node NVLink domain of Blackwell GPUs (``mnnvl``: a GB200 / GB300 NVL72) gets them too:
    on OCI's GB200 racks (NCCL 2.27.3, NVLS on: oracle-quickstart/oci-gpu-quickstarts, GB200 guide) NVLS
    Tree over 2 and 3 racks ran at 800 and 749 GB/s of bus bandwidth at 8 GiB, where 2.27.3's own figures
    give about 1 050 (0.67-0.76x of the time at 4-8 GiB) and 2.30's about 915 (0.78-0.88x).

    One HGX node of Blackwell GPUs (B200 / B300 on their NVSwitch) gets them too: 2.28.3's ``nvlsEfficiency``
    (0.74 on Blackwell, ``tuning.cc`` v2.28.3-v2.30.7) is per GPU generation, not per system. 8 GPUs of one
    node reach a bus bandwidth of 830-845 GB/s at 8-16 GiB under every release (NVIDIA/nccl issue 1807: "830+"
    on 8 B200, NCCL 2.27.1; the bundled 8 x B300 OCI run, NCCL 2.28.9: 835), where 2.25-2.27's own figures
    give 933 (8 channels x 80 GB/s x 5/6 algorithm bandwidth) and 2.28-2.30's 720 (0.90x and 1.16x of the
    time); below 8 GiB the run falls behind 2.25-2.27's figures: a public 8 x B200 run on GKE (a4-highgpu-8g,
    ``-g 8``, 8 MiB-16 GiB; its page names no NCCL release, so it is not bundled) measures 8 MiB-4 GiB at
    0.61-0.80x of 2.26's figures (the median size 0.77x) and 0.73-1.03x of 2.30's (0.98x). Across HGX
    Blackwell nodes (NVLS Tree) every release gets 2.30's figures on the NVLS graph at the bwIntra its GPUs'
    NVSwitch links hold (:func:`nvls_link_graphs`): NCCL's search across nodes tries one speed for both
    sides and stops at the one a 400 Gb/s NIC takes (48), where the links hold 80, so 2.28-2.30's own figure
    is limited by its NVLS side (48 x 0.74 x 7/8 x 2 = 62 GB/s a channel, 265 GB/s) and the NICs' (2 x 48)
    are what the call meets: 409.6 GB/s. 2 nodes of 8 B200 under 2.26.2 (Lambda, dstackai/dstack
    ``examples/clusters/lambda``) add 2.81 ms a GiB from 1 to 2 GiB (382 GB/s), 2 GCP A4 VMs 2.70 ms a GiB
    from 4 to 8 GiB (370 GB/s), where 2.26's figure is 320 GB/s and 2.28-2.30's 265."""
    cc = m.compute_capability
    if cc >= 100 and m.nvls and not mnnvl and m.n_nodes > 1 and LATEST.nvls_efficiency_model:
        return LATEST  # HGX Blackwell nodes: the NVLS graph at the NVLink's bwIntra (nvls_link_graphs)
    if (rel.nvls_efficiency_model or A.NVLS not in rel.algorithms or not m.nvls
            or not (90 <= cc < 100 or (cc >= 100 and (mnnvl or m.n_nodes == 1)))):
        return None
    return LATEST if LATEST.nvls_efficiency_model else None


def nvls_link_graphs(m: Machine) -> Machine:
    """``m`` with its NVLS and NVLS Tree graphs at the bwIntra their GPUs' NVSwitch links hold
    (``Graph.run_bw_intra``) where NCCL's search across nodes stopped at the NIC's speed: HGX Blackwell
    nodes of a 400 Gb/s NIC a GPU, 8 x 48 GB/s where each B200's 18 x 40.1 GB/s takes (8 + 1) x 80
    (``search.cc``, :func:`zerocalc.nccl.graph.nvls_net_speeds`). A run-time figure (the timing run of
    :func:`nvls_run_release`); NCCL chooses with its search's."""
    graphs = {a: replace(g, bw_intra=g.run_bw_intra) for a, g in m.graphs.items()
              if a in (A.NVLS, A.NVLS_TREE) and g.run_bw_intra}
    return replace(m, graphs={**m.graphs, **graphs}) if graphs else m


def tree_run_release(rel: Release, m: Machine, mnnvl: bool) -> Release | None:
    """``rel`` with the latest modelled release's Blackwell rows of ``perChMaxTreeBws`` and
    ``perChMaxTreeLL128Bws`` where its own differ, on a multi-node NVLink rack of Blackwell GPUs (``mnnvl``:
    a GB200 / GB300 NVL72); ``None`` elsewhere, and for releases without a Blackwell row (before 2.25).

    Source: NCCL 2.28.3's release notes ("Update tuning data for H100, GB200-NV72"), which took the Blackwell
    per-channel Tree caps (N1/N2/N4 columns: 1 node, 2 nodes, more) from 2 x Hopper's (77.4, 82.8, 72.0;
    LL128 73.4, 73.4, 58.0; v2.25.1-v2.27.7 ``tuning.cc``) to (70.0, 42.8, 24.0; LL128 55.6, 31.67, 20.0),
    kept to 2.30. The data describe the rack, so they time Tree calls under the earlier releases too: 1440
    GB200 on 20 racks under NCCL 2.26.2 (NVLS off, coreweave/nccl-tests README) reach 203 GB/s of
    algorithm bandwidth at 16 GiB on Tree/Simple, where 2.26.2's caps give 331 and the corrected ones 180.
    HGX B200 nodes keep each release's own figures (the notes name GB200-NV72's data only)."""
    if not mnnvl or m.compute_capability < 100 or len(rel.per_ch_max_tree_bws) <= BLACKWELL:
        return None
    tree, ll128 = LATEST.per_ch_max_tree_bws[BLACKWELL], LATEST.per_ch_max_tree_ll128_bws[BLACKWELL]
    if (rel.per_ch_max_tree_bws[BLACKWELL], rel.per_ch_max_tree_ll128_bws[BLACKWELL]) == (tree, ll128):
        return None
    return replace(rel, per_ch_max_tree_bws=(*rel.per_ch_max_tree_bws[:BLACKWELL], tree),
                   per_ch_max_tree_ll128_bws=(*rel.per_ch_max_tree_ll128_bws[:BLACKWELL], ll128))


def _algo_time_us(t: Tuning, e: Entry, coll: Collective, n_bytes: int, plateau_share: float = 1.0) -> float:
    """``ncclTopoGetAlgoTime`` (numPipeOps = 1); ``plateau_share``: the share of the communicator's channels a
    call runs on (:func:`ring_plateau`), 1 as NCCL prices its choice."""
    rel, m = t.release, t.machine
    bw, lat = e.bandwidth_GBps, e.latency_us
    log_size = _log2i(n_bytes >> 6)
    corr = rel.tree_correction[_PROTO_INDEX[e.protocol]]
    in_row = 0 <= log_size < min(23, len(corr))  # 22 sizes before v2.8.3, 23 after
    if e.algorithm == A.TREE and in_row and (coll == C.ALL_REDUCE or rel.era < 23):
        bw *= corr[log_size]
    bw *= estimate_correction(rel, m, coll, e.algorithm, n_bytes)  # Blackwell NVLS Tree, v2.29.2 on, x86
    if e.algorithm == A.RING and e.protocol == P.SIMPLE and m.n_nodes > 1 and coll == C.ALL_REDUCE:
        lat *= 1.0 + (ring_plateau(t, n_bytes) - 1.0) * plateau_share
    return lat + n_bytes / (1000.0 * bw)


def ring_plateau(t: Tuning, n_bytes: int) -> float:
    """NCCL's "plateau effect of ring" (``ncclTopoGetAlgoTime``), the factor on a Ring/Simple all-reduce's
    latency across nodes: none before v2.7.3; v2.7.3-v2.17.1 from nRanks/16 × 64 KiB, × 1.9 (v2.17.1: × 1.5 on
    sm90+); v2.19.4 on
    from 64 bytes per channel and rank of the communicator (``nBytes / (comm->nChannels · nRanks) >= 64``),
    × 1.9 before sm80, else × 1.4; 1 below.

    NCCL chooses with the whole factor. A call runs its extra latency (the factor less 1) in proportion to the
    share of the communicator's channels it launches on (:func:`zerocalc.nccl.launch.channel_share`): NCCL
    states the plateau for every channel of the communicator carrying its slice, and from v2.20 ``enqueue.cc``
    launches a call below ``nc · nThreads · 64`` bytes on fewer channels (1 up to 32 KiB of all-reduce at 512
    threads); the ring's latency then grows with the channels that run, reaching NCCL's factor where the call
    runs on them all. Seen on 2 GCP A3 Mega nodes (16 H100, TCPXO, NCCL 2.21.5 under Google's
    ``NCCL_PROTO=Simple``; the bundled ``all_reduce_perf-16xH100-2nodes.txt``): 139-174 µs from 16 to 512 KiB,
    where the call runs on 1, 1, 2, 4, 8 and 16 of its 16 channels, rising with them (155 µs on 1, 174 on
    16) instead of stepping from 132 µs at 8 KiB to NCCL's × 1.4; with the whole factor those rows price at
    1.26-1.56x, with the launched share at 1.04-1.26x."""
    rel, m = t.release, t.machine
    if rel.era <= 6:
        return 1.0  # v2.5.x-v2.6.4: no plateau term (ncclTopoGetAlgoTime / getAlgoInfo)
    if rel.era <= 17:
        if n_bytes >= m.n_ranks / 16.0 * 65536:
            return 1.5 if (rel.era >= 17 and m.compute_capability >= 90) else 1.9
        return 1.0
    if n_bytes / (t.comm_channels * m.n_ranks) >= 64:
        return 1.9 if m.compute_capability < 80 else 1.4
    return 1.0


def tune(topo: Topology, n_ranks: int, release: Release, *,
         algo_enable: Mapping[Collective, set[Algorithm]] | None = None,
         proto_enable: Mapping[Collective, set[Protocol]] | None = None, nvls_enable: bool = True,
         min_channels: int | None = None, max_channels: int | None = None,
         stated_channels: int | None = None,
         stated_graphs: Mapping[Algorithm, tuple[int, float, float]] | None = None,
         stated_nvls: int | None = None, cuda_build: tuple[int, int] | None = None,
         _wire_hops: bool = False, _wire_time: bool = False, _nvls_time: bool = False) -> Tuning:
    """NCCL's tuned table for ``n_ranks`` ranks on ``topo`` at ``release``.

    ``algo_enable`` / ``proto_enable`` (from :func:`zerocalc.nccl.env.parse_list`) restrict the
    pairs as ``NCCL_ALGO`` / ``NCCL_PROTO`` do; ``None`` = NCCL's defaults; ``nvls_enable=False``
    is ``NCCL_NVLS_ENABLE=0``; ``min_channels`` / ``max_channels`` are ``NCCL_MIN_NCHANNELS`` /
    ``NCCL_MAX_NCHANNELS`` (the communicator's channels, :mod:`zerocalc.nccl.channels`);
    ``stated_channels``: the ``comm->nChannels`` the run's INFO line states
    (:mod:`zerocalc.traces.nccl_info`), priced where it differs from the derived count
    (:func:`stated_graph_channels`); ``stated_graphs``: the Ring and Tree graphs the run's GRAPH lines state
    (``(nChannels, bwIntra, bwInter)``, the search's result that ``ncclTopoTuneModel`` prices,
    ``src/graph/tuning.cc``), in place of the derived ones where they differ (the derived graph's other
    figures, its latency and PCIe factors, kept); ``stated_nvls``: the ``comm->nvlsChannels`` the run's INFO
    line states: 0 says the communicator has no NVLS support (``src/transport/nvls.cc`` zeroes it with
    ``nvlsSupport``, ``src/init.cc`` when the NVLS graph search found none), so NVLS and NVLS Tree are left
    out as on a machine without NVLink SHARP; another count is what ``ncclTopoPostset`` raises
    ``comm->nChannels`` to at v2.20-v2.27 (:func:`zerocalc.nccl.channels.comm_channels`, step 6).
    ``ncclTopoTuneModel`` itself prices NVLS with its graph's channels, not this count.
    ``cuda_build``: the CUDA release NCCL was built with (``(11, 8)`` for ``+cuda11.8``; ``None``: not
    stated), which leaves LL128 out of a 2-rank Ring all-reduce on sm90
    (:func:`zerocalc.nccl.enabled._cuda_11_8_pair`).
    """
    require_all(topo, REQUIRED_FIELDS, "NCCL's cost model")
    m = machine(topo, n_ranks, release)
    if _nvls_time:
        m = nvls_link_graphs(m)
    if _wire_time:  # the wire's own timing run (below); _wire_hops only ever comes with it
        m = replace(m, wire_hops=_wire_hops, wire_time=True)
    if cuda_build is not None:
        m = replace(m, cuda_build=tuple(cuda_build))
    m, graph_changes = _with_stated_graphs(m, stated_graphs)
    told_nvls = None
    if stated_nvls is not None and nvls_enable and stated_nvls != nvls_channels(m, release):
        told_nvls = (stated_nvls, nvls_channels(m, release))
        if stated_nvls == 0:
            m = replace(m, nvls=False)  # nvlsSupport 0: no NVLS / NVLS Tree
    nvls_count = stated_nvls or None
    nvls_on = m.nvls and nvls_enable
    channels = comm_channels(m, release, min_channels=min_channels, max_channels=max_channels, nvls=nvls_on,
                             nvls_count=nvls_count)
    stated = None
    if stated_channels is not None and stated_channels != channels.n_channels:
        g = stated_graph_channels(m, release, stated_channels, min_channels=min_channels,
                                  max_channels=max_channels, nvls=nvls_on, nvls_count=nvls_count)
        if g is not None:
            stated = (stated_channels, channels.n_channels)
            m = replace(m, graphs={**m.graphs, **{a: replace(m.graphs[a], n_channels=g)
                                                   for a in (A.RING, A.TREE)}})
            channels = comm_channels(m, release, min_channels=min_channels, max_channels=max_channels,
                                     nvls=nvls_on, nvls_count=nvls_count)
    entries = _entries(release, m, algo_enable, proto_enable, nvls_enable)
    run = None if _nvls_time else nvls_run_release(release, m, topo.mnnvl)
    nvls_run = None if run is None else tune(topo, n_ranks, run, algo_enable=algo_enable,
                                               proto_enable=proto_enable, nvls_enable=nvls_enable,
                                               min_channels=min_channels, max_channels=max_channels,
                                               stated_channels=stated_channels, stated_graphs=stated_graphs,
                                               stated_nvls=stated_nvls, cuda_build=cuda_build,
                                               _nvls_time=True)
    told = topo.net_latency_us or 0.0
    wire = getattr(topo, "net_wire_latency_us", None)
    wire = told if wire is None else wire
    unread = release.era < 12 and wire > 0  # before v2.12.12 tuning.cc reads no plugin latency
    wire_run = None
    if m.n_nodes > 1 and (wire != told or unread) and not _wire_time:
        # the same communicator with the network's own latency as latencyInter: NCCL's formulas, the
        # figure NCCL is told replaced by the one the wire has (see Tuning.run_time_s); a release that
        # reads none still pays it, as the first releases that read it count it (replacing the hop)
        wire_topo = replace(topo, net_latency_us=wire, net_wire_latency_us=None)
        wire_run = tune(wire_topo, n_ranks, release, algo_enable=algo_enable, proto_enable=proto_enable,
                        nvls_enable=nvls_enable, min_channels=min_channels, max_channels=max_channels,
                        stated_channels=stated_channels, stated_graphs=stated_graphs, stated_nvls=stated_nvls,
                        cuda_build=cuda_build, _wire_hops=unread, _wire_time=True)
    return Tuning(release, m, entries, channels, nvls_run, wire_run, stated, tuple(graph_changes), told_nvls,
                  tree_run=tree_run_release(release, m, topo.mnnvl))



def enabled_algorithms(tuning: Tuning, coll: Collective) -> Iterable[Algorithm]:
    """Algorithms with at least one enabled protocol for ``coll``."""
    return [a for a in tuning.release.algorithms
            if any(e.enabled for (c, aa, _), e in tuning.entries.items() if c == coll and aa == a)]


def _with_stated_graphs(m, stated_graphs: Mapping[Algorithm, tuple[int, float, float]] | None):
    """``m`` with the Ring / Tree graphs the run's GRAPH lines state where they differ from the derived
    ones (their channels and bandwidths; the derived graph's other figures kept), and the changes
    ``(algorithm, derived, stated)`` for the note."""
    graph_changes = []
    for a, (n, bi, be) in (stated_graphs or {}).items():
        g = m.graphs.get(a)
        if g is not None and (n, bi, be) != (g.n_channels, g.bw_intra, g.bw_inter):
            graph_changes.append((a, (g.n_channels, g.bw_intra, g.bw_inter), (n, bi, be)))
            m = replace(m, graphs={**m.graphs, a: replace(g, n_channels=n, bw_intra=bi, bw_inter=be)})
    return m, graph_changes


def _entries(release: Release, m, algo_enable, proto_enable, nvls_enable: bool) -> dict:
    """Every (collective, algorithm, protocol) the release has: its latency, bandwidth and whether NCCL
    may choose it (``ncclTopoTuneModel``'s table with the enabled pairs, ``src/graph/tuning.cc``)."""
    entries = {}
    for coll in C:
        for a in release.algorithms:
            for p in P:
                if not applies(release, coll, a, p):
                    continue
                why = disabled_reason(release, m, coll, a, p, algo_enable, proto_enable, nvls_enable)
                if a not in m.graphs:  # no graph found (NVLS without NVLink SHARP)
                    entries[(coll, a, p)] = Entry(a, p, math.inf, 0.0, False, why or "no graph")
                    continue
                lat, bw = _tune_one(release, m, coll, a, p)
                entries[(coll, a, p)] = Entry(a, p, lat, bw, not why and bw > 0, why or ("" if bw > 0 else
                                                                                            "zero bandwidth"))
    return entries
