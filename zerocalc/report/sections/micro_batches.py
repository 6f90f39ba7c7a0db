"""Section: gradient accumulation, bytes per optimizer step against micro-batches per implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from zerocalc.report.sections import title

if TYPE_CHECKING:
    from zerocalc.report.config import Progress, ReportConfig, ReportData
    from zerocalc.report.layout import Writer

#: (scheme, gradient-sync mode, label) of the lines: the implementations whose rules differ.
LINES: tuple[tuple[str, str, str], ...] = (
    ("deepspeed-zero1", "every", "deepspeed-zero1"),
    ("deepspeed-zero2", "every", "deepspeed-zero2"),
    ("deepspeed-zero3", "every", "deepspeed-zero3"),
    ("fsdp-full-shard", "every", "fsdp-full-shard"),
    ("fsdp-full-shard", "boundary", "fsdp-full-shard (no sync)"),
    ("dp", "every", "dp (DDP)"),
    ("dp", "boundary", "dp (DDP no_sync)"),
)
MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


def collect(config: ReportConfig, data: ReportData, say: Progress) -> None:
    """Each line's bytes per optimizer step at the report's Ψ, N and dtype, for each micro-batch count."""
    from zerocalc.evaluate import evaluate

    say("pricing gradient accumulation")
    frames = []
    for scheme, sync, label in LINES:
        for k in MICRO_BATCHES:
            df = evaluate([scheme], psi=config.psi, n=config.n, gpus_per_node=config.gpus_per_node,
                          topology=config.topology, comm_dtype=config.comm_dtype, k=config.k,
                          micro_batches=k, grad_sync=sync, tp=config.tp, pp=config.pp)
            frames.append(df.assign(label=label))
    data.extra["micro_batches"] = pd.concat(frames, ignore_index=True)


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc import plots
    from zerocalc.schemes import get_scheme
    from zerocalc.units import format_bytes

    c = data.config
    df = data.extra["micro_batches"]
    w.heading(title("micro_batches"))
    w.paragraph(
        "With k micro-batches per optimizer step (gradient accumulation) the implementations part ways. "
        "DeepSpeed's engine (deepspeed/runtime/engine.py, allreduce_gradients: \"ZeRO stage >= 2 "
        "communicates during non gradient accumulation boundaries as well\") all-reduces ZeRO-2's gradients "
        "in every micro-batch but ZeRO-1's only at the boundary, so ZeRO-2 sends k times ZeRO-1's gradient "
        "traffic. ZeRO-3 gathers in every micro-batch's forward (again in backward only beyond "
        "stage3_max_reuse_distance) and reduce-scatters every micro-batch. DDP and FSDP reduce every "
        "micro-batch unless no_sync() / set_requires_gradient_sync(False) holds the gradients back until "
        "the last one; FSDP still gathers its parameters in every micro-batch, and keeps the unsharded "
        "gradients in the meantime. The parameter all-gather of ZeRO-1/2 follows the update, once per step.")
    w.figure(4.1, lambda sf: plots.plot_bytes_vs_micro_batches(df, fig=sf), caption=(
        f"Bytes one rank sends per optimizer step (left, log scale) and per micro-batch (right) against "
        f"the micro-batches per step, at Ψ = {c.psi:,.0f}, {c.n_words}, {c.comm_dtype}, ring algorithms."))
    k = 8
    rows = []
    for scheme, sync, label in LINES:
        one = df[(df["label"] == label) & (df["micro_batches"] == 1)]["bytes_per_rank"].iloc[0]
        at_k = df[(df["label"] == label) & (df["micro_batches"] == k)]["bytes_per_rank"].iloc[0]
        s = get_scheme(scheme)
        runs = ", ".join(f"{ph.collective.value} {'×k' if ph.runs(sync) != 1 else '×1'}" for ph in s.phases)
        rows.append([label, runs, format_bytes(float(one)), format_bytes(float(at_k)),
                     f"{float(at_k) / float(one):.2f}" if one else "-"])
    w.table(["implementation", "collectives per optimizer step", "k = 1", f"k = {k}", "ratio"], rows,
            align="llrrr", size=7.5, caption=f"Per rank per optimizer step at Ψ = {c.psi:,.0f}, {c.n_words}.")
