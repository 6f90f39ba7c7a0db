"""The ``zerocalc`` command line: parse options, call the library, write the result.

No math lives here. Every :class:`~zerocalc.errors.ZerocalcError` and every usage
error becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer
import typer.core

from zerocalc.errors import ZerocalcError


def _echo_err(text: str) -> None:
    typer.echo(text, err=True)


class _OneLineErrors(typer.core.TyperGroup):
    """A command group whose errors are one line on stderr and exit code 2.

    Usage errors are recognised by duck typing (``format_message`` and ``exit_code``),
    whichever click (vendored by typer or not) raised them.
    """

    def main(self, *args, **kwargs):  # type: ignore[override]
        standalone = kwargs.pop("standalone_mode", True)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
            # Non-standalone click returns the code of a ``typer.Exit`` raised by a command;
            # commands themselves return None.
            code = rv if isinstance(rv, int) else 0
        except ZerocalcError as exc:
            _echo_err(f"error: {exc}")
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
    add_completion=False,
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


def main() -> None:
    """Console-script entry point."""
    app()


# ---------------------------------------------------------------------------
# Commands are added below, one section per concern (table/derive, feasibility,
# trace, check/fit, report). Each section only wires options to library calls.
# ---------------------------------------------------------------------------
