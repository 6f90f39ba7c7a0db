"""Section 4: every scheme at the report's configuration, bytes, time per algorithm and memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.config import config_line
from zerocalc.report.sections import title
from zerocalc.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc.collectives import Algorithm

    w.heading(title("volume_table"))
    t = data.table
    algs = [a.value for a in Algorithm if f"time_s_{a.value}" in t.columns]
    header = ["scheme", "bytes/rank/step", "×Ψb", *[f"T {a}" for a in algs], "memory/GPU", "DP"]
    rows = []
    for _i, r in t.iterrows():
        rows.append([str(r["scheme"]), format_bytes(r["bytes_per_rank"]),
                     f"{r['bytes_per_rank_over_psi']:.3f}", *[format_seconds(r[f"time_s_{a}"]) for a in algs],
                     format_bytes(r["memory_bytes_per_rank"]), "yes" if r["equivalent_to_dp"] else "NO"])
    w.table(header, rows, caption=(
        "Table. " + config_line(data.config) + ". bytes/rank/step: bytes one rank sends per step (ring "
        "algorithms); ×Ψb: the same in units of Ψ × bytes per element; T: step communication time per "
        "algorithm on the topology; memory: model states per GPU (GB = 1e9 B); DP: whether the update "
        "equals data-parallel training. T tree is the textbook binomial tree without pipelining "
        "(Thakur, Rabenseifner & Gropp 2005), not NCCL's pipelined double binary tree; zeropp's quantised "
        f"phases keep their int8/int4 width whatever the wire dtype ({data.config.comm_dtype}) is."),
        size=7.5)
