"""Traces that come compressed or archived: xz and bzip2 (``xz``, ``bzip2``, ``tar -J``) read as gzip is,
through the same cap and the same truncated / corrupt stream errors; zstd, zip and tar refused by name,
one line and exit 2 at the CLI. The rows expected are counted from the bundled plain file
(tests/sweep_files.py, a plain split), the compressed copies made here with Python's own modules."""

import bz2
import gzip
import io
import json
import lzma
import tarfile
import zipfile

import pytest
from typer.testing import CliRunner

from tests.sweep_files import DATA, file_rows
from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces import read_traces
from zerocalc.traces.reader import read_file

runner = CliRunner()
NAME = "all_gather_perf-8xH100-1node-nccl2.29.2.txt"
LOG = DATA.parent / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt"
COMPRESS = {"xz": lzma.compress, "bz2": bz2.compress, "gz": gzip.compress}


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_sweep_is_checked_as_the_plain_one(tmp_path, suffix):
    path = tmp_path / f"{NAME}.{suffix}"
    path.write_bytes(COMPRESS[suffix]((DATA / NAME).read_bytes()))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert [(r["bytes"], r["measured_s"]) for r in sweep["rows"]] == [
        (s, t * 1e-6) for s, t, _ in file_rows(NAME)]


@pytest.mark.parametrize("suffix", ["xz", "bz2"])
def test_compressed_log_reads_as_the_plain_one(tmp_path, suffix):
    path = tmp_path / f"log.txt.{suffix}"
    path.write_bytes(COMPRESS[suffix](LOG.read_bytes()))
    got, want = read_traces(path).table, read_traces(LOG).table
    assert got.drop(columns="file").equals(want.drop(columns="file"))


@pytest.mark.parametrize("suffix", ["xz", "bz2"])
def test_truncated_stream_names_its_compression(tmp_path, suffix):
    data = COMPRESS[suffix](LOG.read_bytes() * 50)
    path = tmp_path / f"log.txt.{suffix}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match=f"truncated {'bzip2' if suffix == 'bz2' else 'xz'} stream"):
        read_traces(path)


@pytest.mark.parametrize("suffix", ["xz", "bz2"])
def test_corrupt_stream_names_its_compression(tmp_path, suffix):
    data = bytearray(COMPRESS[suffix](LOG.read_bytes() * 50))
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)
    path = tmp_path / f"log.txt.{suffix}"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=f"corrupt {'bzip2' if suffix == 'bz2' else 'xz'} data"):
        read_traces(path)


@pytest.mark.parametrize("suffix", ["xz", "bz2"])
def test_the_cap_holds_for_every_compression(tmp_path, suffix):
    path = tmp_path / f"log.txt.{suffix}"
    path.write_bytes(COMPRESS[suffix](LOG.read_bytes() * 100))
    with pytest.raises(TraceFormatError, match="exceeds the cap"):
        read_file(path, max_bytes=LOG.stat().st_size * 10)


def _zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.write(DATA / NAME, NAME)


def _tar_gz(path):
    with tarfile.open(path, "w:gz") as t:
        t.add(DATA / NAME, NAME)


def _zstd(path):  # a zstd frame's magic (RFC 8878, 3.1.1) before bytes no reader gets to
    path.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(64)))


@pytest.mark.parametrize(("make", "words"), [
    (_zip, "a zip archive: unpack it first"),
    (_tar_gz, "a tar archive: unpack it first"),
    (_zstd, "zstd-compressed data: decompress it first"),
], ids=["zip", "tar.gz", "zstd"])
def test_archives_are_refused_by_name_in_one_line(tmp_path, make, words):
    path = tmp_path / "results.bin"
    make(path)
    before = path.read_bytes()
    res = runner.invoke(app, ["check", str(path)])
    assert res.exit_code == 2
    assert words in res.output and str(path) in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert path.read_bytes() == before


def test_compressed_inside_compressed_is_named(tmp_path):
    path = tmp_path / "log.txt.gz"
    path.write_bytes(gzip.compress(lzma.compress(LOG.read_bytes())))
    with pytest.raises(TraceFormatError, match="xz data inside compressed data"):
        read_traces(path)


def test_plain_text_opening_like_a_magic_is_still_text(tmp_path):
    # 'BZh' is bzip2's magic only with its block-size digit after it
    path = tmp_path / "notes.txt"
    path.write_bytes(b"BZhello\n" + io.BytesIO((DATA / NAME).read_bytes()).read())
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert len(sweep["rows"]) == len(file_rows(NAME))


def test_report_input_check_reads_through_the_compression(tmp_path):
    from zerocalc.errors import ConfigError
    from zerocalc.report.inputs import check_traces

    xz = tmp_path / "log.txt.xz"
    xz.write_bytes(lzma.compress(LOG.read_bytes()))
    assert check_traces([xz]) == (xz,)
    zipped = tmp_path / "logs.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        z.write(LOG, LOG.name)
    with pytest.raises(ConfigError, match="a zip archive: unpack it first") as err:
        check_traces([zipped])
    assert err.value.option == "--trace" and str(zipped) in str(err.value)
