"""The trace commands: ``check`` (measured bytes against every scheme; nccl-tests sweeps against
NCCL's cost model), ``fit`` (α-β from measured timings; NCCL's model calibrated into a topology TOML)
and ``trace summary`` (the calls of each rank and step). Each only wires options to library calls;
the sweeps' part of ``check`` and ``fit`` is :mod:`zerocalc.cli.sweep_commands` (``fit --out``:
:mod:`zerocalc.cli.sweep_fit`).
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from zerocalc.cli.application import _echo_err
from zerocalc.cli.check_options import (
    _check_options,
    _local_register,
    _sweep_options_refused,
    _trace_nccl,
    _trace_options_refused,
)
from zerocalc.cli.options import (
    _MODEL_HELP,
    _NCCL_ENV_HELP,
    _TRACE_FORMAT_HELP,
    _TUNER_HELP,
    NcclAlgoOption,
    NcclEnvOption,
    NcclProtoOption,
    _at_least,
    _json_default,
    _nan_to_none,
    _read_traces,
    _trace_format,
    model_psi,
    output_format,
)
from zerocalc.cli.sweep_commands import _sweep_check
from zerocalc.cli.sweep_dirs import per_rank_traces, sweep_paths, sweeps_needed
from zerocalc.cli.sweep_fit import _fit_out
from zerocalc.rendering import (
    _check_markdown,
    _check_rows,
    _check_text,
    _plural,
    _runs_text,
    _skip_notes,
)


def check_cmd(
    traces: Annotated[list[str], typer.Argument(
        help="Trace files (one per rank) or a directory; nccl-tests outputs or NCCL Inspector logs, or a "
             "directory of them.")],
    psi: Annotated[str | None, typer.Option("--psi", help="Parameter count Ψ (7.5e9, 25.5M); "
                                            "default: inferred.")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Data-parallel degree N; default: inferred.")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Steps, when unmarked.")] = None,
    scheme: Annotated[list[str] | None, typer.Option("--schemes", "--scheme", help="Schemes to compare "
                                                     "(repeat or comma-separate).")] = None,
    micro_batches: Annotated[int | None, typer.Option("--micro-batches", help="Micro-batches per optimizer "
                                                      "step; default: inferred.")] = None,
    reuse_distance: Annotated[float | None, typer.Option(
        "--reuse-distance", help="deepspeed-zero3: stage3_max_reuse_distance the run used, parameter "
                                 "elements; default: each regime tried (kept for backward, gathered "
                                 "again) and the one that matches said.")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Element type of calls the trace records "
                                              "none for.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", help="Ranks per node "
                                                      "(default: N up to 8).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json, csv or markdown.")] = "table",
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first unreadable line or "
                                                          "entry.")] = False,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Read the traces on a running Dask "
                                                  "cluster (tcp://HOST:PORT; zerocalc[dask]).")] = None,
    topology: Annotated[str | None, typer.Option(
        "--topology", help="nccl-tests sweeps: compare each size with NCCL's cost model on this preset or "
                           "TOML file (default: the preset the file's '#  Rank' device lines "
                           "describe; NCCL Inspector logs: required); traces: time their calls by NCCL's "
                           "model on it, each group on the nodes its ranks fall on (rank r on node r // "
                           "--gpus-per-node, default the topology's).")] = None,
    nccl_version: Annotated[str | None, typer.Option(
        "--nccl-version", help="NCCL version to price (default: the one the file states, else the latest "
                               "modelled).")] = None,
    nccl_algo: NcclAlgoOption = None,
    nccl_proto: NcclProtoOption = None,
    nccl_env: NcclEnvOption = None,
    nccl_tuner: Annotated[str | None, typer.Option("--nccl-tuner", help=_TUNER_HELP)] = None,
    ofi_tuner: Annotated[str | None, typer.Option(
        "--ofi-tuner", help="nccl-tests sweeps: price under the tuner plugin of this aws-ofi-nccl release "
                            "(1.9.0-1.21.1) [default: the one the file's NCCL INFO lines show loaded]."
    )] = None,
    model: Annotated[str | None, typer.Option("--model", help=_MODEL_HELP)] = None,
    local_register: Annotated[str | None, typer.Option(
        "--local-register", help="nccl-tests sweeps: the -R (--local_register) the run used: 0, 1 (local) "
                                 "or 2 (symmetric: NCCL 2.27+ runs all-reduce, all-gather and reduce-scatter "
                                 "on its symmetric kernels inside one NVLink domain) [default: the one its "
                                 "command line gives, else 0].")] = None,
) -> None:
    """Measure bytes per rank per step in real traces and compare them with every scheme (with
    --topology, also time their calls by NCCL's cost model there); compare nccl-tests sweeps size by
    size with NCCL's cost model (on --topology, else on the preset the file's device lines describe),
    and NCCL Inspector logs the same way, each communicator's calls a sweep of the sizes it ran."""
    fmt = output_format(fmt, ("table", "json", "csv", "markdown"))
    register = _local_register(local_register)
    sweeps = sweep_paths(traces)  # nccl-tests files, or a directory of them
    traces_timed = topology is not None and not sweeps and per_rank_traces(traces)
    if (topology is not None and not traces_timed) or sweeps:
        if sweeps:  # files read as sweeps: what only a check of traces reads is refused (not --scheduler:
            # where the traces are read changes no answer, so a sweep read here stands for it)
            _trace_options_refused({"--psi": psi, "--steps": steps, "--schemes": scheme,
                                    "--micro-batches": micro_batches, "--reuse-distance": reuse_distance,
                                    "--dtype": dtype, "--gpus-per-node": gpus_per_node, "--model": model})
        _sweep_check(sweeps or sweeps_needed(traces), topology, nccl_version, nccl_algo, nccl_proto, n, fmt,
                     strict, nccl_tuner, ofi_tuner, local_register=register, nccl_env=nccl_env)
        return
    _sweep_options_refused(ofi_tuner, register, nccl_env)
    names = _check_options(nccl_version, nccl_tuner, micro_batches, reuse_distance, scheme, gpus_per_node,
                           timed=traces_timed)
    psi_count, _ = model_psi(psi, model)
    nccl = _trace_nccl(topology, nccl_version, nccl_algo, nccl_proto) if traces_timed else None
    _import_model_meanwhile()
    ts, res = _read_and_check(traces if len(traces) > 1 else traces[0], strict, scheduler, fold=steps is None,
                              run=lambda ts, w: _check()(
                                  ts.table, psi=psi_count, n=n, steps=steps, dtype=dtype, schemes=names,
                                  meta=ts.meta, gpus_per_node=gpus_per_node, micro_batches=micro_batches,
                                  reuse_distance=reuse_distance, weights=w, nccl=nccl))
    _write_check(ts, res, fmt)


