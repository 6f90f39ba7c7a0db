"""nccl-tests outputs run with NCCL_DEBUG=INFO under OpenMPI --tag-output, as people post them: KBs of
NCCL INFO lines before and between the rows, launcher tags inside a row, the facts those INFO lines
state (ranks and nodes, the plugin's network latency, a tuner plugin), and NCCL's COLL lines beside a
table.

Expected values are counted from the files in tests/data/traces/nccl-tests/ (see README.md there) with
plain string operations, never through zerocalc.
"""

import gzip
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces.detect import HEAD_BYTES, detect_format
from zerocalc.traces.nccl_info import info_facts
from zerocalc.traces.nccl_tests import parse, parse_row
from zerocalc.traces.prefix import inner_tags

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
RUN1 = DATA / "all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run1.log.gz"
RUN2 = DATA / "all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run2.log.gz"
TUNER = DATA / "all_reduce_perf-16xH100-p5-info-tuner-nccl2.20.3.log.gz"
P5_INFO = [RUN1, RUN2, TUNER]
TAG = "[1,0]<stdout>:"
runner = CliRunner()


def text_of(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def counted(path: Path) -> list[tuple[int, int, float, float]]:
    """(line, size, out-of-place µs, in-place µs) of each result row, the rank-0 tags taken out by
    hand."""
    rows = []
    for i, line in enumerate(text_of(path).splitlines(), 1):
        f = line.replace(TAG, " ").split()
        if len(f) == 13 and f[0].isdigit() and f[1].isdigit() and f[2] == "float":
            rows.append((i, int(f[0]), float(f[5]), float(f[9])))
    return rows


def check_json(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *map(str, args)])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


@pytest.mark.parametrize("path", P5_INFO)
def test_the_files_are_what_their_source_row_says(path):
    text = text_of(path)
    rows = counted(path)
    # 32 sizes, 8 B to 16 GiB by factors of 2; the table's first line is far past the detector's head
    assert [s for _, s, _, _ in rows] == [8 << k for k in range(32)]
    assert len(text[:text.index("#       size")].encode()) > HEAD_BYTES
    assert text.count("NCCL INFO") > 2800
    # the tags cut every row of the two runs; the tuner run's rows are whole
    tagged = [ln for ln in text.splitlines() if ln.startswith(TAG) and ln.count(TAG) == 3]
    assert len(tagged) == (0 if path == TUNER else 32)


def test_info_heavy_files_are_nccl_tests_outputs():
    for path in P5_INFO:
        head = gzip.decompress(path.read_bytes())[:HEAD_BYTES]
        assert b"out-of-place" not in head and b"NCCL INFO" in head  # only the preamble and INFO lines
        assert detect_format(head, str(path)) == "nccl_tests"
    # an NCCL log without an nccl-tests header is still one
    assert detect_format(b"host:1:2 [0] NCCL INFO Bootstrap : Using eth0\n") == "nccl_log"


