"""The model commands: ``table`` and ``derive`` (the symbolic model, :mod:`zerocalc.schemes` and
:mod:`zerocalc.evaluate`, with NCCL's own cost model beside it). Each only wires options to library
calls; ``feasibility`` and ``report`` are :mod:`zerocalc.cli.review_commands`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from zerocalc.cli.model_options import (
    InterAlphaUs,
    InterBwGBps,
    IntraAlphaUs,
    IntraBwGBps,
    TableDtype,
    TableGpuMemory,
    TableGpusPerNode,
    TableGradDtype,
    TableGradSync,
    TableHsdpShardSize,
    TableK,
    TableMicroBatches,
    TableN,
    TableParamDtype,
    TablePp,
    TablePsi,
    TableReuseDistance,
    TableSchemes,
    TableSort,
    TableTopology,
    TableTp,
)
from zerocalc.cli.options import (
    _MODEL_HELP,
    _OFI_HELP,
    _TUNER_HELP,
    BUCKET_HELP,
    NcclAlgoOption,
    NcclEnvOption,
    NcclProtoOption,
    NcclVersionOption,
    _load_topology,
    _read_tuners,
    _scheme_names,
    model_psi,
    warn_implausible,
)
from zerocalc.rendering import (
    TableFormat,
    _step_notes,
    render_table,
    table_caption,
)


def _nccl_columns(df, topo, nccl_version: str | None, nccl_algo: str | None,
                  nccl_proto: str | None, reuse_distance: float = 1e9,
                  nccl_tuner: str | None = None, ofi_tuner: str | None = None,
                  nccl_env: dict[str, str] | None = None, call_bytes: float | str | None = None) -> list[str]:
    """Add ``time_s_nccl`` and ``nccl_choice`` (NCCL's model, :mod:`zerocalc.nccl_pricing`) to the
    table when the topology gives what the model needs, and ``nccl_ofi_tuner`` (the aws-ofi-nccl release
    whose tuner plugin priced them) under ``--ofi-tuner``; the notes to print under it. ``nccl_env``:
    ``--nccl-env``'s variables (:func:`zerocalc.nccl.env_given.parse_given`); ``call_bytes``: ``--bucket``,
    the largest call, each phase priced in equal calls no larger (``"implementation"``: each
    implementation's own buckets, :mod:`zerocalc.buckets`)."""
    from zerocalc.nccl_pricing import missing_fields, price_rows

    if topo.gpu_arch is not None:  # AMD GPUs: RCCL's model (zerocalc.rccl_pricing)
        return _rccl_columns(df, topo, (nccl_version, nccl_algo, nccl_proto, nccl_env), reuse_distance,
                             nccl_tuner, ofi_tuner, call_bytes)
    tuner, ofi = _read_tuners(nccl_tuner, ofi_tuner, topo)
    missing = missing_fields(topo)
    if missing and nccl_version is None and nccl_algo is None and nccl_proto is None and nccl_tuner is None \
            and ofi_tuner is None and not nccl_env and call_bytes is None:
        return [f"no NCCL columns: topology {topo.name!r} does not give {', '.join(missing)} (and NCCL's "
                f"model needs {'it' if len(missing) == 1 else 'them'})"]
    priced = price_rows(df, topo, nccl_version=nccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                        tuner=tuner, reuse_distance=reuse_distance, ofi_tuner=ofi, nccl_env=nccl_env,
                        call_bytes=call_bytes)
    df["time_s_nccl"] = priced.times
    df["nccl_choice"] = priced.choices
    df[_PHASES] = priced.phases
    _bucket_column(df, call_bytes)
    if ofi is not None:
        df["nccl_ofi_tuner"] = ofi.name
    return priced.notes


def _rccl_columns(df, topo, given: tuple, reuse_distance: float, nccl_tuner: str | None,
                  ofi_tuner: str | None, call_bytes: float | None = None) -> list[str]:
    """``time_s_nccl`` and ``nccl_choice`` priced by RCCL's model on a topology of AMD GPUs
    (:mod:`zerocalc.rccl_pricing`; ``given``: ``--nccl-version``, which is then RCCL's version,
    ``--nccl-algo``, ``--nccl-proto`` and ``--nccl-env``'s variables), and ``nccl_library`` (``RCCL``),
    which names the columns ``t RCCL`` / ``RCCL choice``; the notes to print under it."""
    from zerocalc.errors import ConfigError
    from zerocalc.rccl_pricing import price_rows_rccl

    for flag, tuner in (("--nccl-tuner", nccl_tuner), ("--ofi-tuner", ofi_tuner)):
        if tuner is not None:
            raise ConfigError(f"topology {topo.name!r} is of AMD GPUs, priced by RCCL's model, under which "
                              "zerocalc models no tuner plugin", option=flag)
    rccl_version, nccl_algo, nccl_proto, nccl_env = given
    priced = price_rows_rccl(df, topo, rccl_version=rccl_version, nccl_algo=nccl_algo, nccl_proto=nccl_proto,
                             reuse_distance=reuse_distance, nccl_env=nccl_env, call_bytes=call_bytes)
    df["time_s_nccl"] = priced.times
    df["nccl_choice"] = priced.choices
    df[_PHASES] = priced.phases
    _bucket_column(df, call_bytes)
    df["nccl_library"] = "RCCL"
    return priced.notes


def _bucket_column(df, call_bytes: float | str | None) -> None:
    """``--bucket``'s column: ``nccl_call_bytes`` (a size), or ``nccl_buckets`` = ``implementation``
    (each implementation's own, :mod:`zerocalc.buckets`); none without ``--bucket``."""
    from zerocalc.buckets import IMPLEMENTATION

    if call_bytes == IMPLEMENTATION:
        df["nccl_buckets"] = IMPLEMENTATION
    elif call_bytes is not None:
        df["nccl_call_bytes"] = float(call_bytes)


class _Wire:
    """The wire dtypes of a table: ``comm`` (normalises sent/(Psi*b)), ``param``, ``grad``, ``label``."""

    def __init__(self, comm: str, param: str | None, grad: str | None, label: str) -> None:
        self.comm, self.param, self.grad, self.label = comm, param, grad, label


def _wire_dtypes(dtype: str | None, param_dtype: str | None, grad_dtype: str | None) -> _Wire:
    """--dtype sets both sides; --param-dtype / --grad-dtype override one. With mixed sides and no
    --dtype, sent/(Psi*b) is normalised by the gradient side's width."""
    from zerocalc.dtypes import canonical_dtype

    base = canonical_dtype(dtype, "--dtype") if dtype is not None else "fp16"
    p = canonical_dtype(param_dtype, "--param-dtype") if param_dtype is not None else base
    g = canonical_dtype(grad_dtype, "--grad-dtype") if grad_dtype is not None else base
    comm = base if dtype is not None or p == g else g
    label = dtype if (dtype is not None and p == g == base) else (
        p if p == g else f"{p} parameters / {g} gradients")
    return _Wire(comm, p, g, label)


#: The column that carries each row's phases as NCCL's (or RCCL's) model priced them, from the pricing to
#: the JSON's collectives; never printed
_PHASES = "_nccl_phases"


def _nccl_record(p) -> dict | None:
    """A phase as NCCL's (RCCL's) model runs it, for a collective's ``nccl`` field in JSON: its calls per
    optimizer step, bytes a call, the algorithm / protocol picked and the seconds of all its calls;
    ``None`` where nothing is called (one rank) or the model does not price it."""
    if p is None or p.algorithm in ("-", "unpriced"):
        return None
    return {"calls": p.calls, "bytes_per_call": p.bytes_per_call, "algorithm": p.algorithm,
            "protocol": p.protocol, "time_s": p.time_s}


def _with_collectives(df, reuse_distance: float):
    """``df`` with a ``collectives`` column (JSON only): per scheme, its phases in step order with their
    group, group size, side, element bytes, cadence and runs per optimizer step
    (:func:`zerocalc.evaluate.phase_records`), and where NCCL's (RCCL's) model priced the table, each
    phase as it runs it (``nccl``: :func:`_nccl_record`)."""
    from zerocalc.evaluate import phase_records

    recs = []
    priced = df[_PHASES] if _PHASES in df.columns else [None] * len(df)
    for r, phases in zip(df.itertuples(index=False), priced, strict=True):
        tp_pp = int(r.tp) * int(r.pp)
        g_dp = _dp_gpus_per_node(int(r.gpus_per_node), int(r.tp), int(r.dp_size))
        recs.append(phase_records(r.scheme, psi=float(r.psi) / tp_pp, n=int(r.dp_size), gpus_per_node=g_dp,
                                  param_bytes=float(r.param_comm_bytes_per_element),
                                  grad_bytes=float(r.grad_comm_bytes_per_element),
                                  micro_batches=int(r.micro_batches), grad_sync=r.grad_sync,
                                  hsdp_shard_size=int(r.hsdp_shard_size), reuse_distance=reuse_distance))
        if isinstance(phases, list) and len(phases) == len(recs[-1]):
            for rec, p in zip(recs[-1], phases, strict=True):
                rec["nccl"] = _nccl_record(p)
    return df.assign(collectives=recs)


def _dp_gpus_per_node(g: int, tp: int, dp: int) -> int:
    """Ranks of one data-parallel group on a node (:func:`zerocalc.evaluate.data_parallel_layout`)."""
    return min(g // tp if g % tp == 0 else 1, dp)


def table_command(
    psi: TablePsi = None,
    n: TableN = 64,
    gpus_per_node: TableGpusPerNode = None,
    topology: TableTopology = "dgx-a100",
    dtype: TableDtype = None,
    param_dtype: TableParamDtype = None,
    grad_dtype: TableGradDtype = None,
    micro_batches: TableMicroBatches = 1,
    grad_sync: TableGradSync = "every",
    tp: TableTp = 1,
    pp: TablePp = 1,
    hsdp_shard_size: TableHsdpShardSize = None,
    reuse_distance: TableReuseDistance = 1e9,
    k: TableK = 12.0,
    schemes: TableSchemes = None,
    fmt: Annotated[TableFormat, typer.Option("--format", help="Output format.",
                                             case_sensitive=False)] = TableFormat.table,
    intra_alpha_us: IntraAlphaUs = None,
    intra_bw_gbps: IntraBwGBps = None,
    inter_alpha_us: InterAlphaUs = None,
    inter_bw_gbps: InterBwGBps = None,
    nccl_version: NcclVersionOption = None,
    nccl_algo: NcclAlgoOption = None,
    nccl_proto: NcclProtoOption = None,
    nccl_env: NcclEnvOption = None,
    nccl_tuner: str = typer.Option(None, "--nccl-tuner", help=_TUNER_HELP),
    ofi_tuner: str = typer.Option(None, "--ofi-tuner", help=_OFI_HELP),
    model: str = typer.Option(None, "--model", help=_MODEL_HELP),
    gpu_memory: TableGpuMemory = None,
    sort: TableSort = None,
    bucket: str = typer.Option(None, "--bucket", help=BUCKET_HELP),
) -> None:
    """Per-rank bytes sent per optimizer step, α-β time per algorithm, NCCL's own choice and time, and
    memory per GPU of each scheme.

    With --micro-batches, each scheme's collectives run per micro-batch or per optimizer step as its
    implementation does them (zerocalc derive SCHEME cites the rule). With --gpu-memory, which schemes'
    model states fit on one GPU; with --sort time, the fastest of those that fit comes first: the
    stage to use on this cluster."""
    from zerocalc.buckets import parse_bucket
    from zerocalc.evaluate import evaluate
    from zerocalc.nccl.env_given import parse_given

    env_given = parse_given(nccl_env, nccl_algo, nccl_proto)  # a bad entry is refused before any work
    call_bytes = None if bucket is None else parse_bucket(bucket)
    psi_count, preset = model_psi(psi, model, default="7.5e9")
    topo, nodes = _table_topology(topology, n, gpus_per_node, (intra_alpha_us, intra_bw_gbps, inter_alpha_us,
                                                               inter_bw_gbps))
    names, wire = _scheme_names(schemes, "--schemes"), _wire_dtypes(dtype, param_dtype, grad_dtype)
    df = evaluate(names, psi=psi_count, n=n, gpus_per_node=gpus_per_node, topology=topo,
                  comm_dtype=wire.comm, k=k, param_dtype=wire.param, grad_dtype=wire.grad,
                  micro_batches=micro_batches, grad_sync=grad_sync.strip().lower(), tp=tp, pp=pp,
                  hsdp_shard_size=hsdp_shard_size, reuse_distance=reuse_distance)
    warn_implausible(psi=psi_count, n=n)
    df, notes = _table_columns(df, topo, fmt, gpu_memory, sort, reuse_distance,
                               (nccl_version, nccl_algo, nccl_proto, nccl_tuner, ofi_tuner, env_given),
                               call_bytes)
    _write_table(df, fmt, _table_caption(df, psi_count, topo, wire, k, preset), nodes + notes)


def _table_topology(topology: str, n: int, gpus_per_node: int | None, overrides: tuple) -> tuple:
    """The table's topology: its nodes as a run of ``n`` ranks, ``gpus_per_node`` a node, has them
    (:func:`zerocalc.topology.devices.run_nodes`), with the α-β ``overrides`` (intra α, intra bandwidth,
    inter α, inter bandwidth) over it; and the note saying which nodes, if they are not the topology's."""
    from zerocalc.topology.devices import run_nodes

    topo, nodes_how = run_nodes(_load_topology(topology, None, None, None, None), n, gpus_per_node)
    intra_alpha_us, intra_bw_gbps, inter_alpha_us, inter_bw_gbps = overrides
    topo = topo.with_overrides(intra_alpha_us=intra_alpha_us, intra_bw_GBps=intra_bw_gbps,
                               inter_alpha_us=inter_alpha_us, inter_bw_GBps=inter_bw_gbps)
    return topo, [f"nodes: {topology} as {nodes_how}"] if nodes_how else []


def _table_columns(df, topo, fmt: TableFormat, gpu_memory: str | None, sort: str | None,
                   reuse_distance: float, nccl: tuple[str | None, ...], call_bytes: float | None = None):
    """The evaluated table with the columns the options ask for: NCCL's time and choice (``nccl``:
    version, algorithms, protocols, tuner rules, aws-ofi-nccl release, ``--nccl-env``'s variables;
    ``call_bytes``: ``--bucket``), 'fits' and its sort, and in JSON the collectives of each scheme; and
    the notes to print under it."""
    nccl_version, nccl_algo, nccl_proto, nccl_tuner, ofi_tuner, nccl_env = nccl
    notes = list(_nccl_columns(df, topo, nccl_version, nccl_algo, nccl_proto, reuse_distance, nccl_tuner,
                               ofi_tuner, nccl_env, call_bytes))
    df, memory_note = _fits(df, gpu_memory, topo, sort)
    notes += [memory_note] if memory_note else []
    notes += _step_notes(df)
    if fmt is TableFormat.json:
        df = _with_collectives(df, reuse_distance)
    return df.drop(columns=[_PHASES], errors="ignore"), notes


def _table_caption(df, psi_count, topo, wire: _Wire, k: float, preset) -> str:
    """The table's caption, naming the model preset and the source of its Ψ when ``--model`` gave one."""
    caption = table_caption(df, psi_count, topo.name, wire.label, k)
    if preset is not None:
        caption = f"{preset.title}: {caption} [Psi: {preset.source}]"
    return caption


def _write_table(df, fmt: TableFormat, caption: str, notes: list[str]) -> None:
    """The table on stdout; its notes under it as text, on stderr for the machine-readable formats."""
    text = render_table(df, fmt, caption)
    if fmt is TableFormat.table:
        text += "".join(f"note: {t}\n" for t in notes)
    else:
        for t in notes:
            typer.echo(f"note: {t}", err=True)
    typer.echo(text, nl=False)


def _fits(df, gpu_memory: str | None, topo, sort: str | None):
    """``df`` with ``gpu_memory_bytes`` and ``fits`` columns when a GPU memory is known (option, or
    the topology's), sorted as asked; and the note that says what 'fits' covers."""
    from zerocalc.errors import ConfigError
    from zerocalc.units import format_bytes, parse_bytes

    if sort is not None and sort.lower() not in ("time", "memory"):
        raise ConfigError(f"must be time or memory, got {sort!r}", option="--sort")
    mem = parse_bytes(gpu_memory, "--gpu-memory") if gpu_memory is not None else getattr(
        topo, "gpu_memory_bytes", None)
    note = ""
    if mem is not None:
        df = df.assign(gpu_memory_bytes=mem, fits=df["memory_bytes_per_rank"] <= mem)
        note = (f"fits: the model states fit in {format_bytes(mem)} per GPU; activations, buffers and "
                "fragmentation are not counted, so 'yes' is necessary, not sufficient")
    if sort is not None and sort.lower() == "time":
        keys = (["fits"] if mem is not None else []) + ["time_s"]
        df = df.sort_values(keys, ascending=[False] * (len(keys) - 1) + [True], kind="stable")
    elif sort is not None:
        df = df.sort_values("memory_bytes_per_rank", kind="stable")
    return df.reset_index(drop=True), note


class DeriveFormat(StrEnum):
    """Output formats of ``zerocalc derive``."""

    text = "text"
    latex = "latex"
    json = "json"


def _derive_parts(s, alg, grad_sync: str, nccl: bool) -> list[tuple[str, str, object]]:
    """(key, label, expression) of what ``derive`` shows for scheme ``s``."""
    import sympy

    from zerocalc.memory import model_state_bytes

    parts = [
        ("bytes_per_rank", f"bytes sent per rank per optimizer step ({alg.value})",
         sympy.factor(sympy.simplify(s.bytes_per_rank(alg, grad_sync)))),
        ("time_s", f"communication time per optimizer step, s ({alg.value})", s.time_s(alg, grad_sync)),
        ("memory_bytes_per_rank", "model-state bytes per rank",
         sympy.simplify(model_state_bytes(s.name, grad_sync))),
    ]
    if nccl:
        from zerocalc.nccl.formula import formulas

        for coll in dict.fromkeys(ph.collective.value for ph in s.phases):
            for name, expr in formulas(coll).items():
                parts.append((f"nccl_{name}_{coll}".lower(), f"NCCL {name} time of one {coll} of n bytes, µs "
                              "(NCCL 2.30 tuning.cc; its symbols in the legend)", expr))
    return parts


def _phase_line(ph, grad_sync: str) -> str:
    side = {"param": "parameter dtype", "grad": "reduction dtype", "fixed": "fixed width"}[ph.side.value]
    calls = "" if ph.calls == 1 else f"{ph.calls} × "
    return (f"{calls}{ph.collective.value} of {ph.elements} elements × {ph.elem_bytes} B ({side}) on the "
            f"{ph.group.description}, {ph.when(grad_sync)}: {ph.purpose}")


def derive_command(
    scheme: str = typer.Argument(..., help="Scheme name, e.g. zero2, colocated, fsdp-hybrid."),
    algorithm: str = typer.Option("ring", "--algorithm", help="ring, recursive, tree or hierarchical."),
    grad_sync: str = typer.Option("every", "--grad-sync",
                                  help="every or boundary: the gradient-sync mode of DDP and FSDP "
                                       "(no_sync)."),
    fmt: Annotated[DeriveFormat, typer.Option("--format", help="text (pretty and LaTeX), latex or json.",
                                              case_sensitive=False)] = DeriveFormat.text,
    nccl: bool = typer.Option(False, "--nccl", help="Also NCCL's own Ring and Tree time formulas (tuning.cc) "
                              "for the scheme's collectives."),
) -> None:
    """The symbolic per-rank volume, time and memory of one scheme per optimizer step of n_mb micro-batches,
    with what runs per micro-batch and per step (and its source), each collective's dtype side and group,
    and a legend of the symbols."""
    import sympy

    from zerocalc.collectives import as_algorithm
    from zerocalc.schemes import as_grad_sync, get_scheme

    s = get_scheme(scheme)
    alg = as_algorithm(algorithm)
    sync = as_grad_sync(grad_sync.strip().lower()).value
    parts = _derive_parts(s, alg, sync, nccl)
    used = set().union(*(sympy.sympify(e).free_symbols for _, _, e in parts))
    legend = [(name, info) for name, info in _legend_symbols(nccl).items() if info.symbol in used]
    if fmt is DeriveFormat.json:
        import json

        typer.echo(json.dumps(_derive_document(s, alg, sync, parts, legend), indent=2))
    elif fmt is DeriveFormat.latex:
        for _, label, expr in parts:
            typer.echo(f"% {label}\n{sympy.latex(expr)}")
    else:
        _derive_text(s, sync, parts, legend)


def _legend_symbols(nccl: bool) -> dict:
    """The symbols a legend may name: the model's, and with ``--nccl`` those of NCCL's formulas."""
    from zerocalc.symbols import SYMBOLS

    if not nccl:
        return SYMBOLS
    from zerocalc.nccl.formula import SYMBOLS as NCCL_SYMBOLS

    return {**SYMBOLS, **NCCL_SYMBOLS}


def _derive_document(s, alg, sync: str, parts, legend) -> dict:
    """``derive --format json``: the scheme, its phases, each expression as text and LaTeX, the legend."""
    import sympy

    return {
        "scheme": s.name, "title": s.title, "alias_of": s.alias_of,
        "equivalent_to_dp": s.equivalent_to_dp, "exact_on_one_rank": s.exact_on_one_rank,
        "source": s.source, "micro_batch_rule": s.micro_batch_rule,
        "grad_sync": sync, "grad_sync_choice": s.grad_sync_choice, "algorithm": alg.value,
        "phases": [{"collective": ph.collective.value, "elements": str(ph.elements),
                    "calls": str(ph.calls),
                    "side": ph.side.value, "elem_bytes": str(ph.elem_bytes), "group": ph.group.value,
                    "group_size": str(ph.group.size), "cadence": ph.cadence.value,
                    "runs_per_step": str(ph.runs(sync)), "purpose": ph.purpose} for ph in s.phases],
        "expressions": {key: {"label": label, "text": str(expr), "latex": sympy.latex(expr)}
                        for key, label, expr in parts},
        "symbols": {name: {"meaning": info.meaning, "unit": info.unit, "latex": sympy.latex(info.symbol)}
                    for name, info in legend},
    }


def _derive_text(s, sync: str, parts, legend) -> None:
    """``derive``'s text: the scheme and its source, its phases, each expression pretty-printed with its
    LaTeX, and the legend, wrapped to the terminal."""
    import shutil
    import textwrap

    import sympy

    width = max(60, shutil.get_terminal_size((100, 24)).columns)

    def para(text: str, indent: str = "") -> None:
        typer.echo(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  "))

    same = "yes" if s.equivalent_to_dp else ("no; yes at N = 1" if s.exact_on_one_rank else "no")
    para(f"{s.name}: {s.title}  (update equals data parallel: {same})")
    para(f"source: {s.source}")
    para(f"per micro-batch / per optimizer step: {s.micro_batch_rule}"
         + (f" [--grad-sync {sync}]" if s.grad_sync_choice else ""))
    typer.echo("phases of one optimizer step of n_mb micro-batches:")
    for ph in s.phases:
        para(_phase_line(ph, sync), "  ")
    for _, label, expr in parts:
        typer.echo(f"\n{label}:")
        typer.echo(sympy.pretty(expr, use_unicode=True, num_columns=width))
        typer.echo(f"LaTeX: {sympy.latex(expr)}")
    typer.echo("\nsymbols:")
    for name, info in legend:
        para(f"{sympy.pretty(info.symbol, use_unicode=True)} ({name}): {info.meaning} [{info.unit}]", "  ")
