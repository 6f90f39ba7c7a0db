"""``fit --out``: NCCL's model calibrated on nccl-tests sweeps (and NCCL Inspector logs), each sweep priced
as ``check`` prices it (:mod:`zerocalc.cli.sweep_commands`) and its pairs fitted, written as a topology TOML
that ``table``, ``check`` and ``report`` accept. It only wires options to library calls
(:func:`zerocalc.validate.sweep.fit_calibration`)."""

from __future__ import annotations

import typer

from zerocalc.cli.options import _load_topology, _read_tuner
from zerocalc.cli.sweep_commands import _check_one, _listed_hosts, _sweep_inputs, _sweep_topology

#: What each trace format is, in a sentence (:func:`_refuse_traces`).
_TRACE_WORDS = {"kineto": "a PyTorch profiler trace", "nccl_log": "an NCCL debug log",
                "flight_recorder": "a PyTorch Flight Recorder dump",
                "deepspeed_comms": "a DeepSpeed comms log"}


def _refuse_traces(files) -> None:
    """A file of a training run's calls given to ``fit --out`` is refused, saying what it is and what reads
    it: the calibration is NCCL's model fitted on an nccl-tests sweep (or an NCCL Inspector log), one
    collective timed over a range of sizes, and a trace is read by ``fit`` without ``--out`` (α-β on its
    timed calls) and by ``check``. A file that cannot be read or told is left to the sweep reader, which
    says why."""
    from zerocalc.errors import ConfigError, TraceFormatError
    from zerocalc.traces import reader

    for path in files:
        try:
            kind = reader.detect_file(path)
        except (OSError, TraceFormatError):
            continue
        if kind in _TRACE_WORDS:
            raise ConfigError(f"{path} is {_TRACE_WORDS[kind]}, not an nccl-tests sweep: the calibration "
                              "is NCCL's model fitted on an nccl-tests run (or NCCL Inspector logs); "
                              "`zerocalc fit FILE` without --out fits α-β on a trace's timed calls, and "
                              "`zerocalc check FILE` reads it against the schemes", option="--out")


def _fit_out(files, out, topology, nccl_version, n, strict, nccl_algo=None, nccl_proto=None,
             nccl_env=None) -> None:
    """Calibrate NCCL's model on the sweeps and write the topology TOML (never over an input). Each series
    of a file (nccl-tests ``-d all`` / ``-o all``) is calibrated on its own, keyed by its type and
    reduction where one collective and group size has several (:func:`zerocalc.topology.series_calibration`);
    a sweep the model does not price, or too short to fit, is skipped and said, unless none is left.
    ``nccl_algo`` / ``nccl_proto`` / ``nccl_env``: as ``check``'s (the pairs fitted are those NCCL picks
    under them)."""
    from dataclasses import replace
    from pathlib import Path

    from zerocalc.errors import ConfigError, UnpricedOpError
    from zerocalc.nccl.env import restrictions
    from zerocalc.nccl.env_given import parse_given
    from zerocalc.nccl.predict import ANY
    from zerocalc.topology import shape_words, topology_to_toml

    target = Path(out)
    if any(target.exists() and target.resolve() == Path(f).resolve()
           for f in [*files, *([topology] if topology is not None else [])]):
        raise ConfigError(f"{out} is an input; choose another file", option="--out")
    restrictions(nccl_algo, nccl_proto)  # a bad list is refused before any file is read
    env_given = parse_given(nccl_env, nccl_algo, nccl_proto)
    _refuse_traces(files)
    inputs = _sweep_inputs(files, n, strict)
    base, how = _fit_base(topology, inputs)
    tuner = _read_tuner(None, base)  # the tuner the topology names: check will price under it too
    chosen = None if topology is not None else "the topology every sweep is fitted on, " + (
        f"the first sweep's ({inputs[0][0]})" if how.startswith("from") else "the default")
    kinds: dict[tuple, set] = {}
    for _, rows, op, p, *_ in inputs:
        kinds.setdefault((op, p), set()).add(_series_key(rows))
    fits, lines, refused = [], [f"topology {base.name}, {how}"], []
    fits_from: dict[tuple, str] = {}  # a calibration's key -> the sweep it was fitted on
    for path, rows, op, p, stated, skipped, run in inputs:
        try:
            got, notes = _fit_sweep(base, tuner, (nccl_version, nccl_algo, nccl_proto, env_given), path, rows,
                                    op, p, stated, skipped, run, chosen)
        except ConfigError as e:
            if not isinstance(e, UnpricedOpError) and e.option != "fit":
                raise
            refused.append(e)
            lines.append(f"{path}: {op} on {p} ranks{_series_words(rows)}: not fitted: {e.message}")
            continue
        key = _series_key(rows)
        said = ""
        if len(kinds[(op, p)]) > 1:  # several series of one collective and size: each keyed by its own
            got, said = [replace(c, dtype=key[0], redop=key[1]) for c in got], _series_words(rows)
        lines += [t for t in dict.fromkeys(f"{path}: {t}" for t in notes) if t not in lines]
        got, taken = _not_calibrated_yet(got, fits_from)
        if taken:  # one calibration per key: the first sweep's is written, this one's would never be read
            c = got[0] if got else taken[0][0]
            shape = f" ({shape_words((c.nodes, c.ranks_per_node))})" if c.nodes else ""
            lines.append(f"{path}: {c.op} on {c.ranks} ranks{shape}{said}: not written, as {taken[0][1]} "
                         "calibrates the same collective, ranks, shape and series (one calibration each; fit "
                         "the sweeps to separate files to keep both)")
        fits_from.update({_calibration_key(c): path for c in got})
        fits += got
        for c in got:
            shape = f" ({shape_words((c.nodes, c.ranks_per_node))})" if c.nodes else ""
            lines.append(f"{path}: {c.op} on {c.ranks} ranks{shape}{said}, {c.algorithm}/{c.protocol}: " + (
                f"the model's time × {c.model_scale:.4g} ("
                + ("one timed size, too few for an α-β line: every pair's time scaled to it"
                   if c.algorithm == ANY else "chosen at too few sizes for a fit of its own") + ")"
                if c.model_scale else f"α = {c.alpha_us:.4g} µs, bw = {c.bw_GBps:.4g} GB/s"))
    if not fits:
        raise refused[0]
    name = Path(out).stem
    topo = replace(base, name=name, title=f"{base.title}, calibrated on {', '.join(files)}",
                   nccl_calibration=tuple(fits))
    text = topology_to_toml(topo, header=f"zerocalc fit --out: {base.name} calibrated on {', '.join(files)}")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write: {exc.strerror or exc}", option="--out") from None
    typer.echo("\n".join([*lines, f"wrote {out}"]))