@pytest.mark.parametrize(("path", "version", "first_us", "last_us", "tuner"), [
    (RUN1, "2.22.3", 85.14, 66108.0, None),
    (RUN2, "2.22.3", 85.70, 66023.0, None),
    (TUNER, "2.20.3", 65.43, 66154.0, "nccl_ofi_tuner"),
])
def test_rows_and_facts_read_past_info_lines_and_tags(path, version, first_us, last_us, tuner):
    text = text_of(path)
    lines = text.splitlines()
    res = parse(iter(text.splitlines(True)), str(path))
    (run,) = res.meta["runs"]
    rows = counted(path)
    assert res.skipped.count == 0
    assert [(r["source_line"], r["size_bytes"]) for r in res.rows] == [(ln, s) for ln, s, _, _ in rows]
    assert [r["duration_s"] for r in res.rows] == pytest.approx([t * 1e-6 for *_, t, _ in rows])
    assert [r["inplace_duration_s"] for r in res.rows] == pytest.approx([t * 1e-6 for *_, t in rows])
    assert (rows[0][2], rows[-1][2]) == (first_us, last_us)
    # the version is the file's own line (the source's file name says another for two of them)
    assert {m[1] for m in re.finditer(r"NCCL version (\d+\.\d+\.\d+)", text)} == {version}
    assert run["nccl_version"] == version
    assert run["hosts"] == {"test-nccl-worker-0": 8, "test-nccl-worker-1": 8}
    info = run["nccl_info"]
    first = next(i for i, ln in enumerate(lines, 1) if "nRanks 16 nNodes 2 localRanks 8" in ln)
    assert (info["ranks"], info["nodes"], info["local_ranks"]) == ([16, first], [2, first], [8, first])
    lat = next(i for i, ln in enumerate(lines, 1) if "NET/OFI Internode latency set at 75.0 us" in ln)
    assert info["net_latency_us"] == [75.0, lat]
    if tuner:
        at = next(i for i, ln in enumerate(lines, 1) if f"Using tuner plugin: '{tuner}'" in ln)
        assert info["tuner_plugin"] == [tuner, at]
    else:  # "Failed to find ncclTunerPlugin_v2 symbol, using internal tuner instead": none loaded
        assert "tuner_plugin" not in info and "using internal tuner instead" in text
    assert list(run["network"]) == ["efa"]


@pytest.mark.parametrize("path", P5_INFO)
def test_check_prices_every_size_on_the_instance(path):
    """Refused before (the detector saw NCCL INFO lines only; the rows' tags shifted their cells): now
    every size of the 2× p5.48xlarge sweeps within 0.5-2x of NCCL's model on aws-p5, at the NCCL version
    the file states."""
    sweep = check_json(path, "--topology", "aws-p5")
    rows = counted(path)
    assert (sweep["op"], sweep["group_size"]) == ("all_reduce", 16)
    assert sweep["nccl_version"] == ("2.20.3" if path == TUNER else "2.22.3")
    assert [r["bytes"] for r in sweep["rows"]] == [s for _, s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for *_, t, _ in rows])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    tuner_notes = [n for n in sweep["notes"] if "tuner plugin" in n]
    assert bool(tuner_notes) == (path == TUNER)
    # the plugin's 75 µs is the preset's: nothing to say about it
    assert not any("Internode latency" in n for n in sweep["notes"])


def test_nccl_2_20_and_2_22_price_the_p5_tree_alike():
    """Between v2.20.3 and v2.22.3 tuning.cc changes, of what a 2-node p5 communicator prices, NVLS's
    NVLink hop (23 -> 25 µs), Hopper's one-node LL cap and Ring/LL's bus factor (1/4 -> 1/2, not chosen
    here): Tree/LL and Tree/LL128 keep their figures, so the 2.20.3 and 2.22.3 runs are priced alike
    below 64 MiB, where NVLS Tree takes over. Their median-size ratios differ by one row, 256 KiB
    out-of-place (counted: 126.3 µs under 2.20.3, 98.72 under 2.22.3), whose in-place times agree
    within 7% (105.3, 99.25)."""
    old, new = check_json(TUNER, "--topology", "aws-p5"), check_json(RUN1, "--topology", "aws-p5")
    small = [(a["predicted_s"], b["predicted_s"]) for a, b in zip(old["rows"], new["rows"], strict=True)
             if a["bytes"] < 64 << 20]
    assert len(small) == 23 and all(a == pytest.approx(b, rel=1e-9) for a, b in small)
    pairs = [[(r["algorithm"], r["protocol"]) for r in sweep["rows"]] for sweep in (old, new)]
    assert pairs[0] == pairs[1]
    (_, _, o20, i20), = [r for r in counted(TUNER) if r[1] == 262144]
    (_, _, o22, i22), = [r for r in counted(RUN1) if r[1] == 262144]
    assert (o20, o22) == (126.3, 98.72) and abs(i20 / i22 - 1) < 0.07


