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


@pytest.mark.parametrize("path", [LOG, DATA / "kineto", DATA / "deepspeed-comms",
                                  DATA / "nccl-tests" / "all_gather_perf-bf16-2gpu.txt"],
                         ids=lambda p: p.name)
def test_canonical_columns_and_dtypes(path):
    t = read_traces(path).table
    assert list(t.columns[: len(CANONICAL_COLUMNS)]) == list(CANONICAL_COLUMNS)
    assert {c: str(t[c].dtype) for c in CANONICAL_COLUMNS} == CANONICAL_COLUMNS
    assert str(t["step"].dtype) == "Int64"
    # the few-valued strings are categoricals of their distinct values, sorted
    for c in ("file", "op", "dtype", "group"):
        cats = list(t[c].cat.categories)
        assert cats == sorted(set(t[c].dropna().astype(str)))


def test_nccl_log_table_is_compact():
    t = read_traces(LOG).table
    assert t["step"].isna().all()
    # no Python object per call: every column is a typed array (numbers, categoricals, masks)
    assert not any(t[c].dtype == object for c in t.columns)


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


@pytest.mark.parametrize("step", [1 << 26, 4096])
@pytest.mark.parametrize("extra", [-1, 0, 1, 5000])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_whole_file_read_is_every_byte_once(tmp_path, monkeypatch, step, extra, gz):
    # a Kineto trace is read whole, in one read where it is plain and small: sizes on either side
    # of the read's size, and files read in several steps (the step set small), give the file's bytes
    from zerocalc.traces import reader

    monkeypatch.setattr(reader, "WHOLE_STEP", step)
    raw = gzip.decompress((DATA / "kineto" / "dlrm-v100-8ranks" / "rank0.json.gz").read_bytes()) * 2
    raw = raw[: (1 << 20) + extra] if extra < 5000 else raw  # 1 MiB, the least read, or 1.8 MB
    f = tmp_path / ("t.json.gz" if gz else "t.json")
    f.write_bytes(gzip.compress(raw) if gz else raw)
    with reader._open(str(f), reader.MAX_BYTES) as stream:
        stream.peek(1)
        assert reader._whole(stream, str(f)) == raw


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


def test_the_cap_is_on_what_gzip_expands_to_not_on_plain_files(tmp_path):
    # the same 100 copies of the log, plain: read whatever its size (the cap guards against gzip bombs)
    f = tmp_path / "big.txt"
    f.write_bytes(LOG.read_bytes() * 100)
    calls = sum(1 for ln in LOG.read_text().splitlines() if "opCount" in ln and not ln.startswith("#"))
    assert len(read_traces(f, max_bytes=10_000).table) == 100 * calls


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
    assert len(rows) == 7 and list(rows[0]) == [*CANONICAL_COLUMNS, "process"]  # + the table's process
    assert rows[0]["in_nelems"] == 2097152 and rows[0]["step"] is None
    res = runner.invoke(app, ["trace", "summary", str(LOG), "--format", "csv"])
    assert res.exit_code == 0 and res.output.startswith("file,rank,process,step,op,calls")


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    f = tmp_path / "empty.txt"
    f.write_bytes(b"")
    res = CliRunner().invoke(app, ["trace", "summary", str(f)])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "empty file" in res.output


# --- inputs: duplicates, directories, forced formats ----------------------------------------

# The torchtitan excerpt's COLL lines, counted in the file: 7 ("opCount" lines that are not comments).
LOG_CALLS = sum(1 for ln in LOG.read_text().splitlines() if " opCount " in ln and not ln.startswith("#"))


def test_same_file_twice_is_read_once(tmp_path, monkeypatch):
    assert LOG_CALLS == 7
    monkeypatch.chdir(LOG.parent)
    link = tmp_path / "link.txt"
    link.symlink_to(LOG)
    ts = read_traces([LOG, LOG.name, f"./{LOG.name}", link])
    assert len(ts.table) == LOG_CALLS
    assert list(ts.meta) == [str(LOG)]  # the first spelling, first-seen order
    assert len(ts.notes) == 3 and all("read once" in n for n in ts.notes)