def _write_check(ts, res, fmt: str) -> None:
    """The check's result on stdout: a CSV row per scheme, markdown, JSON (with the skipped lines and
    files) or text. The text and markdown note the skipped lines and what the reader left out (files that
    are no trace, subdirectories, a path given twice: ``ts.notes``, as ``trace summary`` says them); beside
    CSV and JSON those notes go to stderr."""
    read = [*ts.notes, *_skip_notes(ts.skipped)]
    if fmt == "csv":
        import pandas as pd

        _notes_to_stderr(ts.notes)
        typer.echo(pd.DataFrame(_check_rows(res)).to_csv(index=False), nl=False)
    elif fmt == "markdown":
        typer.echo(_check_markdown(res, read))
    elif fmt == "json":
        import json

        _notes_to_stderr(ts.notes)
        d = res.as_dict()
        d["skipped_lines"] = {"count": ts.skipped.count,
                              "examples": [list(e) for e in ts.skipped.examples]}
        d["skipped_files"] = dict(ts.skipped_files)
        typer.echo(json.dumps(_nan_to_none(d), indent=2, allow_nan=False, default=_json_default))
    else:
        typer.echo(_check_text(res, read))


def _notes_to_stderr(notes) -> None:
    for note in notes:
        typer.echo(f"note: {note}", err=True)