def _replaced(tmp_path, path, old, new, name=None):
    text = text_of(path)
    assert old in text
    out = tmp_path / (name or path.name.removesuffix(".gz"))
    out.write_text(text.replace(old, new))
    return out


def test_a_plugin_latency_other_than_the_presets_steers_the_choice_not_the_time(tmp_path):
    """aws-ofi-nccl reports 150 µs where its platform table has no entry ("for historical reasons"):
    NCCL then chooses with 150 µs. The sweep is chosen with the file's figure and timed with the
    topology's wire latency, so a size whose choice did not move keeps its time."""
    plain = check_json(RUN1, "--topology", "aws-p5")
    slow = _replaced(tmp_path, RUN1, "Internode latency set at 75.0 us", "Internode latency set at 150.0 us")
    told = check_json(slow, "--topology", "aws-p5")
    (note,) = [n for n in told["notes"] if "Internode latency" in n]
    assert "150 µs" in note and "75 µs of topology aws-p5" in note and "timed at 20 µs" in note
    same = [(a, b) for a, b in zip(plain["rows"], told["rows"], strict=True)
            if (a["algorithm"], a["protocol"]) == (b["algorithm"], b["protocol"])]
    assert same and all(a["predicted_s"] == pytest.approx(b["predicted_s"]) for a, b in same)
    assert len(same) < len(plain["rows"])  # a larger hop latency moves some sizes off Tree/LL


def test_info_ranks_give_the_group_size_when_no_rank_lines_do(tmp_path):
    text = text_of(RUN1)
    out = tmp_path / "all_reduce_perf-norank.log"
    out.write_text("".join(ln for ln in text.splitlines(True) if not ln.startswith(TAG + "#  Rank")))
    sweep = check_json(out, "--topology", "aws-p5")
    line = next(i for i, ln in enumerate(out.read_text().splitlines(), 1) if "nRanks 16 nNodes 2" in ln)
    assert sweep["group_size"] == 16
    assert sweep["n_how"] == f"the file's NCCL INFO lines (nRanks 16, line {line})"


def test_info_lines_between_rows_are_skipped(tmp_path):
    """INFO lines (another rank's, tagged) between rows: the rows read as without them, none refused."""
    text = text_of(RUN2)
    info = [ln for ln in text.splitlines(True) if "NCCL INFO" in ln and "Connected all trees" in ln][:3]
    out = []
    for ln in text.splitlines(True):
        out.append(ln)
        if ln.startswith(TAG) and ln.count(TAG) == 3:
            out.extend(info)
    path = tmp_path / "all_reduce_perf-interleaved.log"
    path.write_text("".join(out))
    with open(path) as f:
        res = parse(f, str(path))
    assert res.skipped.count == 0
    assert [r["size_bytes"] for r in res.rows] == [s for _, s, _, _ in counted(RUN2)]


def test_tags_inside_a_row():
    body, tags = inner_tags("  8  2  float  sum  -1[1,0]<stdout>:    85.14    0.00    0.00      0"
                            "[1,0]<stdout>:  62.82")
    assert body.split() == ["8", "2", "float", "sum", "-1", "85.14", "0.00", "0.00", "0", "62.82"]
    assert tags == [TAG, TAG]
    # srun -l / pdsh labels only as words of their own; a clock cell keeps its colons
    assert inner_tags("8 2 float 0: 1.0 node7: 2.0 12:34:56")[0].split() == ["8", "2", "float", "1.0", "2.0",
                                                                            "12:34:56"]
    # another process's output breaking into rank 0's row is refused, naming the line
    line = "[1,0]<stdout>:  8  2  float  sum  -1[1,3]<stdout>:    85.14    0.00    0.00      0"
    with pytest.raises(TraceFormatError, match=r"x\.log:7: .*another process's output \(\[1,3\]<stdout>:"):
        parse_row(line, file="x.log", lineno=7)


