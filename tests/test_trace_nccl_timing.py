"""``check TRACE --topology T``: a training trace's collective calls timed by NCCL's model on that cluster,
each call also by its fastest rank. The measured values are counted from the trace files themselves (their
NCCL kernel events), not from zerocalc's reading of them."""

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "traces"
DLRM = DATA / "kineto" / "dlrm-v100-8ranks"  # facebookresearch/param: 8 ranks of one DLRM step on V100


def _all_reduce_kernels_us(rank: int, kind: str = "ncclKernel_AllReduce") -> list[float]:
    """The durations (µs) of rank ``rank``'s NCCL all-reduce kernels (or those named ``kind``...), in trace
    order."""
    with gzip.open(DLRM / f"rank{rank}.json.gz") as f:
        events = json.load(f)["traceEvents"]
    return [e["dur"] for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(kind)]


def _check(*args):
    r = runner.invoke(app, ["check", str(DLRM), "--topology", "dgx-1-v100", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["nccl_timing"]


def test_dlrm_step_against_nccl_on_a_dgx1():
    per_rank = [_all_reduce_kernels_us(r) for r in range(8)]
    assert {len(k) for k in per_rank} == {3}
    # each of the step's three all-reduces by its fastest rank (the one that joined last), and on average
    fastest = sum(min(k[i] for k in per_rank) for i in range(3)) * 1e-6  # 86 + 20 + 69 µs
    mean = sum(sum(k) for k in per_rank) / 8 * 1e-6
    t = _check()
    assert t["fastest_rank_step_time_s"] == pytest.approx(fastest)
    assert t["measured_step_time_s"] == pytest.approx(mean)
    step = [c for c in t["calls"] if c["category"] == "step"]
    assert len(step) == 3 and all(c["op"] == "all_reduce" and c["group_size"] == 8 for c in step)
    # NCCL's model of a DGX-1 (V100, NVLink hybrid cube-mesh) against what the fastest ranks took: the
    # sizes' sum within 0.8-1.5, each call too; the averages are several times more (the ranks' skew)
    assert 0.8 <= t["fastest_rank_ratio"] <= 1.5
    for c in step:
        assert 0.8 <= c["fastest_rank_s"] / c["predicted_s"] <= 1.5
    assert t["ratio"] > 3
    # the step's five all-to-alls (DLRM's embedding exchange, ncclKernel_SendRecv_...) are timed apart
    sendrecv = [_all_reduce_kernels_us(r, "ncclKernel_SendRecv") for r in range(8)]
    assert {len(k) for k in sendrecv} == {5}
    other = t["other_calls"]
    assert other["calls_per_rank_per_step"] == 5
    assert other["measured_s"] == pytest.approx(sum(sum(k) for k in sendrecv) / 8 * 1e-6)
    assert other["fastest_rank_s"] == pytest.approx(sum(min(k[i] for k in sendrecv) for i in range(5)) * 1e-6)
    assert {c["op"] for c in t["calls"] if c["category"] != "step"} == {"all_to_all"}


def test_text_says_the_wait_apart_and_the_release_is_the_traces():
    r = runner.invoke(app, ["check", str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"),
                            "--topology", "dgx-a100"])
    assert r.exit_code == 0, r.output
    # the trace states NCCL 2.17.1 (distributedInfo): its release prices the calls
    assert "timing by NCCL 2.17's own cost model (v2.17.1-1 tuning.cc) on dgx-a100" in r.stdout
    assert "holds the wait for the slowest rank and any overlap with compute" in r.stdout
    assert "traces of every rank tell the wait apart" in r.stdout  # one rank's file: no fastest rank
    r = runner.invoke(app, ["check", str(DLRM), "--topology", "dgx-1-v100", "--nccl-version", "2.18.1"])
    assert "NCCL 2.18.1's own cost model" in r.stdout and "on each call's fastest rank" in r.stdout


def test_refusals_in_one_line():
    cases = ((["check", str(DATA / "real-runs" / "ddp-bf16"), "--topology", "dgx-h100"], "error: --topology:",
              "gloo"),
             (["check", str(DLRM), "--topology", "amd-mi300x"], "error: --topology:", "AMD"),
             (["check", str(DLRM), "--topology", "dgx-1-v100", "--nccl-tuner", "x.csv"],
              "error: --nccl-tuner:", "tuner"),
             (["check", str(DLRM), "--topology", "dgx-1-v100", "--nccl-version", "9.9"],
              "error: --nccl-version", "9.9"))
    for args, start, word in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and r.output.startswith(start) and word in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_without_topology_no_nccl_timing():
    r = runner.invoke(app, ["check", str(DLRM), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["nccl_timing"] is None


@pytest.mark.parametrize("name, algorithm", [
    # up to NCCL 2.18 every protocol of (collective, algorithm, type) launches the algorithm's LL kernel
    # (src/enqueue.cc ncclKerns, v2.8-v2.18): the algorithm is stated, the protocol is not
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "Ring"),  # the DLRM trace's
    ("ncclKernel_AllReduce_TREE_LL_Sum_half", "Tree"),
    ("ncclKernel_AllReduce_COLLNET_DIRECT_LL_Sum_float", "CollNetDirect"),
    # from NCCL 2.19 a reduction launches ..._TREE_LL for Tree and ..._RING_LL for every other algorithm, an
    # all-gather ..._RING_LL for all (src/device/generate.py best_kernel, v2.19-v2.30): Tree alone is stated
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", None),
    ("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL", "Tree"),
    ("ncclDevKernel_AllGather_RING_LL", None),
    ("ncclDevKernel_Generic", None),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", None),  # point-to-point (the DLRM trace's all-to-all)
    ("", None),
])
def test_kernel_names_state_an_algorithm_and_no_protocol(name, algorithm):
    from zerocalc.validate.nccl_timing import kernel_algorithm

    assert kernel_algorithm(name) == algorithm


def test_the_algorithm_each_call_ran_is_read_off_its_kernels():
    # every all-reduce kernel of the DLRM step is named ncclKernel_AllReduce_RING_LL_...: NCCL 2.18 or before
    # (ncclKernel_), Ring at a protocol the name does not say
    with gzip.open(DLRM / "rank0.json.gz") as f:
        names = {e["name"] for e in json.load(f)["traceEvents"]
                 if e.get("ph") == "X" and str(e.get("name", "")).startswith("ncclKernel_AllReduce")}
    assert names and all("_RING_LL_" in n for n in names)
    calls = _check()["calls"]
    assert {c["ran_algorithm"] for c in calls if c["op"] == "all_reduce"} == {"Ring"}
    # its all-to-alls run ncclKernel_SendRecv_RING_SIMPLE_...: point-to-point, no ring
    assert {c["ran_algorithm"] for c in calls if c["op"] == "all_to_all"} == {None}
    # the field that stated a pair read off the names is kept, and states none
    assert {c["ran"] for c in calls} == {None}


def test_a_trace_without_durations_says_so():
    # NCCL's INFO lines record each call's size and group, not how long it took
    r = runner.invoke(app, ["check", str(DATA / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt"),
                            "--topology", "dgx-h100", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["nccl_timing"] is None
    assert any(n.startswith("--topology: the trace records no call durations") for n in out["notes"])


def test_a_trace_piped_in_is_timed_as_the_file():
    path = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"
    args = ["--topology", "dgx-a100", "--format", "json"]
    piped = runner.invoke(app, ["check", "-", *args], input=path.read_bytes())
    direct = runner.invoke(app, ["check", str(path), *args])
    assert piped.exit_code == 0 and direct.exit_code == 0, piped.output
    assert json.loads(piped.stdout)["nccl_timing"] == json.loads(direct.stdout)["nccl_timing"]


def test_the_report_times_the_traces_it_is_given_on_its_topology():
    from zerocalc import report
    from zerocalc.report.compute import trace_timing

    given = report.ReportConfig(topology="dgx-1-v100", n=8, traces=(DLRM,))
    checks = report.trace_checks({"dlrm": (DLRM,)}, nccl=trace_timing(given))
    timed = checks["dlrm"].nccl_timing.as_dict()
    assert timed == _check()  # as check DLRM --topology dgx-1-v100 times it
    # the bundled traces ran on other machines than the one under review, and AMD GPUs are RCCL's
    assert trace_timing(report.ReportConfig(topology="dgx-1-v100", n=8)) is None
    assert trace_timing(report.ReportConfig(topology="amd-mi300x", n=8, traces=(DLRM,))) is None
    # a run on gloo is checked, not timed
    gloo = DATA / "real-runs" / "ddp-bf16"
    paths = tuple(sorted(gloo.glob("rank*.json.gz")))
    res = report.trace_checks({"gloo": paths}, nccl=trace_timing(given))["gloo"]
    assert res.nccl_timing is None and res.matches


@pytest.mark.slow
def test_the_reports_validation_section_shows_the_timing(tmp_path):
    pypdf = pytest.importorskip("pypdf")
    out = tmp_path / "r.pdf"
    r = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-1-v100", "--n", "8", "--trace",
                            str(DLRM)])
    assert r.exit_code == 0, r.output
    text = " ".join(" ".join(p.extract_text().split()) for p in pypdf.PdfReader(str(out)).pages)
    # the DLRM kernels are named ncclKernel_...: priced as NCCL 2.18.6, the last release of that naming
    assert "Timed by NCCL 2.18's own cost model (v2.18.6-1 tuning.cc) on dgx-1-v100" in text
    took = "took 1.33 ms per rank per step (sum of kernel durations), 175 µs on each call's fastest rank"
    assert took in text


def test_the_algorithm_the_kernels_ran_is_timed_at_the_protocol_nccl_picks_in_it():
    # the DLRM kernels are Ring's, and NCCL's model picks Ring too (LL for the 448 B call, LL128 for the two
    # larger ones): the pair the model times for the algorithm they ran is its own choice, and no line says
    # more. The fastest rank of each call, read off the trace, stays within 0.8-1.5 of that time
    per_rank = [_all_reduce_kernels_us(r) for r in range(8)]
    fastest = [min(k[i] for k in per_rank) * 1e-6 for i in range(3)]  # in trace order: 394241, 112, 226960
    calls = [c for c in _check()["calls"] if c["op"] == "all_reduce"]
    assert [c["bytes"] for c in calls] == [394241 * 4, 112 * 4, 226960 * 4]
    for c, f in zip(calls, fastest, strict=True):
        assert c["pair"].startswith("Ring/") and c["ran_pair"] == c["pair"]
        assert c["ran_predicted_s"] == c["predicted_s"] and c["fastest_rank_s"] == pytest.approx(f)
        assert 0.8 <= f / c["ran_predicted_s"] <= 1.5
    # under NCCL_ALGO=Tree the model picks Tree and cannot run Ring: the line names what the kernels ran
    r = runner.invoke(app, ["check", str(DLRM), "--topology", "dgx-1-v100", "--nccl-algo", "Tree"])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if line.startswith("  AR of")]
    assert lines and all("NCCL Tree/" in line for line in lines)
    said = "; the trace's kernels ran Ring (their names state no protocol)"
    assert all(line.endswith(said) for line in lines)


def test_an_algorithm_held_to_is_priced_at_the_protocol_nccl_picks_under_nccl_algo():
    # NCCL_ALGO=Ring leaves NCCL Ring's protocols to choose from: the same pair as choose(..., Ring)
    from zerocalc.nccl import release_for
    from zerocalc.nccl.env import parse_list
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import Algorithm, Collective
    from zerocalc.topology import get_topology

    rel, _ = release_for("2.21.5")
    topo = get_topology("dgx-h100")
    whole = tune(topo, 16, rel)
    ring = tune(topo, 16, rel, algo_enable=parse_list("Ring", Algorithm, "NCCL_ALGO"))
    for n in (1 << 10, 1 << 20, 1 << 26, 1 << 30):
        held = whole.choose(Collective.ALL_REDUCE, n, Algorithm.RING)
        assert held[:2] == ring.choose(Collective.ALL_REDUCE, n)[:2]
        assert held[0] == Algorithm.RING


def test_a_given_pair_is_priced_as_the_chosen_one_is():
    from zerocalc.nccl import release_for
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.predict import predict
    from zerocalc.nccl.tables import Algorithm, Collective, Protocol
    from zerocalc.topology import get_topology

    release, _ = release_for("2.21.5")
    tuning = tune(get_topology("dgx-h100"), 16, release)
    for size in (4096, 1 << 20, 1 << 28):
        own = predict(tuning, Collective.ALL_REDUCE, size)
        given = predict(tuning, Collective.ALL_REDUCE, size, pair=(own.algorithm, own.protocol))
        assert (given.algorithm, given.protocol, given.time_s) == (own.algorithm, own.protocol, own.time_s)
    # a pair NCCL would not pick at 256 MiB is slower than its choice (NCCL picks the least time)
    ll = predict(tuning, Collective.ALL_REDUCE, 1 << 28, pair=(Algorithm.RING, Protocol.LL))
    assert ll.time_s > predict(tuning, Collective.ALL_REDUCE, 1 << 28).time_s


def test_check_without_topology_names_the_preset_of_the_traces_gpus():
    # the DLRM ranks ran on Tesla V100-SXM2-32GB (Kineto's deviceProperties), a DGX-1's GPU
    with gzip.open(DLRM / "rank0.json.gz") as f:
        names = {d["name"] for d in json.load(f)["deviceProperties"]}
    assert names == {"Tesla V100-SXM2-32GB"}
    r = runner.invoke(app, ["check", str(DLRM), "--format", "json"])
    hint = [n for n in json.loads(r.stdout)["notes"] if "deviceProperties" in n]
    assert hint == ["--topology dgx-1-v100 (the preset for the trace's Tesla V100-SXM2-32GB, from its "
                    "deviceProperties) would time the steps' NCCL calls by NCCL's own cost model, each "
                    "against its kernel's duration"]
    # not once --topology is given, not for a GPU no preset describes (the resnet trace's A100-PG509-200,
    # a Meta variant), not for a run on gloo
    given = runner.invoke(app, ["check", str(DLRM), "--topology", "dgx-1-v100", "--format", "json"])
    assert not [n for n in json.loads(given.stdout)["notes"] if "deviceProperties" in n]
    resnet = runner.invoke(app, ["check", str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"),
                                 "--format", "json"])
    assert not [n for n in json.loads(resnet.stdout)["notes"] if "deviceProperties" in n]


def test_a_trace_that_states_no_release_says_which_priced_it(tmp_path):
    # the DLRM ranks' distributedInfo has no nccl_version; the resnet trace's states 2.17.1
    from zerocalc.nccl import LATEST

    with gzip.open(DLRM / "rank0.json.gz") as f:
        assert "nccl_version" not in json.load(f)["distributedInfo"]

    def notes(path, *args):
        r = runner.invoke(app, ["check", str(path), "--format", "json", *args])
        return json.loads(r.stdout)["notes"]

    # its kernels are named ncclKernel_...: NCCL 2.18 or before (src/enqueue.cc ncclKerns up to v2.18.6;
    # ncclDevKernel_... from v2.19.3, src/device/generate.py), priced as the last release of that naming
    said = ("--topology: the trace states no NCCL version; its NCCL kernels are named ncclKernel_… "
            "(ncclDevKernel_… from NCCL 2.19): its calls are priced as NCCL 2.18.6, the last release of that "
            "naming (--nccl-version to choose the run's)")
    assert said in notes(DLRM, "--topology", "dgx-1-v100")
    # the same trace with its kernels named as NCCL 2.19 on names them: the latest release prices it
    renamed = tmp_path / "dlrm-ncclDevKernel"
    renamed.mkdir()
    for f in sorted(DLRM.glob("rank*.json.gz")):
        text = gzip.decompress(f.read_bytes()).decode()
        text = text.replace("ncclKernel_AllReduce_RING_LL_Sum_float",
                            "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        text = text.replace("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "ncclDevKernel_SendRecv")
        assert "ncclKernel_" not in text
        (renamed / f.name).write_bytes(gzip.compress(text.encode()))
    latest = LATEST.tag.lstrip("v").split("-")[0]
    said = ("--topology: the trace states no NCCL version; its calls are "
            f"priced by the latest release modelled, {latest} (--nccl-version to choose the run's)")
    assert said in notes(renamed, "--topology", "dgx-1-v100")
    chosen = notes(DLRM, "--topology", "dgx-1-v100", "--nccl-version", "2.18.1")
    resnet = notes(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz", "--topology", "dgx-a100")
    assert not [n for n in chosen + resnet if "states no NCCL version" in n]


def test_the_wait_line_speaks_of_calls_where_a_host_timer_measured_them():
    """DeepSpeed's comms logger times each call on the host (its verbose lines' ``time (ms)``), not a kernel:
    the line on a step far slower than NCCL's model says what a call's measured time holds without calling
    it a kernel's. The gloo ZeRO-2 run's log: its calls take milliseconds where NCCL's model gives µs."""
    log = DATA / "deepspeed-comms-gloo" / "zero2-ga4-verbose.log"
    r = runner.invoke(app, ["check", str(log), "--dtype", "fp32", "--topology", "dgx-h100"])
    assert r.exit_code == 0, r.output
    (line,) = [x for x in r.stdout.splitlines() if "× NCCL's time" in x]
    assert line.lstrip().startswith("the calls took") and "a call's measured time runs from its start" in line
    assert "host timer" in line and "kernels ran" not in line
