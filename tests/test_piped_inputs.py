"""Traces piped in: ``zerocalc check -`` (``all_reduce_perf ... | zerocalc check -``, a run pasted into a
terminal), ``/dev/stdin`` and a FIFO (a shell's ``<(ssh host cat run.log)``) are read as the file itself
is, named ``<stdin>`` or as given; the rows are counted from the file by a plain split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.cli.piped import copied
from zerocalc.errors import TraceFormatError
from zerocalc.traces import piped

SWEEP = "all_reduce_perf-8xH100-dgx-1node-dgxc-benchmarking.txt"
TRACES = Path(__file__).parent / "data" / "traces"
runner = CliRunner()


def shell(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The command as a shell runs it, standard input a pipe holding ``stdin``."""
    return subprocess.run([sys.executable, "-m", "zerocalc", *args], input=stdin, capture_output=True)


class _Result:
    def __init__(self, res) -> None:
        self.returncode, self.stdout, self.stderr = res.exit_code, res.stdout_bytes, res.stderr_bytes


def zerocalc(*args: str, stdin: bytes | None = None) -> _Result:
    """The command run in this process, standard input holding ``stdin``."""
    return _Result(runner.invoke(app, list(args), input=stdin))


def sweep_of(out: bytes) -> dict:
    (sweep,) = json.loads(out)["sweeps"]
    return sweep


def test_check_reads_a_sweep_piped_to_dash_as_the_file():
    data = (DATA / SWEEP).read_bytes()
    res = shell("check", "-", "--format", "json", stdin=data)
    assert res.returncode == 0, res.stderr
    sweep = sweep_of(res.stdout)
    counted = file_rows(SWEEP)
    assert [r["bytes"] for r in sweep["rows"]] == [size for size, _, _ in counted]
    assert [r["measured_s"] * 1e6 for r in sweep["rows"]] == pytest.approx([t for _, t, _ in counted])
    assert any("<stdin>" in note for note in sweep["notes"])  # named as read, never as its copy
    assert b"zerocalc-input-" not in res.stdout + res.stderr


def test_text_output_names_standard_input():
    res = zerocalc("check", "-", stdin=(DATA / SWEEP).read_bytes())
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().startswith("<stdin>: all_reduce on 8 ranks")


def test_gzip_through_a_pipe():
    import gzip

    res = zerocalc("check", "-", "--format", "json", stdin=gzip.compress((DATA / SWEEP).read_bytes()))
    assert res.returncode == 0, res.stderr
    assert len(sweep_of(res.stdout)["rows"]) == len(file_rows(SWEEP))


def test_dev_stdin_behind_a_pipe():
    res = shell("check", "/dev/stdin", "--format", "json", stdin=(DATA / SWEEP).read_bytes())
    assert res.returncode == 0, res.stderr
    assert len(sweep_of(res.stdout)["rows"]) == len(file_rows(SWEEP))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_a_shell_process_substitution_gives_it(tmp_path):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    data = (DATA / SWEEP).read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    res = shell("check", str(fifo), "--format", "json")
    writer.join()
    assert res.returncode == 0, res.stderr
    sweep = sweep_of(res.stdout)
    assert len(sweep["rows"]) == len(file_rows(SWEEP))
    assert any(str(fifo) in note for note in sweep["notes"])


def test_fit_and_summary_read_standard_input(tmp_path):
    data = (DATA / SWEEP).read_bytes()
    res = zerocalc("fit", "-", "--out", str(tmp_path / "c.toml"), stdin=data)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "c.toml").exists()
    res = zerocalc("trace", "summary", "-", "--format", "csv", stdin=data)
    assert res.returncode == 0, res.stderr
    assert f",all_reduce,{len(file_rows(SWEEP))}," in res.stdout.decode()


def test_an_nccl_log_through_a_pipe_reads_as_the_file():
    log = TRACES / "nccl-debug" / "rccl-4ranks-allreduce-allgather.txt"
    lines = log.read_text().splitlines()
    calls = [ln for ln in lines if " opCount " in ln]  # one line per call, counted by a plain split
    res = zerocalc("trace", "summary", "-", "--format", "json", stdin=log.read_bytes())
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == len(calls)


@pytest.mark.parametrize("data, reason", [(b"", "empty file"), (b"junk\n", "unrecognised trace format")])
def test_bad_input_on_standard_input_is_one_line(data, reason):
    res = shell("check", "-", stdin=data)
    assert res.returncode == 2
    assert res.stderr.decode().strip().splitlines() == [res.stderr.decode().strip()]
    assert res.stderr.decode().startswith(f"error: <stdin>: {reason}")


def test_a_dask_cluster_cannot_read_standard_input():
    res = zerocalc("check", "-", "--scheduler", "tcp://127.0.0.1:1", stdin=(DATA / SWEEP).read_bytes())
    assert res.returncode == 2
    assert res.stderr.decode().startswith("error: --scheduler: ")


def test_copies_are_removed_and_dash_twice_is_read_once(monkeypatch, tmp_path):
    import io

    class Stdin:
        buffer = io.BytesIO(b"x" * 10)

    monkeypatch.setattr(sys, "stdin", Stdin)
    plain = tmp_path / "plain.txt"
    plain.write_text("y")
    with copied(["-", str(plain), "-"], cap=100) as names:
        assert names == ["<stdin>", str(plain), "<stdin>"]
        copy = piped.source("<stdin>")
        assert Path(copy).read_bytes() == b"x" * 10
        assert piped.source(str(plain)) == str(plain)  # a plain file is read where it is
    assert not Path(copy).exists() and not piped.is_copy("<stdin>")


def test_more_than_the_cap_is_refused(monkeypatch):
    import io

    class Stdin:
        buffer = io.BytesIO(b"x" * (3 << 20))

    monkeypatch.setattr(sys, "stdin", Stdin)
    with pytest.raises(TraceFormatError, match=r"<stdin>: more than"), copied(["-"], cap=2 << 20):
        pass
    assert not piped.is_copy("<stdin>")


def test_a_piped_log_large_enough_to_split_is_read_here(monkeypatch):
    """A log the reader would scan in worker processes (monkeypatched thresholds: every log is large) is
    read in this process when piped in: the workers could not open its copy by the name it is read under."""
    from zerocalc.traces import reader

    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 1)
    log = TRACES / "nccl-debug" / "rccl-4ranks-allreduce-allgather.txt"
    calls = [ln for ln in log.read_text().splitlines() if " opCount " in ln]
    res = zerocalc("trace", "summary", "-", "--format", "json", stdin=log.read_bytes())
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == len(calls)