@pytest.mark.parametrize(("line", "facts"), [
    # NCCL src/init.cc, v2.20-v2.30; and the Init COMPLETE line every release prints
    ("h:1:2 [3] NCCL INFO comm 0x55 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0",
     [("ranks", 16), ("nodes", 2), ("local_ranks", 8), ("mnnvl", 0)]),
    ("h:1:2 [3] NCCL INFO comm 0x55 rank 3 nRanks 144 nNodes 2 localRanks 72 localRank 3 MNNVL 1",
     [("ranks", 144), ("nodes", 2), ("local_ranks", 72), ("mnnvl", 1)]),
    ("h:1:2 [0] NCCL INFO comm 0x55 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init "
     "COMPLETE", [("ranks", 8)]),
    # tuner plugins, each release's string; the internal tuner names none
    ("h:1:2 [0] NCCL INFO Using tuner plugin: 'nccl_ofi_tuner'", [("tuner_plugin", "nccl_ofi_tuner")]),
    ("h:1:2 [0] NCCL INFO TUNER/Plugin: Using tuner plugin nccl_ofi_tuner",
     [("tuner_plugin", "nccl_ofi_tuner")]),
    ("h:1:2 [0] NCCL INFO TUNER/Plugin: Using nccl_ofi_tuner (v3)", [("tuner_plugin", "nccl_ofi_tuner")]),
    ("h:1:2 [0] NCCL INFO Opened tuner: 'Example'", [("tuner_plugin", "Example")]),
    ("h:1:2 [0] NCCL INFO TUNER/Plugin: Using internal tuner plugin.", []),
    ("h:1:2 [0] NCCL INFO NET/OFI NCCL_OFI_TUNER is not available for platform : p4d.24xlarge, Fall back to "
     "NCCL's tuner", [("tuner_fallback", True)]),
    ("h:1:2 [0] NCCL INFO NET/OFI Internode latency set at 35.0 us", [("net_latency_us", 35.0)]),
    # NCCL's choice per size (enqueue.cc): v2.20-v2.22 by index, v2.23 with the collective, v2.24+ by name
    ("[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 26.549810",
     [("tuning", {"op": None, "bytes": 8192, "algorithm": "Tree", "protocol": "LL", "time_us": 26.54981,
                  "channels": None})]),
    ("h:1:2 [0] NCCL INFO AllGather: 1048576 Bytes -> Algo 1 proto 2 time 40.5",
     [("tuning", {"op": "AllGather", "bytes": 1048576, "algorithm": "Ring", "protocol": "Simple",
                  "time_us": 40.5, "channels": None})]),
    ("h:1:2 [0] NCCL INFO AllReduce: 67108864 Bytes -> Algo NVLSTree proto Simple channel{Lo..Hi}={0..15}",
     [("tuning", {"op": "AllReduce", "bytes": 67108864, "algorithm": "NVLSTree", "protocol": "Simple",
                  "time_us": None, "channels": [0, 15]})]),
    ("h:1:2 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f recvbuff 0x7f count 2 datatype 7 op 0 root 0 "
     "comm 0x55 [nranks=16] stream 0x55", [("coll_lines", True)]),
])
def test_info_facts_of_a_line(line, facts):
    assert info_facts(line) == facts


