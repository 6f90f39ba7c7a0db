"""What NCCL's own INFO lines (``NCCL_DEBUG=INFO``) in an nccl-tests output state of the run it measured.

nccl-tests run with ``NCCL_DEBUG=INFO`` carry NCCL's INFO lines before and between the table's rows.
Beside the ``NCCL version`` line and the environment (:mod:`zerocalc.traces.launch_env`), they state the
network (:data:`NETWORK_EVIDENCE`) and (each ``(kind, pattern)`` of :data:`INFO_FACTS`, from NCCL's and
aws-ofi-nccl's sources):

- ``ranks``, ``nodes``, ``local_ranks``: the communicator's ``nRanks N nNodes M localRanks L`` (NCCL
  ``src/init.cc``, ``"comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"``,
  v2.20-v2.30); before v2.20 only the ranks, ``"comm %p rank %d nranks %d cudaDev %d ... - Init
  COMPLETE"`` (v2.9-v2.30); ``mnnvl``: that line's ``MNNVL`` flag, 1 where NCCL joined the hosts of one
  NVLink domain into one node (multi-node NVLink: a GB200 NVL72 rack's trays); ``clique_size``: the ranks
  of that node, ``"MNNVL %d cliqueId %x cliqueSize %d cliqueRank %d"`` (``src/init.cc`` v2.21-v2.24,
  ``src/mnnvl.cc`` v2.25-v2.30);
- ``tuner_plugin``: the tuner plugin NCCL loaded, which then picks each call's algorithm and protocol
  instead of NCCL's model (NCCL ``src/misc/tuner.cc``: ``"Opened tuner: '%s'"`` v2.19, ``"Using tuner
  plugin: '%s'"`` v2.20-v2.21, ``"TUNER/Plugin: Using tuner plugin %s"`` v2.22-v2.27; ``src/plugin/
  tuner/tuner_v*.cc`` ``"TUNER/Plugin: Using %s (v%d)"`` v2.28-v2.30; ``"Using internal tuner plugin"``
  names none);
- ``tuner_fallback``: the plugin declined and NCCL's own model chooses (aws/aws-ofi-nccl's tuner:
  ``"NCCL_OFI_TUNER is not available for platform : %s, Fall back to NCCL's tuner"``, ``"... Context
  is not ready. Fall back to NCCL's tuner."``, ``src/tuner/``, v1.9-v1.21);
- ``ofi_version``: the aws-ofi-nccl release NCCL loaded as its network plugin (``"NET/OFI Initializing
  %s"`` with its ``PACKAGE_STRING``, ``aws-ofi-nccl 1.9.2-aws``: ``src/nccl_ofi_net.c`` v1.7-v1.13,
  ``nccl_ofi_net.cpp`` to v1.21), which says whose tuner plugin ``nccl_ofi_tuner`` is
  (:mod:`zerocalc.nccl.ofi_tuner`);
- ``ec2_platform``: the EC2 instance type aws-ofi-nccl read (``"Running on %s platform, ..."``,
  ``src/platform-aws.c`` v1.7-v1.13, ``platform-aws.cpp`` to v1.21), by which its tuner answers from v1.13;
- ``net_latency_us``: the per-hop latency aws-ofi-nccl reports to NCCL (``"Internode latency set at
  %.1f us"``, aws/aws-ofi-nccl ``src/platform-aws.c`` v1.7-v1.13, ``platform-aws.cpp`` to v1.21: the
  platform table's figure, 75 µs on p4d/p5 and 35 µs on p5en since v1.16, else 150 µs "for historical
  reasons"), NCCL's ``latencyInter``, which its model chooses with (``src/graph/tuning.cc``);
- ``intra_p2p``, ``intra_shm``: a channel between two GPUs of a node connected by CUDA peer-to-peer or
  through host memory (NCCL ``src/transport.cc``, ``"Channel %02d%s : %d[%d] -> %d[%d] via %s/%s"`` with
  the P2P transport's ``P2P/IPC``, ``P2P/CUMEM``, ``P2P/direct pointer`` or the SHM transport's
  ``SHM/direct/direct``, v2.9-v2.30), which tells whether the GPUs reach each other by PCIe peer-to-peer;
- ``tuning``: the algorithm and protocol NCCL chose for a call of a size, as rank 0 prints them with
  ``NCCL_DEBUG_SUBSYS`` holding ``TUNING`` (NCCL ``src/enqueue.cc``: ``"%ld Bytes -> Algo %d proto %d time
  %f"`` v2.20-v2.22, with ``"%s: "`` (the collective) before it v2.23, ``"%s: %ld Bytes -> Algo %s proto
  %s channel{Lo..Hi}={%d..%d}"`` v2.24-v2.30; the indices are ``src/include/plugin/nccl_tuner.h``'s
  ``NCCL_ALGO_*`` and ``NCCL_PROTO_*``; ``time`` is NCCL's own model's time, µs);
- ``thread_thresholds``: the communicator's effective ``threadThresholds`` (Tree LL/LL128/Simple, Ring
  LL/LL128/Simple), after ``NCCL_THREAD_THRESHOLDS`` (NCCL ``src/graph/tuning.cc``, ``"threadThresholds
  %ld/%ld/%ld | %ld/%ld/%ld"`` then CollNet's ``" | %ld/%ld/%ld"`` or ``" | %ld | %ld"`` by release,
  v2.4-v2.30; ``threadThresholds 8/8/64 | 128/8/64 | 512 | 512`` on 16 ranks, aws/aws-ofi-nccl issue 65),
  which the launch's channel loop reads (:mod:`zerocalc.nccl.launch`);
- ``comm_channels``: the communicator's channels, ``comm->nChannels`` after ``ncclTopoPostset`` (the
  graph's channels doubled, CollNet's and sm90's steps, ``NCCL_MIN/MAX_NCHANNELS``, the NVLS raise:
  :mod:`zerocalc.nccl.channels`), as NCCL prints it once set: ``"%d coll channels, %d p2p channels, %d p2p
  channels per peer"`` (``src/graph/paths.cc`` ``ncclTopoComputeP2pChannels``, v2.8-v2.16), ``"%d coll
  channels, %d nvls channels, %d p2p channels, %d p2p channels per peer"`` (``src/init.cc``, v2.17-v2.21),
  ``"%d coll channels, %d collnet channels, %d nvls channels, ..."`` (``src/init.cc``, v2.22-v2.30); the
  first number is ``comm->nChannels`` in every form;
- ``p2p_channels``: from the same line, ``[p2pnChannels, p2pnChannelsPerPeer]``, the channels NCCL's
  point-to-point operations spread over and each peer's share (``ncclTopoComputeP2pChannels``,
  ``src/graph/paths.cc``: ``comm->nChannels`` bounded by ``NCCL_MIN/MAX_P2P_NCHANNELS`` and rounded up to a
  power of two; the fewest channels any peer's path asks for, likewise, and from v2.29 halved to fit the
  peers in one batch), as :mod:`zerocalc.nccl.p2p` derives them;
- ``p2p_chunk_bytes``: ``comm->p2pChunkSize``, the step of the point-to-point path (``"P2P Chunksize set to
  %d"``, ``src/init.cc`` ``computeBuffSizes``, v2.16-v2.30: ``NCCL_P2P_NET_CHUNKSIZE`` across nodes,
  ``NVL`` on an all-NVLink node, ``PCI`` else, at most ``NCCL_BUFFSIZE / 8``);
- ``nvls_channels``: from the same line, v2.17-v2.30, ``comm->nvlsChannels`` (``src/transport/nvls.cc``:
  ``NCCL_NVLS_NCHANNELS``, within the communicator's CTA bounds), the count ``ncclTopoPostset`` raises
  ``comm->nChannels`` to on NVLS machines at v2.20-v2.27 (:mod:`zerocalc.nccl.channels`, step 6) and
  ``enqueue.cc`` launches NVLS calls on;
- ``ring_channels``: the same count as rank 0's ring lines print it, ``"Channel %02d/%02d : "`` and each
  rank of the ring (``src/graph/rings.cc`` ``ncclBuildRings``, v2.8-v2.30, cut with ``...`` at 128
  characters from v2.23), the second number ``nrings``: ``ncclTopoPostset`` builds the rings on the final
  ``comm->nChannels`` (``src/graph/connect.cc``, after the bounds and the NVLS raise);
- ``ring_graph``, ``tree_graph``: the Ring and the Tree graph the search found, as ``[nChannels, bwIntra,
  bwInter]`` (GB/s per channel, after the search's own channel duplication), with ``NCCL_DEBUG_SUBSYS``
  holding ``GRAPH`` (NCCL ``src/graph/search.cc`` ``ncclTopoPrintGraph``: ``"Pattern %d, crossNic %d,
  nChannels %d, speed %f/%f, type %s/%s, sameChannels %d"`` v2.8-v2.18, ``bw`` for ``speed`` v2.19-v2.30,
  intra before inter in both); ``init.cc`` prints the ring graph (pattern 4) first, then the tree's (pattern
  1, 2 or 3), then CollNet Chain's (pattern 3 too): the first line of each is kept;
- ``nvls_graph``: the NVLS graph (NVLS and NVLS Tree's) in the same form, pattern 5
  (``NCCL_TOPO_PATTERN_NVLS``, v2.18-v2.30, printed last, where the communicator supports NVLS);
  ``collnet_direct_graph``: CollNet Direct's, pattern 6 (``NCCL_TOPO_PATTERN_COLLNET_DIRECT``, v2.22-v2.30;
  before, one CollNet graph of pattern 3, which is not told apart from the tree's and not read);
- ``net_gdr``, ``net_host``: a channel between two nodes whose NIC reads and writes the GPU's memory
  (GPUDirect RDMA) or goes through host memory: the network transport's connect line, ``"Channel %02d/%d :
  %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s"`` with ``/GDRDMA`` when it uses GDR (``src/transport/net.cc``,
  v2.9-v2.30; ``NET/%s/%d(%d)`` through a proxy rank, ``/Shared`` after it; NCCL's socket transport, which
  never uses GDR, left out), or ``ncclTopoCheckGdr``'s own ``"GPU Direct RDMA Enabled for GPU %d / HCA
  ..."`` / ``"GPU Direct RDMA Disabled for GPU %d / HCA ... (distance %d > %d)"`` (``src/graph/paths.cc``,
  v2.12-v2.28, ``%lx`` bus ids to v2.22; ``"... for GPU/%ld-%ld (rank %d) - NET/..."`` in v2.29, a TRACE line
  after), or a NIC's own ``"NET/%s : GPU Direct RDMA Disabled for HCA %d '%s'"`` (``src/graph/topo.cc``,
  v2.28-v2.30: the network cannot reach GPU memory at all; its ``Enabled`` says only that it could, and is not
  read), which :func:`zerocalc.topology.devices.with_stated_gdr` prices;
- ``coll_lines``: how many per-call COLL lines the file holds (``NCCL_DEBUG_SUBSYS=COLL``; NCCL
  ``src/enqueue.cc``, ``"%s: opCount %lx sendbuff ..."``), which an nccl-tests sweep does not read.
"""

