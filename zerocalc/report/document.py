"""The PDF file: render the sections onto pages and write them, refusing paths that would lose data."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

from zerocalc.report.compute import collect
from zerocalc.report.config import DEFAULT_CONFIG, Progress, ReportConfig, ReportData
from zerocalc.report.inputs import check_output, check_traces
from zerocalc.report.layout import Writer
from zerocalc.report.page import RC, shared_mathtext_layouts
from zerocalc.report.sections import draw_all

FOOTER = "zerocalc design review · DeepSpeed #4582"

#: PDF metadata: fixed strings and no creation date, so the same inputs give the same file.
METADATA: dict[str, str | None] = {
    "Title": "Can ZeRO-2 skip its reduce-scatter? A design review of DeepSpeed #4582",
    "Author": "zerocalc",
    "Subject": "ZeRO communication volume, time and memory; the colocated-gradient proposal",
    "Creator": "zerocalc",
    "Producer": "zerocalc (matplotlib)",
    "CreationDate": None,
}


def render(data: ReportData, path: str | Path, progress: Progress | None = None) -> int:
    """Lay the report out and write the PDF to ``path`` (in a directory that exists: none is created);
    returns the number of pages."""
    path = Path(path)
    say = progress or (lambda _msg: None)
    with matplotlib.rc_context(RC), shared_mathtext_layouts():
        w = Writer(FOOTER)
        draw_all(w, data, say)
        w.save(path, metadata=METADATA, progress=say)
        return len(w.pages)


def write_report(path: str | Path, config: ReportConfig = DEFAULT_CONFIG,
                 progress: Progress | None = None) -> ReportData:
    """Collect and render: the whole report, written to ``path``.

    The PDF is written next to ``path`` under a temporary name and moved into place at the end, so
    an interrupted run leaves any earlier report intact. The path and the traces are checked first
(:func:`~zerocalc.report.inputs.check_output`, :func:`~zerocalc.report.inputs.check_traces`); no
directory is created.
    """
    out = check_output(path, config)
    check_traces(config.traces)
    data = collect(config, progress)
    tmp = out.with_name(f".{out.name}.partial")
    try:
        render(data, tmp, progress)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return data
