"""The nccl-tests sweep comparison of ``check``, as text, Markdown and CSV records: per size, the measured
and the predicted time, their ratio on a log bar, NCCL's choice (and who made it), and the marks of rows
an input states otherwise, measured unsteadily or failed; each sweep's ratio summary and its two ends.

Pure: the sweep dictionaries of :mod:`zerocalc.validate.sweep` in, strings out. Heavy imports stay inside the
functions, so that the command line starts fast.
"""

from __future__ import annotations


def _choice(row) -> str:
    """``Tree/Simple``, ``^`` when aws-ofi-nccl's tuner plugin chose it (:mod:`zerocalc.nccl.ofi_tuner`),
    ``*`` when calibrated, `` 2ch`` when a tuner imposed the channel count (:mod:`zerocalc.nccl.tuner`),
    `` host`` when the launching thread's floor sets the time
    (:func:`zerocalc.validate.host_launch.host_floor_s`)."""
    return (f"{row['algorithm']}/{row['protocol']}" + ("^" if row.get("ofi_tuner") else "")
            + ("*" if row["calibrated"] else "")
            + (f" {row['channels']}ch" if row.get("channels") else "")
            + (" host" if row.get("host_bound") else ""))


def _ratio_bar(ratio: float, width: int = 33) -> str:
    """``ratio`` on a log axis from 1/4 to 4 (``|`` at 1, ``:`` at 1/2 and 2), marked ``*``."""
    import math

    cells = [" "] * width
    mid = width // 2
    for mark, at in (("|", 1.0), (":", 0.5), (":", 2.0)):
        cells[mid + round(math.log(at, 4) * mid)] = mark
    if ratio > 0 and math.isfinite(ratio):
        x = math.log(ratio, 4) * mid
        i = mid + round(max(-mid, min(mid, x)))
        cells[i] = "*" if abs(x) <= mid else (">" if x > 0 else "<")
    return "".join(cells)


def _sweep_text(d: dict) -> str:
    from zerocalc.units import format_bytes, format_seconds

    rows = d["rows"]
    how = d.get("topology_how") or ""
    n_how = d.get("n_how") or ""
    ranks = f"{d['group_size']} ranks" + (f" ({n_how})" if n_how.startswith("from busbw") else "")
    if how.startswith("given"):  # a given topology is said only where the file's lines reshaped its nodes
        how = how.partition("; ")[2]
    op = d["op"] + (f" ({d['series']})" if d.get("series") else "")
    lib = d.get("library") or "NCCL"  # RCCL on AMD GPUs (zerocalc.validate.rccl)
    lines = [f"{d['file']}: {op} on {ranks}, {lib} {d['nccl_version']} "
             f"(tables of {d['nccl_tables']}), topology {d['topology']}" + (f", {how}" if how else "")
             + (f"; {d['also_in_file']}" if d.get("also_in_file") else "")]
    lines += [f"note: {t}" for t in d["notes"]]
    wide = max([16, *(len(_choice(r)) for r in rows)])  # a symmetric kernel's name runs past 16
    lines.append(f"  {'size':>10} {'measured':>10} {'predicted':>10} {'ratio':>7}  {lib + ' choice':<{wide}} "
                 f"[1/4{' ' * 5}1/2{' ' * 5}1{' ' * 7}2{' ' * 7}4]")
    for r in rows:
        lines.append(f"  {format_bytes(r['bytes']):>10} {format_seconds(r['measured_s']):>10} "
                     f"{format_seconds(r['predicted_s']):>10} {r['ratio']:>7.3f}  "
                     f"{_choice(r):<{wide}} "
                     f"[{_ratio_bar(r['ratio'])}]" + _unsteady_mark(r) + _wrong_mark(r)
                     + _stated_mark(r, lib))
    if rows:
        lines.append(f"  ratio: {_ratio_summary(rows)}"
                     + ("; * = calibrated (fit --out: α-β, or the model scaled)"
                        if any(r["calibrated"] for r in rows) else "")
                     + ("; ^ = chosen by aws-ofi-nccl's tuner plugin" if any(r.get("ofi_tuner") for r in rows)
                        else "")
                     + ("; Nch = channels the tuner imposes" if any("channels" in r for r in rows) else ""))
        lines += _ends_line(d)
        if any(r.get("unsteady") for r in rows):
            lines.append("  ! = the file's out-of-place and in-place times differ by more than 1.25×, which "
                         f"{lib}'s model cannot (it prices both alike): an unsteady measurement")
        if any(r.get("wrong") for r in rows):
            lines.append("  x = the file's #wrong cell counts elements that failed nccl-tests' check: the "
                         "call's data came out corrupted, its time is no measurement of the collective")
    return "\n".join(lines)


#: The columns of ``check --format csv`` on nccl-tests sweeps: the sweep's fields, then the row's, one line a
#: size (the JSON contract's names; ``in_place_s``, ``unsteady`` and ``wrong`` as the JSON rows hold them).
SWEEP_CSV_COLUMNS = ("file", "op", "series", "group_size", "library", "nccl_version", "topology", "bytes",
                     "measured_s", "predicted_s", "ratio", "algorithm", "protocol", "nccl_s", "in_place_s",
                     "unsteady", "wrong", "calibrated")


