"""The ``zerocalc`` application: its command groups, ``--version``, the console-script entry point,
and the rule that every :class:`~zerocalc.errors.ZerocalcError`, OS error and usage error becomes one
line on stderr and exit code 2, never a traceback.

The commands themselves live in :mod:`zerocalc.cli.model_commands`,
:mod:`zerocalc.cli.review_commands` and :mod:`zerocalc.cli.trace_commands`; :mod:`zerocalc.cli`
registers them on :data:`app`.
"""

from __future__ import annotations

import sys
import typing
from typing import Annotated

import typer
import typer.core

from zerocalc.errors import ZerocalcError


def _echo_err(text: str) -> None:
    typer.echo(text, err=True)


def os_error_line(exc: OSError) -> str:
    """An OS error as one line naming its path: ``out/r.pdf: Permission denied``."""
    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {what}" if paths else what


#: The variables an option sets (its envvar), named by the variable in the errors of their values.
_SET_BY = {"NCCL_ALGO": "--nccl-algo", "NCCL_PROTO": "--nccl-proto"}


def _named(exc: ZerocalcError, given: set[str], named_by: dict[str, str] | None = None) -> str:
    """The error's text, naming of the options it blames (``--n/--gpus-per-node``) those the user
    gave, so that ``--gpus-per-node 3`` is not reported as ``--n``; a name zerocalc does not know
    (:class:`~zerocalc.errors.UnknownNameError`) after the options whose value held it
    (``named_by``: name → options, :func:`_options_naming`); a bad ``NCCL_ALGO`` / ``NCCL_PROTO`` after
    the option that set it, where one did (:data:`_SET_BY`)."""
    from zerocalc.errors import ConfigError, UnknownNameError

    if isinstance(exc, UnknownNameError) and named_by and exc.name in named_by:
        return f"{named_by[exc.name]}: {exc}"
    if isinstance(exc, ConfigError) and _SET_BY.get(exc.option) in given:  # --nccl-algo sets NCCL_ALGO
        return f"{_SET_BY[exc.option]}: {exc}"
    if not isinstance(exc, ConfigError) or not exc.option or "/" not in exc.option:
        return str(exc)
    blamed = exc.option.split("/")
    return f"{'/'.join([o for o in blamed if o in given] or blamed)}: {exc.message}"


def _options_naming(group, argv: list[str]) -> dict[str, str]:
    """Each name the command line gives an option that takes a value (``--dtype int3``,
    ``--schemes=zero2,nope``: each comma-separated item), with the options that gave it
    (``--dtype/--grad-dtype`` where two did): the options of the command ``argv`` invokes, so that a
    flag before an argument is not read as its option."""
    cmd, i = group, 0
    while i < len(argv) and argv[i] in (getattr(cmd, "commands", None) or {}):
        cmd, i = cmd.commands[argv[i]], i + 1
    takes_value = {o for p in getattr(cmd, "params", ()) if getattr(p, "param_type_name", "") == "option"
                   and not getattr(p, "is_flag", False) and not getattr(p, "count", False) for o in p.opts}
    out: dict[str, list[str]] = {}
    for j in range(i, len(argv)):
        option, eq, value = argv[j].partition("=")
        if option not in takes_value or (not eq and j + 1 >= len(argv)):
            continue
        for name in (value if eq else argv[j + 1]).split(","):
            out.setdefault(name.strip(), []).append(option)
    return {name: "/".join(dict.fromkeys(opts)) for name, opts in out.items() if name}


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


def _take_plain_values_as_they_are(group) -> None:
    """Let every str, int, float, bool and list[str] parameter of every command take a value that already has
    its type (a str for str, an int for int after :func:`_read_numbers_alike`, strs for list[str]) as
    it is, as typer's own coercion returns it, without building that coercion: typer (0.29) builds a
    pydantic validator for every parameter of the command run, given or not, and importing pydantic and
    building them cost about 0.4 s of every command's start (``python -X importtime``). Any other
    value (one to convert, to check against a range or choices, or to refuse) goes to typer's own
    coercion, unchanged, with its messages; so does every parameter under a typer without this hook."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return
    plain = (str, int, float, bool)

    class _AsItIs(RuntimeParam):
        def _coerce_value(self, value, param, ctx):
            ann = self.annotation
            if typing.get_origin(ann) is list:
                if isinstance(value, list | tuple) and all(type(v) is str for v in value):
                    return list(value)
            elif type(value) is ann:
                return value
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    def as_it_is(param) -> None:
        desc = getattr(param, "type_descriptor", None)
        ann = getattr(desc, "annotation", None)
        if desc is None or getattr(param, "_runtime_param", 0) is not None or not (
                ann in plain or (typing.get_origin(ann) is list and typing.get_args(ann) == (str,))):
            return
        info = desc.parameter_info
        if desc.is_choice or desc.is_ranged or desc.is_path or desc.is_file or any(
                getattr(info, k, None) is not None for k in ("parser", "click_type")):
            return
        param._runtime_param = _AsItIs(parameter_info=info, annotation=ann)

    stack = [group]
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        for param in getattr(cmd, "params", ()):
            as_it_is(param)
        if hasattr(cmd, "get_help_option") and not getattr(cmd, "_zerocalc_help", False):
            def get_help_option(ctx, _orig=cmd.get_help_option):  # made on first use, and kept
                option = _orig(ctx)
                if option is not None:
                    as_it_is(option)
                return option

            cmd.get_help_option = get_help_option
            cmd._zerocalc_help = True


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
        _take_plain_values_as_they_are(self)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
            # Non-standalone click returns the code of a ``typer.Exit`` raised by a command;
            # commands themselves return None.
            code = rv if isinstance(rv, int) else 0
        except ZerocalcError as exc:
            words = list(sys.argv[1:] if argv is None else argv)
            _echo_err(f"error: {_named(exc, given, _options_naming(self, words))}")
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
    help="Read NCCL logs, PyTorch profiler traces and Flight Recorder dumps, nccl-tests and DeepSpeed comms "
         "logs.",
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
