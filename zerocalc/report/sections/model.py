"""Section 2: the model's assumptions, its symbols, the schemes and the topologies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.config import custom_topology, topology_label
from zerocalc.report.sections import number, title
from zerocalc.units import format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer

_ASSUMPTIONS = [
    "Notation: Ψ parameters (elements); N ranks in the data-parallel group, G per node, N/G nodes; "
    "b_comm bytes per element on the wire (2 for fp16/bf16); b_param and b_grad bytes per stored "
    "parameter and gradient; K bytes of optimizer state per parameter (12 for mixed-precision Adam, "
    "ZeRO §3.1).",
    "Volume = bytes ONE rank sends in one training step, averaged over the ranks of the group. A "
    "collective's "
    "size is the bytes of its full vector (Ψ·b for a whole-model all-reduce); ring all-reduce sends "
    "2(p−1)/p of it per rank, reduce-scatter and all-gather (p−1)/p each (Patarasuk & Yuan 2009; Thakur, "
    "Rabenseifner & Gropp 2005). The ZeRO paper's 2Ψ and 3Ψ are these volumes with (N−1)/N dropped.",
    "Time = Hockney α-β(-γ): each message step costs a latency α plus bytes / bandwidth on the link it "
    "crosses, plus γ per byte reduced. Intra-node and inter-node links have their own α and bandwidth "
    "(the topology presets below); a phase on the world group runs at the pace of the slower tier it "
    "crosses. Ring, recursive halving/doubling, binomial tree and a two-level hierarchical algorithm are "
    "modelled. Phases run one after another and nothing overlaps with compute, so the time is the "
    "exposed-communication upper bound of a step.",
    "Memory = model states only (ZeRO §3.1, §5): parameters, gradients and optimizer states, divided by N "
    "where a scheme shards them. Activations, temporary buffers and fragmentation are left out.",
    "A scheme is the ordered list of collectives one step issues (collective, message size, bytes per "
    "element, group: world, intra-node or inter-node) plus one fact: whether its update equals "
    "data-parallel SGD/Adam on the global batch. The simulation (section {verdict}) checks that fact by "
    "training.",
]


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc.schemes import SCHEME_NAMES, SCHEMES
    from zerocalc.symbols import SYMBOLS

    w.heading(title("model"))
    w.bullets([a.format(verdict=number("verdict")) for a in _ASSUMPTIONS])
    w.heading("Symbols", 2)
    symbols = [[name, info.meaning, info.unit] for name, info in SYMBOLS.items()]
    w.table(["symbol", "meaning", "unit"], symbols,
            align="lll", size=7.5)
    w.heading("Schemes", 2)
    rows = []
    for name in SCHEME_NAMES:
        s = SCHEMES[name]
        phases = " + ".join(f"{p.collective.value} ({p.group.value})" for p in s.phases)
        rows.append([name, s.title, "yes" if s.equivalent_at(data.config.dp_n) else "NO", phases])
    w.table(["scheme", "what it is", "DP update", "collectives per step (group)"], rows, align="llll",
            size=7.5,
            wrap={1: 34, 3: 46})
    from zerocalc.topology import PRESETS

    custom = custom_topology(data.config)
    topologies = [*([custom] if custom is not None else []), *PRESETS.values()]
    w.ensure(2.8)  # the heading with the presets table's first rows; a longer table goes on under its header
    w.heading("Topologies" if custom is not None else "Topology presets", 2)
    w.table(["topology" if custom is not None else "preset", "G", "intra α", "intra GB/s (per GPU)",
             "inter α", "inter GB/s (per node)", "source"],
            [[topology_label(t), str(t.gpus_per_node), format_seconds(t.intra.alpha_s),
              f"{t.intra.bw_Bps / 1e9:g}", format_seconds(t.inter.alpha_s), f"{t.inter.bw_Bps / 1e9:g}",
              t.source or ("this report's --topology file" if t is custom else "")]
             for t in topologies], align="lrrrrrl", size=7.0, wrap={6: 48})
