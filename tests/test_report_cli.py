"""`zerocalc report`: every option and input is checked before any work.

A bad output path, option or trace exits 2 with one line on stderr and no progress line
before it; nothing is created on the way (no directory, no partial file).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc import report
from zerocalc.cli import app
from zerocalc.report import inputs

DATA = Path(__file__).parent / "data" / "traces"
KINETO = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"


@pytest.fixture
def no_work(monkeypatch):
    """write_report replaced: reaching it means every check passed (and nothing heavy ran)."""
    calls = []
    monkeypatch.setattr(report, "write_report", lambda out, config, progress=None: calls.append(out))
    return calls


def _refused(args, needle, calls):
    res = CliRunner().invoke(app, ["report", *args])
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output, res.stderr
    assert res.stderr.startswith("error: ") and needle in res.stderr, res.stderr
    assert "[" not in res.stderr.split("error:")[0]  # no progress line came first
    assert calls == []
    return res.stderr


def test_output_directory_must_exist_and_is_never_created(tmp_path, no_work):
    out = tmp_path / "no" / "such" / "dir" / "r.pdf"
    msg = _refused(["-o", str(out)], "--output", no_work)
    assert f"directory {tmp_path / 'no' / 'such' / 'dir'} does not exist" in msg
    assert list(tmp_path.iterdir()) == []


def test_output_must_end_in_pdf(tmp_path, no_work):
    for name in ("review.txt", "review", "review.pdf.gz"):
        _refused(["-o", str(tmp_path / name)], "give a file name ending in .pdf", no_work)
    CliRunner().invoke(app, ["report", "-o", str(tmp_path / "Review.PDF")])
    assert no_work == [str(tmp_path / "Review.PDF")]  # the case of the suffix does not matter


def test_output_under_a_file_is_refused(tmp_path, no_work):
    f = tmp_path / "notes.txt"
    f.write_text("x\n")
    _refused(["-o", str(f / "r.pdf")], f"{f} is not a directory", no_work)


def test_output_directory_that_cannot_be_written(tmp_path, no_work, monkeypatch):
    # As root every directory is writable; the check creates a temporary file, so make that fail
    # the way it fails for a user without write permission (EACCES) or on a read-only mount (EROFS).
    import tempfile

    for code, words in ((errno.EACCES, "permission denied"), (errno.EROFS, "read-only file system")):
        def refuse(*_a, code=code, **_k):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
        msg = _refused(["-o", str(tmp_path / "r.pdf")], "--output", no_work)
        assert f"cannot write in directory {tmp_path} ({words})" in msg
    assert list(tmp_path.iterdir()) == []


def test_bad_options_are_refused_before_any_work(tmp_path, no_work):
    out = str(tmp_path / "r.pdf")
    _refused(["-o", out, "--n", "0"], "--n: must be a whole number ≥ 1", no_work)
    _refused(["-o", out, "--gpus-per-node", "0"], "--gpus-per-node: must be a whole number ≥ 1", no_work)
    _refused(["-o", out, "--psi", "0"], "--psi", no_work)
    _refused(["-o", out, "--dtype", "fp7"], "fp7", no_work)
    _refused(["-o", out, "--topology", "no-such-preset"], "no-such-preset", no_work)


def test_trace_that_is_not_a_file_or_directory_is_refused_unopened(tmp_path, no_work):
    # a device (a pipe is read, as check reads one: test_report_nccl.py) is refused from its stat alone
    _refused(["-o", str(tmp_path / "r.pdf"), "--trace", os.devnull], "not a regular file or directory",
             no_work)


def test_unreadable_trace_file(tmp_path, no_work, monkeypatch):
    # chmod 000 does not stop root: make the open fail as it does for a user (EACCES)
    trace = tmp_path / "run" / "rank0.json.gz"
    trace.parent.mkdir()
    shutil.copy(KINETO, trace)
    real_open = open

    def guarded(file, *a, **k):
        if Path(file) == trace:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(inputs, "open", guarded, raising=False)
    msg = _refused(["-o", str(tmp_path / "r.pdf"), "--trace", str(trace)], "--trace", no_work)
    assert f"{trace}: cannot be read (permission denied)" in msg
    # the same file inside a directory given as the run
    _refused(["-o", str(tmp_path / "r.pdf"), "--trace", str(trace.parent)], f"{trace}: cannot be read",
             no_work)


def test_trace_that_is_no_trace(tmp_path, no_work):
    notes = tmp_path / "run" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("loss 2.31 at step 10\n")
    _refused(["-o", str(tmp_path / "r.pdf"), "--trace", str(notes)], f"{notes}: not a trace", no_work)
    _refused(["-o", str(tmp_path / "r.pdf"), "--trace", str(notes.parent)],
             f"{notes.parent}: no trace of a known format in the directory", no_work)
    bad_gz = tmp_path / "rank0.json.gz"
    bad_gz.write_bytes(KINETO.read_bytes()[:1000][:2] + b"\x00" * 50)
    _refused(["-o", str(tmp_path / "r.pdf"), "--trace", str(bad_gz)], "corrupt gzip data", no_work)


def test_good_inputs_reach_the_report(tmp_path, no_work):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(KINETO, run / "rank0.json.gz")
    (run / "README.md").write_text("notes\n")  # skipped by the reader, and so by the check
    res = CliRunner().invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--trace", str(run),
                                   "--trace", str(KINETO)])
    assert res.exit_code == 0, res.output
    assert no_work == [str(tmp_path / "r.pdf")]


def test_the_check_reads_as_many_bytes_as_the_detector():
    from zerocalc.traces import reader
    from zerocalc.traces.detect import HEAD_BYTES

    assert inputs._HEAD_BYTES == HEAD_BYTES and inputs._SKIP_SUFFIXES == reader._SKIP_SUFFIXES


def test_write_report_checks_too_and_creates_no_directory(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        report.write_report(tmp_path / "new" / "r.pdf")
    assert list(tmp_path.iterdir()) == []
