"""OS errors are one line naming the path and exit 2, wherever a file is opened; a closed pipe
on stdout (``zerocalc ... | head -1``) exits 0 without a traceback."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import zerocalc.traces.reader as reader
from zerocalc.cli import app

ROOT = Path(__file__).parent.parent
TRACE = ROOT / "tests" / "data" / "traces" / "nccl-tests" / "broadcast_perf-pre2022-NA-2ranks.txt"
runner = CliRunner()


def _one_line(out) -> str:
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1, out.output
    assert "Traceback" not in out.output
    return lines[0]


def test_unreadable_trace_everywhere(monkeypatch):
    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(reader, "open", denied, raising=False)
    for cmd in (["trace", "summary"], ["fit"], ["check"]):
        out = runner.invoke(app, [*cmd, str(TRACE)])
        assert out.exit_code == 2, (cmd, out.output)
        assert _one_line(out) == f"error: {TRACE}: Permission denied"


@pytest.mark.parametrize("cmd", [["trace", "summary"], ["fit"], ["check"]])
def test_dev_null_is_not_a_regular_file(cmd):
    out = runner.invoke(app, [*cmd, os.devnull])
    assert out.exit_code == 2
    assert _one_line(out) == f"error: {os.devnull}: not a regular file"


def test_unreadable_topology_file(tmp_path, monkeypatch):
    topo = tmp_path / "cluster.toml"
    topo.write_text("name = 'x'\n")
    real = Path.read_text

    def denied(self, *args, **kwargs):
        if self == topo:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    out = runner.invoke(app, ["table", "--topology", str(topo)])
    assert out.exit_code == 2 and str(topo) in _one_line(out) and "Permission denied" in out.output


def test_any_other_os_error_is_one_line(monkeypatch):
    import zerocalc.evaluate as evaluate

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", "/some/out.csv")

    monkeypatch.setattr(evaluate, "evaluate", full)
    out = runner.invoke(app, ["table"])
    assert out.exit_code == 2
    assert _one_line(out) == "error: /some/out.csv: No space left on device"


@pytest.mark.skipif(os.name != "posix" or shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs setpriv, as root, to give up the override of file permissions")
def test_unreadable_trace_as_a_user_would(tmp_path):
    # root reads any file: drop the capability that lets it, as an ordinary user has none
    f = tmp_path / "trace.txt"
    f.write_bytes(TRACE.read_bytes())
    f.chmod(0)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m",
                        "zerocalc", "trace", "summary", str(f)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stderr.strip()) == (2, f"error: {f}: Permission denied")


def test_closed_pipe_exits_0():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen([sys.executable, "-m", "zerocalc", "table", "--format", "json"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        p.stdout.close()  # the reader is gone before the first byte is written ('| head' done early)
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0
        assert "Traceback" not in err and "Broken pipe" not in err and "error" not in err.lower()