def _import_model_meanwhile() -> None:
    """Import the check (pandas, the schemes' numbers: :mod:`zerocalc.validate.numeric`, no sympy) on a
    thread while the traces are read: the read of a large log spends most of its time in polars and
    numpy, which release the interpreter, so the imports cost the check little of its wall time
    (benchmarks/bench_scale.py). The check imports them again, waiting for the thread if need be; the
    thread is not a daemon, so an early exit waits for it rather than stopping it mid-import."""
    import threading

    def imports() -> None:
        try:
            for name in ("zerocalc.validate", "zerocalc.validate.numeric_table"):
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- raised again, in its place, by the check's own import
            return

    threading.Thread(target=imports).start()


def _check():
    """:func:`zerocalc.validate.check`, imported when first needed."""
    from zerocalc.validate import check

    return check


def _read_and_check(paths, strict: bool, scheduler: str | None, fold: bool, run):
    """Read the traces and ``run(trace set, weights)`` on them: NCCL logs with their repeated steps
    folded (:func:`zerocalc.traces.reader.read_folded`) and measured with the weights of the calls
    kept; read in full (weights None) when ``fold`` is false (``--steps`` counts the full trace's
    steps), and every call's table made from the sequences read where the folded calls cannot be
    shown to give the full trace's answer (:class:`~zerocalc.validate.folded.Unfoldable`). Returns
    the trace set and the result."""
    if fold:
        from zerocalc.traces.progress import terminal_meter
        from zerocalc.traces.reader import read_folded

        meter = terminal_meter()
        try:
            ts, folded = read_folded(paths, strict=strict, scheduler=scheduler, progress=meter)
        finally:
            if meter is not None:
                meter.close()
        if folded is None:
            return ts, run(ts, None)
        # imported after the read (zerocalc.validate imports pandas: not before the read's workers start)
        from zerocalc.validate.folded import Unfoldable

        try:
            return ts, run(ts, folded.weights())
        except Unfoldable:  # every call's table, from the sequences already read
            del ts
            ts = folded.full()
            return ts, run(ts, None)
    ts = _read_traces(paths, strict=strict, scheduler=scheduler)
    return ts, run(ts, None)


def _missing_facts(runs: list[dict], op: str | None, ranks: int | None) -> str:
    """What nccl-tests rows do not say and which option supplies it ("" when nothing is missing)."""
    missing = {m for r in runs for m in r.get("missing", ())}
    need = ["the collective (no <op>_perf name or header in the file: give --op)" for _ in [0]
            if "op" in missing and op is None]
    need += ["the number of ranks (no '#  Rank' lines: give --ranks)" for _ in [0]
             if "ranks" in missing and ranks is None]
    return f"the rows do not say {' nor '.join(need)}" if need else ""


