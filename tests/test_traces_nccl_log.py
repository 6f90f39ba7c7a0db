"""NCCL COLL logs: expected values read off the lines of tests/data/traces/nccl-debug."""

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerocalc.errors import TraceFormatError
from zerocalc.traces import read_traces
from zerocalc.traces.nccl_log import parse_coll_line

DATA = Path(__file__).parent / "data" / "traces" / "nccl-debug"


def test_128_rank_ray_log_group_size_and_two_buckets():
    t = read_traces(DATA / "ddp-allreduce-128ranks-L4-ray.txt").table
    # 4 COLL lines, all "AllReduce ... datatype 7 ... [nranks=128]"; counts 7382228 (opCount 139d, 2 lines)
    # and 7066572 (opCount 139e, 2 lines)
    assert len(t) == 4
    assert set(t["op"]) == {"all_reduce"}
    assert set(t["group_size"]) == {128}
    assert set(t["dtype"]) == {"fp32"} and set(t["elem_bytes"]) == {4}
    assert sorted(t["in_nelems"]) == [7066572, 7066572, 7382228, 7382228]
    assert (t["in_nelems"] == t["out_nelems"]).all()
    assert t["rank"].isna().all()  # no Init COMPLETE line: [dev] is not the rank
    assert list(t["device"]) == [2, 5, 3, 5]
    assert list(t["opcount"]) == [0x139D, 0x139D, 0x139E, 0x139E]
    assert list(t["source_line"]) == [5, 6, 7, 8]  # 4 comment lines first


def test_torchtitan_allgather_reducescatter_counts_per_rank():
    t = read_traces(DATA / "tp-allgather-reducescatter-2ranks.txt").table
    ag, rs = t[t["op"] == "all_gather"], t[t["op"] == "reduce_scatter"]
    assert len(ag) == 3 and len(rs) == 2
    # AllGather count = per-rank send count: in 2097152, out 2 x 2097152 = 4194304
    assert set(ag["in_nelems"]) == {2097152} and set(ag["out_nelems"]) == {4194304}
    # ReduceScatter count = per-rank receive count: in 2 x 2097152, out 2097152
    assert set(rs["out_nelems"]) == {2097152} and set(rs["in_nelems"]) == {4194304}
    ar = t[t["op"] == "all_reduce"]
    assert list(ar["in_nelems"]) == [1, 1]
    assert set(t["group_size"]) == {2}


def test_unusual_prefix_rccl_and_send_recv():
    t = read_traces(DATA / "allreduce-unusual-prefix.txt").table
    assert list(t["op"]) == ["all_reduce", "all_reduce", "all_gather"]
    assert list(t["dtype"]) == ["uint8", "uint8", "int8"]  # datatype 1, 1, 0
    assert list(t["out_nelems"]) == [1, 1, 8 * 4]
    t = read_traces(DATA / "rccl-4ranks-allreduce-allgather.txt").table
    assert list(t["op"]) == ["all_reduce", "all_reduce", "all_gather", "all_gather"]
    assert list(t["in_nelems"]) == [9984512, 8149504, 59205120, 15360]
    t = read_traces(DATA / "send-recv-2ranks.txt").table
    assert list(t["op"]) == ["send"] * 6 + ["recv"]
    assert set(t["in_nelems"][:6]) == {2420736} and set(t["out_nelems"][:6]) == {0}
    assert t["out_nelems"].iloc[6] == 2420736 and t["in_nelems"].iloc[6] == 0
    assert list(t["root"]) == [1, 1, 1, 1, 0, 0, 1]  # root = peer


HOST = "node7:123:456 [3] NCCL INFO "


def test_init_complete_gives_rank_and_tuning_gives_algorithm(tmp_path):
    # Layouts of NCCL's own format strings (init.cc "comm %p rank %d nranks %d ... - Init COMPLETE",
    # enqueue.cc COLL line, tuning "%s: %ld Bytes -> Algo %s proto %s").
    log = tmp_path / "rank5.log"
    log.write_text(
        HOST + "comm 0x55d0 rank 5 nranks 8 cudaDev 3 busId 3b000 - Init COMPLETE\n"
        + HOST + "AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 9 op 0 root 0 "
        "comm 0x55d0 [nranks=8] stream 0x5600\n"
        + HOST + "AllReduce: 2048 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
        + HOST + "Broadcast: opCount 1 sendbuff 0x7f00 recvbuff 0x7f00 count 7 datatype 4 op 0 root 2 "
        "comm 0x55d0 stream 0x5600\n"
    )
    t = read_traces(log).table
    assert list(t["rank"]) == [5, 5]
    assert list(t["group_size"]) == [8, 8]  # second line has no [nranks=]: from the Init line
    assert list(t["dtype"]) == ["bf16", "int64"] and list(t["elem_bytes"]) == [2, 8]
    assert t["algorithm"].iloc[0] == "RING" and t["protocol"].iloc[0] == "LL"
    assert t["algorithm"].isna().iloc[1]


