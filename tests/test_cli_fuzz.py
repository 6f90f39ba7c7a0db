"""Hypothesis at the command line: real files of every format the check reads, changed a line, a cell or a
field at a time, give a verdict or one line and exit 2 (``check``, ``trace summary``), never a traceback; and
``table`` and ``check`` of a sweep under any few of their options' values (``table --topology amd-mi250x``
raised KeyError).

The parsers' own fuzzing (``test_traces_fuzz.py``) stops at the parsed rows; what reads them after (the ranks
from busbw/algbw, the tables, the groups, the steps) met values the parsers let through: a busbw over twice
its algbw, a cell of 1e309, a 20-digit count, a Flight Recorder ``record_id`` of ``"x"``. Derandomized, so a
run is the same run everywhere; ``-m slow`` tries more of each."""

from __future__ import annotations

import gzip
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology import PRESETS

TRACES = Path(__file__).parent / "data" / "traces"
TEXTS = [TRACES / p for p in (
    "nccl-tests/all_reduce_perf-16xH100-2nodes.txt",  # device lines, 31 sizes
    "nccl-tests/alltoall_perf-8xMI355X-oci-pollara-1node-2sizes.txt",  # no device lines, ranks by busbw
    "nccl-tests/sendrecv_perf-8xB200-vultr-1node-uint8-table-only.txt",  # a table alone
    "nccl-tests/all_gather_perf-2xB200-gcp-a4-1node-nccl2.26.6.txt",
    "nccl-tests/all_reduce_perf-1xH200-g1-nccl2.28.9.json",  # a -J report: one line of JSON
    "nccl-debug/tp-allgather-reducescatter-2ranks.txt",  # NCCL INFO lines
    "nccl-debug/send-recv-2ranks.txt",
    "deepspeed-comms-gloo/zero2-ga4-verbose.log",  # DeepSpeed's comms logger
    "deepspeed-comms/tutorial-examples.txt",
    "nccl-inspector/readme-allreduce-8ranks-1node.log",
)]
RUNS = [TRACES / p for p in (
    "flight-recorder/ddp-dp2-of-4-gloo",  # Flight Recorder dumps, JSON
    "flight-recorder/ds-zero2-ga4",  # gzip'd
    "real-runs/ddp-ga4-no-sync",  # PyTorch profiler traces
    "real-runs/fsdp2-ga4-no-sync",
)]
#: cells a row may hold in place of a number: words, out-of-range numbers, what a double cannot hold
CELLS = [b"nan", b"inf", b"-1", b"0", b"1e309", b"9" * 20, b"abc", b"", b"N/A", b"1.5", b"-0"]
#: values a JSON field may hold in place of its own
VALUES = [None, -1, 0, 1.5, "x", "", [], {}, True, 2**64, [1], {"a": 1}]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

runner = CliRunner()


class Case:
    """A changed file (``data``: its bytes) or run (``data``: each file's bytes), shown by what changed: a
    falsifying example names the file and the change, not the megabytes it holds."""

    def __init__(self, name: str, data, change: str):
        self.name, self.data, self.change = name, data, change

    def __repr__(self) -> str:
        return f"Case({self.name!r}, {self.change})"


@st.composite
def changed_texts(draw):
    """A text file with one change: a line dropped, doubled or cut short, a number swapped for a cell of
    :data:`CELLS`, a cell dropped or added, bytes put in, the file cut anywhere."""
    path = draw(st.sampled_from(TEXTS))
    data = path.read_bytes()
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["drop", "double", "cell", "drop cell", "add cell", "bytes", "cut",
                                "cut line"]))
    change = f"{how} line {i + 1}"
    if how == "drop":
        del lines[i]
    elif how == "double":
        lines.insert(i, lines[i])
    elif how == "cell" and NUMBER.search(lines[i]):
        found = list(NUMBER.finditer(lines[i]))
        m = found[draw(st.integers(0, len(found) - 1))]
        cell = draw(st.sampled_from(CELLS))
        lines[i] = lines[i][:m.start()] + cell + lines[i][m.end():]
        change += f": {m[0]!r} -> {cell!r}"
    elif how in ("drop cell", "add cell") and lines[i].split():
        cells = lines[i].split()
        k = draw(st.integers(0, len(cells) - 1))
        if how == "drop cell":
            change += f": cell {k} {cells.pop(k)!r}"
        else:
            cells.insert(k, draw(st.sampled_from(CELLS)) or b"x")
            change += f": {cells[k]!r} before cell {k}"
        lines[i] = b"  ".join(cells)
    elif how == "bytes":
        k = draw(st.integers(0, len(lines[i])))
        put = draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\r", b"\t", b"#"]))
        lines[i] = lines[i][:k] + put + lines[i][k:]
        change += f": {put!r} at {k}"
    elif how == "cut line":
        k = draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:k]
        change += f" at {k}"
    data = b"\n".join(lines)
    if how == "cut":
        k = draw(st.integers(0, len(data)))
        data, change = data[:k], f"cut at byte {k}"
    return Case(path.name, data, change)