def test_coll_lines_beside_a_table_the_sweep_is_compared_and_the_first_line_says_so(tmp_path):
    """NCCL_DEBUG_SUBSYS=COLL prints a line per call before each row: the file is the sweep (what its
    header says it measured); the first output line says the COLL lines were not read and how to."""
    coll = ("[1,0]<stdout>:test-nccl-worker-0:25:25 [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x7f00 "
            "recvbuff 0x7f00 count 2 datatype 7 op 0 root 0 comm 0x5646 [nranks=16] stream 0x55\n")
    out, n = [], 0
    for ln in text_of(RUN1).splitlines(True):
        if ln.startswith(TAG) and ln.count(TAG) == 3:
            out += [coll.format(n=n + k) for k in range(4)]
            n += 4
        out.append(ln)
    path = tmp_path / "all_reduce_perf-coll.log"
    path.write_text("".join(out))
    assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "nccl_tests"
    res = runner.invoke(app, ["check", str(path), "--topology", "aws-p5"])
    assert res.exit_code == 0, res.output
    first = res.stdout.splitlines()[0]
    assert f"not its {n} NCCL COLL lines" in first and "--trace-format nccl-log" in first
    sweep = check_json(path, "--topology", "aws-p5")
    assert sweep["nccl_info"]["coll_lines"] == n == 128
    assert [r["bytes"] for r in sweep["rows"]] == [s for _, s, _, _ in counted(RUN1)]
    summary = runner.invoke(app, ["trace", "summary", str(path)])
    assert summary.exit_code == 0, summary.output
    assert summary.stdout.splitlines()[0].endswith(
        "32 calls, world size 16; the table's rows, not its 128 NCCL COLL lines (--trace-format nccl-log "
        "reads those)")
    calls = runner.invoke(app, ["trace", "summary", "--trace-format", "nccl-log", str(path)])
    assert calls.exit_code == 0 and "nccl_log, 128 calls" in calls.stdout.splitlines()[0]


@pytest.mark.parametrize(("name", "told", "how"), [
    # 16 ranks by its # Rank lines; sum, root -1, size = count × 4, busbw/algbw 1.875
    ("all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", "all_reduce", "2(n-1)/n with n = 16"),
    ("reduce_scatter_perf-8xH100-1node-nccl2.29.2.txt", "reduce_scatter", "size = 8 × count × 8 B (n = 8)"),
    # busbw = algbw: sendrecv on any ranks or a 2-rank all_reduce; sendrecv prints N/A for its in-place
    # check beside a checked out-of-place one, all_reduce checks both (nccl-tests src/sendrecv.cu)
    ("sendrecv_perf-2xA100-SXM4-80GB-g2-docker-nccl2.20.5.txt", "sendrecv", "N/A in place only"),
    ("all_reduce_perf-2xH100-g2-1node-baremetal.txt", "all_reduce", "n = 2 and its in-place check printed"),
    # redop none, root -1, size = n × count × elem: all_gather checks its in-place result, alltoall prints
    # N/A there (nccl-tests src/alltoall.cu)
    ("all_gather_perf-8xH100-1node-nccl2.29.2.txt", "all_gather", "its in-place check printed"),
    ("alltoall_perf-2xRTX2080Ti-pcie3-shm.txt", "all_to_all", "N/A in place only"),
])
def test_a_file_naming_no_test_is_told_by_its_table(tmp_path, name, told, how):
    """The file and its name without any <test>_perf (as a job file launched it): the test is told by
    the table's redop and root columns, size/count and busbw/algbw, or refused saying why."""
    lines = (DATA / name).read_text().splitlines(True)
    path = tmp_path / "nccl-test-output.log"
    path.write_text("".join(ln for ln in lines if "_perf" not in ln))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    if told is None:
        assert res.exit_code == 2 and "cannot tell the collective" in res.output and how in res.output
        return
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["op"] == told
    (note,) = [n for n in sweep["notes"] if n.startswith("the file names no test")]
    assert how in note


def test_the_tuner_run_under_its_published_name_is_told_all_reduce(tmp_path):
    path = tmp_path / "nccl-test-output-v2.22.3-1-with-tuner.log"
    path.write_text(text_of(TUNER))
    assert "_perf" not in path.read_text()
    sweep = check_json(path, "--topology", "aws-p5")
    assert (sweep["op"], sweep["group_size"], sweep["nccl_version"]) == ("all_reduce", 16, "2.20.3")
    assert [r["bytes"] for r in sweep["rows"]] == [s for _, s, _, _ in counted(TUNER)]