from __future__ import annotations

import re
from typing import Any

#: What an NCCL INFO line (``NCCL_DEBUG=INFO``) or the launch line says of the network that ran, as
#: (kind, pattern), strongest first: NCCL's own ``Using network X`` / ``Using net plugin`` and the
#: transport of a channel (``via NET/IB/0``) or a transport's init line (``NET/IB :``, ``NET/Socket :``,
#: ``NET/OFI`` of aws-ofi-nccl, ``NET/AWS Libfabric`` of its releases before 1.2, ``FasTrak`` /
#: ``GPUDirectTCPX`` of GCP's TCPXO / TCPX plugins; ``IBext`` and ``NET/NCCL RDMA Plugin`` of HPC-X's
#: Mellanox/nccl-rdma-sharp-plugins, InfiniBand verbs under NCCL's net plugin API); last,
#: ``NCCL_IB_DISABLE=1`` on the launch line (NCCL falls back to its socket transport unless a net plugin
#: is loaded); ``NET/IB : No device found``
#: names no network (NCCL then falls back to another). NCCL ``src/init.cc``
#: (``Using network %s``), ``src/transport/net_ib.cc``, ``net_socket.cc``; aws/aws-ofi-nccl
#: ``src/nccl_ofi_net.cpp``; google/nccl-plugin-gpudirecttcpx.
NETWORK_EVIDENCE: tuple[tuple[str, re.Pattern[str]], ...] = (
    # HPE Slingshot through aws-ofi-nccl and libfabric's cxi provider: the plugin's lines are the ones it
    # prints on EFA (``NET/OFI``, ``Using network AWS Libfabric``), its provider line names the fabric
    # (``"Selected provider is %s, fabric is %s (found %d nics)"``, ``src/nccl_ofi_net.cpp``; ``Selected
    # Provider is cxi`` in aws-ofi-rccl 1.4) and so does its GPUDirect line (``GPU Direct RDMA Enabled for
    # HCA 0 'cxi3'``); :func:`zerocalc.topology.devices.preset_for_devices` lets it outrank ``efa``
    ("slingshot", re.compile(r"\bNCCL INFO\b.*(?:\bSelected [Pp]rovider is cxi\b"
                             r"|GPU Direct RDMA Enabled for (?:HCA \d+ ')?cxi\d*)")),
    ("efa", re.compile(r"\bNCCL INFO\b.*(?:\bNET/OFI\b|\bNET/AWS Libfabric\b|Using network (?:AWS )?Libfabric"
                       r"|Selected [Pp]rovider is efa)")),
    ("tcpxo", re.compile(r"\bNCCL INFO\b.*(?:\bFasTrak\b|\bGPUDirectTCPXO\b)")),
    # the plugin's own lines (``NET/GPUDirectTCPX : ...``) and NCCL's ``Using network GPUDirectTCPX_v7``
    ("tcpx", re.compile(r"\bNCCL INFO\b.*\bGPUDirectTCPX(?!O)(?:_v\d+)?\b")),
    ("ib", re.compile(r"\bNCCL INFO\b.*(?:\bNET/IB\b(?!.*\bNo device found)|Using network IB(?:ext)?\b"
                      r"|\bP2P plugin IBext|\bvia NET/NCCL RDMA Plugin\b)")),
    ("socket", re.compile(r"\bNCCL INFO\b.*(?:\bNET/Socket\b|Using network Socket\b)")),
    ("socket", re.compile(r"\bNCCL_IB_DISABLE=1\b")),
)
_CHANNEL = r"\bNCCL INFO\b.*\bChannel \d+(?:/\d+)? : \d+\[\d+\] -> \d+\[\d+\] "
#: a network connect line up to its device (``[%lx]`` bus ids before v2.12, ``[%d]`` devices after; a proxy
#: rank in parentheses), NCCL's socket transport left out
_NET_CHANNEL = (r"\bNCCL INFO\b.*\bChannel \d+(?:/\d+)? : \d+\[[0-9a-fA-F]+\] -> \d+\[[0-9a-fA-F]+\] "
                r"\[(?:send|receive)\] via NET/(?!Socket/)[^/]+/\d+(?:\(\d+\))?")
