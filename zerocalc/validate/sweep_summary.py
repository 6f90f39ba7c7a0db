"""The summary of checked nccl-tests sweeps: per sweep its ratios (predicted / measured) and how many of
its sizes lie within the bands issue 11 holds NCCL's model to, and the count of sweeps within them.

Pure: the JSON sweeps of ``check`` (:meth:`zerocalc.validate.sweep.SweepComparison.as_dict` with the
file, topology and series ``check`` adds) in, plain dicts out. :func:`ratio_stats` is the one place a
sweep's median size is taken (the lower middle row by size when the count is even), for the summary, the
``ratio:`` line under each sweep's table and :meth:`~zerocalc.validate.sweep.SweepComparison.
median_size_ratio`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

EVERY_SIZE_BAND = (0.5, 2.0)
"""Predicted / measured at every size of a sweep: within 0.5–2× (issue 11), ends included."""

MEDIAN_SIZE_BAND = (0.8, 1.25)
"""Predicted / measured at a sweep's median size: within 0.8–1.25× (issue 11), ends included."""


def ends(rows: Sequence[Mapping], op: str, n: int) -> dict | None:
    """What the cluster does at a sweep's two ends against the model, over the sizes that passed
    nccl-tests' check (:func:`passed_rows`): its fastest call, the latency floor (the size whose measured
    time is least, the smaller of a tie; not the smallest size, whose call often carries a first call's
    cost), measured and predicted; and the largest size's bus bandwidth measured and predicted (nccl-tests'
    busbw: size / time × :func:`zerocalc.validate.accounting.busbw_factor`), in GB/s, keyed by
    :data:`ENDS`. ``None`` where no size passed."""
    from zerocalc.validate.accounting import busbw_factor

    rows = sorted((r for r in passed_rows(rows) if r["measured_s"] > 0 and r["predicted_s"] > 0),
                  key=lambda r: r["bytes"])
    if not rows:
        return None
    fast, large = min(rows, key=lambda r: r["measured_s"]), rows[-1]
    factor = busbw_factor(op, n)
    return dict(zip(ENDS, (fast["bytes"], fast["measured_s"], fast["predicted_s"], large["bytes"],
                           large["bytes"] / large["measured_s"] * factor / 1e9,
                           large["bytes"] / large["predicted_s"] * factor / 1e9), strict=True))


#: The keys of :func:`ends`, as the JSON summary holds them (null where no size passed).
ENDS = ("fastest_bytes", "fastest_measured_s", "fastest_predicted_s", "largest_bytes",
        "largest_measured_busbw_GBps", "largest_predicted_busbw_GBps")


