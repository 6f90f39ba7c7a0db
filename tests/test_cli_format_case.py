"""``--format`` is read whatever its case in every command (``JSON`` is ``json``), and the output is
the canonical format's, byte for byte; anything else exits 2 with one line naming ``--format``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces"
RUN = str(DATA / "real-runs" / "ddp-bf16" / "rank0.json.gz")
SWEEP = str(DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes.txt")

#: command → its arguments before --format
COMMANDS = {
    "table": ["table", "--psi", "1B", "--n", "8", "--schemes", "dp,zero2"],
    "derive": ["derive", "zero2"],
    "feasibility": ["feasibility", "--n", "2", "--steps", "1", "--schemes", "dp"],
    "check": ["check", RUN],
    "fit": ["fit", SWEEP],
    "trace summary": ["trace", "summary", RUN],
}
runner = CliRunner()


def _out(args):
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("command", list(COMMANDS))
def test_format_json_in_capitals_is_json(command):
    args = COMMANDS[command]
    canonical = _out([*args, "--format", "json"])
    json.loads(canonical)
    assert _out([*args, "--format", "JSON"]) == _out([*args, "--format", "Json"]) == canonical


@pytest.mark.parametrize("command", ["table", "check"])
def test_format_markdown_in_any_case_is_markdown(command):
    args = COMMANDS[command]
    assert _out([*args, "--format", "Markdown"]) == _out([*args, "--format", "markdown"])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unknown_format_is_one_line_naming_the_option(command):
    r = runner.invoke(app, [*COMMANDS[command], "--format", "xml"])
    assert r.exit_code == 2 and "--format" in r.stderr and len(r.stderr.strip().splitlines()) == 1