#: the GPU and NIC of ``ncclTopoCheckGdr``'s line (``GPU %d / HCA %lx``; ``GPU/%ld-%ld (rank %d) - NET/...``)
_GDR_GPU = r"GPU(?: [0-9a-fA-F]+ / HCA\b|/[0-9a-fA-F]+-[0-9a-fA-F]+ )"
#: (kind, pattern): the fact a line states, its value in group 1 (none: a count or a flag).
INFO_FACTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("coll_lines", re.compile(r"\bNCCL INFO (?:\[\d+\] )?[A-Za-z]+: opCount [0-9a-fA-F]+ ")),
    ("ranks_nodes", re.compile(r"\bNCCL INFO\b.*\bnRanks (\d+) nNodes (\d+) localRanks (\d+)\b"
                               r"(?: localRank \d+ MNNVL (\d+)\b)?")),
    ("ranks", re.compile(r"\bNCCL INFO\b.*\brank \d+ nranks (\d+) .*Init COMPLETE")),
    ("clique_size", re.compile(r"\bNCCL INFO\b.*\bMNNVL 1 cliqueId [0-9a-fA-F]+ cliqueSize (\d+)\b")),
    ("tuner_plugin", re.compile(r"\bNCCL INFO\b.*(?:Opened tuner: '([^']+)'|Using tuner plugin: '([^']+)'"
                                r"|TUNER/Plugin: Using tuner plugin (\S+)|TUNER/Plugin: Using (?!internal\b)"
                                r"(\S+) \(v\d+\))")),
    ("tuner_fallback", re.compile(r"\bNCCL INFO\b.*\bFall(?:ing)? back to NCCL'?s (?:internal )?tuner")),
    ("tuning", re.compile(r"\bNCCL INFO (?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)"
                          r"(?: time (\d+(?:\.\d+)?)| channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?")),
    ("ofi_version", re.compile(r"\bNCCL INFO\b.*\bNET/OFI Initializing aws-ofi-nccl (\S+)")),
    ("ec2_platform", re.compile(r"\bNCCL INFO\b.*\bNET/OFI Running on (\S+) platform\b")),
    ("comm_channels", re.compile(r"\bNCCL INFO (\d+) coll channels, (?:\d+ collnet channels, )?"
                                 r"(?:(\d+) nvls channels, )?(\d+) p2p channels, (\d+) p2p channels per "
                                 r"peer\b")),
    ("p2p_chunk_bytes", re.compile(r"\bNCCL INFO\b.*\bP2P Chunksize set to (\d+)\b")),
    ("ring_channels", re.compile(r"\bNCCL INFO Channel \d+/(\d+) :(?: +\d+)+(?: *\.\.\.)?\s*$")),
    ("graph", re.compile(r"\bNCCL INFO Pattern (\d+), crossNic \d+, nChannels (\d+), (?:speed|bw) "
                         r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?), type ")),
    ("net_latency_us", re.compile(r"\bNCCL INFO\b.*\bInternode latency set at (\d+(?:\.\d+)?) us")),
    ("thread_thresholds", re.compile(r"\bNCCL INFO threadThresholds (\d+)/(\d+)/(\d+) \| "
                                     r"(\d+)/(\d+)/(\d+)\b")),
    ("intra_p2p", re.compile(_CHANNEL + r"via P2P/")),
    ("intra_shm", re.compile(_CHANNEL + r"via SHM/")),
    ("net_gdr", re.compile(_NET_CHANNEL + r"/GDRDMA\b")),
    ("net_host", re.compile(_NET_CHANNEL + r"(?:/Shared)?\s*$")),
    ("net_gdr", re.compile(r"\bNCCL INFO\b.*\bGPU Direct RDMA Enabled for " + _GDR_GPU)),
    ("net_host", re.compile(r"\bNCCL INFO\b.*\bGPU Direct RDMA Disabled for (?:" + _GDR_GPU
                            + r"|HCA \d+ ')")),
)


