"""Section 1: the title, the short answer, and the question of DeepSpeed #4582 with its context."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from zerocalc.report.config import config_line
from zerocalc.report.sections import number, title

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


_QUESTION = """
    DeepSpeed issue #4582 ("Direct Correspondence between Gradient and Optimizer States to Reduce
    Communication", opened 2023-10-30, open, no maintainer answer) argues: in ZeRO stage 2 (P_os+g) a
    training step costs a ReduceScatter of the gradients (Ψ elements) plus an AllGather of the updated
    parameters (Ψ), 2Ψ in all. If each gradient were placed in the same partition as its optimizer-state
    shard, the ReduceScatter could be skipped and only the AllGather (Ψ) would remain: half the traffic.

    Two facts from the ZeRO paper (Rajbhandari et al., SC20) bear on it. §2.1: every rank runs forward and
    backward on a different micro-batch, and the update uses the gradient averaged over all ranks. §5.2:
    ZeRO-2 already reduces each gradient only onto the rank that owns the matching optimizer-state shard
    ("effectively a Reduce-Scatter"). So after the ReduceScatter the gradients are colocated with their
    optimizer state; the question is whether the ReduceScatter relocates data (and could be avoided) or
    computes the cross-rank sum (and cannot). This report answers it three ways: a symbolic derivation of
    the volume, time and memory of every scheme (sections {model} to {figures}); a simulation of ranks that
    really train with each scheme and are compared with data-parallel training (section {verdict}); and real
    traces checked against the model (section {validation}).
"""


def draw(w: Writer, data: ReportData) -> None:
    w.title("Can ZeRO-2 skip its reduce-scatter?",
            "Design review of DeepSpeed issue #4582 (colocating gradients with optimizer-state shards), "
            "derived, simulated and measured with zerocalc. Configuration: "
            + config_line(data.config) + ".")
    if "feasibility" in data.extra:
        from zerocalc.report.summary import in_short

        lead, bullets = in_short(data)
        w.box("In short", lead, bullets)
    w.heading(title("question"))
    numbers = {key: number(key) for key in ("model", "figures", "validation", "verdict")}
    for para in dedent(_QUESTION).format(**numbers).split("\n"):
        w.paragraph(para)


def dedent(text: str) -> str:
    """Prose written as an indented triple-quoted block → paragraphs joined into single lines."""
    paragraphs = textwrap.dedent(text).strip().split("\n\n")
    return "\n".join(" ".join(p.split()) for p in paragraphs)