def _split_rows(path: Path, tagged: bool, drop_last_piece_of: int | None = None) -> str:
    """``path``'s text with NCCL's own lines printed inside each row, between the pieces nccl-tests
    prints with separate printf calls, as NVIDIA/nccl issue 1453 shows them (``...  sum  -1[0] host:pid:tid
    [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 26.549810``, more INFO lines, then ``[0]     75.38
    0.05    0.10      0``): the INFO line is one of the file's own, and another rank's line comes between."""
    text = text_of(path)
    own = next(ln for ln in text.splitlines() if ln.startswith(TAG) and "NCCL INFO Connected all trees" in ln)
    info = own.removeprefix(TAG)
    other = next(ln for ln in text.splitlines() if ln.startswith("[1,3]<stdout>:") and "NCCL INFO" in ln)
    out, k = [], 0
    for ln in text.splitlines(True):
        if not (ln.startswith(TAG) and ln.count(TAG) == 3):
            out.append(ln)
            continue
        lead, oop, ip = ln.removeprefix(TAG).split(TAG)
        tag = TAG if tagged else ""
        out += [tag + lead + tag + info + "\n", other + "\n", tag + oop + tag + info + "\n"]
        if k != drop_last_piece_of:
            out.append(tag + ip)
        k += 1
    return "".join(out)


@pytest.mark.parametrize("tagged", [True, False])
def test_rows_split_by_nccls_own_lines_are_put_back_together(tmp_path, tagged):
    path = tmp_path / "all_reduce_perf-split.log"
    path.write_text(_split_rows(RUN2, tagged))
    with open(path) as f:
        res = parse(f, str(path))
    rows = counted(RUN2)
    assert res.skipped.count == 0
    assert [r["size_bytes"] for r in res.rows] == [s for _, s, _, _ in rows]
    assert [r["duration_s"] for r in res.rows] == pytest.approx([t * 1e-6 for *_, t, _ in rows])
    assert [r["inplace_duration_s"] for r in res.rows] == pytest.approx([t * 1e-6 for *_, t in rows])
    lines = path.read_text().splitlines()
    assert not any(len(ln.replace(TAG, " ").split()) == 13 for ln in lines)  # no row whole on one line
    # each row's line is the line its first piece is on
    assert [lines[r["source_line"] - 1].replace(TAG, " ").split()[0] for r in res.rows] == \
        [str(r["size_bytes"]) for r in res.rows]


def test_a_row_whose_pieces_never_all_come_is_refused_at_its_line(tmp_path):
    path = tmp_path / "all_reduce_perf-split.log"
    path.write_text(_split_rows(RUN2, True, drop_last_piece_of=5))  # the 256 B row loses its in-place cells
    with open(path) as f:
        res = parse(f, str(path))
    assert [r["size_bytes"] for r in res.rows] == [s for _, s, _, _ in counted(RUN2) if s != 256]
    assert res.skipped.count == 1
    ((_, line, reason),) = res.skipped.examples
    assert path.read_text().splitlines()[line - 1].replace(TAG, " ").split()[0] == "256"
    assert "row has 9 cells" in reason and "13 columns" in reason
    with pytest.raises(TraceFormatError, match=rf":{line}: row has 9 cells"):
        parse(iter(path.read_text().splitlines(True)), str(path), strict=True)