def sweep_records(sweeps: list[dict]) -> list[dict]:
    """One record a size of every sweep (``check --format csv``), in :data:`SWEEP_CSV_COLUMNS`; a sweep
    the library's model does not price has no rows and so no record."""
    out = []
    for d in sweeps:
        head = {k: d.get(k) for k in SWEEP_CSV_COLUMNS[:7]}
        head["library"] = head["library"] or "NCCL"
        for r in d["rows"]:
            out.append({**head, **{k: r.get(k) for k in SWEEP_CSV_COLUMNS[7:]}})
    return out


def sweeps_markdown(sweeps: list[dict]) -> str:
    """``check --format markdown`` on nccl-tests sweeps: each sweep's line and notes as a list, then a table
    of its sizes (measured, predicted, ratio, the library's choice) and its ratios' summary."""
    from zerocalc.units import format_bytes, format_seconds

    blocks = []
    for d in sweeps:
        lib = d.get("library") or "NCCL"
        op = d["op"] + (f" ({d['series']})" if d.get("series") else "")
        lines = [f"**{d['file']}**: {op} on {d['group_size']} ranks, {lib} {d.get('nccl_version')}, topology "
                 f"{d.get('topology', 'not chosen')}", ""]
        lines += [f"- {t}".replace("|", "/") for t in d.get("notes") or []]
        if d["rows"]:
            lines += ["", f"| size | measured | predicted | ratio | {lib} choice |",
                      "|---:|---:|---:|---:|---|"]
            lines += [f"| {format_bytes(r['bytes'])} | {format_seconds(r['measured_s'])} | "
                      f"{format_seconds(r['predicted_s'])} | {r['ratio']:.3f} | {_choice(r)}"
                      f"{_unsteady_mark(r)}{_wrong_mark(r)} |" for r in d["rows"]]
            lines += ["", f"ratio (predicted / measured): {_ratio_summary(d['rows'])}"]
            lines += [y for x in _ends_line(d) for y in ("", x.strip())]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _ends_line(d: dict) -> list[str]:
    """``  ends: fastest 32 B in 34.6 µs (predicted 35.2 µs); 17.18 GB at 366 GB/s of bus bandwidth
    (predicted 382 GB/s)``: the latency floor and the bus bandwidth the cluster reaches, against the model
    (:func:`zerocalc.validate.sweep_summary.ends`); none where every size failed nccl-tests' check."""
    from zerocalc.units import format_bytes, format_seconds
    from zerocalc.validate.sweep_summary import ends

    e = ends(d["rows"], d["op"], d["group_size"])
    if e is None:
        return []
    fastest = f"{format_bytes(e['fastest_bytes'])} in {format_seconds(e['fastest_measured_s'])}"
    return [f"  ends: fastest {fastest} (predicted {format_seconds(e['fastest_predicted_s'])}); "
            f"{format_bytes(e['largest_bytes'])} at "
            f"{e['largest_measured_busbw_GBps']:.3g} GB/s of bus bandwidth (predicted "
            f"{e['largest_predicted_busbw_GBps']:.3g} GB/s)"]


def _ratio_summary(rows: list[dict]) -> str:
    """``min 0.268, median 1.01, max 1.1; at the median size 1.06`` of a sweep's rows (the median size's:
    the lower middle row by size when the count is even, :func:`zerocalc.validate.sweep_summary.
    ratio_stats`), over the sizes that passed nccl-tests' check, said where some failed."""
    from zerocalc.validate.sweep_summary import passed_rows, ratio_stats

    s = ratio_stats(rows)
    failed = len(rows) - len(passed_rows(rows))
    if failed == len(rows):
        return f"none (each of the {failed} sizes failed nccl-tests' check)"
    return (f"min {s['min']:.3g}, median {s['median']:.3g}, max {s['max']:.3g}; "
            f"at the median size {s['median_size']:.3g}"
            + (f" (the {len(rows) - failed} sizes that passed nccl-tests' check; x rows left out)" if failed
               else ""))


def _stated_mark(r: dict, lib: str = "NCCL") -> str:
    """`` NCCL ran Ring/Simple`` (``lib``: the library, RCCL on AMD GPUs) on a row whose file's TUNING lines
    state another choice than the model's (:func:`zerocalc.validate.sweep_info.stated_choices`), else ''."""
    s = r.get("nccl_stated")
    if not s or (s["algorithm"], s["protocol"]) == (r["algorithm"], r["protocol"]):
        return ""
    return f" {lib} ran {s['algorithm']}/{s['protocol']}"


def _wrong_mark(r: dict) -> str:
    """`` x 18134 wrong`` on a row whose result failed nccl-tests' check (:func:`zerocalc.validate.sweep.
    _checked`), else ''."""
    return f" x {r['wrong']} wrong" if r.get("wrong") else ""


def _unsteady_mark(r: dict) -> str:
    """`` ! out-of-place 1.91× in-place`` on an unsteady row (:mod:`zerocalc.validate.sweep`), else ''."""
    if not r.get("unsteady"):
        return ""
    return f" ! out-of-place {r['measured_s'] / r['in_place_s']:.2f}× in-place"