def fit_cmd(
    files: Annotated[list[str], typer.Argument(help="nccl-tests outputs (or timed traces); each run in a "
                                               "file is fitted apart.")],
    pooled: Annotated[bool, typer.Option("--pooled", help="One α, β over all ops of a group size.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first unreadable line or "
                                                          "entry.")] = False,
    out: Annotated[str | None, typer.Option(
        "--out", "-o", "--output",
        help="Write a topology TOML calibrated on these nccl-tests sweeps (NCCL's model, one α-β "
             "per algorithm/protocol where the sweep allows), for table, check and report.")] = None,
    topology: Annotated[str | None, typer.Option(
        "--topology", help="With --out: the preset or TOML file the calibration starts from [default: the "
                           "preset the first sweep's device lines describe, else dgx-h100].")] = None,
    nccl_version: Annotated[str | None, typer.Option(
        "--nccl-version",
        help="With --out: NCCL version (default: the file's, else the latest modelled).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="With --out: ranks of a sweep whose file does not "
                                          "say.")] = None,
    nccl_algo: Annotated[str | None, typer.Option(
        "--nccl-algo", envvar="NCCL_ALGO", help="With --out: NCCL_ALGO list restricting the algorithms, as "
                                                "check's (give check the same).")] = None,
    nccl_proto: Annotated[str | None, typer.Option(
        "--nccl-proto", envvar="NCCL_PROTO", help="With --out: NCCL_PROTO list restricting the protocols, "
                                                  "as check's (give check the same).")] = None,
    nccl_env: Annotated[list[str] | None, typer.Option(
        "--nccl-env", help="With --out: " + _NCCL_ENV_HELP + " As check's (give check the same).")] = None,
    trace_format: Annotated[str | None, typer.Option(
        "--trace-format", help=_TRACE_FORMAT_HELP)] = None,
    op: Annotated[str | None, typer.Option("--op", help="The collective of nccl-tests rows that name none "
                                           "(an excerpt without its header), e.g. all_reduce.")] = None,
    ranks: Annotated[int | None, typer.Option("--ranks", help="The group size of nccl-tests rows, or of a "
                                              "trace's calls, that name none.")] = None,
) -> None:
    """Fit the ring α-β model (latency, bus bandwidth with its uncertainty) to measured timings;
    with --out, calibrate NCCL's model on nccl-tests sweeps and write it as a topology TOML."""
    from zerocalc.errors import TraceMismatchError

    fmt = output_format(fmt, ("table", "csv", "json"))
    group = _at_least(ranks if ranks is not None else n, 2, "--ranks" if ranks is not None else "--n")
    if out is not None:
        _fit_out(sweeps_needed(files), out, topology, nccl_version, n if n is not None else group,
                 strict, nccl_algo, nccl_proto, nccl_env)
        return
    if nccl_env:
        from zerocalc.errors import ConfigError

        raise ConfigError("calibrates NCCL's model under the run's NCCL environment; give --out",
                          option="--nccl-env")
    frames, remarks, unfit = [], {}, []
    files = sweep_paths(files) or files  # nccl-tests files, or a directory of them
    for f in files:
        got, remarks[f], missed = _fit_file(f, strict, _trace_format(trace_format), op, group, pooled)
        frames += got
        unfit += missed
    if not frames:
        raise TraceMismatchError("; ".join(unfit))
    for line in unfit:
        _echo_err(f"skipped: {line}")
    import pandas as pd

    _write_fits(pd.concat(frames, ignore_index=True), files, remarks, fmt)


def _fit_file(f: str, strict: bool, trace_format: str | None, op: str | None, group: int | None,
              pooled: bool) -> tuple[list, list[str], list[str]]:
    """The fits of one file, each of its runs apart: their frames, the remarks to print with them,
    and why a run had nothing to fit (said, and the other files and runs fitted)."""
    from zerocalc.traces.nccl_tests import FORMAT as NCCL_TESTS_FORMAT
    from zerocalc.traces.nccl_tests import complete, cputime_refusal
    from zerocalc.validate import fit_trace, fits_frame
    from zerocalc.validate.fit import ONE_SIZE

    frames, remarks, unfit = [], [], []
    ts = _read_traces(f, strict=strict, fmt=trace_format)
    if ts.table.empty and ts.skipped.examples:  # every row refused: the first one's line and why
        from zerocalc.errors import TraceFormatError

        file, line, reason = ts.skipped.examples[0]
        more = f" (and {ts.skipped.count - 1} more)" if ts.skipped.count > 1 else ""
        raise TraceFormatError(file, line, f"no rows read{more}: {reason}")
    if "layout" in ts.table.columns:  # nccl-tests -C: host launch times, not the calls' own
        refusal = cputime_refusal(ts.table[["layout", "source_line"]].to_dict("records"), f)
        if refusal is not None:
            raise refusal
    table = complete(ts.table, op=op, ranks=group)
    if group is not None and "group_size" in table.columns:  # a trace's calls that name no group
        unnamed = table["group_size"].isna() & (
            table["layout"].isna() if "layout" in table.columns else True)
        if unnamed.any():
            table = table.copy()
            table.loc[unnamed, "group_size"] = group
            remarks.append(f"note: {int(unnamed.sum())} call(s) record no group size: taken as --ranks "
                           f"{group}")
    meta = ts.meta.get(f) or next(iter(ts.meta.values()), {})
    runs, sweep = meta.get("runs") or [], meta.get("format") == NCCL_TESTS_FORMAT
    parts = [(None, table)] if "run" not in table.columns or len(runs) < 2 else [
        (r, table[table["run"] == r["run"]]) for r in runs]
    for run, part in parts:
        res = fit_trace(part, meta=ts.meta, pooled=pooled)
        label = f"{f} (run {run['run'] + 1} of {len(runs)}, line {run['line']})" if run else f
        if not res.fits:  # said, and the other files and runs fitted; an error if none fits
            why = [_missing_facts(runs if run is None else [run], op, group), *res.skipped]
            one_size = sweep and any(w.endswith(ONE_SIZE) for w in why)
            unfit.append(f"{label}: nothing to fit: "
                         + ("; ".join(w for w in why if w) or "no timed collectives")
                         + (" (fit --out calibrates NCCL's model on one size)" if one_size else ""))
            continue
        df = fits_frame(res.fits)
        df.insert(0, "file", f)
        # added at the end: the columns before them keep their places
        df["run"] = run["run"] if run else (runs[0]["run"] if runs else None)
        df["nccl_version"] = run["nccl_version"] if run else (
            runs[0]["nccl_version"] if len(runs) == 1 else None)
        df["library"] = _run_library(run if run else (runs[0] if len(runs) == 1 else None))
        frames.append(df)
        remarks += ([f"note: {t}" for t in res.notes] + [f"skipped: {t}" for t in res.skipped])
    remarks += [f"note: {t}" for t in _skip_notes(ts.skipped)]
    return frames, remarks, unfit


