"""Hypothesis: the line parsers and the detector raise nothing but TraceFormatError."""

import gzip

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zerocalc.errors import TraceFormatError
from zerocalc.traces.deepspeed_comms import parse_summary_row, parse_verbose_line
from zerocalc.traces.detect import detect_format
from zerocalc.traces.kineto import parse_bytes, parse_document
from zerocalc.traces.nccl_log import parse_coll_line
from zerocalc.traces.nccl_tests import parse_row

REAL = (
    "hopper01:191370:191425 [1] NCCL INFO AllGather: opCount d sendbuff 0x7fa921200000 recvbuff "
    "0x7fa915800000 count 2097152 datatype 7 op 0 root 0 comm 0x55fca23fc0f0 [nranks=2] stream 0x55fca193e8e0"
)
TOKENS = REAL.split(" ") + ["[2]", "task", "globalrank", "-1", "99999999999999999999", "(nil)", "nranks=0]",
                            "|", "comm op:", "time (ms):", "msg size:", "KB", "#", "\t", "float", "N/A"]
mutated = st.lists(st.sampled_from(TOKENS), min_size=0, max_size=40).map(" ".join)
texts = st.one_of(st.text(max_size=300), mutated)


def _only_format_errors(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except TraceFormatError:
        pass


@settings(max_examples=300, deadline=None)
@given(texts)
def test_nccl_coll_line(line):
    _only_format_errors(parse_coll_line, line)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_nccl_tests_row(line):
    _only_format_errors(parse_row, line)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_deepspeed_lines(line):
    _only_format_errors(parse_verbose_line, line)
    _only_format_errors(parse_summary_row, line)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=400), texts.map(str.encode),
                 st.binary(max_size=50).map(gzip.compress)))
def test_detector(head):
    _only_format_errors(detect_format, head)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
    max_leaves=20,
)

names = st.sampled_from(["record_param_comms", "c10d::allreduce_", "nccl:all_reduce", "gloo:all_reduce",
                         "ProfilerStep#1", "ncclKernel_AllReduce", "cudaLaunchKernel", "ProfilerStep#x"])
events = st.fixed_dictionaries(
    {"ph": st.just("X"), "name": names, "ts": json_values, "dur": json_values},
    optional={"cat": st.sampled_from(["cpu_op", "kernel", "user_annotation", "cuda_runtime"]),
              "args": st.dictionaries(st.sampled_from(["Collective name", "In msg nelems", "Input Dims",
                                                       "Input type", "External id", "correlation", "dtype",
                                                       "Group size"]), json_values, max_size=5),
              "pid": json_values, "tid": json_values},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(events, json_values), max_size=8), json_values)
def test_kineto_events(evs, info):
    _only_format_errors(parse_document, {"traceEvents": evs, "distributedInfo": info}, "f.json")
    _only_format_errors(parse_bytes, orjson.dumps({"traceEvents": evs})[:-3], "f.json")



# any event: any phase, a name of any type (a list or an object is no key), relevant or not
finite = st.floats(allow_nan=False, allow_infinity=False)
categories = st.sampled_from(["cpu_op", "kernel", "user_annotation", "cuda_runtime", "gpu_user_annotation"])
any_events = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "B", "i", "f", "M"]), "name": names | json_values,
     "ts": json_values | finite, "dur": json_values | st.floats(0, 9)},
    optional={"cat": categories | json_values,
              "args": st.dictionaries(st.sampled_from(["Collective name", "In msg nelems", "External id",
                                                       "correlation", "dtype", "Input Dims"]), json_values,
                                      max_size=3),
              "pid": st.integers(0, 3) | json_values, "tid": st.integers(0, 3) | json_values},
)


def _outcome(fn, doc, strict):
    try:
        r = fn(doc, "f.json", strict=strict)
    except TraceFormatError as exc:
        return repr(("error", exc.line, exc.reason))
    return repr((r.rows, r.meta, r.skipped.count, sorted(r.skipped.by_reason.items()), r.skipped.examples))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(any_events, events), max_size=8), st.booleans())
@example([{"ph": "X", "name": "record_param_comms", "ts": None, "dur": 0.0},  # an id that is a list
          {"ph": "X", "name": "ncclKernel_AllReduce", "ts": 0, "dur": 0.0, "cat": "kernel",
           "args": {"External id": []}}], False)
def test_kineto_fields_decoded_alone_give_what_the_whole_document_gives(evs, strict):
    """parse_bytes decodes only the fields it reads and filters events by name in bulk; on any events
    it must give the rows, metadata, skipped events or error that the whole document decoded by orjson
    gives (parse_document)."""
    doc = orjson.dumps({"traceEvents": evs})
    assert _outcome(parse_bytes, doc, strict) == _outcome(parse_document, orjson.loads(doc), strict)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=12), st.booleans())