def test_info_nodes_shape_a_given_topology_where_no_rank_lines_name_hosts(tmp_path):
    """nNodes/localRanks (NCCL init.cc) are the nodes NCCL built its communicator on: with no # Rank
    lines, 16 ranks stated as 4 on each of 4 nodes make a given 8-GPU topology's nodes 4 GPUs with their
    share of its NICs (half of a p5's 8 NCCL network devices, each the 4 EFA NICs of a GPU's PCIe switch
    joined), as device lines naming 4 ranks per host would."""
    from zerocalc.topology import PRESETS
    from zerocalc.validate.sweep_info import nodes_as_stated

    p5 = PRESETS["aws-p5"]
    shaped, how = nodes_as_stated(p5, {"nodes": [4, 90], "local_ranks": [4, 90]}, 16)
    assert (p5.gpus_per_node, p5.nics_per_node) == (8, 8)
    assert (shaped.gpus_per_node, shaped.nics_per_node) == (4, 4)
    assert shaped.inter.bw_Bps == pytest.approx(p5.inter.bw_Bps / 2)
    assert how.endswith("as the file's NCCL INFO lines state 4 ranks on each of 4 nodes (line 90)")
    # what the file's lines state of 2 full nodes, or of ranks that do not multiply out, changes nothing
    assert nodes_as_stated(p5, {"nodes": [2, 9], "local_ranks": [8, 9]}, 16) is None
    assert nodes_as_stated(p5, {"nodes": [4, 9], "local_ranks": [4, 9]}, 8) is None
    text = "".join(ln for ln in text_of(RUN1).splitlines(True) if not ln.startswith(TAG + "#  Rank"))
    path = tmp_path / "all_reduce_perf-4x4.log"
    path.write_text(text.replace("nRanks 16 nNodes 2 localRanks 8", "nRanks 16 nNodes 4 localRanks 4"))
    sweep = check_json(path, "--topology", "aws-p5")
    assert "nodes of 4 GPUs and 4 NICs, as the file's NCCL INFO lines state 4 ranks" in sweep["topology_how"]


def test_nccls_stated_choice_per_size_is_set_beside_the_models(tmp_path):
    """With NCCL_DEBUG_SUBSYS=TUNING rank 0 prints NCCL's choice per call (NCCL 2.22's enqueue.cc form,
    by index): each row carries it (nccl_stated) and a note counts where the model chooses alike."""
    chosen = {}
    out = []
    for ln in text_of(RUN1).splitlines(True):
        if ln.startswith(TAG) and ln.count(TAG) == 3:
            size = int(ln.replace(TAG, " ").split()[0])
            algo, proto = (0, 0) if size <= 65536 else (1, 2)  # Tree/LL, then Ring/Simple
            chosen[size] = (("Tree", "LL") if algo == 0 else ("Ring", "Simple"), len(out) + 1)
            out.append(f"{TAG}test-nccl-worker-0:25:25 [0] NCCL INFO {size} Bytes -> Algo {algo} "
                       f"proto {proto} time {size / 1e4 + 20:.6f}\n")
        out.append(ln)
    path = tmp_path / "all_reduce_perf-tuning.log"
    path.write_text("".join(out))
    sweep = check_json(path, "--topology", "aws-p5")
    rows = sweep["rows"]
    assert [(tuple((r["nccl_stated"]["algorithm"], r["nccl_stated"]["protocol"])), r["nccl_stated"]["line"])
            for r in rows] == [chosen[r["bytes"]] for r in rows]
    assert rows[0]["nccl_stated"]["time_s"] == pytest.approx((8 / 1e4 + 20) * 1e-6)
    same = sum((r["algorithm"], r["protocol"]) == chosen[r["bytes"]][0] for r in rows)
    (note,) = [n for n in sweep["notes"] if n.startswith("NCCL's TUNING lines")]
    assert note.startswith(f"NCCL's TUNING lines state its choice at 32 of 32 sizes: the model chooses the "
                           f"same at {same}; NCCL ran otherwise at ")
    assert 0 < same < 32
    text = runner.invoke(app, ["check", str(path), "--topology", "aws-p5"]).stdout.splitlines()
    differ = [r for r in rows if (r["algorithm"], r["protocol"]) != chosen[r["bytes"]][0]]
    ran = [ln for ln in text if ln.endswith(("NCCL ran Ring/Simple", "NCCL ran Tree/LL"))]
    assert len(ran) == len(differ)


