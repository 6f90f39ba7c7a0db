"""Reader: directories, gzip, bad input, strict vs lenient, parallel reads, the CLI."""

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError, TraceMismatchError, UnknownNameError
from zerocalc.traces import CANONICAL_COLUMNS, read_traces

DATA = Path(__file__).parent / "data" / "traces"
LOG = DATA / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt"


def test_canonical_columns_and_dtypes():
    t = read_traces(LOG).table
    assert list(t.columns[: len(CANONICAL_COLUMNS)]) == list(CANONICAL_COLUMNS)
    assert str(t["step"].dtype) == "Int64" and t["step"].isna().all()


def test_gzip_text_equals_plain(tmp_path):
    gz = tmp_path / "log.txt.gz"
    gz.write_bytes(gzip.compress(LOG.read_bytes()))
    a, b = read_traces(LOG).table, read_traces(gz).table
    assert a.drop(columns="file").equals(b.drop(columns="file"))


def test_truncated_gzip(tmp_path):
    data = gzip.compress(LOG.read_bytes() * 50)
    f = tmp_path / "cut.txt.gz"
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated gzip"):
        read_traces(f)


def test_truncated_kineto_json(tmp_path):
    raw = gzip.decompress((DATA / "kineto" / "dlrm-v100-8ranks" / "rank0.json.gz").read_bytes())
    f = tmp_path / "cut.json"
    f.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        read_traces(f)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"   \n\n", "empty file"),
        (bytes(range(256)) * 4, "binary data"),
        (b"\x80\x04\x95\x00\x00", "pickle"),
        (b"hello world\nthis is not a trace\n", "unrecognised"),
        (b'{"a": 1}', "neither a Chrome trace"),
    ],
)
def test_bad_files_raise_clear_errors(tmp_path, content, reason):
    f = tmp_path / "bad.bin"
    f.write_bytes(content)
    with pytest.raises(TraceFormatError, match=reason) as err:
        read_traces(f)
    assert str(f) in str(err.value)


def test_decompressed_size_cap(tmp_path):
    f = tmp_path / "big.txt.gz"
    f.write_bytes(gzip.compress(LOG.read_bytes() * 100))
    with pytest.raises(TraceFormatError, match="exceeds the cap"):
        read_traces(f, max_bytes=10_000)


def test_mixed_world_sizes():
    with pytest.raises(TraceMismatchError, match="world size"):
        read_traces([LOG, DATA / "nccl-debug" / "ddp-allreduce-128ranks-L4-ray.txt"])


def test_unknown_format_name_and_missing_path(tmp_path):
    with pytest.raises(UnknownNameError):
        read_traces(LOG, fmt="pcap")
    with pytest.raises(TraceFormatError, match="no such file"):
        read_traces(tmp_path / "nope.txt")
    with pytest.raises(TraceFormatError, match="no trace files"):
        read_traces(tmp_path)


def test_nothing_written_next_to_inputs(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(DATA / "kineto" / "dlrm-v100-8ranks", d)
    before = sorted(p.name for p in d.iterdir())
    read_traces(d)
    assert sorted(p.name for p in d.iterdir()) == before


def test_parallel_read_equals_sequential():
    d = DATA / "kineto" / "dlrm-v100-8ranks"
    seq, par = read_traces(d, workers=1), read_traces(d, workers=2)
    assert seq.table.equals(par.table)
    assert seq.meta == par.meta


def test_cli_summary_table_and_json():
    runner = CliRunner()
    resnet = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"
    res = runner.invoke(app, ["trace", "summary", str(resnet)])
    assert res.exit_code == 0, res.output
    assert "all_reduce" in res.output and "total: all_reduce 15, broadcast 6" in res.output
    res = runner.invoke(app, ["trace", "summary", str(LOG), "--format", "json"])
    assert res.exit_code == 0
    rows = json.loads(res.output)
    assert len(rows) == 7 and list(rows[0]) == list(CANONICAL_COLUMNS)
    assert rows[0]["in_nelems"] == 2097152 and rows[0]["step"] is None
    res = runner.invoke(app, ["trace", "summary", str(LOG), "--format", "csv"])
    assert res.exit_code == 0 and res.output.startswith("file,rank,step,op,calls")


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    f = tmp_path / "empty.txt"
    f.write_bytes(b"")
    res = CliRunner().invoke(app, ["trace", "summary", str(f)])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "empty file" in res.output