def test_nccl_log_blocks(lines, strict):
    """The block scanner (the fast path of whole logs), not only the one-line parser."""
    import io

    from zerocalc.traces.nccl_log import parse

    _only_format_errors(parse, io.StringIO("\n".join(lines) + "\n"), "f.log", strict=strict)


def test_out_of_range_numbers_are_malformed_lines_not_overflows():
    """A 20-digit opCount or a 23-digit count cannot fit the table's 64-bit columns: the line is
    malformed (skipped and counted, or an error naming it in strict mode)."""
    import io

    import pytest

    from zerocalc.traces.nccl_log import parse

    too_long = [("opCount d", "opCount 99999999999999999999"), ("count 2097152", "count " + "9" * 23)]
    for field, value in too_long:
        log = REAL.replace(field, value) + "\n"
        assert parse(io.StringIO(log), "f.log").skipped.count == 1
        with pytest.raises(TraceFormatError, match="f.log:1"):
            parse(io.StringIO(log), "f.log", strict=True)


def test_kineto_thread_ids_must_be_scalars():
    """A pid or tid that is a list or an object cannot identify a thread: the event is malformed."""
    import pytest

    ev = {"ph": "X", "name": "c10d::allreduce_", "cat": "cpu_op", "ts": 1, "dur": 2, "pid": [1], "tid": 1,
          "args": {"Input Dims": [[4]]}}
    doc = orjson.dumps({"traceEvents": [ev]})
    assert parse_bytes(doc, "f.json").skipped.count == 1
    with pytest.raises(TraceFormatError, match="pid/tid"):
        parse_bytes(doc, "f.json", strict=True)


def test_kineto_args_must_be_an_object():
    """A collective's ``args`` that are a number or a list hold no sizes: the event is malformed, on both
    decoding paths (check raised AttributeError reading its sizes)."""
    import pytest

    for value in (-1, [], "x"):
        ev = {"ph": "X", "name": "gloo:broadcast", "cat": "user_annotation", "ts": 1, "dur": 2, "pid": 1,
              "tid": 1, "args": value}
        doc = orjson.dumps({"traceEvents": [ev]})
        for parse in (parse_bytes, lambda d, f, **kw: parse_document(orjson.loads(d), f, **kw)):
            assert parse(doc, "f.json").skipped.count == 1
            with pytest.raises(TraceFormatError, match="args are not an object"):
                parse(doc, "f.json", strict=True)


def test_deepspeed_numbers_past_their_columns_are_malformed_lines():
    """A rank of 20 digits (the table's rank column is 64-bit), a time or size no double holds, a summary
    count past 64 bits: the line is malformed, not an OverflowError building the table (check raised it)."""
    import pytest

    line = ("[2026-12-06 00:25:06,945] [INFO] [logging.py:123:log_dist] [Rank 0] comm op: all_reduce | "
            "time (ms): 15.27 | msg size: 277.75 KB | algbw (Gbps): 0.30 | busbw (Gbps): 0.22")
    assert parse_verbose_line(line)["rank"] == 0
    for old, new in (("[Rank 0]", "[Rank 99999999999999999999]"), ("15.27", "9" * 400),
                     ("277.75 KB", "9" * 400 + " KB")):
        with pytest.raises(TraceFormatError, match="f.log:3"):
            parse_verbose_line(line.replace(old, new), file="f.log", lineno=3)
    row = "        277.75 KB           4          15.27        0.30       0.22        0.14"
    with pytest.raises(TraceFormatError, match="past what its column holds"):
        parse_summary_row(row.replace("   4   ", "   99999999999999999999   "), file="f.log", lineno=3)


def test_skip_log_counts_lines_entries_or_both():
    """The count names what was skipped: lines of a text format, entries of a JSON document (no line), or
    both where a directory held both."""
    from zerocalc.traces.records import SkipLog

    lines, entries, both = SkipLog(), SkipLog(), SkipLog()
    lines.add("a.txt", 3, "x")
    entries.add("b.json", None, "event 4 is not an object")
    entries.add("b.json", None, "event 5 is not an object")
    both.merge(lines)
    both.merge(entries)
    assert lines.counted() == "1 unreadable line"
    assert entries.counted() == "2 unreadable entries"
    assert both.counted() == "3 unreadable lines and entries"
    assert both.example_text() == ("a.txt:3: x; b.json: event 4 is not an object; "
                                   "b.json: event 5 is not an object")
