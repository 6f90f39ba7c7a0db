"""The fields of NCCL ``COLL`` lines pulled out of a block of a log by polars, vectorised.

polars (https://pola.rs) runs Rust's ``regex`` crate over a column of lines in native code
(``Series.str.extract_groups``): no Python object per line except the line itself and the few
distinct values of each few-valued field. It reads the lines where the ``host:pid:tid [dev] ``
prefix precedes ``NCCL INFO`` (NCCL's own layout, with or without a launcher's tag before it).
A block in which some line carries the ``opCount`` marker but not that form (no prefix, a
malformed line), or which is not valid UTF-8, is left to the ``re`` scanner
(:mod:`zerocalc.traces.nccl_log`), which reads every form and reports what it cannot read: the
rows are the same either way (tests/test_traces_nccl_engines.py compares the two on every
bundled log, on synthetic ones and on random lines).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

#: ASCII whitespace, as Python's ``\\s`` in a bytes pattern reads it (Rust's ``\\s`` is Unicode's).
_WS = r"\t\n\x0b\x0c\r "
_S = f"[^{_WS}]"
#: :data:`zerocalc.traces.nccl_log.COLL` with its prefix required, in the syntax of Rust's regex
#: crate, which has no look-behind: the host starts the line or follows whitespace or a colon
#: (``(?<![^\\s:])``), and the leftmost match takes the whole run of host characters, as Python's
#: lazy scan does. A line holds at most one place where the body matches (nccl_log's ``_TIERS``).
PATTERN = (
    f"(?:^|[{_WS}:])(?P<host>[^{_WS}:]+):(?P<pid>[0-9]{{1,18}}):(?P<tid>[0-9]{{1,18}})"
    r" \[(?P<dev>[0-9]{1,9})\] "
    r"NCCL INFO (?:\[[0-9]+\] )?(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]{1,15})"
    f" sendbuff {_S}+ recvbuff {_S}+ count (?P<count>[0-9]{{1,18}})"
    r" datatype (?P<datatype>[0-9]{1,9}) op (?P<redop>[0-9]{1,9}) root (?P<root>-?[0-9]{1,18})"
    f" comm (?P<comm>{_S}+)"
    r"(?: \[nranks=(?P<nranks>[0-9]{1,9})\])?"
    f" stream {_S}+"
    r"(?: task [0-9]+ globalrank (?P<globalrank>[0-9]{1,9}))?[ \t\r]*$"
)


def available() -> bool:
    """Whether polars can be imported.

    The reader scans a large log in one process per CPU (zerocalc.traces.reader), so polars is
    started with one thread unless ``POLARS_MAX_THREADS`` says otherwise (and unless something
    imported it first): a pool of threads per process would compete with the processes (measured
    on the synthetic 128-rank log, benchmarks/bench_scale.py: more CPU time in all, no less wall
    time).
    """
    if "polars" not in sys.modules:
        os.environ.setdefault("POLARS_MAX_THREADS", "1")
    try:
        import polars  # noqa: F401
    except ImportError:
        return False
    return True


def extract(text: bytes, end: int, line0: int, res: Any) -> tuple | None:
    """The calls of the block ``text[1:end]`` (whole lines, the first line ``line0``), coded
    into ``res``'s tables (:class:`~zerocalc.traces.nccl_log.Scan`); ``None`` when the block
    is left to the ``re`` scanner (see the module's docstring).

    Returns (codes of the few-valued fields, numbers: pid/count/opcount, the communicators joined
    by newlines, the calls' lines, the lines with the marker that are neither calls nor comments
    (``None`` if none), Init lines and TUNING lines (line from 0, bytes), newlines in ``text[:end]``).
    """
    import polars as pl

    from zerocalc.traces import nccl_log

    try:
        lines_text = text[1 : end - 1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = pl.Series("line", lines_text.split("\n"), dtype=pl.String)
    del lines_text
    marked = lines.str.contains(nccl_log.MARKER, literal=True)
    at = np.flatnonzero(marked.to_numpy())
    g = lines.filter(marked).str.extract_groups(PATTERN).struct.unnest()
    unmatched = None
    if g["op"].null_count():  # lines with the marker that are not calls in this form
        miss = g["op"].is_null().to_numpy()
        rest = lines.filter(marked).filter(miss)
        if rest.str.contains("NCCL INFO ", literal=True).any():  # maybe a call in another form: re's
            return None
        # not calls in any form: reported unless a comment, as the re scanner does
        comment = rest.str.strip_chars_start(" \t\n\r\x0b\x0c").str.starts_with("#").to_numpy()
        unmatched = at[miss][~comment].astype(np.int64) + line0
        at = at[~miss]
        g = g.filter(~miss)
    codes = {name: _codes(g[name], res.tables[name]) for name in nccl_log._FACTORS}
    numbers = {"pid": g["pid"].cast(pl.Int64).to_numpy(), "count": g["count"].cast(pl.Int64).to_numpy(),
               "opcount": g["opcount"].str.to_integer(base=16).cast(pl.Int64).to_numpy()}
    comm = g["comm"].str.join("\n").item().encode("utf-8") if len(g) else b""
    inits, tunings = [], []
    others = ~marked
    for marker, found in ((nccl_log._INIT_MARKER, inits), (nccl_log._TUNING_MARKER, tunings)):
        hits = np.flatnonzero((others & lines.str.contains(marker.decode(), literal=True)).to_numpy())
        for j in hits.tolist():
            found.append((j, lines[j].encode("utf-8")))
    return (codes, numbers, comm, at.astype(np.int64) + line0, unmatched, inits, tunings, len(lines) + 1)


def _codes(col: Any, table: Any) -> np.ndarray:
    """Codes of a field's values in ``table`` (bytes → code, growing), one lookup per distinct value."""
    import polars as pl

    values = col.unique(maintain_order=True).to_list()
    known = [v for v in values if v is not None]
    out = col.replace_strict(known, [table[v.encode("utf-8")] for v in known], default=None,
                             return_dtype=pl.Int32)
    if len(known) < len(values):
        out = out.fill_null(table[None])
    return out.to_numpy().astype(np.int32, copy=False)
