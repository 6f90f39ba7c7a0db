"""The engines that pull COLL fields out of an NCCL log (polars by position, polars by regex, and
``re``) give the same table.

nccl_log.ENGINE = "polars" sends every block to zerocalc.traces.nccl_polars.extract_fields (which
reads by position the lines in NCCL's own layout and leaves the others to ``re``, and a block it
cannot read at all, not UTF-8, to ``re`` whole); "polars-regex" to its regex extraction; "re" never
to polars. Each input is read every way and compared row for row, with its metadata and skip log.
"""

import importlib.util
import io
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerocalc.traces import nccl_log, nccl_polars, read_traces

pytest.importorskip("polars")

ROOT = Path(__file__).resolve().parent.parent
NCCL_LOGS = sorted((ROOT / "tests" / "data" / "traces" / "nccl-debug").glob("*.txt"))


ENGINES = ("re", "polars", "polars-regex")


def _both(monkeypatch, read):
    """``read()`` under ``re`` and under polars by position, and how many blocks polars read itself;
    the read by polars' regex extraction is compared with ``re``'s here."""
    used = []
    extract = nccl_polars.extract_fields

    def counted(*args):
        got = extract(*args)
        used.append(got is not None)
        return got

    monkeypatch.setattr(nccl_polars, "extract_fields", counted)
    out = {}
    for engine in ENGINES:
        monkeypatch.setattr(nccl_log, "ENGINE", engine)
        out[engine] = read()
    _same(out["re"], out["polars-regex"])
    return out["re"], out["polars"], sum(used)


def _same(a, b):
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.meta == b.meta
    assert (a.skipped.count, a.skipped.examples) == (b.skipped.count, b.skipped.examples)


@pytest.mark.parametrize("log", NCCL_LOGS, ids=lambda p: p.name)
def test_bundled_logs_read_alike(monkeypatch, log):
    a, b, native = _both(monkeypatch, lambda: read_traces(log, workers=1))
    _same(a, b)
    lines = log.read_text().splitlines()
    assert len(a.table) == sum("opCount" in ln and not ln.startswith("#") for ln in lines)
    assert native == 1  # one block, read by polars itself


def _synthetic():
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_synthetic_128_rank_log_reads_alike_in_blocks_and_chunks(monkeypatch, tmp_path):
    log = tmp_path / "ray.log"
    lines, _ = _synthetic().build(log, 2.5 * nccl_log.BLOCK_BYTES)
    assert log.read_bytes().count(b"opCount") == lines
    a, b, native = _both(monkeypatch, lambda: read_traces(log, workers=1))
    _same(a, b)
    assert len(a.table) == lines and native == 3  # three blocks, all read by polars
    # a log split between processes reads the same (the default read of a large log)
    monkeypatch.setattr("zerocalc.traces.reader.SPLIT_MIN_BYTES", 1 << 20)
    _same(b, read_traces(log, workers=2))


_AUTO = r"""
import sys
from zerocalc.traces import nccl_log, nccl_polars
nccl_log.NATIVE_MIN_STREAM_BYTES = int(sys.argv[2])
blocks = []
extract = nccl_polars.extract_fields
nccl_polars.extract_fields = lambda *a: blocks.append(1) or extract(*a)
with open(sys.argv[1], "rb") as f:
    scan = nccl_log.scan(f, sys.argv[1])
print(len(blocks), "polars" in sys.modules, scan.lines)
"""


