"""The ``zerocalc`` command line: parse options, call the library, write the result.

No math lives here. Every :class:`~zerocalc.errors.ZerocalcError` and every usage
error becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys
import typing
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated

import typer
import typer.core

from zerocalc.errors import ZerocalcError
from zerocalc.rendering import (
    TableFormat,
    _check_markdown,
    _check_rows,
    _check_text,
    _feasibility_table,
    _plural,
    _runs_text,
    _skip_notes,
    _step_notes,
    _sweep_text,
    render_table,
    table_caption,
)


def _echo_err(text: str) -> None:
    typer.echo(text, err=True)


def os_error_line(exc: OSError) -> str:
    """An OS error as one line naming its path: ``out/r.pdf: Permission denied``."""
    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {what}" if paths else what


def _named(exc: ZerocalcError, given: set[str]) -> str:
    """The error's text, naming of the options it blames (``--n/--gpus-per-node``) those the user
    gave, so that ``--gpus-per-node 3`` is not reported as ``--n``."""
    from zerocalc.errors import ConfigError

    if not isinstance(exc, ConfigError) or not exc.option or "/" not in exc.option:
        return str(exc)
    blamed = exc.option.split("/")
    return f"{'/'.join([o for o in blamed if o in given] or blamed)}: {exc.message}"


def _read_numbers_alike(group) -> None:
    """Let every int and float option of every command read its value with
    :func:`zerocalc.units.parse_number` (``1e3``, ``1,024``, ``8K``), as ``--psi`` does, and name
    the option in its error; typer's own conversion (and range check) runs on the number."""
    from zerocalc.units import parse_number

    stack = [group]
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        for param in getattr(cmd, "params", ()):
            desc = getattr(param, "type_descriptor", None)
            ann = getattr(desc, "annotation", None)
            base = next(iter(typing.get_args(ann)), None) if typing.get_origin(ann) in (list, tuple) else ann
            if base not in (int, float) or getattr(param, "_zerocalc_numbers", False):
                continue
            option = max(param.opts, key=len) if getattr(param, "opts", None) else param.name

            def process_value(ctx, value, _orig=param.process_value, _opt=option, _whole=base is int):
                def one(v):
                    return parse_number(v, _opt, whole=_whole) if isinstance(v, str) else v

                value = type(value)(one(v) for v in value) if isinstance(value, list | tuple) else one(value)
                return _orig(ctx, value)

            param.process_value = process_value
            param._zerocalc_numbers = True


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush finds no closed pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class _OneLineErrors(typer.core.TyperGroup):
    """A command group whose errors are one line on stderr and exit code 2.

    Usage errors are recognised by duck typing (``format_message`` and ``exit_code``),
    whichever click (vendored by typer or not) raised them.
    """

    def main(self, *args, **kwargs):  # type: ignore[override]
        standalone = kwargs.pop("standalone_mode", True)
        argv = kwargs.get("args", args[0] if args else None)
        given = {a.split("=", 1)[0] for a in (sys.argv[1:] if argv is None else argv) if a.startswith("-")}
        _read_numbers_alike(self)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
            # Non-standalone click returns the code of a ``typer.Exit`` raised by a command;
            # commands themselves return None.
            code = rv if isinstance(rv, int) else 0
        except ZerocalcError as exc:
            _echo_err(f"error: {_named(exc, given)}")
            code = 2
        except BrokenPipeError:  # the reader of our output went away (| head): not an error
            _quiet_stdout()
            code = 0
        except SystemExit as exc:
            # click answers a closed stdout (EPIPE) itself with exit 1 after wrapping sys.stdout
            if type(sys.stdout).__name__ != "PacifyFlushWrapper":
                raise
            _quiet_stdout()
            code = 0 if exc.code == 1 else exc.code
        except OSError as exc:  # a file that cannot be read or written, wherever it is opened
            _echo_err(f"error: {os_error_line(exc)}")
            code = 2
        except typer.Exit as exc:
            code = exc.exit_code
        except typer.Abort:
            _echo_err("aborted")
            code = 1
        except Exception as exc:
            if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
                raise
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                _echo_err(ctx.get_help())
            else:
                hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                _echo_err(f"error: {exc.format_message()}{hint}")
            code = exc.exit_code
        if standalone:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    name="zerocalc",
    help="What a sharding scheme costs on the wire, in time and in memory; and what your traces say.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
trace_app = typer.Typer(
    cls=_OneLineErrors,
    help="Read NCCL logs, PyTorch profiler traces, nccl-tests and DeepSpeed comms logs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(trace_app, name="trace")


def _print_version(value: bool) -> None:
    if value:
        from zerocalc import __version__

        typer.echo(f"zerocalc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_print_version, is_eager=True,
                                          help="Print 'zerocalc <version>' and exit.")] = False,
) -> None:
    """What a sharding scheme costs on the wire, in time and in memory; and what your traces say."""


def main() -> None:
    """Console-script entry point."""
    app()


def _read_traces(paths, **options):
    """``read_traces``, with a progress line on stderr while it reads when stderr is a terminal."""
    from zerocalc.traces import read_traces
    from zerocalc.traces.progress import terminal_meter

    meter = terminal_meter()
    try:
        return read_traces(paths, progress=meter, **options)
    finally:
        if meter is not None:
            meter.close()


def _scheme_names(values: str | list[str] | None, option: str) -> list[str] | None:
    """Scheme names from comma-separated and/or repeated options, in order, each once.

    ``None`` (option not given) means every scheme; given but empty is an error naming the option.
    """
    if values is None or (not isinstance(values, str) and len(values) == 0):
        return None
    items = [values] if isinstance(values, str) else values
    names = list(dict.fromkeys(s.strip() for item in items for s in item.split(",") if s.strip()))
    if not names:
        from zerocalc.errors import ConfigError

        raise ConfigError("no scheme given; name some (e.g. zero2,colocated) or leave the option out",
                          option=option)
    return names


# ---------------------------------------------------------------------------
# Commands are added below, one section per concern (table/derive, feasibility,
# trace, check/fit, report). Each section only wires options to library calls.
# ---------------------------------------------------------------------------


# --- table / derive: the symbolic model (zerocalc.schemes, zerocalc.evaluate) ------------

