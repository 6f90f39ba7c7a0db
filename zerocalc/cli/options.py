"""What the commands share: option help texts and names, and the reading and checking of option
values (Ψ or a model preset, schemes, topology, tuner, output format, bounds), the traces reader with
its progress line, the progress bar and the JSON helpers.

Nothing heavy is imported here at start-up: each helper imports the library it calls when it runs.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Annotated

import typer

from zerocalc.cli.application import _echo_err


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

_NCCL_ENV_HELP = ("NCCL_NAME=VALUE, a variable NCCL runs with: priced where NCCL's cost model reads it, "
                  "said in a note where not; repeat for several. On nccl-tests sweeps, set as if the file's "
                  "lines set it (over them); NCCL_NAME= unsets one the file sets.")

#: The NCCL options of every command that prices with NCCL's cost model (``table``, ``report``, ``check``),
#: one definition each: ``--nccl-algo`` / ``--nccl-proto`` read the shell's ``NCCL_ALGO`` / ``NCCL_PROTO``
#: when not given, as NCCL itself would; ``--nccl-env`` is read by
#: :func:`zerocalc.nccl.env_given.parse_given`.
NcclAlgoOption = Annotated[str | None, typer.Option(
    "--nccl-algo", envvar="NCCL_ALGO", help="NCCL_ALGO list restricting NCCL's algorithms.")]
NcclProtoOption = Annotated[str | None, typer.Option(
    "--nccl-proto", envvar="NCCL_PROTO", help="NCCL_PROTO list restricting NCCL's protocols.")]
NcclEnvOption = Annotated[list[str] | None, typer.Option("--nccl-env", help=_NCCL_ENV_HELP)]
#: ``--bucket``'s help, shared by table, feasibility and report
BUCKET_HELP = ("Largest collective call (25MiB: DDP's bucket_cap_mb; 1GB: DeepSpeed's reduce_bucket_size of "
               "5e8 fp16 elements): NCCL's time prices each phase as equal calls no larger, the pair NCCL "
               "picks for that size; 'implementation': each gradient reduction in its implementation's "
               "default bucket (DDP's 25MiB, DeepSpeed's 5e8 elements), other phases one call [default: one "
               "call per phase, its whole vector].")
#: ``--nccl-version`` of the commands that price the schemes (``table``, ``report``); ``check`` and ``fit``
#: price files, which may state their own.
NcclVersionOption = Annotated[str | None, typer.Option(
    "--nccl-version", help="NCCL version whose cost model prices the schemes (RCCL's on an AMD topology) "
                           "[default: the one a calibrated topology (fit --out) was fitted at, else the "
                           "latest].")]


#: zerocalc.topology.TOPOLOGY_NAMES, spelled out (the topology module is not imported at start-up;
#: a test keeps the two equal).
TOPOLOGY_PRESETS = ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "dgx-b300", "abci-a", "abci-v",
                    "hgx-a800", "hgx-h800", "hgx-h20", "gcp-a3-mega", "gcp-a3-high", "dgx-1-v100",
                    "gb200-nvl72", "gb300-nvl72", "gh200", "leonardo-booster", "hgx-h100-4gpu", "dgx-spark",
                    "aws-p4d", "aws-p4de", "aws-p5", "aws-p5e", "aws-p5en", "aws-p6-b200", "aws-p6-b300",
                    "pcie-gen3", "pcie-gen4", "pcie-gen5", "ethernet-100g", "amd-mi300x", "amd-mi325x",
                    "amd-mi350x", "amd-mi355x", "amd-mi250x", "amd-mi300a")
_TOPOLOGY_HELP = f"Preset ({', '.join(TOPOLOGY_PRESETS)}) or a .toml file."

#: zerocalc.traces.detect.FORMATS, spelled out: importing zerocalc.traces at start-up would load
#: numpy and pandas before any command runs (a test keeps the two equal).
TRACE_FORMATS = ("nccl_log", "kineto", "nccl_tests", "nccl_tests_json", "deepspeed_comms", "flight_recorder")
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


_OFI_HELP = ("Price under aws-ofi-nccl's tuner plugin of this release (1.9.0-1.21.1), loaded by NCCL in "
             "place of its own choice (AWS EFA clusters: aws-p5, aws-p5e, aws-p5en).")


def _read_tuners(nccl_tuner: str | None, ofi_tuner: str | None, topo):
    """The tuner plugin a command prices under: ``(TunerConfig or None, OfiTuner or None)``, at most one of
    them (NCCL loads one tuner plugin): ``--nccl-tuner`` or the topology's ``nccl_tuner``
    (:func:`_read_tuner`), or ``--ofi-tuner``, aws-ofi-nccl's of that release on the topology's EC2
    platform (:func:`zerocalc.nccl.ofi_tuner.platform_of`). An unknown or unmodelled release, or both
    given, is a :class:`ConfigError` naming ``--ofi-tuner``."""
    from dataclasses import replace

    from zerocalc.errors import ConfigError
    from zerocalc.nccl.ofi_tuner import ofi_tuner as ofi_release
    from zerocalc.nccl.ofi_tuner import platform_of

    if ofi_tuner is None:
        return _read_tuner(nccl_tuner, topo), None
    ofi = replace(ofi_release(ofi_tuner), platform=platform_of(topo.name))
    if nccl_tuner is not None:
        raise ConfigError("NCCL loads one tuner plugin: give --nccl-tuner or --ofi-tuner, not both",
                          option="--ofi-tuner")
    if topo.nccl_tuner:
        raise ConfigError(f"NCCL loads one tuner plugin, and topology {topo.name} names tuner rules "
                          f"({topo.nccl_tuner}): give a topology without nccl_tuner", option="--ofi-tuner")
    return None, ofi


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