def _run_library(run: dict | None) -> str:
    """``RCCL`` where a run's device lines name GPUs of an AMD preset (one with ``gpu_arch``: rccl-tests on
    AMD Instinct GPUs), else ``NCCL``: the library whose version ``nccl_version`` is."""
    from zerocalc.topology import PRESETS
    from zerocalc.topology.devices import preset_for_gpu

    presets = [PRESETS.get(preset_for_gpu(g) or "") for g in (run or {}).get("gpus") or {}]
    return "RCCL" if any(p is not None and p.gpu_arch is not None for p in presets) else "NCCL"


def _write_fits(out, files: list[str], remarks: dict[str, list[str]], fmt: str) -> None:
    """The fits as CSV or JSON on stdout (their remarks on stderr), or as text with the remarks of
    each file after its last fit."""
    if fmt != "table":  # the remarks go to stderr, stdout stays machine-readable
        for f in files:
            for line in remarks[f]:
                typer.echo(f"{f}: {line}", err=True)
    if fmt == "csv":
        typer.echo(out.to_csv(index=False), nl=False)
    elif fmt == "json":
        import json

        recs = _nan_to_none(out.to_dict(orient="records"))
        typer.echo(json.dumps(recs, indent=2, default=_json_default))
    else:
        for i, r in enumerate(out.itertuples()):
            lines = _fit_lines(r, out)
            if i + 1 == len(out) or out["file"].iat[i + 1] != r.file:
                lines += [f"  {t}" for t in remarks[r.file]]
            typer.echo("\n".join(lines))


#: A standard error below this share of its value is a fit's rounding (:func:`_fit_lines`).
_EXACT = 1e-6


def _fit_lines(r, out) -> list[str]:
    """The text of one fit ``r`` (a row of ``out``, all the fits): what was fitted, α and the bus
    bandwidth with their uncertainties, and what the input itself says."""
    from zerocalc.units import format_seconds

    run = "" if r.run is None or r.run != r.run or (out["file"] == r.file).sum() == 1 else (
        f", run {int(r.run) + 1}")
    nccl = f", {r.library} {r.nccl_version}" if isinstance(r.nccl_version, str) else ""
    # a fit through every point (one time per size: a comms-logger summary's means, or two sizes) has no
    # spread to tell its uncertainty by: its standard errors are rounding, not said
    exact = r.latency_se_s <= _EXACT * abs(r.latency_s)
    lines = [f"{r.file}: {r.op} on {r.group_size} ranks{run}{nccl}, {r.n_sizes} "
             f"size{'' if r.n_sizes == 1 else 's'} ({r.n_points} calls), method {r.method}",
             f"  latency (zero-size call) {format_seconds(r.latency_s)}"
             + ("" if exact else f" ± {format_seconds(r.latency_se_s)}")
             + f"  (α = {format_seconds(r.alpha_s)} per ring step)",
             f"  bus bandwidth {r.busbw_GBps:.4g}" + ("" if exact else f" ± {r.busbw_se_GBps:.2g}")
             + " GB/s  (1/β)"
             if r.beta_s_per_byte > 0 else
             f"  no bus bandwidth: β = {r.beta_s_per_byte:.3g} s/B ≤ 0 (the times do not grow with the size)"]
    if exact:
        lines.append("  the line passes through every size's time (one time a size): no spread to give an "
                     "uncertainty by")
    if r.method == "regimes":
        lines.append(f"  fitted on {r.n_latency_points} latency-dominated and {r.n_bandwidth_points} "
                     "bandwidth-dominated sizes; the others differ by up to "
                     f"{100 * r.max_abs_rel_residual:.0f} % from the model")
    if r.reported_busbw_GBps == r.reported_busbw_GBps:
        lines.append("  input's busbw column at the bandwidth sizes: up to "
                     f"{r.reported_busbw_GBps:.4g} GB/s")
    if r.small_message_time_s == r.small_message_time_s:
        lines.append("  input's median time at the latency sizes: "
                     f"{format_seconds(r.small_message_time_s)}")
    if r.note:
        lines.append(f"  note: {r.note}")
    return lines