@pytest.mark.parametrize(("threshold", "blocks"), [(None, 0), (2, 2), (1, 3)])
def test_auto_reads_a_short_log_by_re_and_a_long_one_by_polars_from_its_threshold(tmp_path, threshold,
                                                                                  blocks):
    # a fresh interpreter, where nothing has imported polars: below NATIVE_MIN_STREAM_BYTES (16 MiB) the
    # log of three 4 MiB blocks is read by re alone and polars is not imported; from the threshold on
    # (in blocks) every block is polars'
    import subprocess
    import sys

    log = tmp_path / "ray.log"
    lines, _ = _synthetic().build(log, 2.5 * nccl_log.BLOCK_BYTES)
    limit = nccl_log.NATIVE_MIN_STREAM_BYTES if threshold is None else threshold * nccl_log.BLOCK_BYTES
    out = subprocess.run([sys.executable, "-c", _AUTO, str(log), str(limit)], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    assert out == [str(blocks), str(blocks > 0), str(log.read_bytes().count(b"\n"))]
    assert log.stat().st_size < nccl_log.NATIVE_MIN_STREAM_BYTES


# Line starts of every shape (as in test_traces_nccl_log), Init and TUNING lines, malformed calls,
# calls without the host:pid:tid prefix, an unknown collective, and a byte that is not UTF-8.
_PREFIXES = ["", "(RayTrainWorker pid=615, ip=10.72.7.6) ", "[rank3]: ", "a:b", "x\t", "  ", "0: ", "é ",
             "noise opCount 3 "]
_HOSTS = ["h1:10:20 [0] ", "node-x:12:22 [3] ", "hé:3:4 [1] ", "h:1:2 [0]", ""]
_ARGS = "sendbuff 0x1 recvbuff 0x2 count 7 datatype 7 op 0 root 0 comm 0x9"
_BODIES = [f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3",
           f"NCCL INFO ReduceScatter: opCount 1b {_ARGS} [nranks=4] stream 0x3",
           f"NCCL INFO [2] AllGather: opCount 2 {_ARGS} [nranks=4] stream 0x3",
           f"NCCL INFO [2] AllGather: opCount 2 {_ARGS} stream 0x3 task 0 globalrank 5",
           "NCCL INFO Send: opCount 3 sendbuff 0x1 recvbuff (nil) count 5 datatype 0 op 0 root 1 comm 0x7 "
           "[nranks=2] stream 0x3 \t",
           f"NCCL INFO Frobnicate: opCount 3 {_ARGS} [nranks=4] stream 0x3",
           f"NCCL INFO AllReduce: opCount 5 {_ARGS} [nranks=0] stream 0x3",
           f"NCCL INFO AllReduce: opCount 4 {_ARGS.replace('count', 'cnt')} stream 0x3",
           "NCCL INFO comm 0x9 rank 1 nranks 4 cudaDev 1 busId 1000 - Init COMPLETE",
           "NCCL INFO AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
           "NCCL INFO Channel 00/02 : 0 1"]
# Calls one change away from NCCL's layout: each is read by neither engine or by both alike.
_MALFORMED = [f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3 ",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3 extra",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS}  [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4]\tstream 0x3",
              f"NCCL INFO AllReduce: opCount +1a {_ARGS} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount {'f' * 16} {_ARGS} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('count 7', 'count -7')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('count 7', 'count +7')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('count 7', 'count ' + '9' * 19)} [nranks=4] "
              "stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('root 0', 'root -3')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('datatype 7', 'datatype x')} [nranks=4] "
              "stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=x] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4 stream 0x3",
              f"NCCL INFO All-Reduce: opCount 1a {_ARGS} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce opCount 1a {_ARGS} [nranks=4] stream 0x3",
              f"NCCL INFO x NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3 NCCL INFO AllReduce: "
              "opCount 1",
              "NCCL INFO AllReduce: opCount 1a sendbuff  recvbuff 0x2 count 7 datatype 7 op 0 root 0 "
              "comm 0x9 [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('comm 0x9', 'comm  0x9')} [nranks=4] "
              "stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('comm', 'cmm')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('op 0', 'opp 0')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('datatype 7', 'datatype ' + '7' * 10)} "
              "[nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS.replace('root 0', 'root --3')} [nranks=4] stream 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] strem 0x3",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4]",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] [nranks=4] stream 0x3",
              "", "# NCCL INFO AllReduce: opCount 1a",
              f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3\x01",
              "NCCL INFO AllReduce: opCount 1a " + _ARGS.replace("comm 0x9", "comm 0x9\x0b")
              + " [nranks=4] stream 0x3"]


def test_every_layout_of_a_call_read_by_position(monkeypatch):
    # NCCL's layout with and without [nranks=], "NCCL INFO [k]", RCCL's tail, blanks at the end, behind
    # NCCL's own prefix or a launcher's: all read by position, none left to re, rows as re reads them
    heads = ("h1:10:20 [0] ", "(RayTrainWorker pid=615, ip=10.72.7.6) node-x:12:22 [3] ")
    lines = [h + b + end for h in heads for b in _BODIES[:4] for end in ("", "  ")]
    data = ("\n".join(lines) + "\n").encode()
    left = []
    by_re = nccl_polars._by_re

    def spy(rest, *args):
        left.append(len(rest))
        return by_re(rest, *args)

    monkeypatch.setattr(nccl_polars, "_by_re", spy)
    out = {}
    for engine in ("re", "polars"):
        monkeypatch.setattr(nccl_log, "ENGINE", engine)
        out[engine] = nccl_log.parse(io.BytesIO(data), "f.log")
    assert left == []
    a, b = pd.DataFrame(out["re"].columns), pd.DataFrame(out["polars"].columns)
    pd.testing.assert_frame_equal(a, b)
    assert len(b) == len(lines)
    assert b["rank"].notna().sum() == len(lines) // 4  # RCCL's globalrank: a quarter of the lines


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_HOSTS),
                          st.sampled_from(_BODIES + _MALFORMED)),
                min_size=1, max_size=30),
       st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_random_lines_read_alike(lines, newline, latin1):
    _read_alike(lines, newline, latin1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_HOSTS),
                          st.sampled_from(_BODIES + _MALFORMED)),
                min_size=1, max_size=30),
       st.sampled_from(["\n", "\r\n"]))
def test_random_lines_read_alike_with_heads_and_rests_by_position(lines, newline):
    # a block whose calls differ before and after their opCount more often than not (a time stamp on
    # each line; buffers, counts): polars cuts those parts itself, rather than each distinct text by re
    saved = nccl_polars._MANY_PREFIXES, nccl_polars._MANY_RESTS, nccl_polars._CALLS_PER_REST
    nccl_polars._MANY_PREFIXES, nccl_polars._MANY_RESTS, nccl_polars._CALLS_PER_REST = -1, -1, 1 << 62
    try:
        _read_alike(lines, newline, False)
    finally:
        nccl_polars._MANY_PREFIXES, nccl_polars._MANY_RESTS, nccl_polars._CALLS_PER_REST = saved


def _read_alike(lines, newline, latin1):
    data = (newline.join(p + h + b for p, h, b in lines) + newline).encode()
    if latin1:
        data = data.replace("é".encode(), b"\xe9")  # not UTF-8: polars leaves the block to re
    out = {}
    for engine in ENGINES:
        nccl_log.ENGINE = engine
        try:
            out[engine] = nccl_log.parse(io.BytesIO(data), "f.log")
        finally:
            nccl_log.ENGINE = "auto"
    a = out["re"]
    for b in (out["polars"], out["polars-regex"]):
        assert a.meta == b.meta
        assert (a.skipped.count, a.skipped.examples) == (b.skipped.count, b.skipped.examples)
        assert (a.columns is None) == (b.columns is None)
        if a.columns is not None:
            pd.testing.assert_frame_equal(pd.DataFrame(a.columns), pd.DataFrame(b.columns))