def _load(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


@st.composite
def changed_runs(draw):
    """A run's files with one rank's changed: an event's or entry's field set to a value of :data:`VALUES`
    or removed, an event removed, a top-level field replaced, the file cut."""
    run = draw(st.sampled_from(RUNS))
    files = sorted(p for p in run.iterdir() if p.name.startswith("rank"))
    path = draw(st.sampled_from(files))
    doc = _load(path)
    items = doc.get("traceEvents") or doc.get("entries")
    how = draw(st.sampled_from(["set", "set", "remove field", "remove item", "top", "cut"]))
    change = f"{path.name}: {how}"
    if how in ("set", "remove field", "remove item"):
        k = draw(st.integers(0, len(items) - 1))
        change += f" item {k}"
        if how == "remove item":
            del items[k]
        else:
            target = items[k]
            if draw(st.booleans()) and isinstance(target.get("args"), dict) and target["args"]:
                target, change = target["args"], change + " args"
            key = draw(st.sampled_from(sorted(target)))
            if how == "set":
                target[key] = draw(st.sampled_from(VALUES))
                change += f" {key!r} = {target[key]!r}"
            else:
                del target[key]
                change += f" {key!r}"
    elif how == "top":
        key = draw(st.sampled_from(sorted(doc)))
        doc[key] = draw(st.sampled_from(VALUES))
        change += f" {key!r} = {doc[key]!r}"
    data = json.dumps(doc).encode()
    if how == "cut":
        k = draw(st.integers(0, len(data)))
        data, change = data[:k], change + f" at byte {k}"
    out = {p.name: p.read_bytes() for p in files}
    out[path.name] = gzip.compress(data) if path.suffix == ".gz" else data
    return Case(run.name, out, change)


def _no_traceback(args: list[str], where: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 2), f"{where}: {args} exit {res.exit_code}\n{res.output[-2000:]}"
    assert res.exception is None or isinstance(res.exception, SystemExit), f"{where}: {res.exception!r}"
    if res.exit_code == 2:
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error")]
        assert len(errors) == 1, f"{where}: {res.stderr[-2000:]}"


def _check_text(case: Case) -> None:
    name, data = case.name, case.data
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / name
        f.write_bytes(data)
        for args in (["check", str(f)], ["check", str(f), "--format", "json"], ["trace", "summary", str(f)]):
            _no_traceback(args, name)


def _check_run(case: Case) -> None:
    name, files = case.name, case.data
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / name
        d.mkdir()
        for fname, data in files.items():
            (d / fname).write_bytes(data)
        for args in (["check", str(d)], ["trace", "summary", str(d)]):
            _no_traceback(args, name)


def _text_with(name: str, old: bytes, new: bytes) -> Case:
    path = next(p for p in TEXTS if p.name == name)
    data = path.read_bytes()
    assert old in data
    return Case(name, data.replace(old, new, 1), f"{old!r} -> {new!r}")


def _run_with(run: str, rank: str, index: int, key: str, value) -> Case:
    path = TRACES / run / rank
    doc = _load(path)
    (doc.get("traceEvents") or doc["entries"])[index][key] = value
    files = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.name.startswith("rank")}
    data = json.dumps(doc).encode()
    files[rank] = gzip.compress(data) if path.suffix == ".gz" else data
    return Case(path.parent.name, files, f"{rank}: item {index} {key!r} = {value!r}")


def _run_top(run: str, rank: str, key: str, value) -> Case:
    """A run whose trace ``rank`` has its top-level ``key`` set to ``value``."""
    path = TRACES / run / rank
    doc = _load(path)
    doc[key] = value
    files = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.name.startswith("rank")}
    data = json.dumps(doc).encode()
    files[rank] = gzip.compress(data) if path.suffix == ".gz" else data
    return Case(path.parent.name, files, f"{rank}: top {key!r} = {value!r}")


#: what these tests found, kept as examples: a busbw no double holds (OverflowError reading the ranks from
#: busbw/algbw), a busbw over twice its algbw (the same), a 20-digit count (OverflowError building trace
#: summary's table), a -J report's root of "abc" (TypeError telling the op), a record_id of "x" (ValueError
#: building the dumps' table), a gloo call's args of -1 (AttributeError reading its sizes), a DeepSpeed comms
#: log's rank of 20 digits (OverflowError building the table), a gloo trace without distributedInfo
#: (ValueError placing its worker threads on no process group)
KNOWN_TEXTS = [
    _text_with("alltoall_perf-8xMI355X-oci-pollara-1node-2sizes.txt", b"412.20  360.67", b"412.20  1e309"),
    _text_with("all_reduce_perf-16xH100-2nodes.txt", b"180.71  338.82", b"100.00  338.82"),
    _text_with("sendrecv_perf-8xB200-vultr-1node-uint8-table-only.txt", b"8388608       8388608",
               b"8388608  99999999999999999999"),
    _text_with("all_reduce_perf-1xH200-g1-nccl2.28.9.json", b'"root":"    -1"', b'"root":"abc"'),
    _text_with("zero2-ga4-verbose.log", b"[Rank 0]", b"[Rank 99999999999999999999]"),
]
KNOWN_RUNS = [_run_with("flight-recorder/ds-zero2-ga4", "rank2.json.gz", 3, "record_id", "x"),
              _run_with("real-runs/ddp-ga4-no-sync", "rank0.json.gz", 11, "args", -1),
              _run_top("real-runs/ddp-ga4-no-sync", "rank0.json.gz", "distributedInfo", None)]