def test_rccl_globalrank_suffix():
    line = (HOST + "AllGather: opCount 3 sendbuff 0x1 recvbuff 0x2 count 10 datatype 7 op 0 root 0 "
            "comm 0x9 [nranks=4] stream 0x3 task 0 globalrank 6")
    row = parse_coll_line(line)
    assert row["rank"] == 6 and row["out_nelems"] == 40


def test_malformed_coll_line_strict_and_lenient(tmp_path):
    good = (HOST + "AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 "
            "comm 0x9 [nranks=2] stream 0x3\n")
    log = tmp_path / "x.log"
    log.write_text(good + HOST + "AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x1 count four\n" + good)
    ts = read_traces(log)
    assert len(ts.table) == 2 and ts.skipped.count == 1
    assert ts.skipped.examples[0][1] == 2
    with pytest.raises(TraceFormatError) as err:
        read_traces(log, strict=True)
    assert err.value.line == 2 and err.value.file == str(log)



def test_coll_fields_table_matches_the_parser(tmp_path):
    # schema.NCCL_COLL_FIELDS says which field of a COLL line fills which column; this RCCL line
    # has every field, each with its own value.
    from zerocalc.traces.nccl_log import COLL
    from zerocalc.traces.schema import NCCL_COLL_FIELDS

    log = tmp_path / "rccl.log"
    log.write_text(HOST + "AllGather: opCount 3 sendbuff 0x1 recvbuff 0x2 count 10 datatype 7 op 0 root 0 "
                   "comm 0x9 [nranks=4] stream 0x3 task 0 globalrank 6\n")
    row = read_traces(log).table.iloc[0]
    assert set(NCCL_COLL_FIELDS) <= set(COLL.groupindex)
    assert {NCCL_COLL_FIELDS[k]: row[NCCL_COLL_FIELDS[k]] for k in ("opcount", "count", "comm", "nranks",
                                                                    "globalrank", "datatype")} == {
        "opcount": 3, "count": 10, "group": "0x9", "group_size": 4, "rank": 6, "dtype": "fp32"}
    assert all(not pd.isna(row[col]) for col in NCCL_COLL_FIELDS.values())


# Launcher prefixes and line starts of every shape: NCCL's own (host first), Ray's tag, a rank tag,
# a host after a colon or a tab (no space before it), a host glued to the text before it, none.
_PREFIXES = ["", "(RayTrainWorker pid=615, ip=10.72.7.6) ", "[rank3]: ", "a:b", "x\t", "  ",
             "noise opCount 3 ", "0: ", "x", "é "]
_HOSTS = ["h1:10:20 [0] ", "node-x:12:22 [3] ", "", "h:1:2 [0]", "hé:3:4 [1] "]
_ARGS = "sendbuff 0x1 recvbuff 0x2 count 7 datatype 7 op 0 root 0 comm 0x9"
_BODIES = [f"NCCL INFO AllReduce: opCount 1a {_ARGS} [nranks=4] stream 0x3",
           f"NCCL INFO [2] AllGather: opCount 2 {_ARGS} stream 0x3 task 0 globalrank 5",
           "NCCL INFO Send: opCount 3 sendbuff 0x1 recvbuff (nil) count 5 datatype 0 op 0 root 1 comm 0x7 "
           "[nranks=2] stream 0x3  ",
           f"NCCL INFO AllReduce: opCount 4 {_ARGS.replace('count', 'cnt')} stream 0x3",
           "NCCL INFO Channel 00/02 : 0 1"]
_COMPARED = ("source_line", "nccl_op", "count", "opcount", "group", "host", "pid", "tid", "device", "rank",
             "group_size")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_HOSTS), st.sampled_from(_BODIES)),
                min_size=1, max_size=30),
       st.sampled_from(["\n", "\r\n"]))
def test_block_scan_reads_each_line_as_the_one_line_parser(lines, newline):
    """The block scanner tries NCCL's own layout first and a launcher's prefix next, before the
    general pattern: whatever the line start, each line gives the row (or the skip) that the
    one-line parser, which applies the general pattern to the line alone, gives it."""
    import io

    from zerocalc.traces.nccl_log import parse

    text = [p + h + b for p, h, b in lines]
    expected, bad = [], []
    for i, line in enumerate(text, 1):
        try:
            row = parse_coll_line(line, file="f.log", lineno=i)
        except TraceFormatError:
            bad.append(i)
            continue
        if row is not None:
            expected.append({k: row[k] for k in _COMPARED})
    got = parse(io.BytesIO((newline.join(text) + newline).encode()), "f.log")
    actual = []
    if got.columns:
        rows = pd.DataFrame(got.columns)[list(_COMPARED)].astype(object)
        actual = [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in rows.to_dict("records")]
    assert actual == expected
    assert got.skipped.count == len(bad)
    assert [line for _, line, _ in got.skipped.examples] == bad[: len(got.skipped.examples)]