def trace_summary(
    paths: list[str] = typer.Argument(..., help="Trace files or directories (plain, gzip, xz or bzip2)."),  # noqa: B008
    fmt: str = typer.Option("table", "--format", help="table, csv (the summary), json (a list of the "
                            "canonical rows) or csv-rows (the canonical rows as CSV); rows are written as "
                            "they are read."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first unreadable line or entry."),
    trace_format: str | None = typer.Option(None, "--trace-format", help=_TRACE_FORMAT_HELP),
    scheduler: str | None = typer.Option(None, "--scheduler", help="Read the traces on a running Dask "
                                         "cluster (tcp://HOST:PORT; zerocalc[dask])."),
    op: str | None = typer.Option(None, "--op", help="The collective of nccl-tests rows that name none "
                                  "(an excerpt without its header), e.g. all_reduce."),
    ranks: int | None = typer.Option(None, "--ranks",
                                     help="The group size of nccl-tests rows that name none."),
) -> None:
    """Per rank and step: count and volume of each collective, and the totals.

    A trace that records no rank (an NCCL log without Init lines) is summarised per process.
    """

    fmt = output_format(fmt, ("table", "csv", "json", "csv-rows"))
    from zerocalc.traces.nccl_tests import complete

    group = _at_least(ranks, 1, "--ranks")
    trace_format = _trace_format(trace_format)
    rows = fmt in ("json", "csv-rows")
    # the summary needs per distinct call only its number of calls (memory flat in the log's length), and
    # so does the check of every file before the rows are streamed (read again, part by part); on a Dask
    # cluster the rows are read there, whole
    ts = _read_traces(paths, strict=strict, fmt=trace_format, scheduler=scheduler,
                      aggregate=not rows or scheduler is None)
    if op is not None or group is not None:
        from dataclasses import replace

        ts = replace(ts, table=complete(ts.table, op=op, ranks=group))
    _notes_to_stderr(ts.notes)
    if ts.table.empty:
        from zerocalc.errors import TraceFormatError

        raise TraceFormatError(", ".join(ts.meta), None, "no collective calls found"
                               + (f" (as {trace_format})" if trace_format else "")
                               + "".join(f"; {t}" for t in _skip_notes(ts.skipped)))
    if rows:
        import sys

        from zerocalc.traces.progress import terminal_meter
        from zerocalc.traces.streamed import row_parts

        # the logs read again: their progress too, on a terminal, unless the rows go to that terminal
        meter = None if sys.stdout.isatty() else terminal_meter()
        try:
            parts = (iter([ts.table]) if scheduler is not None
                     else row_parts(ts, strict=strict, progress=meter))
            _write_rows(parts, fmt)
        finally:
            if meter is not None:
                meter.close()
        return
    summary = ts.summary()
    if fmt == "csv":
        typer.echo(summary.to_csv(index=False), nl=False)
        return
    for file, part in summary.groupby("file", sort=False):
        typer.echo(_summary_text(file, part, ts.meta.get(file, {})))
    total = summary.groupby("op")["calls"].sum()
    typer.echo("total: " + ", ".join(f"{op} {n}" for op, n in total.items()))
    if ts.skipped:
        typer.echo(f"skipped {ts.skipped.counted()}, e.g. "
                   + ts.skipped.example_text(), err=True)


#: Rows of ``trace summary --format json / csv-rows`` turned into text at a time (a few MB of it).
_SLICE_ROWS = 1 << 14


def _write_rows(parts, fmt: str) -> None:
    """The canonical rows with each call's ``process`` (:meth:`TraceSet.processes`), written as they come,
    part by part, each in slices of :data:`_SLICE_ROWS` rows: a JSON list, as ``json.dumps(every row,
    indent=1)`` writes it (:func:`_json_items`), or CSV with one header line."""
    from zerocalc.traces import CANONICAL_COLUMNS, TraceSet

    first = True
    for part in parts:
        table = part[list(CANONICAL_COLUMNS)].assign(process=TraceSet(table=part).processes())
        for start in range(0, len(table), _SLICE_ROWS):
            piece = table.iloc[start : start + _SLICE_ROWS]
            if fmt == "csv-rows":
                typer.echo(piece.to_csv(index=False, header=first), nl=False)
            else:
                typer.echo(("[\n" if first else ",\n") + _json_items(piece), nl=False)
            first = False
    if fmt == "json":
        typer.echo("\n]")


def _json_items(frame) -> str:
    """The rows of ``frame`` as ``json.dumps(rows, indent=1)`` writes the items of a list of them (a row a
    dict of its columns, a missing value ``null``), without the brackets: each distinct value of a column
    encoded once by ``json.dumps`` and spread over its rows."""
    import json

    import numpy as np
    import pandas as pd

    columns = []
    for name in frame.columns:
        codes, uniques = pd.factorize(frame[name])
        key = f"  {json.dumps(name)}: "
        texts = np.array([key + json.dumps(v) for v in uniques.astype(object)] + [key + "null"], dtype=object)
        columns.append(texts[codes].tolist())  # code -1 (missing): the last, null
    return ",\n".join([" {\n" + ",\n".join(row) + "\n }" for row in zip(*columns, strict=True)])


def _coll_lines_text(runs) -> str:
    """What the first line says of an nccl-tests output that also holds NCCL's COLL lines (read as the
    sweep: its table's rows, not those lines)."""
    n = sum((r.get("nccl_info") or {}).get("coll_lines", 0) for r in runs or ())
    return (f"; the table's rows, not its {_plural(n, 'NCCL COLL line')} (--trace-format nccl-log reads "
            "those)") if n else ""


def _summary_text(file: str, part, meta: dict) -> str:
    """One file's lines of ``trace summary``: its format, calls, world size and runs, then the calls
    of each rank (or process, where the trace records no rank) and step."""
    from zerocalc.units import format_bytes

    def values(col) -> list:
        """A column as a list, ``None`` where missing."""
        return col.astype(object).where(col.notna(), None).tolist()

    head = (f"{file}: {meta.get('format')}, {_plural(meta.get('rows', 0), 'call')}"
            f"{', world size ' + str(meta['world_size']) if meta.get('world_size') else ''}"
            + _runs_text(meta.get("runs")) + _coll_lines_text(meta.get("runs")))
    # no rank recorded: the process instead (columns aligned within the file)
    who = [f"process {p}" if r is None and p is not None else f"rank {'-' if r is None else r!s:>4}"
           for r, p in zip(values(part["rank"]), values(part["process"]), strict=True)]
    width = max(map(len, who))
    out = values(part["out_bytes"]) if "out_bytes" in part else [None] * len(part)
    # a receive has no input: what it receives, its output
    moved = [("out", o) if op == "recv" else ("in", b)
             for op, b, o in zip(part["op"].tolist(), values(part["in_bytes"]), out, strict=True)]
    fwd = part["forward_calls"].tolist() if "forward_calls" in part else [0] * len(part)
    return head + "\n" + "\n".join(
        f"  {w:<{width}}  step {'-' if st is None else st!s:>5}  {op:<15} {c:>6} "
        f"{'call ' if c == 1 else 'calls'}  {side} {'?' if b is None else format_bytes(float(b))}"
        + (f"  ({f:g} in a forward pass)" if f else "")
        for w, st, op, c, (side, b), f in zip(who, values(part["step"]), part["op"].tolist(),
                                              part["calls"].tolist(), moved, fwd, strict=True))