_FAST = settings(max_examples=40, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_SLOW = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.data_too_large])


@pytest.mark.parametrize("case", KNOWN_TEXTS, ids=["busbw-1e309", "busbw-over-2x", "count-20-digits",
                                                 "json-root-abc", "deepspeed-rank-20-digits"])
def test_what_changed_text_files_found(case):
    _check_text(case)


@pytest.mark.parametrize("case", KNOWN_RUNS, ids=["record-id-x", "kineto-args-number",
                                                "kineto-no-distributed-info"])
def test_what_changed_runs_found(case):
    _check_run(case)


@_FAST
@given(changed_texts())
def test_changed_text_files_give_a_verdict_or_one_line(case):
    _check_text(case)


@_FAST
@given(changed_runs())
def test_changed_runs_give_a_verdict_or_one_line(case):
    _check_run(case)


@pytest.mark.slow
@_SLOW
@given(changed_texts())
def test_many_changed_text_files(case):
    _check_text(case)


@pytest.mark.slow
@_SLOW
@given(changed_runs())
def test_many_changed_runs(case):
    _check_run(case)


# -- options: each one's own values, any few of them together -------------------------------------------

#: values of table's options: the presets, releases, restrictions and variables a user gives
TABLE_OPTIONS = {
    "--psi": ["1", "7.5B", "175B", "1T", "1,000"], "--n": ["1", "2", "3", "8", "16", "1000"],
    "--gpus-per-node": ["1", "2", "3", "8", "72"], "--topology": sorted(PRESETS),
    "--dtype": ["int8", "fp16", "bf16", "fp32", "fp8"], "--param-dtype": ["bf16", "fp32", "fp8"],
    "--grad-dtype": ["bf16", "fp32"], "--micro-batches": ["1", "4", "1000"],
    "--grad-sync": ["every", "boundary"],
    "--tp": ["1", "2", "3", "8"], "--pp": ["1", "2", "3"], "--hsdp-shard-size": ["1", "2", "3", "8"],
    "--k": ["0", "12", "2.5"], "--format": ["table", "csv", "json", "markdown", "latex"],
    "--nccl-version": ["2.8.4", "2.12.12", "2.18.3", "2.19.3", "2.21.5", "2.26.2", "2.28.9", "2.30.7"],
    "--nccl-algo": ["Ring", "Tree", "NVLS", "^NVLS", "CollNetDirect", "PAT", "NVLSTree"],
    "--nccl-proto": ["LL", "LL128", "Simple", "^LL128"],
    "--nccl-env": ["NCCL_NVLS_ENABLE=0", "NCCL_MIN_NCHANNELS=32", "NCCL_MAX_NCHANNELS=1",
                   "NCCL_COLLNET_ENABLE=1"],
    "--gpu-memory": ["80GB", "1GB"], "--bucket": ["25MiB", "1KiB", "1GB"],
}
#: values of check's options for an nccl-tests sweep
SWEEP_OPTIONS = {
    "--topology": sorted(PRESETS), "--nccl-version": TABLE_OPTIONS["--nccl-version"],
    "--nccl-algo": TABLE_OPTIONS["--nccl-algo"], "--nccl-proto": TABLE_OPTIONS["--nccl-proto"],
    "--nccl-env": TABLE_OPTIONS["--nccl-env"], "--n": ["1", "2", "4", "8", "16", "7"],
    "--gpus-per-node": ["1", "2", "4", "8"], "--format": ["table", "json", "csv", "markdown"],
}


@st.composite
def option_sets(draw, options):
    keys = draw(st.lists(st.sampled_from(sorted(options)), max_size=5, unique=True))
    return [a for k in keys for a in (k, draw(st.sampled_from(options[k])))]


@_FAST
@given(option_sets(TABLE_OPTIONS))
@example(["--topology", "amd-mi250x"])  # found here: KeyError naming RCCL's tuning model 3
def test_table_under_any_options_gives_a_table_or_one_line(args):
    _no_traceback(["table", *args], "table")


@_FAST
@given(st.sampled_from([p for p in TEXTS if "nccl-tests" in str(p)]), option_sets(SWEEP_OPTIONS))
def test_check_of_a_sweep_under_any_options_gives_a_verdict_or_one_line(sweep, args):
    _no_traceback(["check", str(sweep), *args], sweep.name)


@pytest.mark.slow
@_SLOW
@given(option_sets(TABLE_OPTIONS))
def test_table_under_many_options(args):
    _no_traceback(["table", *args], "table")


@pytest.mark.slow
@_SLOW
@given(st.sampled_from([p for p in TEXTS if "nccl-tests" in str(p)]), option_sets(SWEEP_OPTIONS))
def test_check_of_a_sweep_under_many_options(sweep, args):
    _no_traceback(["check", str(sweep), *args], sweep.name)
