"""Section 4: every scheme at the report's configuration, bytes, time per algorithm and memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.config import config_line, nccl_words
from zerocalc.report.sections import title
from zerocalc.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import Progress, ReportConfig, ReportData
    from zerocalc.report.layout import Writer


def collect(config: ReportConfig, data: ReportData, say: Progress) -> None:
    """With tuner rules or aws-ofi-nccl's tuner plugin given: every scheme priced with NCCL's cost model, by
    itself and under them (:func:`zerocalc.report.sweeps.nccl_under_tuner`); else, with NCCL's options given
    or a calibrated topology (:attr:`~zerocalc.report.config.ReportConfig.nccl_priced`), every scheme priced
    with NCCL's cost model under them (:func:`zerocalc.report.sweeps.nccl_priced`)."""
    if not config.nccl_priced:
        return
    from zerocalc.report.sweeps import nccl_priced, nccl_under_tuner

    if config.nccl_tuner is None and config.ofi_tuner is None:
        say("pricing every scheme with NCCL's cost model")
        data.extra["volume_table_priced"], data.extra["volume_table_priced_notes"] = nccl_priced(config,
                                                                                                 data.table)
        return
    say("pricing every scheme with NCCL's cost model under the tuner " +
        ("rules" if config.ofi_tuner is None else "plugin"))
    frame, notes = nccl_under_tuner(config, data.table)
    data.extra["volume_table_nccl"], data.extra["volume_table_nccl_notes"] = frame, notes


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
        "Table. " + config_line(data.config, nccl=False) + ". bytes/rank/step: bytes one rank sends per step "
        "(ring algorithms); ×Ψb: the same in units of Ψ × bytes per element; T: step communication time per "
        "algorithm on the topology; memory: model states per GPU (GB = 1e9 B); DP: whether the update "
        "equals data-parallel training. T tree is the textbook binomial tree without pipelining "
        "(Thakur, Rabenseifner & Gropp 2005), not NCCL's pipelined double binary tree; zeropp's quantised "
        f"phases keep their int8/int4 width whatever the wire dtype ({data.config.comm_dtype}) is."),
        size=7.5)
    if "volume_table_nccl" in data.extra:
        _draw_tuned(w, data)
    elif "volume_table_priced" in data.extra:
        _draw_priced(w, data)


def _draw_priced(w: Writer, data: ReportData) -> None:
    """The schemes' step time under NCCL's cost model with the options given, beside the textbook ring's."""
    lib = nccl_words(data.config)[:4]  # NCCL, or RCCL on AMD GPUs
    w.paragraph(
        f"Each scheme's collectives priced with {lib}'s own cost model, one call per phase, with the "
        f"algorithm and protocol {lib} picks under the options given (--nccl-version, --nccl-algo, "
        "--nccl-proto, --nccl-env) or the topology's calibration (zerocalc fit --out), as zerocalc table "
        "prices them with the same; beside it, the textbook ring of the table above:", size=8.5)
    w.bullets(data.extra["volume_table_priced_notes"], size=8.5)
    rows = [[r.scheme, r.nccl_choice, format_seconds(r.time_s_nccl), format_seconds(r.time_s_ring),
             "n/a" if r.time_s_nccl != r.time_s_nccl else  # NaN: a scheme the library's model leaves unpriced
             f"{r.time_s_nccl / r.time_s_ring:.2f}" if r.time_s_ring > 0 else "-"]
            for r in data.extra["volume_table_priced"].itertuples(index=False)]
    w.table(["scheme", f"{lib}'s choice", f"T {lib}", "T ring", f"{lib} / ring"], rows, align="llrrr",
            wrap={1: 48}, size=7.5, caption=(
                "Table. " + config_line(data.config) + f". T {lib}: step communication time under {lib}'s "
                "model with its choices; T ring: the textbook ring's (AR all-reduce, AG all-gather, RS "
                "reduce-scatter, BC broadcast, R reduce, A2A all-to-all)."))


def _draw_tuned(w: Writer, data: ReportData) -> None:
    """The schemes' step time under NCCL's cost model, by itself and under the tuner rules or plugin given."""
    t = data.extra["volume_table_nccl"]
    from pathlib import Path

    ofi = data.config.ofi_tuner
    if ofi is None:
        w.paragraph(
            f"Under the tuner rules of {Path(data.config.nccl_tuner.source).name} (NCCL's example tuner "
            "plugin, given with --nccl-tuner or named by the topology): each scheme's collectives priced "
            "with NCCL's own cost model, one call per phase, first with the algorithm and protocol NCCL "
            "picks by itself, then with the pair and channels a matching rule forces (a call no rule matches "
            "keeps NCCL's choice, on the one channel the example plugin then leaves it).")
    else:
        w.paragraph(
            f"Under {ofi.name}'s tuner plugin (given with --ofi-tuner; {ofi.source}): each scheme's "
            "collectives priced with NCCL's own cost model, one call per phase, first with the algorithm and "
            "protocol NCCL picks by itself, then with the pair the plugin returns for the phase's "
            "communicator where it returns one (marked ^), on NCCL's own channels; where it returns none, "
            "NCCL's own choice.")
    w.bullets(data.extra["volume_table_nccl_notes"])
    rows = [[r.scheme, r.nccl_choice, format_seconds(r.time_s_nccl), r.tuned_choice,
             format_seconds(r.time_s_tuned),
             f"{r.time_s_tuned / r.time_s_nccl:.2f}" if r.time_s_nccl > 0 else "-"]
            for r in t.itertuples(index=False)]
    w.table(["scheme", "NCCL's choice", "T NCCL", "under the tuner", "T tuner", "tuner / NCCL"], rows,
            align="llrlrr", wrap={1: 34, 3: 34}, size=7.5, caption=(
                "Table. " + config_line(data.config) + ". T NCCL: step communication time under NCCL's "
                "model with its own choices; T tuner: under the tuner " +
                ("plugin's choices" if ofi is not None else "'s rules") + " (AR all-reduce, AG all-gather, "
                "RS reduce-scatter, BC broadcast, R reduce)."))
