"""RCCL on MI250X (gfx90a) and MI350X / MI355X (gfx950): presets, detection, tuning models, the NIC floor.

Expected values: the rows and times are counted from the bundled MI355X sweep (tests/data/traces/README.md
names its source); the model's figures are derived by hand from RCCL's ``src/graph/tuning.cc``
(tuning_model_3 for rome_model_74's 8 MI250X GCDs and 4 NICs, tuning_model_6 for gfx950), ``topo.h``
(MI200_XGMI_WIDTH 36 GB/s, GFX95X_XGMI_WIDTH 48 GB/s), ``rome_models.cc`` (rome_model_73/74's
``connMatrix``: a GCD's links 4 + 2 + 1) and the OLCF Frontier user guide (4 Slingshot-11 NICs of 200 Gb/s).
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.rccl import V2_21, network_floor_us, price_call, rccl_tune
from zerocalc.nccl.release import Algorithm, Collective, Protocol
from zerocalc.topology import PRESETS
from zerocalc.topology.devices import preset_for_gpu
from zerocalc.traces import nccl_tests

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
MI355X_2N = DATA / "all_reduce_perf-16xMI355X-2nodes-pollara-rccl2.26.6.txt"
A, P, C = Algorithm, Protocol, Collective
runner = CliRunner()


@pytest.mark.parametrize(("name", "preset", "arch"), [
    ("AMD Instinct MI250X", "amd-mi250x", "gfx90a"),  # rocminfo's name, as HPE's EX235a runs print it
    ("AMD Instinct MI355X", "amd-mi355x", "gfx950"),
    ("AMD Instinct MI350X", "amd-mi350x", "gfx950"),
    ("AMD Instinct MI300A", "amd-mi300a", "gfx942"),
])
def test_amd_names_find_their_preset(name, preset, arch):
    assert preset_for_gpu(name) == preset
    assert PRESETS[preset].gpu_arch == arch
    assert PRESETS[preset].gpus_per_node == (4 if preset == "amd-mi300a" else 8)


def test_mi300a_node_by_hand():
    t = PRESETS["amd-mi300a"]
    # LLNL: 4 APUs, two Infinity Fabric links to each peer (6 × 64 GB/s each way); 4 Slingshot-11 NICs
    assert (t.nics_per_node, t.nic_Gbps) == (4, 200.0) and t.intra.bw_Bps == pytest.approx(6 * 64e9)
    one, two = rccl_tune(t, 4, V2_21), rccl_tune(t, 8, V2_21)
    # rome_model_80 sets no tuning: model 0; RCCL's totalBw 3 peers × 2 links × 48 GB/s
    assert (one.model_index, two.model_index) == (0, 0)
    assert one.total_bw_GBps == pytest.approx(288.0) and not one.msccl
    # model 0 Ring/Simple on one node: 17 + 6 × 3.6 = 38.6 µs, 288 × 1.0 × 4/6 = 192 GB/s
    e = one.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)]
    assert e.latency_us == pytest.approx(38.6) and e.bandwidth_GBps == pytest.approx(192.0)
    assert two.net_GBps == pytest.approx(4 * 25.0)


def test_mi250x_node_and_tuning_by_hand():
    t = PRESETS["amd-mi250x"]
    # OLCF: 4 Slingshot-11 NICs of 200 Gb/s; a GCD's 7 links (4 + 2 + 1) at 50 GB/s
    assert (t.nics_per_node, t.nic_Gbps, t.cpu_vendor) == (4, 200.0, "amd")
    assert t.intra.bw_Bps == pytest.approx(7 * 50e9)
    one, two = rccl_tune(t, 8, V2_21), rccl_tune(t, 16, V2_21)
    # rome_model_73 (one node, no tuning option) → model 0; rome_model_74 (4 NICs, tuning=3) → model 3
    assert (one.model_index, two.model_index) == (0, 3)
    assert one.total_bw_GBps == pytest.approx(7 * 36.0) and not one.msccl
    # gfx90a: Tree/Simple stays on within a node (the skip is gfx942/gfx950's); model 0's Tree/Simple
    # bwRatio 0.91 × 252 × 0.5 = 114.66 GB/s, latency 17 + 2 × 7 × 2.5 = 52 µs
    e = one.entries[(C.ALL_REDUCE, A.TREE, P.SIMPLE)]
    assert e.enabled and e.bandwidth_GBps == pytest.approx(114.66) and e.latency_us == pytest.approx(52.0)
    # model 3 across 2 nodes: Ring/LL 12 + (30 − 4) × max(0.8, 2) + 4 × 9.5 = 102 µs (getNetOverhead 2 µs on
    # AMD hosts); bandwidth 252 × 0.20 × 16/30 = 26.88 GB/s
    e = two.entries[(C.ALL_REDUCE, A.RING, P.LL)]
    assert e.latency_us == pytest.approx(102.0) and e.bandwidth_GBps == pytest.approx(26.88)
    assert two.net_GBps == pytest.approx(4 * 25.0)


def test_nic_floor_by_hand():
    two = rccl_tune(PRESETS["amd-mi250x"], 16, V2_21)
    n = 256 * 2**20
    # a ring all-reduce sends 2 (p − 1)/p × n per node on its 100 GB/s of NICs, a tree at least n
    assert network_floor_us(two, C.ALL_REDUCE, A.RING, n) == pytest.approx(2 * 15 / 16 * n / 100e3)
    assert network_floor_us(two, C.ALL_REDUCE, A.TREE, n) == pytest.approx(n / 100e3)
    assert network_floor_us(two, C.ALL_GATHER, A.RING, n) == pytest.approx(15 / 16 * n / 100e3)
    call = price_call(two, C.ALL_REDUCE, n, 4, False)
    assert call.net_bound and call.time_us >= n / 100e3
    # one node: no NIC; MI300X: 8 × 50 GB/s of NICs above RCCL's 336 GB/s ring, never the bound
    assert network_floor_us(rccl_tune(PRESETS["amd-mi250x"], 8, V2_21), C.ALL_REDUCE, A.RING, n) is None
    mi300 = rccl_tune(PRESETS["amd-mi300x"], 16, V2_21)
    assert not any(price_call(mi300, C.ALL_REDUCE, 2**k, 4, False).net_bound for k in range(3, 35))


def test_mi355x_tuning_model_6_by_hand():
    one, two = (rccl_tune(PRESETS["amd-mi355x"], r, V2_21) for r in (8, 16))
    assert (one.model_index, two.model_index) == (6, 6)
    assert one.total_bw_GBps == pytest.approx(7 * 48.0) and one.msccl and not two.msccl
    assert not one.entries[(C.ALL_REDUCE, A.TREE, P.SIMPLE)].enabled  # gfx950 within one node
    # model 6 Tree/LL across 2 nodes: 12 + 2 × (7 × 0.9 + 10.5) = 45.6 µs; 336 × 0.06 × 0.5 = 10.08 GB/s,
    # × treeCorrectionFactor[LL][0] 0.1 at 64 B
    assert two.time_us(C.ALL_REDUCE, A.TREE, P.LL, 64) == pytest.approx(45.6 + 64 / (1000 * 1.008))
    # 8 MiB: Tree/Simple × 0.1 (index 17 of model 6's Simple row) against model 5's 1.0 (2.21.5)
    t5 = rccl_tune(PRESETS["amd-mi300x"], 16, V2_21)
    bw = 336 * 0.11 * 0.5
    assert two.time_us(C.ALL_REDUCE, A.TREE, P.SIMPLE, 2**23) == pytest.approx(
        t5.entries[(C.ALL_REDUCE, A.TREE, P.SIMPLE)].latency_us + 2**23 / (1000 * bw * 0.1))


def test_mi355x_two_node_sweep_is_read_and_checked():
    with open(MI355X_2N) as f:
        run, = nccl_tests.parse(f, str(MI355X_2N)).meta["runs"]
    # counted from the file: 8 B to 8 GiB (31 sizes), 16 rank lines, 8 on each of 2 hosts, naming no GPU
    assert (run["rows"], run["group_size"], run["nccl_version"]) == (31, 16, "2.26.6")
    assert run["gpus"] == {} and run["hosts"] == {"mi355-gpu-23": 8, "mi355-gpu-24": 8}
    res = runner.invoke(app, ["check", str(MI355X_2N)])
    assert res.exit_code == 2 and "--topology" in res.output and len(res.output.strip().splitlines()) == 1
    assert "leave the device name empty" in res.output
    res = runner.invoke(app, ["check", str(MI355X_2N), "--topology", "amd-mi355x", "--format", "json"])
    assert res.exit_code == 0, res.output
    sweep, = json.loads(res.stdout)["sweeps"]
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert rows[8]["measured_s"] == pytest.approx(41.16e-6) and rows[8589934592]["measured_s"] == \
        pytest.approx(43643e-6)
    # 64 B across nodes: Tree/LL, its latency 45.6 µs (above) and 64 B at the table's LL bandwidth without its
    # size correction, 336 × 0.06 × 0.5 = 10.08 GB/s (zerocalc.nccl.rccl_net), against 40.38 µs measured
    assert rows[64]["predicted_s"] == pytest.approx((45.6 + 64 / 10080) * 1e-6)
    assert (rows[64]["algorithm"], rows[64]["protocol"]) == ("Tree", "LL")


@pytest.mark.parametrize(("preset", "says", "cites"), [
    # 64 ranks on 8 nodes: rome_model_74 (tuning=3); the 8-rank shard groups on one node: rome_model_73
    ("amd-mi250x", ["tuning model 3 of rome_model_74", "tuning model 0 (rome_model_73, 8 MI250X GCDs"],
     "the tables of tuning_model_0 and tuning_model_3"),
    ("amd-mi355x", ["tuning model 6, gfx950's"], "the tables of tuning_model_0 and tuning_model_6"),
    # zeropp's hpZ/qgZ groups across nodes hold one GPU per node: no rome model, model 0
    ("amd-mi300x", ["tuning model 5 of the 8-GPU xGMI rome models"],
     "src/graph/tuning.cc tuning_model_5, tools/msccl-algorithms; the tables of tuning_model_0"),
])
def test_table_on_each_amd_preset_names_the_tuning_models_it_priced(preset, says, cites):
    # table on MI250X and MI355X raised KeyError naming the model (3, 6) its note had no words for; then
    # cited the release's tuning_model_5 for tables it did not read
    res = runner.invoke(app, ["table", "--topology", preset])
    assert res.exit_code == 0 and res.exception is None, res.output
    (note,) = [ln for ln in res.output.splitlines() if ln.startswith("note: t RCCL: RCCL ")]
    for words in says:
        assert words in note
    assert cites in note
    assert ("tuning_model_5" in note) == (preset == "amd-mi300x")


def test_a_pair_only_a_restriction_leaves_is_timed_without_its_steering_correction():
    """8 MI355X on one node under NCCL_ALGO=Tree: Tree/Simple is skipped within a node on gfx950, so every
    all-reduce outside MSCCL's programs runs Tree/LL, which model 6 corrects by 0.1 from 8 KiB (its LL row of
    treeCorrectionFactor) to steer RCCL to Ring. Once run, the pair is timed as RCCL's latency, 12 + 2 × 7
    × 0.9 = 24.6 µs (baseLat LL + 2 × (p - 1) xGMI hops), plus the bytes at 336 × 0.06 × 0.5 = 10.08 GB/s
    (totalBw × bwRatio × the tree's bus-to-algorithm 1/2): an 8 GiB call 852 ms, not 8.5 s."""
    from zerocalc.nccl.env import settings

    topo = PRESETS["amd-mi355x"]
    env = settings(topo, "2.26.6", "Tree", None)
    from zerocalc.nccl.rccl import rccl_default_for

    rel = rccl_default_for("gfx950")
    forced = rccl_tune(topo, 8, rel, algo_enable=env.algo_enable, proto_enable=env.proto_enable)
    n = 8 << 30
    call = price_call(forced, C.ALL_REDUCE, n, 4, True)
    assert (call.algorithm, call.protocol) == ("Tree", "LL")
    assert call.time_us == pytest.approx(24.6 + n / (1000 * 10.08))
    assert (call.forced_correction, call.unrestricted) == (0.1, "Ring/Simple")
    free = price_call(rccl_tune(topo, 8, rel), C.ALL_REDUCE, n, 4, True)
    assert (free.algorithm, free.protocol, free.forced_correction) == ("Ring", "Simple", None)
    # a pair RCCL picks unrestricted keeps its table time, correction included: 8 MI250X GCDs on one node
    # (model 0) take Tree/Simple at 1 MiB
    mi250 = rccl_tune(PRESETS["amd-mi250x"], 8, V2_21)
    own = price_call(mi250, C.ALL_REDUCE, 1 << 20, 4, True)
    assert (own.algorithm, own.protocol, own.forced_correction) == ("Tree", "Simple", None)
    assert own.time_us == pytest.approx(mi250.time_us(C.ALL_REDUCE, A.TREE, P.SIMPLE, 1 << 20))


def test_table_under_nccl_algo_tree_on_one_amd_node_says_how_it_times_tree():
    # data parallelism's all-reduce of 7.5e9 fp16 elements, 15e9 B, as Tree/LL: 24.6 µs + 15e9 B at
    # 10.08 GB/s = 1.488 s
    res = runner.invoke(app, ["table", "--topology", "amd-mi355x", "--n", "8", "--nccl-algo", "Tree",
                              "--schemes", "dp", "--format", "json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["nccl_choice"] == "AR Tree/LL"
    assert row["time_s_nccl"] == pytest.approx(24.6e-6 + 15e9 / 10.08e9, rel=1e-6)
    said = "only because NCCL_ALGO / NCCL_PROTO leave it no other"
    notes = [n for n in res.stderr.splitlines() if said in n]
    assert len(notes) == 1 and "its table would pick Ring/Simple" in notes[0] and "×0.1" in notes[0]


def test_the_reports_notes_keep_a_collectives_name_as_written():
    """The report's notes are the table's without their ``t RCCL:`` label, each opened with a capital, but
    a collective's name before a colon stays as the table writes it (as a scheme's name does)."""
    from zerocalc.report.sweeps import _notes

    assert _notes(["t RCCL: all_reduce: RCCL runs Tree/LL on one node only because NCCL_ALGO …",
                   "t RCCL: zero1, zero2 not priced (n/a): …", "t NCCL: priced under NCCL_ALGO=Tree",
                   "t NCCL: reduce the bytes"]) == [
        "all_reduce: RCCL runs Tree/LL on one node only because NCCL_ALGO …",
        "zero1, zero2 not priced (n/a): …", "Priced under NCCL_ALGO=Tree", "Reduce the bytes"]
