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
    while size < 2.5 * nccl_log.BLOCK_BYTES:
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


def test_chunks_start_after_the_last_newline_before_each_block(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path)
    data = path.read_bytes()
    block = nccl_log.BLOCK_BYTES
    with path.open("rb") as f:
        starts = [reader._boundary(f, k, len(data)) for k in range(4)]
    # 2.5 blocks: three chunks, each starting just after the last newline before k blocks
    assert starts == [0, data.rfind(b"\n", 0, block) + 1, data.rfind(b"\n", 0, 2 * block) + 1, len(data)]
    assert reader._read_split(str(path), False, 2) is not None  # read in chunks by two processes
    _same(path)


def test_chunk_without_a_newline_is_empty(tmp_path, monkeypatch):
    """A line longer than a block: the chunks that start inside it start where it does instead
    (all but the last of them empty), and the read is still the sequential one."""
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 256)
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 0)
    line = ("h:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 7 datatype 7 op 0 "
            "root 0 comm 0x9 [nranks=4] stream 0x3\n")
    long = "h:1:2 [0] NCCL INFO note " + "x" * 700 + "\n"
    path = tmp_path / "nccl.log"
    path.write_text(line * 3 + long + line * 5)
    with path.open("rb") as f:
        size = path.stat().st_size
        starts = [reader._boundary(f, k, size) for k in range(size // 256 + 2)]
    assert starts[2] == starts[3] == starts[4] == len(line) * 3  # where the long line starts
    _same(path)
    assert len(read_traces(path, workers=2).table) == 8


def test_rank_from_a_later_run_and_tuning(tmp_path, split_small):
    path = tmp_path / "nccl.log"
    _build(path)
    t = read_traces(path, workers=2).table
    rows = t[(t["group"] == "0x55bef0201370")]
    assert len(rows) and (rows["rank"] == 3).all()  # the Init COMPLETE line is in the last run
    assert t["algorithm"].notna().any()


def test_strict_error_is_the_first_in_the_file(tmp_path, split_small):
    """Strict mode names the log's first unusable line, whichever process scans it: one in the last
    chunk alone (a worker's first), then one in the first chunk as well (the reading process's)."""
    path = tmp_path / "nccl.log"
    _build(path, noise=False)
    data = path.read_bytes()
    last = data[: data.rfind(b"\n", 0, 2 * nccl_log.BLOCK_BYTES) + 1].count(b"\n") + 1000
    for bad_at in (last, 500):
        _build(path, noise=False, bad_at=bad_at)
        if bad_at == 500:  # keep the later bad line too
            lines = path.read_text().split("\n")
            lines[last - 1] = lines[last - 1].replace(" count ", " cnt ")
            path.write_text("\n".join(lines))
        for workers in (1, 2):
            with pytest.raises(TraceFormatError) as err:
                read_traces(path, workers=workers, strict=True)
            assert err.value.line == bad_at and "not the NCCL COLL layout" in err.value.reason


def test_non_ascii_and_carriage_returns_split_exactly(tmp_path, split_small):
    """The log is scanned as bytes: a cut at a newline is exact whatever the bytes around it
    (multi-byte UTF-8, invalid UTF-8, CRLF and lone CR line ends, read as text mode reads them)."""
    path = tmp_path / "nccl.log"
    _build(path, extra="h:1:2 [0] NCCL INFO note \u00e9\u00e9\u00e9\n")
    data = path.read_bytes()
    lines = data.split(b"\n")
    for i in range(0, len(lines) - 1, 97):  # a non-ASCII host, an invalid byte, other line ends
        lines[i] = lines[i].replace(b"ubuntu:", "\u00fcbuntu:".encode()).replace(b"hopper01:", b"hop\xff:")
    ends = [b"\n", b"\r\n", b"\r\n", b"\r"]
    path.write_bytes(b"".join(ln + ends[i % 4] for i, ln in enumerate(lines[:-1])))
    assert reader._read_split(str(path), False, 2) is not None
    _same(path)
    t = read_traces(path, workers=2).table
    assert {"\u00fcbuntu", "hop\ufffd"} <= set(t["host"])
    # every line is one line: the last call's line number counts CR, CRLF and LF ends alike
    last_call = max(i for i, ln in enumerate(lines) if b"opCount" in ln and b"Bogus" not in ln
                    and b" cnt " not in ln)
    assert int(t["source_line"].max()) == last_call + 1