#: NCCL's algorithm and protocol indices (``src/include/plugin/nccl_tuner.h``, v2.19-v2.30) and names
#: (``ncclAlgoToString``, ``ncclProtoToString``).
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")


def _named(token: str, names: tuple[str, ...]) -> str:
    return names[int(token)] if token.isdecimal() and int(token) < len(names) else token


def info_facts(line: str) -> list[tuple[str, Any]]:
    """The facts (kind, value) one line states (:data:`INFO_FACTS`; ``ranks_nodes`` as ``ranks``,
    ``nodes`` and ``local_ranks``)."""
    if "NCCL INFO" not in line:
        return []
    for kind, rx in INFO_FACTS:
        m = rx.search(line)
        if m is None:
            continue
        if kind == "ranks_nodes":
            return [("ranks", int(m[1])), ("nodes", int(m[2])), ("local_ranks", int(m[3])),
                    *([("mnnvl", int(m[4]))] if m[4] is not None else [])]
        if kind == "ranks":
            return [("ranks", int(m[1]))]
        if kind == "tuner_plugin":
            return [(kind, next(g for g in m.groups() if g))]
        if kind == "thread_thresholds":
            return [(kind, [int(g) for g in m.groups()])]
        if kind in ("ofi_version", "ec2_platform"):
            return [(kind, m[1])]
        if kind == "graph":  # NCCL_TOPO_PATTERN_RING 4, the trees 1-3, NVLS 5, COLLNET_DIRECT 6 (graph.h)
            name = {"4": "ring_graph", "1": "tree_graph", "2": "tree_graph", "3": "tree_graph",
                    "5": "nvls_graph", "6": "collnet_direct_graph"}.get(m[1])
            return [(name, [int(m[2]), float(m[3]), float(m[4])])] if name else []
        if kind == "comm_channels":
            return [(kind, int(m[1])), ("p2p_channels", [int(m[3]), int(m[4])]),
                    *([("nvls_channels", int(m[2]))] if m[2] is not None else [])]
        if kind in ("ring_channels", "clique_size"):
            return [(kind, int(m[1]))]
        if kind == "p2p_chunk_bytes":
            return [(kind, int(m[1]))]
        if kind == "net_latency_us":
            return [(kind, float(m[1]))]
        if kind == "tuning":
            return [(kind, {"op": m[1], "bytes": int(m[2]), "algorithm": _named(m[3], ALGORITHMS),
                            "protocol": _named(m[4], PROTOCOLS),
                            "time_us": float(m[5]) if m[5] else None,
                            "channels": [int(m[6]), int(m[7])] if m[6] else None})]
        return [(kind, True)]
    return []


