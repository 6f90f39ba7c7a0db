"""A large NCCL log cut into runs of lines scanned in worker processes reads exactly as a
sequential read: same table, metadata, skip log and strict error."""

import random
from pathlib import Path

import pandas.testing as pdt
import pytest

from zerocalc.errors import TraceFormatError
from zerocalc.traces import nccl_log, read_traces, reader

DATA = Path(__file__).parent / "data" / "traces" / "nccl-debug"

pytestmark = pytest.mark.slow  # builds a log of three 4 MiB blocks and starts worker processes


def _build(path: Path, *, noise: bool = True, bad_at: int | None = None, extra: str = "") -> None:
    """Real COLL lines repeated past two block boundaries, with INIT, TUNING and (``noise``)
    bad lines; ``bad_at``: one more bad line there."""
    lines = [ln for f in sorted(DATA.glob("*.txt")) for ln in f.read_text().splitlines()
             if "opCount" in ln and not ln.startswith("#")]
    rng = random.Random(4)
    out, size = [], 0
    while size < 2.5 * nccl_log.BLOCK_CHARS:
        ln = rng.choice(lines)
        r = rng.random()
        if r < 0.01:  # a TUNING line for the preceding call of this thread, when it matches
            host = ln.split(" NCCL INFO")[0]
            ln = f"{host} NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{{Lo..Hi}}={{0..1}}"
        elif noise and r < 0.012:
            ln = ln.replace("AllReduce:", "Bogus:")
        elif noise and r < 0.014:
            ln = ln.replace(" count ", " cnt ")
        out.append(ln)
        size += len(ln) + 1
    # the rank of a communicator seen in the first run is only given near the end of the file
    out.append("h03r3n06:45006:45006 [0] NCCL INFO comm 0x55bef0201370 rank 3 nranks 4 cudaDev 0"
               " busId 3b000 - Init COMPLETE")
    if bad_at is not None:
        out[bad_at - 1] = out[bad_at - 1].replace(" count ", " cnt ")
    path.write_text("\n".join(out) + "\n" + extra)


def _same(path: Path, **kw) -> None:
    a, b = read_traces(path, workers=1, **kw), read_traces(path, workers=2, **kw)
    pdt.assert_frame_equal(a.table, b.table, check_exact=True)
    assert a.meta == b.meta
    assert (a.skipped.count, a.skipped.by_reason, a.skipped.examples) == \
        (b.skipped.count, b.skipped.by_reason, b.skipped.examples)


@pytest.fixture
def split_small(monkeypatch):
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 0)


def test_cut_at_block_boundaries(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path)
    size = path.stat().st_size
    cuts = reader._cuts(str(path), size, 2)
    data = path.read_bytes()
    # 2.5 blocks in two runs: the cut is where a sequential scan ends its first block
    assert cuts == [0, data.rfind(b"\n", 0, nccl_log.BLOCK_CHARS) + 1, size]
    assert reader._read_split(str(path), False, 2) is not None  # read in two runs
    _same(path)


def test_rank_from_a_later_run_and_tuning(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path)
    t = read_traces(path, workers=2).table
    rows = t[(t["group"] == "0x55bef0201370")]
    assert len(rows) and (rows["rank"] == 3).all()  # the Init COMPLETE line is in the last run
    assert t["algorithm"].notna().any()


def test_strict_error_line_in_second_run(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path, noise=False)
    cut = reader._cuts(str(path), path.stat().st_size, 2)[1]
    bad_at = path.read_bytes()[:cut].count(b"\n") + 1000  # a line of the second run
    _build(path, noise=False, bad_at=bad_at)
    for workers in (1, 2):
        with pytest.raises(TraceFormatError) as err:
            read_traces(path, workers=workers, strict=True)
        assert err.value.line == bad_at and "not the NCCL COLL layout" in err.value.reason


def test_non_ascii_falls_back_to_a_sequential_read(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path, extra="h:1:2 [0] NCCL INFO note \u00e9\u00e9\u00e9\n")
    assert reader._read_split(str(path), False, 2) is None  # characters are not bytes: no exact cut
    _same(path)
