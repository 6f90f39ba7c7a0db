"""A call's group placed on the cluster's nodes by its members' global ranks (``check TRACE --topology``).

PyTorch writes a call's group in ``record_param_comms``' ``Process Group Ranks`` (``format_list``,
``torch/csrc/profiler/util.cpp``: past 30 entries the first 29, ``...`` and the last) and, where the ranks
step evenly, ``Global rank start`` / ``Global rank stride``; the rank's process groups in
``distributedInfo.pg_config``. Expected values are read off the trace files, or derived by hand from those
rules and from rank r sitting on node r // G."""

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces
from zerocalc.traces.kineto_groups import ranks_recorded
from zerocalc.validate.nccl_timing import node_fill

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "traces"
RESNET = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"  # HolisticTraceAnalysis, NCCL 2.17.1
RUNS = DATA / "real-runs"


def _events(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


def test_the_resnet_trace_states_its_groups_ranks():
    doc = _events(RESNET)
    stated = {e["args"]["Process Group Ranks"] for e in doc["traceEvents"]
              if e.get("name") == "record_param_comms" and e["args"].get("Collective name") not in ("wait",)}
    assert "[0, 1]" in stated
    t = read_traces(RESNET).table
    assert len(t) == 21 and set(t["group_ranks"]) == {"0,1"}
    # and its description, which names each line of the timing
    descs = {e["args"].get("Process Group Description") for e in doc["traceEvents"]
             if e.get("name") == "record_param_comms" and e["args"].get("Collective name") != "wait"}
    assert descs == {"default_pg"}
    r = runner.invoke(app, ["check", str(RESNET), "--topology", "dgx-a100", "--format", "json"])
    calls = json.loads(r.stdout)["nccl_timing"]["calls"]
    assert {(c["group_name"], c["nodes"], c["placement"]) for c in calls} == {("default_pg", 1, "ranks")}


def test_pytorchs_truncated_list_and_the_stride_are_read_back():
    # 64 ranks a stride of 8 apart, as format_list writes them: 29 entries, "...", the last
    written = "[" + ", ".join(str(8 * i) for i in range(29)) + ", ..., 504]"
    assert ranks_recorded({"Process Group Ranks": written}, 64) == ",".join(str(8 * i) for i in range(64))
    # the 29 do not step evenly to the last at the group's size: not guessed
    uneven = "[" + ", ".join(str(i) for i in range(28)) + ", 40, ..., 504]"
    assert ranks_recorded({"Process Group Ranks": uneven}, 64) is None
    assert ranks_recorded({"Process Group Ranks": written}, 63) is None
    # no list (or an empty one): the start and the stride, with the group's size
    assert ranks_recorded({"Process Group Ranks": "[]", "Global rank start": 1, "Global rank stride": 8},
                          2) == "1,9"
    assert ranks_recorded({"Global rank start": 0, "Global rank stride": -1}, 2) is None  # not evenly spaced
    assert ranks_recorded({"Process Group Ranks": "[0, 8]"}, 4) is None  # at odds with the group's size
    assert ranks_recorded({"Process Group Ranks": "[0, 0]"}, 2) is None


def test_pg_config_gives_the_ranks_of_a_call_that_states_none():
    # DDP over the data-parallel group [1, 3] of a 4-rank gloo run: its calls record no group, pg_config
    # lists the one group of two ranks this rank is in
    path = RUNS / "ddp-subgroup-dp2-of-4" / "rank1.json.gz"
    groups = {pg["pg_size"]: pg["ranks"] for pg in _events(path)["distributedInfo"]["pg_config"]}
    assert groups == {4: [0, 1, 2, 3], 2: [1, 3]}
    t = read_traces(path).table
    assert set(t.loc[t["group_size"] == 2, "group_ranks"]) == {"1,3"}
    # HSDP 2 × 2: rank 1 is in two groups of two (shard [0, 1], replicate [1, 3]); a call of two ranks that
    # does not name its group could be on either by its size: its worker thread tells which (README: the
    # all-reduces of the shards run on the replicate group)
    path = RUNS / "hsdp-2x2" / "rank1.json.gz"
    sizes = [pg["pg_size"] for pg in _events(path)["distributedInfo"]["pg_config"]]
    assert sorted(sizes) == [2, 2, 4]
    t = read_traces(path).table
    ranks = t.groupby(t["op"].astype(str))["group_ranks"].unique().map(list).to_dict()
    assert ranks == {"all_gather": ["0,1"], "reduce_scatter": ["0,1"], "all_reduce": ["1,3"]}


def test_node_fill_by_hand():
    assert node_fill("1,9", 2, 8) == (1, True)  # one rank on each of two 8-GPU nodes
    assert node_fill(",".join(map(str, range(16))), 16, 8) == (8, True)
    assert node_fill("0,1,2,8", 4, 8) == (4, False)  # 3 + 1: unevenly, placed packed
    assert node_fill("", 4, 8) == (4, False)
    assert node_fill("0,1", 2, 1) == (1, True)


def _trace(tmp_path: Path, *groups: str) -> Path:
    """A one-step trace of rank 9's all-reduces, one on each of ``groups`` (their ``Process Group Ranks``),
    written as PyTorch 2.4+ writes them (the resnet trace's first bucket, 2,049,000 fp32 elements): a
    ProfilerStep, and for each call record_param_comms and the NCCL kernel it launched (500 µs)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": 10000.0, "args": {}}]
    for i, ranks in enumerate(groups):
        size = len(ranks.strip("[]").split(",")) if ranks != "[]" else 2
        args = {"External id": 7 + i, "Collective name": "allreduce", "dtype": "Float",
                "In msg nelems": 2049000, "Out msg nelems": 2049000, "Group size": size,
                "Process Group Name": str(5 + i), "Process Group Description": "undefined",
                "Process Group Ranks": ranks, "Rank": 1}
        events += [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                    "ts": 100.0 + 1000 * i, "dur": 20.0, "args": args},
                   {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 130.0 + 1000 * i, "dur": 500.0,
                    "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                    "args": {"External id": 7 + i}}]
    doc = {"distributedInfo": {"backend": "nccl", "rank": 9, "world_size": 16, "nccl_version": "2.21.5"},
           "traceEvents": events}
    path = tmp_path / ("trace-" + "_".join(g.strip("[]").replace(", ", "-") for g in groups) + ".json")
    path.write_text(json.dumps(doc))
    return path


def _one_call_trace(tmp_path: Path, ranks: str) -> Path:
    return _trace(tmp_path, ranks)


def _timed(path: Path, *args) -> dict:
    r = runner.invoke(app, ["check", str(path), "--topology", "dgx-h100", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    (call,) = json.loads(r.stdout)["nccl_timing"]["calls"]
    return call


def test_a_group_spread_one_rank_a_node_is_priced_on_the_network(tmp_path):
    spread = _timed(_one_call_trace(tmp_path, "[1, 9]"))  # a data-parallel pair under tp = 8
    packed = _timed(_one_call_trace(tmp_path, "[8, 9]"))  # a pair on one node
    assert (spread["nodes"], spread["ranks_per_node"], spread["placement"]) == (2, 1, "ranks")
    assert (packed["nodes"], packed["ranks_per_node"], packed["placement"]) == (1, 2, "ranks")
    # one rank on each of two nodes is a pair on nodes of one GPU
    one_gpu_nodes = _timed(_one_call_trace(tmp_path, "[0, 1]"), "--gpus-per-node", "1")
    assert (one_gpu_nodes["nodes"], one_gpu_nodes["ranks_per_node"]) == (2, 1)
    assert spread["predicted_s"] == pytest.approx(one_gpu_nodes["predicted_s"])
    # over the nodes' NICs the 8.2 MB all-reduce takes longer than over one node's NVLink
    assert spread["predicted_s"] > 1.3 * packed["predicted_s"]
    assert spread["measured_s"] == packed["measured_s"] == pytest.approx(500e-6)


def test_the_text_says_where_each_group_ran(tmp_path):
    r = runner.invoke(app, ["check", str(_one_call_trace(tmp_path, "[1, 9]")), "--topology", "dgx-h100"])
    assert r.exit_code == 0, r.output
    assert "on 2 ranks (2 nodes × 1) ×1 a step" in r.stdout
    r = runner.invoke(app, ["check", str(_one_call_trace(tmp_path, "[]")), "--topology", "dgx-h100"])
    assert "on 2 ranks (packed: 1 node) ×1 a step" in r.stdout


def test_a_tp_and_a_dp_group_are_each_timed_on_their_own_links(tmp_path):
    # rank 9 of 16 at tp = 8: its tensor-parallel group is node 1's eight GPUs, its data-parallel pair
    # [1, 9] one rank on each node
    path = _trace(tmp_path, "[8, 9, 10, 11, 12, 13, 14, 15]", "[1, 9]")
    r = runner.invoke(app, ["check", str(path), "--topology", "dgx-h100", "--format", "json"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)["nccl_timing"]
    tp, dp = t["groups"]
    assert (tp["group_size"], tp["nodes"], tp["ranks_per_node"]) == (8, 1, 8)
    assert (dp["group_size"], dp["nodes"], dp["ranks_per_node"]) == (2, 2, 1)
    assert tp["measured_s"] == dp["measured_s"] == pytest.approx(500e-6)  # one 500 µs kernel each
    # the check takes one group for the data-parallel step and the other's call for another group's:
    # both are timed, the step's in the total and the other apart
    assert {c["category"] for c in t["calls"]} == {"step", "unexplained"}
    total = t["predicted_step_time_s"] + t["other_calls"]["predicted_s"]
    assert tp["predicted_s"] + dp["predicted_s"] == pytest.approx(total)
    assert dp["predicted_s"] == pytest.approx(_timed(_trace(tmp_path, "[1, 9]"))["predicted_s"])
    text = runner.invoke(app, ["check", str(path), "--topology", "dgx-h100"]).stdout
    assert "by group, per rank per step: 8 ranks (1 node): measured 500 µs" in text
    assert "; 2 ranks (2 nodes × 1): measured 500 µs" in text


def test_a_call_on_the_whole_world_is_placed_on_it():
    # the DLRM trace (facebookresearch/param) records no group, but its header states world_size 8 and its
    # calls run on 8 ranks: ranks 0-7, one 8-GPU node, or two of 4
    dlrm = DATA / "kineto" / "dlrm-v100-8ranks"
    assert _events(dlrm / "rank0.json.gz")["distributedInfo"]["world_size"] == 8
    for g, nodes in ((8, 1), (4, 2)):
        r = runner.invoke(app, ["check", str(dlrm), "--topology", "dgx-1-v100", "--gpus-per-node", str(g),
                                "--format", "json"])
        calls = json.loads(r.stdout)["nccl_timing"]["calls"]
        assert {(c["group_size"], c["nodes"], c["ranks_per_node"], c["placement"]) for c in calls} == {
            (8, nodes, 8 // nodes, "ranks")}


def _hsdp_trace(tmp_path: Path) -> Path:
    """One step of rank 9 of an HSDP run on two 8-GPU nodes, as PyTorch 2.4+ records FSDP2's calls: the
    parameters all-gathered and the gradients reduce-scattered on the node ([8, ..., 15], mesh_shard), the
    shard all-reduced across the nodes ([1, 9], mesh_replicate); Ψ = 8,000,000 fp32 parameters, each
    kernel 1 ms."""
    shard, replicate = "[8, 9, 10, 11, 12, 13, 14, 15]", "[1, 9]"
    psi = 8_000_000
    calls = (("_allgather_base", psi // 8, psi, 8, "mesh_shard", shard, "AllGather"),
             ("_reduce_scatter_base", psi, psi // 8, 8, "mesh_shard", shard, "ReduceScatter_Sum"),
             ("allreduce", psi // 8, psi // 8, 2, "mesh_replicate", replicate, "AllReduce_Sum"))
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": 100000.0, "args": {}}]
    for i, (name, n_in, n_out, size, desc, ranks, kernel) in enumerate(calls):
        args = {"External id": 20 + i, "Collective name": name, "dtype": "Float", "In msg nelems": n_in,
                "Out msg nelems": n_out, "Group size": size, "Process Group Name": str(2 + i // 2),
                "Process Group Description": desc, "Process Group Ranks": ranks, "Rank": 1}
        events += [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                    "ts": 100.0 + 5000 * i, "dur": 20.0, "args": args},
                   {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 130.0 + 5000 * i, "dur": 1000.0,
                    "name": f"ncclDevKernel_{kernel}_f32_RING_SIMPLE(ncclDevComm*)",
                    "args": {"External id": 20 + i}}]
    doc = {"distributedInfo": {"backend": "nccl", "rank": 9, "world_size": 16, "nccl_version": "2.21.5"},
           "traceEvents": events}
    path = tmp_path / "hsdp-rank9.json"
    path.write_text(json.dumps(doc))
    return path


def test_hsdp_shard_and_replicate_groups_are_placed_apart(tmp_path):
    r = runner.invoke(app, ["check", str(_hsdp_trace(tmp_path)), "--topology", "dgx-h100", "--format",
                            "json"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)["nccl_timing"]
    where = {(c["op"], c["group_name"], c["nodes"], c["ranks_per_node"], c["category"]) for c in t["calls"]}
    assert where == {("all_gather", "mesh_shard", 1, 8, "step"),
                     ("reduce_scatter", "mesh_shard", 1, 8, "step"),
                     ("all_reduce", "mesh_replicate", 2, 1, "step")}
    shard, replicate = t["groups"]
    assert (shard["group_name"], shard["measured_s"]) == ("mesh_shard", pytest.approx(2e-3))
    assert (replicate["group_name"], replicate["measured_s"]) == ("mesh_replicate", pytest.approx(1e-3))
    assert shard["predicted_s"] + replicate["predicted_s"] == pytest.approx(t["predicted_step_time_s"])


def test_a_malformed_group_size_is_not_spelt_out():
    # a billion-rank group (a corrupt trace) is left unknown at once, not listed
    assert ranks_recorded({"Global rank start": 0, "Global rank stride": 1}, 10**9) is None
    assert ranks_recorded({"Process Group Ranks": "[0, 1]"}, 0) is None


@pytest.mark.slow
def test_the_report_splits_a_given_traces_time_by_group(tmp_path):
    pypdf = pytest.importorskip("pypdf")
    out = tmp_path / "r.pdf"
    r = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-h100", "--n", "16", "--trace",
                            str(_hsdp_trace(tmp_path))])
    assert r.exit_code == 0, r.output
    text = " ".join(" ".join(p.extract_text().split()) for p in pypdf.PdfReader(str(out)).pages)
    # two 1 ms kernels on the node's shard group, one on the replicate pair across the nodes
    assert "By group: 8 ranks (mesh_shard) on 1 node: 2 ms against" in text
    assert "; 2 ranks (mesh_replicate) on 2 nodes: 1 ms against" in text
