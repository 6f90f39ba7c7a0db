"""The ``zerocalc`` command line: parse options, call the library, write the result.

No math lives here. Every :class:`~zerocalc.errors.ZerocalcError` and every usage
error becomes one line on stderr and exit code 2, never a traceback.

One module per part: :mod:`~zerocalc.cli.application` (the typer app, one-line errors, ``main``),
:mod:`~zerocalc.cli.options` (what the commands share in reading their options),
:mod:`~zerocalc.cli.model_commands` (table, derive), :mod:`~zerocalc.cli.review_commands`
(feasibility, report) and
:mod:`~zerocalc.cli.trace_commands` (check, fit, trace summary) with
:mod:`~zerocalc.cli.sweep_commands` (nccl-tests sweeps in check and fit; ``fit --out``:
:mod:`~zerocalc.cli.sweep_fit`). This module registers the
commands on the app, in the order ``zerocalc --help`` lists them; those that read traces read ``-`` and
pipes too (:func:`~zerocalc.cli.piped.piped_inputs`).
"""

from __future__ import annotations

from zerocalc.cli.application import _OneLineErrors, _read_numbers_alike, app, main, os_error_line, trace_app
from zerocalc.cli.model_commands import DeriveFormat, derive_command, table_command
from zerocalc.cli.options import (
    TOPOLOGY_PRESETS,
    TRACE_FORMATS,
    model_psi,
    output_format,
    warn_implausible,
)
from zerocalc.cli.piped import piped_inputs
from zerocalc.cli.review_commands import feasibility_cmd, report_cmd
from zerocalc.cli.trace_commands import check_cmd, fit_cmd, trace_summary

app.command("table")(table_command)
app.command("derive")(derive_command)
app.command("feasibility")(feasibility_cmd)
app.command("check")(piped_inputs("traces")(check_cmd))
app.command("fit")(piped_inputs("files")(fit_cmd))
trace_app.command("summary")(piped_inputs("paths")(trace_summary))
app.command("report")(piped_inputs("trace")(report_cmd))

__all__ = [
    "TOPOLOGY_PRESETS", "TRACE_FORMATS", "DeriveFormat", "_OneLineErrors", "_read_numbers_alike", "app",
    "check_cmd", "derive_command", "feasibility_cmd", "fit_cmd", "main", "model_psi", "os_error_line",
    "output_format", "report_cmd", "table_command", "trace_app", "trace_summary", "warn_implausible",
]