@pytest.mark.parametrize("line", [
    # HPC-X's nccl-rdma-sharp-plugins on a B200 cluster (togethercomputer/together-nccl-tests,
    # benchmarks/B200/sendrecv-p2p-scaling/run1/nccl-sendrecv-2node-79912.out)
    "use3a-ss-b200-gpu-150:98207:98207 [3] NCCL INFO P2P plugin IBext_v8",
    "use3a-ss-b200-gpu-150:98990:98990 [0] NCCL INFO Channel 08/1 : 7[7] -> 8[0] [receive] via NET/NCCL RDMA "
    "Plugin v8/0/GDRDMA/Shared",
])
def test_the_rdma_sharp_plugin_is_infiniband(line):
    from zerocalc.traces.nccl_info import NETWORK_EVIDENCE

    assert next(kind for kind, rx in NETWORK_EVIDENCE if rx.search(line)) == "ib"


def test_the_split_rows_of_nvidia_nccl_issue_1453():
    """NVIDIA/nccl issue 1453 (3 × 8 H100, mpirun prefixing '[0] ', NCCL_DEBUG_SUBSYS with TUNING).
    Posted, verbatim: rank 0's TUNING lines for 4096 B, then ``[0]     75.38    0.05    0.10      0``
    (the 4096 B row's in-place cells: 4096 B / 75.38 µs = 0.05 GB/s), then the 8192 B row's lead cells
    with a TUNING line glued to them, then TUNING lines (where the excerpt ends). The 4096 B row's lead
    and out-of-place
    pieces before them are not in the excerpt and are written here in the same form (out-of-place
    time 76.00 µs). The 4096 B row is read whole; the 8192 B row, whose cells never come, is refused
    at its line."""
    header = ("[0] #       size         count      type   redop    root     time   algbw   busbw #wrong"
              "     time   algbw   busbw #wrong\n")
    t4096 = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 25.874907\n"
    t8192 = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 8192 Bytes -> Algo 0 proto 0 time 26.549810\n"
    text = (header
            + "[0]         4096          1024     float     sum      -1" + t4096  # written here
            + t4096 * 2
            + "[0]     76.00    0.05    0.10      0" + t4096  # written here
            + t4096 * 2                                       # from here on, as posted
            + "[0]     75.38    0.05    0.10      0\n"
            + "[0]         8192          2048     float     sum      -1" + t8192
            + t8192 * 2)
    res = parse(iter(text.splitlines(True)), "issue1453.txt")
    (row,) = res.rows
    assert (row["size_bytes"], row["count"], row["source_line"]) == (4096, 1024, 2)
    assert row["duration_s"] == pytest.approx(76.00e-6)
    assert row["inplace_duration_s"] == pytest.approx(75.38e-6)
    assert res.skipped.count == 1
    ((_, line, reason),) = res.skipped.examples
    assert line == 9 and "row has 5 cells" in reason and "never came" in reason
    (run,) = res.meta["runs"]
    assert [(t["bytes"], t["algorithm"], t["protocol"], t["time_us"], t["line"])
            for t in run["nccl_info"]["tuning"]] == [(4096, "Tree", "LL", 25.874907, 2),
                                                     (8192, "Tree", "LL", 26.54981, 9)]


def test_a_log_collectors_timestamps_are_a_prefix(tmp_path):
    """``kubectl logs --timestamps`` (RFC 3339 with nanoseconds) before each tagged line of the p5 run:
    the same rows and facts."""
    stamped = "".join(f"2024-07-19T05:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z {ln}"
                      for i, ln in enumerate(text_of(RUN1).splitlines(True)))
    path = tmp_path / "all_reduce_perf-stamped.log"
    path.write_text(stamped)
    assert detect_format(path.read_bytes()[:HEAD_BYTES]) == "nccl_tests"
    with open(path) as f:
        res = parse(f, str(path))
    assert res.skipped.count == 0
    assert [r["size_bytes"] for r in res.rows] == [s for _, s, _, _ in counted(RUN1)]
    assert [r["duration_s"] for r in res.rows] == pytest.approx([t * 1e-6 for *_, t, _ in counted(RUN1)])
    (run,) = res.meta["runs"]
    assert run["hosts"] == {"test-nccl-worker-0": 8, "test-nccl-worker-1": 8}
    assert run["nccl_version"] == "2.22.3" and run["nccl_info"]["ranks"][0] == 16