def test_directory_is_not_read_recursively():
    # deepspeed-gloo-zero3-n4 holds one run (comms-summary.txt, rank0..3.json.gz) and, in
    # no-step-markers/, a second run of the same job: only the first is read, the second is named.
    d = DATA / "deepspeed-gloo-zero3-n4"
    ts = read_traces(d)
    direct = sorted(str(p) for p in d.iterdir() if p.is_file())
    assert sorted(ts.meta) == direct and len(direct) == 5
    assert not ts.table["file"].str.contains("no-step-markers").any()
    assert list(ts.skipped_files) == [str(d / "no-step-markers")]
    assert any("no-step-markers" in n and "subdirectory" in n for n in ts.notes)


def test_bundled_deepspeed_directory_still_gives_four_ranks():
    d = Path(__file__).parents[1] / "zerocalc" / "data" / "traces" / "deepspeed-gloo-zero3-n4"
    ts = read_traces(d)
    assert sorted(ts.table["rank"].dropna().unique()) == [0, 1, 2, 3]  # rank0..3.json.gz
    assert ts.skipped_files == {}


def test_directory_skips_a_file_that_is_not_a_trace(tmp_path):
    src = DATA / "kineto" / "dlrm-v100-8ranks"
    d = tmp_path / "run"
    d.mkdir()
    for r in (0, 1):
        shutil.copy(src / f"rank{r}.json.gz", d)
    (d / "notes.txt").write_text("lr 1e-3, ran on Tuesday\n")
    ts = read_traces(d)
    assert sorted(ts.table["rank"].unique()) == [0, 1]
    assert list(ts.skipped_files) == [str(d / "notes.txt")]
    assert "unrecognised" in ts.skipped_files[str(d / "notes.txt")]
    assert ts.table.equals(read_traces([d / "rank0.json.gz", d / "rank1.json.gz"]).table)
    with pytest.raises(TraceFormatError, match="unrecognised") as err:  # named: still an error
        read_traces(d / "notes.txt")
    assert err.value.file == str(d / "notes.txt")


def test_directory_of_subdirectories_only(tmp_path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run2").mkdir()
    with pytest.raises(TraceFormatError, match="no trace files found.*subdirectories.*run1.*run2"):
        read_traces(tmp_path)


def test_directory_of_non_traces_only(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with pytest.raises(TraceFormatError, match="no trace files found.*notes.txt: unrecognised"):
        read_traces(tmp_path)


def test_unexpanded_glob_gets_a_hint():
    with pytest.raises(TraceFormatError, match="globs are expanded by the shell") as err:
        read_traces(str(DATA / "kineto" / "*.json.gz"))
    assert err.value.file.endswith("*.json.gz")
    with pytest.raises(TraceFormatError, match="no such file or directory$"):
        read_traces(DATA / "kineto" / "nope.json.gz")


@pytest.mark.parametrize(
    ("path", "fmt", "looks_like"),
    [
        (DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz", "nccl_log", "kineto"),
        (LOG, "deepspeed_comms", "nccl_log"),
        (LOG, "nccl_tests", "nccl_log"),
        (DATA / "deepspeed-comms" / "tutorial-examples.txt", "nccl_log", "deepspeed_comms"),
    ],
)
def test_forced_format_with_no_records_names_file_and_format(path, fmt, looks_like):
    with pytest.raises(TraceFormatError, match=f"no {fmt} records found; is it a {looks_like} file") as err:
        read_traces(path, fmt=fmt)
    assert err.value.file == str(path)


def test_forced_format_that_matches_still_reads():
    assert len(read_traces(LOG, fmt="nccl_log").table) == LOG_CALLS
