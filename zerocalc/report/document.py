"""The PDF file: render the sections onto pages and write them, refusing paths that would lose data."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

from zerocalc.errors import ConfigError
from zerocalc.report.compute import collect
from zerocalc.report.config import DEFAULT_CONFIG, Progress, ReportConfig, ReportData
from zerocalc.report.layout import Writer
from zerocalc.report.page import RC
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
    """Lay the report out and write the PDF to ``path``; returns the number of pages."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    with matplotlib.rc_context(RC):
        w = Writer(FOOTER)
        draw_all(w, data, say)
        w.save(path, metadata=METADATA, progress=say)
        return len(w.pages)


def check_output(path: str | Path, config: ReportConfig = DEFAULT_CONFIG) -> Path:
    """The PDF path to write, refused (:class:`ConfigError`) where writing would lose data.

    An input trace, a directory, or an existing file that is not a PDF is never overwritten.
    """
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{out} is a directory; give a file name such as {out / 'review.pdf'}",
                          option="--output")
    target = out.resolve()
    for trace in config.traces:
        t = Path(trace).resolve()
        if target == t or (t.is_dir() and t in target.parents):
            raise ConfigError(f"{out} is (inside) the input trace {trace}; write the PDF elsewhere",
                              option="--output")
    if out.exists():
        with out.open("rb") as fh:
            head = fh.read(5)
        if head != b"%PDF-":
            raise ConfigError(f"refusing to overwrite {out}: it exists and is not a PDF", option="--output")
    return out


def write_report(path: str | Path, config: ReportConfig = DEFAULT_CONFIG,
                 progress: Progress | None = None) -> ReportData:
    """Collect and render: the whole report, written to ``path``.

    The PDF is written next to ``path`` under a temporary name and moved into place at the end, so
    an interrupted run leaves any earlier report intact; see :func:`check_output` for what is refused.
    """
    out = check_output(path, config)
    data = collect(config, progress)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    try:
        render(data, tmp, progress)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return data
