"""Progress of a long read: reported by the reader, drawn on stderr only when it is a terminal."""

import io
from pathlib import Path

from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces
from zerocalc.traces.progress import Meter, terminal_meter

DATA = Path(__file__).parent / "data" / "traces"
LOG = DATA / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_meter_shows_bytes_files_rate_and_time_left_then_clears():
    now = [0.0]
    out = _Tty()
    meter = Meter(out, clock=lambda: now[0])
    now[0] = 2.0
    meter(1_000_000, 4_000_000, 3, 16)  # 1 MB in 2 s: 0.5 MB/s, 3 MB left: 6 s
    assert out.getvalue() == "\rreading 1.00 MB of 4.00 MB (25%), 3 of 16 files, 500.00 KB/s, 6 s left"
    now[0] = 2.1
    meter(1_500_000, 4_000_000, 3, 16)  # within a quarter of a second of the last: not redrawn
    assert out.getvalue().count("\r") == 1
    meter.close()
    assert out.getvalue().endswith("\r" + " " * 70 + "\r")


def test_the_rate_is_taken_from_the_first_report_not_the_start():
    """Start-up before the first block (imports, worker processes) does not count in the rate: 1 MB
    by 2 s, then 3 MB by 4 s is 2 MB in 2 s, 1 MB/s, and the last 1 MB 1 s away."""
    now = [0.0]
    out = _Tty()
    meter = Meter(out, clock=lambda: now[0])
    now[0] = 2.0
    meter(1_000_000, 4_000_000, 0, 1)
    now[0] = 4.0
    meter(3_000_000, 4_000_000, 0, 1)
    assert out.getvalue().split("\r")[-1].strip() == "reading 3.00 MB of 4.00 MB (75%), 1.00 MB/s, 1 s left"


def test_no_meter_unless_stderr_is_a_terminal():
    assert terminal_meter(io.StringIO()) is None
    assert isinstance(terminal_meter(_Tty()), Meter)
    res = CliRunner().invoke(app, ["trace", "summary", str(LOG)])
    assert res.exit_code == 0 and "reading" not in res.stderr


def test_the_reader_reports_every_file_and_the_bytes_within_a_log(tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(LOG.read_bytes() * 3000)  # read in blocks of 1 MiB: several reports within it
    calls = []
    read_traces([big, LOG], workers=1, progress=lambda *a: calls.append(a))
    total = big.stat().st_size + LOG.stat().st_size
    assert calls[-1] == (total, total, 2, 2)
    done = [c[0] for c in calls]
    assert done == sorted(done) and all(c[1] == total for c in calls)
    assert sum(1 for c in calls if c[2] == 0 and 0 < c[0] < big.stat().st_size) >= 2