def _dtype_help() -> str:
    from zerocalc.dtypes import ALIASES, DTYPE_BYTES

    return (f"Communication dtype: {', '.join(DTYPE_BYTES)}; or an alias: "
            f"{', '.join(f'{a} ({c})' for a, c in ALIASES.items())}.")


_DTYPE_HELP = _dtype_help()


def _model_help() -> str:
    from zerocalc.models import MODELS

    return f"A model preset that sets --psi: {', '.join(MODELS)}."


_TUNER_HELP = ("Tuner plugin rules to price with (NCCL's example tuner CSV: collective_type,min_bytes,"
               "max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]) [default: the "
               "topology TOML's nccl_tuner].")
_MODEL_HELP = _model_help()


#: zerocalc.topology.TOPOLOGY_NAMES, spelled out (the topology module is not imported at start-up;
#: a test keeps the two equal).
TOPOLOGY_PRESETS = ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gcp-a3-mega", "pcie-gen4",
                    "ethernet-100g")
_TOPOLOGY_HELP = f"Preset ({', '.join(TOPOLOGY_PRESETS)}) or a .toml file."

#: zerocalc.traces.detect.FORMATS, spelled out: importing zerocalc.traces at start-up would load
#: numpy and pandas before any command runs (a test keeps the two equal).
TRACE_FORMATS = ("nccl_log", "kineto", "nccl_tests", "nccl_tests_json", "deepspeed_comms")
_TRACE_FORMAT_HELP = (f"Read every file as this format ({', '.join(TRACE_FORMATS)}) "
                      "[default: detected per file].")


def _load_topology(
    topology: str,
    intra_alpha_us: float | None,
    intra_bw_gbps: float | None,
    inter_alpha_us: float | None,
    inter_bw_gbps: float | None,
):
    """A preset name or a TOML file, then the link flags on top."""
    from pathlib import Path

    from zerocalc.errors import ConfigError
    from zerocalc.topology import PRESETS, get_topology, topology_from_mapping

    if topology not in PRESETS and (topology.endswith(".toml") or Path(topology).is_file()):
        import tomllib

        path = Path(topology)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{topology}: cannot read: {exc.strerror or exc}",
                              option="--topology") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{topology}: not valid TOML: {exc}", option="--topology") from None
        topo = topology_from_mapping(data, where=str(path), option="--topology")
        if topo.nccl_tuner and not Path(topo.nccl_tuner).is_absolute():  # relative to the TOML file
            from dataclasses import replace

            topo = replace(topo, nccl_tuner=str(path.parent / topo.nccl_tuner))
    else:
        topo = get_topology(topology)
    return topo.with_overrides(intra_alpha_us=intra_alpha_us, intra_bw_GBps=intra_bw_gbps,
                               inter_alpha_us=inter_alpha_us, inter_bw_GBps=inter_bw_gbps)


def _read_tuner(path: str | None, topo):
    """The tuner configuration of ``--nccl-tuner`` (else the one the topology TOML names), or None."""
    from pathlib import Path

    from zerocalc.errors import ConfigError
    from zerocalc.nccl.tuner import parse_tuner

    given = path or topo.nccl_tuner
    if not given:
        return None
    option = "--nccl-tuner" if path else "--topology"
    p = Path(given)
    if p.is_dir():
        raise ConfigError(f"{given}: is a directory, not a tuner configuration file", option=option)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{given}: cannot read: {exc.strerror or exc}", option=option) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{given}: not a text file", option=option) from None
    return parse_tuner(text.splitlines(), given)


