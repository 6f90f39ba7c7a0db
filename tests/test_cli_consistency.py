"""One behaviour across commands: numbers parsed alike, names case-insensitive, -V, completion,
and errors that name the option the user gave."""

import pytest
import typer
from typer.testing import CliRunner

from zerocalc import __version__
from zerocalc.cli import _read_numbers_alike, app

runner = CliRunner()


def _err(out) -> str:
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out.output, out.output
    return lines[0]


@pytest.mark.parametrize(("given", "n"), [("1e3", 1000), ("1,024", 1024), ("2K", 2000), ("64", 64)])
def test_whole_numbers_read_like_psi(given, n):
    out = runner.invoke(app, ["table", "--n", given, "--psi", "1e9", "--schemes", "dp"])
    assert out.exit_code == 0, out.output
    assert f"N = {n} (" in out.output


def test_real_numbers_read_alike():
    out = runner.invoke(app, ["table", "--k", "1.2e1", "--schemes", "dp", "--intra-bw-GBps", "3e2"])
    assert out.exit_code == 0 and "K = 12;" in out.output


@pytest.mark.parametrize(("args", "msg"), [
    (["--n", "1.5"], "error: --n: must be a whole number, got '1.5'"),
    (["--n", "lots"], "error: --n: 'lots' is not a whole number"),
    (["--k", "x"], "error: --k: 'x' is not a number"),
])
def test_bad_numbers_name_the_option(args, msg):
    assert _err(runner.invoke(app, ["table", *args])).startswith(msg)


def test_every_numeric_option_of_every_command_uses_the_one_parser():
    group = typer.main.get_command(app)
    _read_numbers_alike(group)
    stack, numeric = [group], []
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        for p in cmd.params:
            ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
            if ann in (int, float) or ann in (list[int], list[float]):
                numeric.append((cmd.name, p.name, getattr(p, "_zerocalc_numbers", False)))
    assert len(numeric) >= 10 and all(ok for *_, ok in numeric), numeric


def test_error_names_the_option_given():
    # N = 64 (the default) is not a multiple of 3 GPUs per node: the user gave --gpus-per-node
    line = _err(runner.invoke(app, ["table", "--gpus-per-node", "3"]))
    assert line.startswith("error: --gpus-per-node: N = 64 is not a multiple of the 3 GPUs per node")
    line = _err(runner.invoke(app, ["table", "--n", "12"]))
    assert line.startswith("error: --n: N = 12 is not a multiple of the 8 GPUs per node")


def test_names_are_case_insensitive():
    out = runner.invoke(app, ["table", "--schemes", "ZeRO2,Colocated", "--topology", "DGX-H100"])
    assert out.exit_code == 0, out.output
    assert "dgx-h100" in out.output and "\nzero2 " in out.output and "\ncolocated " in out.output
    out = runner.invoke(app, ["derive", "ZERO3", "--algorithm", "Ring"])
    assert out.exit_code == 0 and out.output.startswith("zero3:")


def test_topology_help_names_every_preset():
    from zerocalc.cli import TOPOLOGY_PRESETS
    from zerocalc.topology import TOPOLOGY_NAMES

    assert TOPOLOGY_PRESETS == TOPOLOGY_NAMES
    for cmd in ("table", "report"):
        out = runner.invoke(app, [cmd, "--help"])
        assert "gcp-a3-mega" in out.output and "dgx-b200" in out.output


def test_trace_format_help_names_every_format():
    from zerocalc.cli import TRACE_FORMATS
    from zerocalc.traces.detect import FORMATS

    assert TRACE_FORMATS == FORMATS


def test_short_version_flag():
    for flag in ("-V", "--version"):
        out = runner.invoke(app, [flag])
        assert out.exit_code == 0 and out.output == f"zerocalc {__version__}\n"


def test_shell_completion_is_offered(monkeypatch):
    out = runner.invoke(app, ["--help"])
    assert "--install-completion" in out.output and "--show-completion" in out.output
    # --show-completion is a flag that names the shell it finds among the process's parents; a run with no
    # shell above it (a detached job) finds none, so the shell is named here, as a user's bash would be found
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    out = runner.invoke(app, ["--show-completion"])
    assert out.exit_code == 0
    assert "complete -o default -F" in out.output and "_ZEROCALC_COMPLETE" in out.output


def test_the_file_a_command_writes_is_named_alike(tmp_path):
    """``fit`` writes its TOML and ``report`` its PDF under ``--out``, ``--output`` or ``-o`` alike (fit
    took only ``--out``, report only ``-o`` / ``--output``: ``report --out r.pdf`` was 'No such option')."""
    from sweep_files import DATA

    sweep = DATA / "all_gather_perf-8xH100-1node-nccl2.29.2.txt"
    for flag in ("--out", "--output", "-o"):
        toml = tmp_path / f"fit{flag}.toml"
        res = runner.invoke(app, ["fit", str(sweep), flag, str(toml)])
        assert res.exit_code == 0 and toml.exists(), res.output
    for flag in ("--out", "--output", "-o"):
        res = runner.invoke(app, ["report", flag, str(tmp_path / "no-such-dir" / "r.pdf")])
        assert "No such option" not in res.output and res.exit_code == 2, res.output