def _calibration_key(c) -> tuple:
    """What a calibration table is looked up by (:func:`zerocalc.topology.shape_calibration`,
    :func:`zerocalc.topology.series_calibration`): its collective, ranks, shape and series."""
    return c.op, c.ranks, c.nodes, c.ranks_per_node, c.dtype, c.redop


def _not_calibrated_yet(got: list, fits_from: dict[tuple, str]) -> tuple[list, list]:
    """A sweep's fitted pairs whose key an earlier sweep has not calibrated, and the others with the
    earlier sweep's path: a table of the same key would never be read (the first one found prices)."""
    new = [c for c in got if _calibration_key(c) not in fits_from]
    return new, [(c, fits_from[_calibration_key(c)]) for c in got if _calibration_key(c) in fits_from]


def _series_key(rows) -> tuple[str, str]:
    """A sweep's series as a calibration keys it: its type and reduction (``''`` where the table has none)."""
    from zerocalc.topology import series_redop

    return rows[0].get("dtype") or "", series_redop(rows[0].get("redop"))


def _series_words(rows) -> str:
    """`` (fp32 sum)``: a sweep's series as the fit's lines name it; '' where the table states none."""
    words = " ".join(x for x in _series_key(rows) if x)
    return f" ({words})" if words else ""


def _fit_sweep(base, tuner, given, path, rows, op, p, stated, skipped, run,
               chosen=None) -> tuple[list, list[str]]:
    """One sweep's fitted pairs (:func:`zerocalc.validate.sweep.fit_calibration`) on the choices ``check
    --topology`` makes on the calibrated topology (:func:`_check_one` on ``base`` with no calibration: the
    same release, environment, tuner, placement, type; ``given``: ``--nccl-version``, ``--nccl-algo``,
    ``--nccl-proto``, ``--nccl-env``; ``chosen``: how ``base`` was chosen where no ``--topology`` gave it),
    and the notes on how it was priced; the legacy kernels' pairs,
    whatever ``-R`` the run used (a calibration's pairs are (algorithm, protocol) of ``tuning.cc``)."""
    from dataclasses import replace

    from zerocalc.validate.sweep import fit_calibration, wrong_notes

    d, cmp = _check_one(path, rows, op, p, stated, skipped, run, given=replace(base, nccl_calibration=()),
                        tuner=tuner, nccl_version=given[0], nccl_algo=given[1], nccl_proto=given[2],
                        ofi_tuner=None, local_register=0,  # a calibration holds the legacy kernels' pairs
                        nccl_env=given[3], chosen=chosen)
    fits = fit_calibration(cmp)
    failed = wrong_notes(cmp.rows)  # said once, with what the fit does with those sizes
    notes = [n for n in d["notes"] if n not in failed]
    notes += wrong_notes(cmp.rows, "left out of the fit, their times being the failed runs'")
    if _shape_stated(run, d["nccl_info"], p, stated):
        fits = [replace(c, nodes=d["nodes"], ranks_per_node=d["ranks_per_node"]) for c in fits]
    return fits, notes


def _shape_stated(run: dict, info: dict, p: int, stated: str | None) -> bool:
    """Whether a sweep states the nodes its ``p`` ranks ran on: its ``# Rank`` lines list the host of each
    (:func:`_listed_hosts`), or its NCCL INFO lines state ``nNodes`` for them; a calibration is then keyed
    by the shape it was priced on (:class:`zerocalc.topology.Calibration`), else by its ranks alone."""
    nodes, local = (info or {}).get("nodes"), (info or {}).get("local_ranks")
    told = bool(nodes and local and (nodes[0] - 1) * local[0] < p <= nodes[0] * local[0])
    return told or _listed_hosts(run, p, stated) is not None


#: The preset ``fit --out`` starts from when neither ``--topology`` nor the sweep's device lines name one.
FIT_DEFAULT_TOPOLOGY = "dgx-h100"


def _fit_base(topology: str | None, inputs: list) -> tuple:
    """The topology ``fit --out`` calibrates and how it was chosen: ``--topology`` when given; else the
    preset the first sweep's device lines describe (as ``check`` prices it); else
    :data:`FIT_DEFAULT_TOPOLOGY`, saying why."""
    from zerocalc.errors import ConfigError

    if topology is not None:
        return _load_topology(topology, None, None, None, None), "given (--topology)"
    path, _, _, p, *_, run = inputs[0]
    try:
        return _sweep_topology(None, path, run, p)
    except ConfigError:
        return (_load_topology(FIT_DEFAULT_TOPOLOGY, None, None, None, None),
                f"the default: {path} names no GPU a preset describes (--topology to choose)")