def median_size_row(rows: Sequence[Mapping]) -> Mapping | None:
    """The row at a sweep's median size: index ``(n - 1) // 2`` of its rows sorted by ``bytes`` (the lower
    middle when the count is even); ``None`` for no rows."""
    by_size = sorted(rows, key=lambda r: r["bytes"])
    return by_size[(len(by_size) - 1) // 2] if by_size else None


def passed_rows(rows: Sequence[Mapping]) -> list[Mapping]:
    """The rows whose result passed nccl-tests' check: all but those whose ``wrong`` counts elements above 0
    (:func:`zerocalc.validate.sweep.wrong_notes`: a failed call's time is not the collective's). The one
    rule the ratios of the summary, of the ``ratio:`` line and of ``fit`` leave failed sizes out by."""
    return [r for r in rows if not r.get("wrong")]


def ratio_stats(rows: Sequence[Mapping]) -> dict[str, float]:
    """``min``, ``median``, ``max`` of a sweep's ratios and ``median_size``, the ratio at its median size
    (:func:`median_size_row`), over the sizes that passed nccl-tests' check (:func:`passed_rows`); NaN each
    where none did."""
    import numpy as np

    rows = passed_rows(rows)
    if not rows:
        return dict.fromkeys(("min", "median", "max", "median_size"), math.nan)
    ratios = np.array([r["ratio"] for r in rows], dtype=float)
    return {"min": float(ratios.min()), "median": float(np.median(ratios)), "max": float(ratios.max()),
            "median_size": float(median_size_row(rows)["ratio"])}


def _within(ratio, band: tuple[float, float]) -> bool:
    """``ratio`` is a number inside ``band`` (ends included); a missing or non-finite ratio is not."""
    return isinstance(ratio, (int, float)) and math.isfinite(ratio) and band[0] <= ratio <= band[1]


def sweep_entry(index: int, sweep: Mapping, hosts: int | None = None) -> dict:
    """One sweep's line of the summary: where it is in ``sweeps`` (``index``), its file, op (``series``
    too where its file holds several), ranks, ``hosts`` (``None`` where its lines do not list every rank's
    host), library and version priced, topology, rows, ratios (:func:`ratio_stats`), ``rows_in_band``
    (within :data:`EVERY_SIZE_BAND`), ``unsteady_rows``, ``failed_rows`` (sizes that failed nccl-tests'
    check), whether every size and the median size are within their bands, and the sweep's :func:`ends`
    (null where no size passed the check). The ratios and bands are those of the sizes that passed the
    check (:func:`passed_rows`): a failed call's time is no measurement of the collective. A sweep the
    model does not price, or whose every size failed, is within neither."""
    rows = sweep.get("rows") or []
    passed = passed_rows(rows)
    stats = ratio_stats(rows)
    in_band = sum(_within(r.get("ratio"), EVERY_SIZE_BAND) for r in passed)
    return {"index": index, "file": sweep.get("file"), "op": sweep.get("op"), "series": sweep.get("series"),
            "group_size": sweep.get("group_size"), "hosts": hosts, "library": sweep.get("library") or "NCCL",
            "nccl_version": sweep.get("nccl_version"), "topology": sweep.get("topology"), "rows": len(rows),
            "median_size_ratio": stats["median_size"], "min_ratio": stats["min"],
            "median_ratio": stats["median"], "max_ratio": stats["max"], "rows_in_band": in_band,
            "unsteady_rows": sum(bool(r.get("unsteady")) for r in rows),
            "failed_rows": len(rows) - len(passed),
            "every_size_in_band": bool(passed) and in_band == len(passed),
            "median_size_in_band": _within(stats["median_size"], MEDIAN_SIZE_BAND),
            **(ends(rows, sweep.get("op"), sweep.get("group_size") or 1) or dict.fromkeys(ENDS))}


def sweeps_summary(sweeps: Sequence[Mapping], hosts: Sequence[int | None] | None = None) -> dict:
    """The summary of ``check``'s sweeps (JSON ``summary``): the bands, a :func:`sweep_entry` a sweep
    (``hosts``: each sweep's host count, or ``None``), and ``totals``: sweeps, those priced (with rows),
    those within :data:`EVERY_SIZE_BAND` at every size, within :data:`MEDIAN_SIZE_BAND` at the median size,
    within both; rows, rows within the band, unsteady rows, rows that failed nccl-tests' check."""
    hosts = list(hosts) if hosts is not None else [None] * len(sweeps)
    entries = [sweep_entry(i, d, h) for i, (d, h) in enumerate(zip(sweeps, hosts, strict=True))]
    totals = {"sweeps": len(entries), "priced": sum(e["rows"] > 0 for e in entries),
              "every_size_in_band": sum(e["every_size_in_band"] for e in entries),
              "median_size_in_band": sum(e["median_size_in_band"] for e in entries),
              "both_bands": sum(e["every_size_in_band"] and e["median_size_in_band"] for e in entries),
              "rows": sum(e["rows"] for e in entries),
              "rows_in_band": sum(e["rows_in_band"] for e in entries),
              "unsteady_rows": sum(e["unsteady_rows"] for e in entries),
              "failed_rows": sum(e["failed_rows"] for e in entries)}
    return {"every_size_band": list(EVERY_SIZE_BAND), "median_size_band": list(MEDIAN_SIZE_BAND),
            "sweeps": entries, "totals": totals}