class InfoFacts:
    """The INFO facts of one run: the first line of each (the largest for ``ranks``: a split
    communicator is smaller than the world), with its line number; COLL lines counted."""

    def __init__(self) -> None:
        self.facts: dict[str, tuple[Any, int]] = {}
        self.coll_lines = 0
        #: NCCL's choice per (collective, bytes), from its first TUNING line (with that line).
        self.tuning: dict[tuple[str | None, int], dict[str, Any]] = {}

    def add(self, line: str, lineno: int) -> None:
        for kind, value in info_facts(line):
            if kind == "coll_lines":
                self.coll_lines += 1
                continue
            if kind == "tuning":
                self.tuning.setdefault((value["op"], value["bytes"]), {**value, "line": lineno})
                continue
            old = self.facts.get(kind)
            if old is None or (kind in ("ranks", "nodes", "local_ranks") and value > old[0]):
                self.facts[kind] = (value, lineno)

    def ranks(self) -> int | None:
        """The ranks of the run's communicator, ``None`` when no line states them."""
        got = self.facts.get("ranks")
        return got[0] if got else None

    def as_dict(self) -> dict[str, Any]:
        """``kind → [value, line]``; ``coll_lines`` (a count) and ``tuning`` (each size's choice: ``op``,
        ``bytes``, ``algorithm``, ``protocol``, ``time_us``, ``channels``, ``line``) where the run has any."""
        out: dict[str, Any] = {k: [v, ln] for k, (v, ln) in sorted(self.facts.items())}
        if self.coll_lines:
            out["coll_lines"] = self.coll_lines
        if self.tuning:
            out["tuning"] = list(self.tuning.values())
        return out
