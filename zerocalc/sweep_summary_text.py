"""The closing summary of ``check`` on several nccl-tests sweeps, as text and as Markdown: a line a sweep
(file, op, ranks, hosts, version priced, topology, rows, ratios, rows within 0.5-2x, unsteady rows, rows
that failed nccl-tests' check, the largest size's bus bandwidth measured / predicted) and the count of
sweeps within issue 11's bands; the ratios and bands are those of the sizes that passed the check.

Pure: the summary of :func:`zerocalc.validate.sweep_summary.sweeps_summary` in, strings out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: A file's name is shown without its folder, and past this many characters with its middle left out (the
#: JSON ``summary`` keeps the whole path).
NAME_CHARS = 56

#: (header, field or function of a summary line, right-aligned)
_COLUMNS = (
    ("#", lambda e: str(e["index"] + 1), True),
    ("file", lambda e: _short_name(e["file"]), False),
    ("op", lambda e: e["op"] + (f" ({e['series']})" if e.get("series") else ""), False),
    ("ranks", lambda e: str(e["group_size"]), True),
    ("hosts", lambda e: "-" if e["hosts"] is None else str(e["hosts"]), True),
    ("priced as", lambda e: f"{e['library']} {e['nccl_version']}", False),
    ("topology", lambda e: str(e["topology"] or "-"), False),
    ("rows", lambda e: str(e["rows"]), True),
    ("median size", lambda e: _ratio(e["median_size_ratio"], e), True),
    ("min", lambda e: _ratio(e["min_ratio"], e), True),
    ("max", lambda e: _ratio(e["max_ratio"], e), True),
    ("in 0.5-2x", lambda e: f"{e['rows_in_band']}/{e['rows'] - e.get('failed_rows', 0)}", True),
    ("unsteady", lambda e: str(e["unsteady_rows"]), True),
    ("failed", lambda e: str(e.get("failed_rows", 0)), True),
    ("busbw GB/s", lambda e: _busbw(e), True),
    ("within", lambda e: _within(e), False),
)


def _short_name(path) -> str:
    """``path`` without its folder; a name past :data:`NAME_CHARS` keeps its start and end around ``…``."""
    name = os.path.basename(str(path or "-")) or str(path)
    if len(name) <= NAME_CHARS:
        return name
    head = (NAME_CHARS - 1) // 2
    return name[:head] + "…" + name[-(NAME_CHARS - 1 - head):]


def _ratio(x, e: Mapping) -> str:
    """``x`` to 3 places; ``-`` for a sweep without rows, or whose every size failed nccl-tests' check."""
    return f"{x:.3f}" if e["rows"] and x is not None and x == x else "-"


def _within(e: Mapping) -> str:
    """Which of the two bands the sweep is within: ``both``, ``every size``, ``median size``, ``neither``;
    ``not priced`` for a sweep without rows."""
    if not e["rows"]:
        return "not priced"
    every, median = e["every_size_in_band"], e["median_size_in_band"]
    return {(True, True): "both", (True, False): "every size", (False, True): "median size"}.get(
        (every, median), "neither")


def _count_line(summary: Mapping) -> str:
    """``1 of 2 sweeps within 0.5-2x at every size; 2 within 0.8-1.25x at the median size; 1 within both``."""
    t = summary["totals"]
    (lo, hi), (mlo, mhi) = summary["every_size_band"], summary["median_size_band"]
    return (f"{t['every_size_in_band']} of {t['sweeps']} sweeps within {lo:g}-{hi:g}x at every size; "
            f"{t['median_size_in_band']} within {mlo:g}-{mhi:g}x at the median size; "
            f"{t['both_bands']} within both")


def _busbw(e: Mapping) -> str:
    """``366/382``: the largest size's bus bandwidth measured / predicted (the sweep's ends); ``-`` where
    none stands (no rows, or every size failed nccl-tests' check)."""
    m, p = e.get("largest_measured_busbw_GBps"), e.get("largest_predicted_busbw_GBps")
    return "-" if m is None or p is None else f"{m:.3g}/{p:.3g}"


def _failed_words(summary: Mapping) -> str:
    """``, over the sizes that passed nccl-tests' check`` where some size failed it, else ''."""
    return ", over the sizes that passed nccl-tests' check" if summary["totals"].get("failed_rows") else ""


def _cells(summary: Mapping) -> list[list[str]]:
    return [[get(e) for _, get, _ in _COLUMNS] for e in summary["sweeps"]]


def summary_text(summary: Mapping) -> str:
    """The summary as a fixed-width table, each column as wide as its widest cell, then the count line."""
    cells = _cells(summary)
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, (h, _, _) in enumerate(_COLUMNS)]

    def line(values) -> str:
        padded = (v.rjust(w) if right else v.ljust(w) for v, w, (_, _, right) in zip(values, widths, _COLUMNS,
                                                                                       strict=True))
        return ("  " + "  ".join(padded)).rstrip()

    head = f"summary of {len(cells)} sweeps (ratio = predicted / measured{_failed_words(summary)})"
    return "\n".join([head, line([h for h, _, _ in _COLUMNS]), *map(line, cells), _count_line(summary)])


def summary_markdown(summary: Mapping) -> str:
    """The summary as a Markdown table, then the count line."""
    heads = [h for h, _, _ in _COLUMNS]
    rows = [f"| {' | '.join(v.replace('|', '/') for v in c)} |" for c in _cells(summary)]
    head = f"**summary of {len(rows)} sweeps** (ratio = predicted / measured{_failed_words(summary)})"
    return "\n".join([head, "",
                      f"| {' | '.join(heads)} |",
                      "|" + "|".join("---:" if right else "---" for _, _, right in _COLUMNS) + "|",
                      *rows, "", _count_line(summary)])