def _nccl_columns(df, topo, nccl_version: str | None, nccl_algo: str | None,
                  nccl_proto: str | None, reuse_distance: float = 1e9,
                  nccl_tuner: str | None = None) -> list[str]:
    """Add ``time_s_nccl`` and ``nccl_choice`` (NCCL's model, :mod:`zerocalc.nccl.steps`) to the
    table when the topology gives what the model needs; the notes to print under it."""
    from dataclasses import replace

    from zerocalc.nccl import LATEST, release_for
    from zerocalc.nccl.env import settings
    from zerocalc.nccl.graph import REQUIRED_FIELDS
    from zerocalc.nccl.steps import scheme_phases, scheme_time
    from zerocalc.topology import require

    missing = [f for f in REQUIRED_FIELDS if getattr(topo, f) is None]
    if missing and nccl_version is None and nccl_algo is None and nccl_proto is None and nccl_tuner is None:
        return [f"no NCCL columns: topology {topo.name!r} does not give {missing[0]} (and NCCL's model "
                "needs it)"]
    for f in missing:  # NCCL's model asked for explicitly: name the missing field
        require(topo, f, "NCCL's cost model")
    version = nccl_version or LATEST.tag.lstrip("v").split("-")[0]
    release, note = release_for(version)
    tuner = _read_tuner(nccl_tuner, topo)
    env = settings(topo, version, nccl_algo, nccl_proto, tuner_given=tuner is not None)
    algo, proto = env.algo_enable, env.proto_enable
    times, choices = [], []
    for r in df.itertuples(index=False):
        tp, dp = int(getattr(r, "tp", 1)), int(getattr(r, "dp_size", r.n))
        # under tensor parallelism the node's NICs are shared by its tp data-parallel groups
        topo_dp = topo if tp == 1 or not topo.nics_per_node else replace(
            topo, nics_per_node=max(1, topo.nics_per_node // tp))
        phases = scheme_phases(r.scheme, psi=float(r.psi) / (tp * int(getattr(r, "pp", 1))), n=dp,
                               gpus_per_node=_dp_gpus_per_node(int(r.gpus_per_node), tp, dp),
                               comm_bytes=float(r.comm_bytes_per_element), topology=topo_dp, release=release,
                               algo_enable=algo, proto_enable=proto,
                               param_bytes=float(r.param_comm_bytes_per_element),
                               grad_bytes=float(r.grad_comm_bytes_per_element),
                               micro_batches=int(r.micro_batches), grad_sync=r.grad_sync,
                               hsdp_shard_size=int(r.hsdp_shard_size), reuse_distance=reuse_distance,
                               nvls_enable=env.nvls_enable, tuner=tuner, nccl_version=version)
        t, c = scheme_time(phases)
        times.append(t)
        choices.append(c)
    df["time_s_nccl"] = times
    df["nccl_choice"] = choices
    return [f"t NCCL: NCCL {release.name}'s own cost model ({release.tag} tuning.cc), the algorithm/protocol "
            "it picks per collective; one call per phase" + (f"; {note}" if note else ""), *env.notes,
            *([f"t NCCL: under the tuner rules of {tuner.source} (NCCL's example tuner plugin)"]
              if tuner else [])]


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


def _with_collectives(df, reuse_distance: float):
    """``df`` with a ``collectives`` column (JSON only): per scheme, its phases in step order with their
    group, group size, side, element bytes, cadence and runs per optimizer step
    (:func:`zerocalc.evaluate.phase_records`)."""
    from zerocalc.evaluate import phase_records

    recs = []
    for r in df.itertuples(index=False):
        tp_pp = int(r.tp) * int(r.pp)
        g_dp = _dp_gpus_per_node(int(r.gpus_per_node), int(r.tp), int(r.dp_size))
        recs.append(phase_records(r.scheme, psi=float(r.psi) / tp_pp, n=int(r.dp_size), gpus_per_node=g_dp,
                                  param_bytes=float(r.param_comm_bytes_per_element),
                                  grad_bytes=float(r.grad_comm_bytes_per_element),
                                  micro_batches=int(r.micro_batches), grad_sync=r.grad_sync,
                                  hsdp_shard_size=int(r.hsdp_shard_size), reuse_distance=reuse_distance))
    return df.assign(collectives=recs)


def _dp_gpus_per_node(g: int, tp: int, dp: int) -> int:
    """Ranks of one data-parallel group on a node (:func:`zerocalc.evaluate.data_parallel_layout`)."""
    return min(g // tp if g % tp == 0 else 1, dp)


@app.command("table")
def table_command(
    psi: str = typer.Option(None, "--psi", help="Parameters: 7.5e9, 7.5B, 175B, 1T [default: 7.5e9]."),
    n: int = typer.Option(64, "--n", help="GPUs in the world: the data-parallel degree N when --tp and --pp "
                                          "are 1, else N = n/(tp·pp)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node",
                                      help="GPUs per node [default: the topology's]."),
    topology: str = typer.Option(
        "dgx-a100", "--topology",
        help=_TOPOLOGY_HELP),
    dtype: str = typer.Option(None, "--dtype", help=_DTYPE_HELP + " Sets both sides [default: fp16]."),
    param_dtype: str = typer.Option(None, "--param-dtype",
                                    help="Dtype of the parameter-side collectives (all-gather, broadcast of "
                                         "parameters), e.g. FSDP2 param_dtype [default: --dtype]."),
    grad_dtype: str = typer.Option(None, "--grad-dtype",
                                   help="Dtype of the gradient-side collectives (all-reduce, reduce-scatter, "
                                        "reduce), e.g. FSDP2 reduce_dtype [default: --dtype]."),
    micro_batches: int = typer.Option(1, "--micro-batches",
                                      help="Micro-batches per optimizer step (gradient accumulation); each "
                                           "scheme runs its collectives per micro-batch or per step as its "
                                           "implementation does (zerocalc derive SCHEME)."),
    grad_sync: str = typer.Option("every", "--grad-sync",
                                  help="every or boundary: where the implementation lets you choose (DDP "
                                       "and FSDP no_sync() / set_requires_gradient_sync(False)), reduce "
                                       "gradients every micro-batch or only in the last."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree (the data-parallel group is n/(tp·pp))."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel degree."),
    hsdp_shard_size: int = typer.Option(None, "--hsdp-shard-size",
                                        help="fsdp-hybrid: ranks in one shard group H [default: the data-"
                                             "parallel group's GPUs per node]."),
    reuse_distance: float = typer.Option(1e9, "--reuse-distance",
                                         help="deepspeed-zero3: stage3_max_reuse_distance, parameter "
                                              "elements [default: DeepSpeed's 1e9]."),
    k: float = typer.Option(12.0, "--k",
                            help="Optimizer-state bytes per parameter (12: mixed-precision Adam)."),
    schemes: str = typer.Option(None, "--schemes", help="Comma-separated scheme names [default: all]."),
    fmt: Annotated[TableFormat, typer.Option("--format", help="Output format.",
                                             case_sensitive=False)] = TableFormat.table,
    intra_alpha_us: float = typer.Option(None, "--intra-alpha-us", help="Override: intra-node latency, µs."),
    intra_bw_gbps: float = typer.Option(None, "--intra-bw-GBps",
                                        help="Override: one GPU's intra-node bandwidth, GB/s."),
    inter_alpha_us: float = typer.Option(None, "--inter-alpha-us", help="Override: inter-node latency, µs."),
    inter_bw_gbps: float = typer.Option(None, "--inter-bw-GBps",
                                        help="Override: one node's inter-node bandwidth, GB/s."),
    nccl_version: str = typer.Option(None, "--nccl-version",
                                     help="NCCL version whose cost model prices 't NCCL' [default: latest]."),
    nccl_algo: str = typer.Option(None, "--nccl-algo", envvar="NCCL_ALGO",
                                  help="NCCL_ALGO list restricting NCCL's algorithms."),
    nccl_proto: str = typer.Option(None, "--nccl-proto", envvar="NCCL_PROTO",
                                   help="NCCL_PROTO list restricting NCCL's protocols."),
    nccl_tuner: str = typer.Option(None, "--nccl-tuner", help=_TUNER_HELP),
    model: str = typer.Option(None, "--model", help=_MODEL_HELP),
    gpu_memory: str = typer.Option(None, "--gpu-memory",
                                   help="Memory of one GPU (80GB, 80GiB): adds a 'fits' column "
                                        "[default: the topology's, if it names one]."),
    sort: str = typer.Option(None, "--sort", help="time: the schemes that fit first, fastest first "
                                                  "(ring time); memory: least memory first."),
) -> None:
    """Per-rank bytes sent per optimizer step, α-β time per algorithm, NCCL's own choice and time, and
    memory per GPU of each scheme.

    With --micro-batches, each scheme's collectives run per micro-batch or per optimizer step as its
    implementation does them (zerocalc derive SCHEME cites the rule). With --gpu-memory, which schemes'
    model states fit on one GPU; with --sort time, the fastest of those that fit comes first: the
    stage to use on this cluster."""
    from zerocalc.evaluate import evaluate

    psi_count, preset = model_psi(psi, model, default="7.5e9")
    topo = _load_topology(topology, intra_alpha_us, intra_bw_gbps, inter_alpha_us, inter_bw_gbps)
    names = _scheme_names(schemes, "--schemes")
    wire = _wire_dtypes(dtype, param_dtype, grad_dtype)
    df = evaluate(names, psi=psi_count, n=n, gpus_per_node=gpus_per_node, topology=topo,
                  comm_dtype=wire.comm, k=k, param_dtype=wire.param, grad_dtype=wire.grad,
                  micro_batches=micro_batches, grad_sync=grad_sync.strip().lower(), tp=tp, pp=pp,
                  hsdp_shard_size=hsdp_shard_size, reuse_distance=reuse_distance)
    warn_implausible(psi=psi_count, n=n)
    notes = list(_nccl_columns(df, topo, nccl_version, nccl_algo, nccl_proto, reuse_distance, nccl_tuner))
    df, memory_note = _fits(df, gpu_memory, topo, sort)
    notes += [memory_note] if memory_note else []
    notes += _step_notes(df)
    if fmt is TableFormat.json:
        df = _with_collectives(df, reuse_distance)
    caption = table_caption(df, psi_count, topo.name, wire.label, k)
    if preset is not None:
        caption = f"{preset.title}: {caption} [Psi: {preset.source}]"
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


def output_format(value: str, allowed: tuple[str, ...]) -> str:
    """``--format``'s value as one of ``allowed``, whatever its case (``JSON`` is ``json``): the
    canonical name, which the rest of the command uses; anything else a :class:`ConfigError`."""
    from zerocalc.errors import ConfigError

    name = str(value).strip().lower()
    if name not in allowed:
        raise ConfigError(f"must be {', '.join(allowed[:-1])} or {allowed[-1]}, got {value!r}",
                          option="--format")
    return name


def model_psi(psi: str | None, model: str | None, default: str | None = None, psi_option: str = "--psi"):
    """Ψ from ``--psi`` (``None``: not given, then ``default``) or from ``--model`` (the preset,
    returned too); both given is an error."""
    from zerocalc.errors import ConfigError
    from zerocalc.units import parse_count

    if model is None:
        psi = default if psi is None else psi
        return (parse_count(psi, option=psi_option) if psi is not None else None), None
    from zerocalc.models import get_model

    preset = get_model(model)
    if psi is not None:
        raise ConfigError(f"sets Psi itself ({preset.psi:,} for {preset.title}); give --model or "
                          f"{psi_option}, not both", option="--model")
    return preset.psi, preset


def warn_implausible(psi: float | None = None, n: float | None = None) -> None:
    """Print a warning line to stderr for a Ψ or N far outside anything trained."""
    from zerocalc.units import implausible

    for line in implausible(psi=psi, n=n):
        _echo_err(f"warning: {line}")


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
                              "(NCCL 2.30 tuning.cc; see zerocalc.nccl.formula for the symbols)", expr))
    return parts


def _phase_line(ph, grad_sync: str) -> str:
    side = {"param": "parameter dtype", "grad": "reduction dtype", "fixed": "fixed width"}[ph.side.value]
    calls = "" if ph.calls == 1 else f"{ph.calls} × "
    return (f"{calls}{ph.collective.value} of {ph.elements} elements × {ph.elem_bytes} B ({side}) on the "
            f"{ph.group.description}, {ph.when(grad_sync)}: {ph.purpose}")


@app.command("derive")
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
    import shutil
    import textwrap

    import sympy

    from zerocalc.collectives import as_algorithm
    from zerocalc.schemes import as_grad_sync, get_scheme
    from zerocalc.symbols import SYMBOLS

    s = get_scheme(scheme)
    alg = as_algorithm(algorithm)
    sync = as_grad_sync(grad_sync.strip().lower()).value
    parts = _derive_parts(s, alg, sync, nccl)
    used = set().union(*(sympy.sympify(e).free_symbols for _, _, e in parts))
    legend = [(name, info) for name, info in SYMBOLS.items() if info.symbol in used]
    same = "yes" if s.equivalent_to_dp else ("no; yes at N = 1" if s.exact_on_one_rank else "no")
    if fmt is DeriveFormat.json:
        import json

        doc = {
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
        typer.echo(json.dumps(doc, indent=2))
        return
    if fmt is DeriveFormat.latex:
        for _, label, expr in parts:
            typer.echo(f"% {label}\n{sympy.latex(expr)}")
        return
    width = max(60, shutil.get_terminal_size((100, 24)).columns)

    def para(text: str, indent: str = "") -> None:
        typer.echo(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  "))

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


# ---------------------------------------------------------------------------
# feasibility: simulate every scheme on N ranks and state the verdict on DeepSpeed #4582
# ---------------------------------------------------------------------------


@app.command("feasibility")
def feasibility_cmd(
    n: int = typer.Option(4, "--n", help="Simulated ranks (data-parallel degree N)."),
    steps: int = typer.Option(20, "--steps", help="Adam steps to simulate (0: compare nothing)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the weights and of every micro-batch."),
    micro_batches: int = typer.Option(
        1, "--micro-batches", help="Micro-batches per optimizer step (gradient accumulation): each scheme "
                                   "reduces every micro-batch or once per step as its implementation does."),
    schemes: list[str] | None = typer.Option(  # noqa: B008 - typer's option declaration
        None, "--schemes", help="Schemes to simulate (repeat or comma-separate); default: all."),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node",
        help="Ranks per node: of the simulation (for fsdp-hybrid and zeropp; default 2 if N is even) and "
             "of the cluster the plan is priced on (default: the topology's)."),
    psi: str = typer.Option("7.5e9", "--psi",
                            help="Parameters of the model the plan is priced for: 7.5e9, 70B."),
    plan_n: int | None = typer.Option(
        None, "--plan-n", help="Data-parallel ranks N of the cluster the plan is priced on [default: --n]."),
    topology: str = typer.Option(
        "dgx-a100", "--topology",
        help="Cluster the plan is priced on: a preset (dgx-a100, dgx-h100, dgx-h200, dgx-b200, gcp-a3-mega, "
             "pcie-gen4, ethernet-100g) or a .toml file; its in-network reduction (nvls, sharp) is priced "
             "where it has one."),
    dtype: str = typer.Option("fp16", "--dtype",
                              help="Element type on the wire for the plan. " + _DTYPE_HELP),
    fmt: str = typer.Option("table", "--format", help="table or json."),
) -> None:
    """Simulate each scheme on N ranks training a small MLP, compare with data parallelism and the model,
    and state the verdict on DeepSpeed issue #4582 with the implementation plan it leads to, priced on a
    cluster."""
    from fractions import Fraction

    from zerocalc.dtypes import canonical_dtype, dtype_bytes
    from zerocalc.errors import ConfigError
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility
    from zerocalc.units import parse_count

    fmt = output_format(fmt, ("table", "json"))
    names = _scheme_names(schemes, "--schemes")
    plan_psi = parse_count(psi, option="--psi")
    comm_bytes = Fraction(str(dtype_bytes(canonical_dtype(dtype))))
    topo = _load_topology(topology, None, None, None, None)
    cfg = FeasibilityConfig(n=n, steps=steps, seed=seed, micro_batches=micro_batches,
                            gpus_per_node=None if gpus_per_node is None else min(gpus_per_node, n))
    if plan_n is not None and plan_n < 1:
        raise ConfigError(f"must be a whole number of ranks ≥ 1, got {plan_n}", option="--plan-n")
    with _progress_bar("simulating") as progress:
        result = run_feasibility(
            cfg, names, plan_psi=plan_psi,
            plan_comm_bytes=int(comm_bytes) if comm_bytes.denominator == 1 else comm_bytes,
            plan_topology=topo, plan_n=n if plan_n is None else plan_n,
            plan_gpus_per_node=topo.gpus_per_node if gpus_per_node is None else gpus_per_node,
            progress=progress)
    if fmt == "json":
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        typer.echo(_feasibility_table(result))


@contextmanager
def _progress_bar(label: str):
    """A rich progress bar on stderr while the body runs, only when stderr is a terminal; yields the
    ``progress(done, total, what)`` callback (``None`` when there is no terminal)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"{label}: {what}")

        yield progress


# --- check / fit: measured against predicted, α-β fitted from timings -------------


@app.command("check")
def check_cmd(
    traces: Annotated[list[str], typer.Argument(help="Trace files (one per rank) or a directory.")],
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
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first unreadable line.")] = False,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Read the traces on a running Dask "
                                                  "cluster (tcp://HOST:PORT; zerocalc[dask]).")] = None,
    topology: Annotated[str | None, typer.Option(
        "--topology", help="nccl-tests sweeps: compare each size with NCCL's cost model on this preset or "
                           "TOML file.")] = None,
    nccl_version: Annotated[str | None, typer.Option(
        "--nccl-version", help="NCCL version to price (default: the one the file states, else the latest "
                               "modelled).")] = None,
    nccl_algo: Annotated[str | None, typer.Option(
        "--nccl-algo", envvar="NCCL_ALGO", help="NCCL_ALGO list restricting the algorithms.")] = None,
    nccl_proto: Annotated[str | None, typer.Option(
        "--nccl-proto", envvar="NCCL_PROTO", help="NCCL_PROTO list restricting the protocols.")] = None,
    nccl_tuner: Annotated[str | None, typer.Option("--nccl-tuner", help=_TUNER_HELP)] = None,
    model: Annotated[str | None, typer.Option("--model", help=_MODEL_HELP)] = None,
) -> None:
    """Measure bytes per rank per step in real traces and compare them with every scheme;
    with --topology, compare nccl-tests sweeps size by size with NCCL's cost model."""
    from zerocalc.errors import ConfigError
    from zerocalc.validate import check

    fmt = output_format(fmt, ("table", "json", "csv", "markdown"))
    if topology is not None:
        if fmt not in ("table", "json"):
            raise ConfigError(f"must be table or json with --topology, got {fmt!r}", option="--format")
        _sweep_check(traces, topology, nccl_version, nccl_algo, nccl_proto, n, fmt, strict, nccl_tuner)
        return
    for flag, given in (("--nccl-version", nccl_version), ("--nccl-tuner", nccl_tuner)):
        if given is not None:
            raise ConfigError("prices nccl-tests sweeps with NCCL's model; give --topology too", option=flag)
    if micro_batches is not None and micro_batches < 1:
        raise ConfigError(f"must be a positive integer, got {micro_batches}", option="--micro-batches")
    if reuse_distance is not None and not reuse_distance >= 0:
        raise ConfigError(f"must be a number ≥ 0, got {reuse_distance:g}", option="--reuse-distance")
    names = _scheme_names(scheme, "--schemes")
    if gpus_per_node is not None and gpus_per_node < 1:  # before reading the traces
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    ts = _read_traces(traces if len(traces) > 1 else traces[0], strict=strict, scheduler=scheduler)
    psi_count, _ = model_psi(psi, model)
    res = check(ts.table, psi=psi_count, n=n, steps=steps, dtype=dtype,
                schemes=names, meta=ts.meta, gpus_per_node=gpus_per_node, micro_batches=micro_batches,
                reuse_distance=reuse_distance)
    if fmt == "csv":
        import pandas as pd

        typer.echo(pd.DataFrame(_check_rows(res)).to_csv(index=False), nl=False)
    elif fmt == "markdown":
        typer.echo(_check_markdown(res))
    elif fmt == "json":
        import json

        d = res.as_dict()
        d["skipped_lines"] = {"count": ts.skipped.count,
                              "examples": [list(e) for e in ts.skipped.examples]}
        typer.echo(json.dumps(_nan_to_none(d), indent=2, allow_nan=False, default=_json_default))
    else:
        typer.echo(_check_text(res, _skip_notes(ts.skipped)))


def _missing_facts(runs: list[dict], op: str | None, ranks: int | None) -> str:
    """What nccl-tests rows do not say and which option supplies it ("" when nothing is missing)."""
    missing = {m for r in runs for m in r.get("missing", ())}
    need = ["the collective (no <op>_perf name or header in the file: give --op)" for _ in [0]
            if "op" in missing and op is None]
    need += ["the number of ranks (no '#  Rank' lines: give --ranks)" for _ in [0]
             if "ranks" in missing and ranks is None]
    return f"the rows do not say {' nor '.join(need)}" if need else ""


def _at_least(value: int | None, minimum: int, option: str) -> int | None:
    """``value`` (``None``: not given), refused below ``minimum``."""
    from zerocalc.errors import ConfigError

    if value is not None and value < minimum:
        raise ConfigError(f"must be at least {minimum}, got {value}", option=option)
    return value


def _trace_format(name: str | None) -> str | None:
    """``--trace-format`` as the reader names formats (case-insensitive, ``-`` for ``_``)."""
    return None if name is None else name.strip().lower().replace("-", "_")


def _json_default(x):
    """``json.dumps``'s fallback: numpy scalars → Python numbers, anything else → its text
    (NaN → null is :func:`_nan_to_none`'s work, done before)."""
    return x.item() if hasattr(x, "item") else str(x)


def _nan_to_none(obj):
    import math

    if hasattr(obj, "item") and not isinstance(obj, dict | list):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    return obj


@app.command("fit")
def fit_cmd(
    files: Annotated[list[str], typer.Argument(help="nccl-tests outputs (or timed traces); each run in a "
                                               "file is fitted apart.")],
    pooled: Annotated[bool, typer.Option("--pooled", help="One α, β over all ops of a group size.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first unreadable line.")] = False,
    out: Annotated[str | None, typer.Option(
        "--out", help="Write a topology TOML calibrated on these nccl-tests sweeps (NCCL's model, one α-β "
                      "per algorithm/protocol where the sweep allows), for table, check and report.")] = None,
    topology: Annotated[str, typer.Option(
        "--topology", help="With --out: the preset or TOML file the calibration starts from.")] = "dgx-h100",
    nccl_version: Annotated[str | None, typer.Option(
        "--nccl-version",
        help="With --out: NCCL version (default: the file's, else the latest modelled).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="With --out: ranks of a sweep whose file does not "
                                          "say.")] = None,
    trace_format: Annotated[str | None, typer.Option(
        "--trace-format", help=_TRACE_FORMAT_HELP)] = None,
    op: Annotated[str | None, typer.Option("--op", help="The collective of nccl-tests rows that name none "
                                           "(an excerpt without its header), e.g. all_reduce.")] = None,
    ranks: Annotated[int | None, typer.Option("--ranks", help="The group size of nccl-tests rows that "
                                              "name none.")] = None,
) -> None:
    """Fit the ring α-β model (latency, bus bandwidth with its uncertainty) to measured timings;
    with --out, calibrate NCCL's model on nccl-tests sweeps and write it as a topology TOML."""
    from zerocalc.errors import TraceMismatchError
    from zerocalc.traces.nccl_tests import complete
    from zerocalc.validate import fit_trace, fits_frame

    fmt = output_format(fmt, ("table", "csv", "json"))
    group = _at_least(ranks if ranks is not None else n, 2, "--ranks" if ranks is not None else "--n")
    if out is not None:
        _fit_out(files, out, topology, nccl_version, n if n is not None else group, strict)
        return
    frames, remarks, unfit = [], {}, []
    for f in files:
        ts = _read_traces(f, strict=strict, fmt=_trace_format(trace_format))
        table = complete(ts.table, op=op, ranks=group)
        runs = (ts.meta.get(f) or next(iter(ts.meta.values()), {})).get("runs") or []
        parts = [(None, table)] if "run" not in table.columns or len(runs) < 2 else [
            (r, table[table["run"] == r["run"]]) for r in runs]
        remarks[f] = []
        for run, part in parts:
            res = fit_trace(part, meta=ts.meta, pooled=pooled)
            label = f"{f} (run {run['run'] + 1} of {len(runs)}, line {run['line']})" if run else f
            if not res.fits:  # said, and the other files and runs fitted; an error if none fits
                why = [_missing_facts(runs if run is None else [run], op, group), *res.skipped]
                unfit.append(f"{label}: nothing to fit: "
                             + ("; ".join(w for w in why if w) or "no timed collectives"))
                continue
            df = fits_frame(res.fits)
            df.insert(0, "file", f)
            # added at the end: the columns before them keep their places
            df["run"] = run["run"] if run else (runs[0]["run"] if runs else None)
            df["nccl_version"] = run["nccl_version"] if run else (
                runs[0]["nccl_version"] if len(runs) == 1 else None)
            frames.append(df)
            remarks[f] += ([f"note: {t}" for t in res.notes] + [f"skipped: {t}" for t in res.skipped])
        remarks[f] += [f"note: {t}" for t in _skip_notes(ts.skipped)]
    if not frames:
        raise TraceMismatchError("; ".join(unfit))
    for line in unfit:
        _echo_err(f"skipped: {line}")
    import pandas as pd

    out = pd.concat(frames, ignore_index=True)
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
        from zerocalc.units import format_seconds

        for i, r in enumerate(out.itertuples()):
            run = "" if r.run is None or r.run != r.run or (out["file"] == r.file).sum() == 1 else (
                f", run {int(r.run) + 1}")
            nccl = f", NCCL {r.nccl_version}" if isinstance(r.nccl_version, str) else ""
            lines = [f"{r.file}: {r.op} on {r.group_size} ranks{run}{nccl}, {r.n_sizes} "
                     f"size{'' if r.n_sizes == 1 else 's'} ({r.n_points} calls), method {r.method}",
                     f"  latency (zero-size call) {format_seconds(r.latency_s)} ± "
                     f"{format_seconds(r.latency_se_s)}  (α = {format_seconds(r.alpha_s)} per ring step)",
                     f"  bus bandwidth {r.busbw_GBps:.4g} ± {r.busbw_se_GBps:.2g} GB/s  (1/β)"]
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
            if i + 1 == len(out) or out["file"].iat[i + 1] != r.file:
                lines += [f"  {t}" for t in remarks[r.file]]
            typer.echo("\n".join(lines))


# --- trace: read traces into the canonical table (zerocalc.traces) ---------------


@trace_app.command("summary")
def trace_summary(
    paths: list[str] = typer.Argument(..., help="Trace files or directories (plain or gzip)."),  # noqa: B008
    fmt: str = typer.Option("table", "--format", help="table, csv, or json (a list of the canonical rows)."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first unreadable line."),
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

    fmt = output_format(fmt, ("table", "csv", "json"))
    from zerocalc.traces import CANONICAL_COLUMNS
    from zerocalc.traces.nccl_tests import complete

    group = _at_least(ranks, 1, "--ranks")
    trace_format = _trace_format(trace_format)
    # the summary formats need per distinct call only its number of calls (memory flat in the log's length)
    ts = _read_traces(paths, strict=strict, fmt=trace_format, scheduler=scheduler, aggregate=fmt != "json")
    if op is not None or group is not None:
        from dataclasses import replace

        ts = replace(ts, table=complete(ts.table, op=op, ranks=group))
    for note in ts.notes:
        typer.echo(f"note: {note}", err=True)
    if ts.table.empty:
        from zerocalc.errors import TraceFormatError

        raise TraceFormatError(", ".join(ts.meta), None, "no collective calls found"
                               + (f" (as {trace_format})" if trace_format else "")
                               + "".join(f"; {t}" for t in _skip_notes(ts.skipped)))
    if fmt == "json":
        import json

        # written in parts: one part of the rows as Python objects at a time, not the whole table
        table = ts.table[list(CANONICAL_COLUMNS)].assign(process=ts.processes())
        part = 1 << 16
        for start in range(0, len(table), part):
            rows = table.iloc[start : start + part].astype(object)
            text = json.dumps(rows.where(rows.notna(), None).to_dict(orient="records"), indent=1)
            # the list's items as json.dumps(whole list, indent=1) writes them: "[\n", items, "\n]"
            typer.echo(("[\n" if start == 0 else ",\n") + text[2:-2], nl=False)
        typer.echo("\n]")
        return
    summary = ts.summary()
    if fmt == "csv":
        typer.echo(summary.to_csv(index=False), nl=False)
        return
    import pandas as pd

    from zerocalc.units import format_bytes

    def values(col: pd.Series) -> list:
        """A column as a list, ``None`` where missing."""
        return col.astype(object).where(col.notna(), None).tolist()

    for file, part in summary.groupby("file", sort=False):
        meta = ts.meta.get(file, {})
        typer.echo(f"{file}: {meta.get('format')}, {_plural(meta.get('rows', 0), 'call')}"
                   f"{', world size ' + str(meta['world_size']) if meta.get('world_size') else ''}"
                   + _runs_text(meta.get("runs")))
        # no rank recorded: the process instead (columns aligned within the file)
        who = [f"process {p}" if r is None and p is not None else f"rank {'-' if r is None else r!s:>4}"
               for r, p in zip(values(part["rank"]), values(part["process"]), strict=True)]
        width = max(map(len, who))
        typer.echo("\n".join(
            f"  {w:<{width}}  step {'-' if st is None else st!s:>5}  {op:<15} {c:>6} "
            f"{'call ' if c == 1 else 'calls'}  in {'?' if b is None else format_bytes(float(b))}"
            for w, st, op, c, b in zip(who, values(part["step"]), part["op"].tolist(), part["calls"].tolist(),
                                       values(part["in_bytes"]), strict=True)))
    total = summary.groupby("op")["calls"].sum()
    typer.echo("total: " + ", ".join(f"{op} {n}" for op, n in total.items()))
    if ts.skipped:
        typer.echo(f"skipped {_plural(ts.skipped.count, 'unreadable line')}, e.g. "
                   + "; ".join(f"{f}:{ln}: {why}" for f, ln, why in ts.skipped.examples[:3]), err=True)


# --- report: the design-review PDF (zerocalc.report) ------------------------------


@app.command("report")
def report_cmd(
    output: Annotated[str, typer.Option("-o", "--output", help="PDF to write.")] = (
        "reports/zero-colocation-review.pdf"),
    psi: Annotated[str | None, typer.Option("--psi", help="Parameters: 7.5e9, 7.5B, 175B, 1T "
                                            "[default: 7.5e9].")] = None,
    n: Annotated[int, typer.Option("--n", help="Data-parallel ranks N of the cluster.")] = 64,
    gpus_per_node: Annotated[int | None, typer.Option(
        "--gpus-per-node", help="GPUs per node [default: the topology's].")] = None,
    topology: Annotated[str, typer.Option(
        "--topology",
        help=_TOPOLOGY_HELP)] = "dgx-a100",
    dtype: Annotated[str, typer.Option("--dtype", help=_DTYPE_HELP)] = "fp16",
    trace: Annotated[list[str] | None, typer.Option(
        "--trace", help="A trace file or a directory of one run (repeat for several runs); "
                        "default: the real traces bundled with zerocalc.")] = None,
    model: Annotated[str | None, typer.Option("--model", help=_MODEL_HELP)] = None,
    gpu_memory: Annotated[str | None, typer.Option(
        "--gpu-memory", help="Memory of one GPU (80GB, 141e9): the summary flags model states above it "
                             "[default: the topology's, where it gives one].")] = None,
) -> None:
    """Write the design-review PDF: question, model, derivations, figures, validation, verdict, plan."""
    import time
    from pathlib import Path


    start = time.perf_counter()

    def progress(message: str) -> None:
        typer.echo(f"[{time.perf_counter() - start:5.1f} s] {message}", err=True)

    # Every option and input is checked before any work (and before any progress line): the
    # cluster, the output path, the traces; only then are the model and matplotlib loaded.
    from zerocalc.dtypes import canonical_dtype
    from zerocalc.report.config import ReportConfig
    from zerocalc.report.inputs import check_output, check_traces
    from zerocalc.topology import PRESETS
    from zerocalc.units import parse_bytes

    paths = tuple(Path(t) for t in trace or ())
    topo = _load_topology(topology, None, None, None, None)
    psi_count, _ = model_psi(psi, model, default="7.5e9")
    warn_implausible(psi=psi_count, n=n)
    config = ReportConfig(psi=float(psi_count), n=n,
                          gpus_per_node=topo.gpus_per_node if gpus_per_node is None else gpus_per_node,
                          topology=topo if topology not in PRESETS else topology,
                          comm_dtype=canonical_dtype(dtype), traces=paths,
                          gpu_memory_bytes=None if gpu_memory is None else float(
                              parse_bytes(gpu_memory, "--gpu-memory")))
    check_output(output, config)
    check_traces(paths)
    progress("importing the model")
    from zerocalc.report import write_report

    write_report(output, config, progress)
    progress(f"wrote {output}")


# --- NCCL's cost model on nccl-tests sweeps: check --topology, fit --out (zerocalc.nccl) -------

def _sweep_inputs(paths: list[str], n: int | None, strict: bool):
    """Each nccl-tests file: (path, rows, op, group size, version the file states, skipped lines)."""
    from pathlib import Path

    from zerocalc.errors import ConfigError, TraceFormatError
    from zerocalc.nccl.predict import version_from_text
    from zerocalc.traces.nccl_tests import parse

    if n is not None and n < 1:
        raise ConfigError("must be a whole number ≥ 1", option="--n")
    out = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace").splitlines(True)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        res = parse(iter(text), path, strict=strict)
        if not res.rows:
            raise TraceFormatError(path, None, "no nccl-tests result rows")
        if any(r["op"] == "other" for r in res.rows):
            raise TraceFormatError(path, None, "cannot tell the collective (no <op>_perf in the file or "
                                               "its name)")
        groups: dict[tuple, list] = {}
        for r in res.rows:  # one sweep per run, collective and group size the file holds
            p = n or r.get("group_size") or res.meta.get("world_size")
            groups.setdefault((r.get("run"), r["op"], p), []).append(r)
        for (_, op, p), rows in groups.items():
            if not p:
                raise ConfigError(f"{path}: the file does not say how many ranks ran; give --n", option="--n")
            version = rows[0].get("nccl_version") or version_from_text(text)  # the run's own
            out.append((path, rows, op, int(p), version, res.skipped))
    return out


def _sweep_version(path: str, given: str | None, stated: str | None) -> tuple[str, list[str]]:
    from zerocalc.nccl import LATEST

    if given:
        return given, []
    if stated:
        return stated, []
    v = LATEST.tag.lstrip("v").split("-")[0]
    return v, [f"{path} states no NCCL version; priced as NCCL {v} (--nccl-version to choose)"]


def _sweep_check(paths, topology, nccl_version, nccl_algo, nccl_proto, n, fmt, strict,
                 nccl_tuner=None) -> None:
    from zerocalc.nccl.env import restrictions, settings
    from zerocalc.validate.sweep import compare_sweep

    topo = _load_topology(topology, None, None, None, None)
    restrictions(nccl_algo, nccl_proto)  # a bad list is refused before any file is read
    tuner = _read_tuner(nccl_tuner, topo)
    sweeps, texts = [], []
    for path, rows, op, p, stated, skipped in _sweep_inputs(paths, n, strict):
        version, notes = _sweep_version(path, nccl_version, stated)
        env = settings(topo, version, nccl_algo, nccl_proto, tuner_given=tuner is not None)
        cmp = compare_sweep(rows, topo, op=op, group_size=p, nccl_version=version,
                            algo_enable=env.algo_enable, proto_enable=env.proto_enable,
                            nvls_enable=env.nvls_enable, tuner=tuner)
        d = cmp.as_dict()
        d["file"], d["topology"] = path, topo.name
        d["notes"] = notes + list(env.notes) + d["notes"] + _skip_notes(skipped)
        sweeps.append(d)
        texts.append(_sweep_text(d, cmp))
    if fmt == "json":
        import json

        typer.echo(json.dumps(_nan_to_none({"sweeps": sweeps}), indent=2, allow_nan=False,
                              default=_json_default))
    else:
        typer.echo("\n\n".join(texts))


def _fit_out(files, out, topology, nccl_version, n, strict) -> None:
    """Calibrate NCCL's model on the sweeps and write the topology TOML (never over an input)."""
    from dataclasses import replace
    from pathlib import Path

    from zerocalc.errors import ConfigError
    from zerocalc.nccl.env import settings
    from zerocalc.topology import topology_to_toml
    from zerocalc.validate.sweep import compare_sweep, fit_calibration

    target = Path(out)
    if any(target.exists() and target.resolve() == Path(f).resolve() for f in [*files, topology]):
        raise ConfigError(f"{out} is an input; choose another file", option="--out")
    base = _load_topology(topology, None, None, None, None)
    tuner = _read_tuner(None, base)  # the tuner the topology names: check will price under it too
    fits, lines = [], []
    for path, rows, op, p, stated, _ in _sweep_inputs(files, n, strict):
        version, notes = _sweep_version(path, nccl_version, stated)
        env = settings(base, version, None, None, tuner_given=tuner is not None)  # as check prices it
        cmp = compare_sweep(rows, replace(base, nccl_calibration=()), op=op, group_size=p,
                            nccl_version=version, algo_enable=env.algo_enable, proto_enable=env.proto_enable,
                            nvls_enable=env.nvls_enable, tuner=tuner)
        got = fit_calibration(cmp)
        fits += [c for c in got if (c.op, c.ranks) not in {(f.op, f.ranks) for f in fits}]
        lines += [f"{path}: {t}" for t in notes + list(env.notes) + list(cmp.notes)]
        for c in got:
            lines.append(f"{path}: {c.op} on {c.ranks} ranks, {c.algorithm}/{c.protocol}: "
                         f"α = {c.alpha_us:.4g} µs, bw = {c.bw_GBps:.4g} GB/s")
    name = Path(out).stem
    topo = replace(base, name=name, title=f"{base.title}, calibrated on {', '.join(files)}",
                   nccl_calibration=tuple(fits))
    text = topology_to_toml(topo, header=f"zerocalc fit --out: {base.name} calibrated on {', '.join(files)}")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write: {exc.strerror or exc}", option="--out") from None
    typer.echo("\n".join([*lines, f"wrote {out}"]))


if __name__ == "__main__":  # python -m zerocalc.cli
    main()
