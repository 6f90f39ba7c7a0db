"""NCCL 2.5, 2.6 and 2.7: hand derivations from each tag's tuning.cc, search.cc and topo.h (NVIDIA/nccl
v2.5.7-1, v2.6.4-1, v2.7.3-1, v2.7.8-1), the version → table rule, and the refusal of 2.4 and earlier."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, release_for, tune
from zerocalc.topology import get_topology

A, P, C = Algorithm, Protocol, Collective
runner = CliRunner()


def entry(topo, ranks, name, algo, proto, coll=C.ALL_REDUCE):
    return tune(get_topology(topo), ranks, RELEASES[name]).entries[(coll, algo, proto)]


@pytest.mark.parametrize(("version", "table"), [
    ("2.5.6", "2.5"), ("2.5.7+cuda10.2", "2.5"), ("v2.6.4-1", "2.6"), ("2.7.3", "2.7.3"), ("2.7.1", "2.7.3"),
    ("2.7.5", "2.7"), ("2.7.8+cuda11.0", "2.7"),
])
def test_release_for_2_5_to_2_7(version, table):
    rel, note = release_for(version)
    assert rel.name == table and note is None  # each line's own table


@pytest.mark.parametrize("bad", ["2.4.8", "2.4.6+cuda10.0", "2.3.7"])
def test_2_4_and_earlier_refused_naming_why(bad):
    with pytest.raises(ConfigError, match="--nccl-version") as exc:
        release_for(bad)
    assert "modelled: 2.5 and later" in str(exc.value) and "no cost model" in str(exc.value)


def test_2_7_one_dgx1_by_hand():
    # v2.7.8 on one DGX-1 (8 V100, 6 NVLinks of 21 GB/s, topo.cc VOLTA_NVLINK_WIDTH): the ring graph is 6
    # channels × 21 GB/s (search.cc speedArray from 42; 126 GB/s a GPU).
    # Ring/Simple: bus 126, × 8/14; latency 8.4 + 14 NVLink hops × 3.4
    e = entry("dgx-1-v100", 8, "2.7", A.RING, P.SIMPLE)
    assert (e.latency_us, e.bandwidth_GBps) == pytest.approx((8.4 + 14 * 3.4, 126 * 8 / 14))
    # Tree/Simple: min(126 × 0.9, maxTreeBw 110) × 0.5 (no per-channel cap before v2.8.3); 2 · 7 · 28 µs
    e = entry("dgx-1-v100", 8, "2.7", A.TREE, P.SIMPLE)
    assert (e.latency_us, e.bandwidth_GBps) == pytest.approx((2 * 7 * 28, 110 * 0.5))
    # Tree/LL128: min(110 × 7/9, ll128MaxBwPerCh[AllReduce] 16.7 × 6 × 7/9) × 0.5; base 4.4 + 2 · 7 · 1.2
    e = entry("dgx-1-v100", 8, "2.7", A.TREE, P.LL128)
    assert (e.latency_us, e.bandwidth_GBps) == pytest.approx((4.4 + 2 * 7 * 1.2, 16.7 * 6 * 7 / 9 * 0.5))
    # Ring/LL: no llMaxBws before v2.8.3: 126 / 4 × 8/14
    assert entry("dgx-1-v100", 8, "2.7", A.RING, P.LL).bandwidth_GBps == pytest.approx(126 / 4 * 8 / 14)


def test_2_7_two_dgx1_network_hops_by_hand():
    # v2.7.8, 2 nodes × 8: Tree/Simple's network hop 50 µs (v2.8.3: 28); Ring/Simple 8.4 + (30 − 2) NVLink
    # hops × 3.4 + 2 network hops (nInterSteps = 2 (nNodes − 1)) × 9.6
    assert entry("dgx-1-v100", 16, "2.7", A.TREE, P.SIMPLE).latency_us == pytest.approx(2 * (7 * 28 + 50))
    ring = entry("dgx-1-v100", 16, "2.7", A.RING, P.SIMPLE)
    assert ring.latency_us == pytest.approx(8.4 + 28 * 3.4 + 2 * 9.6)
    # Tree/LL: 4.4 + 2 (7 · 0.52 · 1.8 + 5.0) beats Ring/LL's 3.6 + 28 · 0.47 · 1.8 + 2 · 2.7 for 8 bytes
    t = tune(get_topology("dgx-1-v100"), 16, RELEASES["2.7"])
    tree_ll = t.entries[(C.ALL_REDUCE, A.TREE, P.LL)]
    assert tree_ll.latency_us == pytest.approx(4.4 + 2 * (7 * 0.52 * 1.8 + 5.0))
    assert t.choose(C.ALL_REDUCE, 8)[:2] == (A.TREE, P.LL)


def test_2_6_ring_hops_of_one_class_and_whole_bus_ll128_cap():
    # v2.6.4: Ring/Simple 8.4 + nsteps × hwLat[hw] (NVLink 5.7 on one node; the network's 6.6 on every one of
    # the 30 steps on two nodes); Ring/LL128 min(126 × 120/128, ll128MaxBw[AllReduce] 100) × 8/14
    assert entry("dgx-1-v100", 8, "2.6", A.RING, P.SIMPLE).latency_us == pytest.approx(8.4 + 14 * 5.7)
    assert entry("dgx-1-v100", 16, "2.6", A.RING, P.SIMPLE).latency_us == pytest.approx(8.4 + 30 * 6.6)
    e = entry("dgx-1-v100", 8, "2.6", A.RING, P.LL128)
    assert (e.latency_us, e.bandwidth_GBps) == pytest.approx((3.6 + 14 * 2.5, 100 * 8 / 14))
    # Tree/LL ÷ 3 (v2.7.3 on: ÷ 3.8); Tree/LL128 × 7/9 uncapped
    assert entry("dgx-1-v100", 8, "2.6", A.TREE, P.LL).bandwidth_GBps == pytest.approx(110 / 3 * 0.5)
    assert entry("dgx-1-v100", 8, "2.6", A.TREE, P.LL128).bandwidth_GBps == pytest.approx(110 * 7 / 9 * 0.5)


def test_2_6_has_no_ring_plateau_and_2_7_has():
    # ncclTopoGetAlgoTime: the "plateau effect of ring" (× 1.9 from nRanks/16 × 64 KiB) arrives in v2.7.3
    for name, factor in (("2.6", 1.0), ("2.7", 1.9)):
        t = tune(get_topology("dgx-1-v100"), 16, RELEASES[name])
        e = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)]
        n = 1 << 20
        assert t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, n) == pytest.approx(
            (e.latency_us * factor + n / (1000 * e.bandwidth_GBps)) * 1e-6)


def test_ll128_on_ampere_from_2_7_only():
    # tuning.cc: v2.6.4 enables LL128 by default on sm70 alone, v2.7.3 on sm70 and sm80
    assert not entry("dgx-a100", 8, "2.6", A.RING, P.LL128).enabled
    assert entry("dgx-a100", 8, "2.7", A.RING, P.LL128).enabled


def test_2_7_3_scales_ampere_where_2_7_5_caps():
    # 8 A100 (12 NVLinks × 21 GB/s: 12 channels × 21): v2.7.3 busBw × 0.92, v2.7.5 on min(busBw, 235)
    e = entry("dgx-a100", 8, "2.7.3", A.RING, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(252 * 0.92 * 8 / 14)
    assert entry("dgx-a100", 8, "2.7", A.RING, P.SIMPLE).bandwidth_GBps == pytest.approx(235 * 8 / 14)
    # Tree/LL128 on sm80: maxTreeBw 130 (not 110), × 7/9, under 16.7 × 12 × 7/9
    assert entry("dgx-a100", 8, "2.7", A.TREE, P.LL128).bandwidth_GBps == pytest.approx(130 * 7 / 9 * 0.5)


def test_2_5_tree_caps_and_no_collnet():
    # v2.5.7: Tree capped at 90 GB/s on one node, 70 on more; Tree and Ring only
    assert entry("dgx-1-v100", 8, "2.5", A.TREE, P.SIMPLE).bandwidth_GBps == pytest.approx(90 * 0.5)
    assert entry("dgx-1-v100", 16, "2.5", A.TREE, P.SIMPLE).bandwidth_GBps == pytest.approx(70 * 0.5)
    assert RELEASES["2.5"].algorithms == (A.TREE, A.RING)
    assert A.COLLNET_DIRECT in RELEASES["2.6"].algorithms


def test_table_command_prices_2_7():
    res = runner.invoke(app, ["table", "--topology", "dgx-1-v100", "--nccl-version", "2.7.8"])
    assert res.exit_code == 0, res.output
    assert "v2.7.8-1" in res.stdout


def test_point_to_point_refused_before_2_7():
    # ncclSend / ncclRecv arrive in v2.7.3 (src/nccl.h.in; v2.6.4 has none): a sendrecv sweep at 2.6 is
    # refused in one line, at 2.7 priced
    data = str(Path(__file__).parent / "data" / "traces" / "nccl-tests" / "sendrecv_perf-8xA100-g8-block.txt")
    args = ["check", data, "--topology", "dgx-a100", "--n", "8", "--nccl-version"]
    res = runner.invoke(app, [*args, "2.6.4"])
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert "NCCL 2.6.4 has no point-to-point operations" in line
    assert runner.invoke(app, [*args, "2.7.8"]).exit_code == 0


def test_table_before_2_7_leaves_the_send_receive_scheme_unpriced():
    # ZeRO++'s qgZ all-to-all is grouped ncclSend / ncclRecv, which NCCL 2.5 and 2.6 lack (v2.7.3's
    # nccl.h.in): the table prices every other scheme with that release's model and says why zeropp is n/a
    args = ["table", "--topology", "dgx-1-v100", "--nccl-version", "2.6.4"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.split() and ln.split()[0] in
            ("zeropp", "zero2", "fsdp-hybrid")}
    assert "n/a" in rows["zeropp"] and "n/a" not in rows["zero2"] and "n/a" not in rows["fsdp-hybrid"]
    assert "zeropp not priced (n/a): NCCL 2.6.4 has no point-to-point operations" in res.stdout
    import json

    records = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)  # strict JSON: null, no NaN
    by = {r["scheme"]: r for r in records}
    assert by["zeropp"]["time_s_nccl"] is None and by["zeropp"]["nccl_choice"] == "n/a"
    assert by["zero2"]["time_s_nccl"] > 0 and "Ring" in by["zero2"]["nccl_choice"]
    # at 2.7.8 the same table prices zeropp's all-to-all
    json_27 = runner.invoke(app, ["table", "--topology", "dgx-1-v100", "--nccl-version", "2.7.8", "--format",
                                  "json"]).stdout
    assert {r["scheme"]: r for r in json.loads(json_27)}["zeropp"]["time_s_nccl"] > 0


def test_check_prices_a_file_s_collectives_and_leaves_its_send_receive_before_2_7():
    # nccl-tests' five tests in one log: at 2.6.4 all-reduce, all-gather and reduce-scatter are priced, the
    # all-to-all and sendrecv sweeps are named unpriced (no ncclSend / ncclRecv), and the exit is 0
    data = str(Path(__file__).parent / "data" / "traces" / "nccl-tests"
               / "five-tests-8xH100-1node-nccl2.29.2.log")
    res = runner.invoke(app, ["check", data, "--nccl-version", "2.6.4"])
    assert res.exit_code == 0, res.output
    assert "sendrecv on 8 ranks: not priced: NCCL 2.6.4 has no point-to-point operations" in res.output
    assert "all_to_all on 8 ranks: not priced" in res.output
