"""NCCL releases before 2.18 (v2.9.9 to v2.17.1): hand derivations from each tag's tuning.cc, search.cc
and topo.h, the version → table rule, and old-version sweeps priced through the CLI."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, parse_list, release_for, tune
from zerocalc.nccl_pricing import nvls_corrected
from zerocalc.topology import get_topology

A, P, C = Algorithm, Protocol, Collective
V9, V10, V12, V14, V15, V16, V17, V19 = (RELEASES[n] for n in ("2.9", "2.10", "2.12", "2.14", "2.15", "2.16",
                                                                 "2.17", "2.19"))
DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def entry(topo, ranks, release, coll, algo, proto):
    return tune(get_topology(topo), ranks, release).entries[(coll, algo, proto)]


@pytest.mark.parametrize(("version", "table", "noted"), [
    ("2.8.3", "2.9", True), ("2.9.6", "2.9", False), ("2.10.3+cuda11.4", "2.10", False),
    ("2.11.4", "2.10", True), ("v2.12.12-1", "2.12", False), ("2.13.4", "2.12", True),
    ("2.14.3", "2.14", False),
    ("2.15.1", "2.15", False), ("2.16.2", "2.15", True), ("2.16.5", "2.16", False), ("2.17.1", "2.17", False),
])
def test_release_for_old_versions(version, table, noted):
    # which tag's files are the same is read off the tags (module docstring of zerocalc.nccl.tables)
    rel, note = release_for(version)
    assert rel.name == table
    assert (note is not None) == noted
    if noted:
        assert f"tables of NCCL {table}" in note


@pytest.mark.parametrize("bad", ["2.4.6", "2.0.5", "1.3.4", "3.0.0", "2.x"])
def test_versions_before_2_5_and_non_versions_refused(bad):
    # NCCL 2.5-2.7: tests/test_nccl_releases_pre28.py; 2.4 and earlier have no tuning.cc to transcribe
    with pytest.raises(ConfigError, match="--nccl-version") as exc:
        release_for(bad)
    if bad.startswith("2.") and bad != "2.x":
        assert "modelled: 2.5 and later" in str(exc.value)
        assert "no cost model" in str(exc.value)
    elif not bad.startswith("2."):  # 3.0.0 is no later NCCL 2: not told it is within "2.5 and later"
        assert "modelled: NCCL 2, 2.5 and later" in str(exc.value)
        assert f"NCCL {bad[0]} is no release of NCCL 2" in str(exc.value)


def test_ring_ll_allreduce_latency_16_a100_by_hand():
    # v2.12.12 tuning.cc, 2 nodes × 8 (DGX A100):
    # base 3.6 + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat with nsteps = 2·15 = 30,
    # nInterSteps = 2·nNodes = 4, intraLat = NVLink Ring/LL 0.47 × 1.8 (nNodes > 1, LL),
    # interLat = network Ring/LL 2.7; no network overhead term before v2.19
    e = entry("dgx-a100", 16, V12, C.ALL_REDUCE, A.RING, P.LL)
    assert e.latency_us == pytest.approx(3.6 + 26 * 0.47 * 1.8 + 4 * 2.7)
    # v2.10.3: nInterSteps = 2·(nNodes − 1) = 2
    e = entry("dgx-a100", 16, V10, C.ALL_REDUCE, A.RING, P.LL)
    assert e.latency_us == pytest.approx(3.6 + 28 * 0.47 * 1.8 + 2 * 2.7)
    # v2.17.1: v2.12.12's formula and numbers
    assert entry("dgx-a100", 16, V17, C.ALL_REDUCE, A.RING, P.LL).latency_us == pytest.approx(
        3.6 + 26 * 0.47 * 1.8 + 4 * 2.7)


def test_ring_simple_network_hop_28_in_2_12_only():
    # Ring/Simple network hop: 9.6 µs in v2.10.3, 28 in v2.12.12, 9.6 again from v2.14.3 (tuning.cc hwLat);
    # 8.4 base + 26 NVLink steps × 3.4 + 4 network steps
    for rel, hop in ((V12, 28.0), (V14, 9.6), (V17, 9.6)):
        e = entry("dgx-a100", 16, rel, C.ALL_REDUCE, A.RING, P.SIMPLE)
        assert e.latency_us == pytest.approx(8.4 + 26 * 3.4 + 4 * hop)


def test_tree_ll128_bandwidth_16_a100_by_hand():
    # Tree graph on 2 DGX A100 (v2.12.12 search.cc): 8 channels (one per 25 GB/s NIC behind PCIe 4, speed 24),
    # bwIntra raised to 30 for trees. tuning.cc: bus = 8·30 = 240, capped at 235 (compCap80), Tree:
    # min(235·0.92, 8·23.6) = 188.8, LL128 across nodes: min(188.8·120/128, 8·20) = 160; × 0.5
    e = entry("dgx-a100", 16, V12, C.ALL_REDUCE, A.TREE, P.LL128)
    assert e.bandwidth_GBps == pytest.approx(80.0)
    assert e.enabled
    # v2.9.9: Ampere's 2-node Tree cap 22.5, LL128 × 0.915 and its all-reduce cap 16.9 a channel
    e = entry("dgx-a100", 16, V9, C.ALL_REDUCE, A.TREE, P.LL128)
    assert e.bandwidth_GBps == pytest.approx(min(min(235 * .92, 8 * 22.5) * .915, 8 * 16.9) * .5)
    # v2.17.1: v2.12.12's for Ampere
    assert entry("dgx-a100", 16, V17, C.ALL_REDUCE, A.TREE, P.LL128).bandwidth_GBps == pytest.approx(80.0)


def test_hopper_rows_by_release():
    # 2 × DGX H100 (8 × 400 Gb/s NICs behind PCIe 5: 48 GB/s): ring graph 8 channels at speed 48.
    # v2.14.3 (compCap80 only) reads Volta's rows for sm90: Tree cap 18.5 a channel on 2 nodes; search.cc
    # duplicates channels from 25 GB/s → 16 × 24: Tree/Simple = min(16·24·0.92, 16·18.5) · 0.5
    e = entry("dgx-h100", 16, V14, C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(min(16 * 24 * .92, 16 * 18.5) * .5)
    # v2.15.5: a Hopper row with Ampere's numbers (23.6)
    e = entry("dgx-h100", 16, V15, C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(min(16 * 24 * .92, 16 * 23.6) * .5)
    # v2.17.1: sm90 duplicates only from 50 GB/s → 8 × 48; bus 384 capped at 370; Hopper cap 41.4
    e = entry("dgx-h100", 16, V17, C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(min(370 * .92, 8 * 41.4) * .5)


def test_channel_duplication_capped_at_the_ring_graph_maximum():
    # one DGX H100 at v2.15.5: 18 NVLinks × 22 GB/s = 396; no sm90 speed array yet, so the intra speed 44
    # → 9 channels; search.cc duplicates from 25 GB/s, at most the ring graph's maxChannels = MAXCHANNELS/2
    # = 16 (init.cc), each at 44 / DIVUP(16, 9) = 22 GB/s; comm channels: min(MAXCHANNELS, 2·16) = 32
    t = tune(get_topology("dgx-h100"), 8, V15)
    g = t.machine.graphs[A.RING]
    assert (g.n_channels, g.bw_intra) == (16, 22.0)
    assert t.comm_channels == 32


def test_sm90_speed_arrays_from_2_16_5():
    # one DGX H100, 396 GB/s of NVLink (18 × 22): v2.16.5 search.cc's first sm90 intra speed 66 → 6 channels,
    # duplicated on sm90 from 50 GB/s → 12 × 33 (v2.15.5, no sm90 array: 44 → 9, then 16 × 22)
    for rel, graph in ((V16, (12, 33.0)), (V17, (12, 33.0)), (V15, (16, 22.0))):
        g = tune(get_topology("dgx-h100"), 8, rel).machine.graphs[A.RING]
        assert (g.n_channels, g.bw_intra) == graph


def test_tree_correction_ll128_row_of_2_9():
    # ncclTopoGetAlgoTime: Tree bandwidth × treeCorrectionFactor[LL128][log2(nBytes >> 6)]; at 512 KiB
    # (index 13) v2.9.9's row has 0.5, v2.10.3's 0.6
    for rel, factor in ((V9, .5), (V10, .6)):
        t = tune(get_topology("dgx-a100"), 16, rel)
        e = t.entries[(C.ALL_REDUCE, A.TREE, P.LL128)]
        n = 512 * 1024
        assert t.time_s(C.ALL_REDUCE, A.TREE, P.LL128, n) * 1e6 == pytest.approx(
            e.latency_us + n / (1000 * e.bandwidth_GBps * factor))


def test_ll128_on_hopper_from_2_15():
    # tuning.cc: v2.14.3 enables LL128 by default for sm70 and sm80 only; v2.15.5 adds sm90
    assert not entry("dgx-h100", 16, V14, C.ALL_REDUCE, A.RING, P.LL128).enabled
    assert entry("dgx-h100", 16, V15, C.ALL_REDUCE, A.RING, P.LL128).enabled
    assert entry("dgx-a100", 16, V9, C.ALL_REDUCE, A.RING, P.LL128).enabled


def test_nvls_2_17_single_node_h100_by_hand():
    # v2.17.1: NVLS priced on the ring graph. One DGX H100: 18 NVLinks × 22 GB/s (SM80_NVLINK_BW, which sm90
    # takes before 2.18) = 396; sm90 intra speed 66 → 6 channels, duplicated (≥ 50 GB/s) to 12 × 33;
    # bus 396 capped at 370, × 0.75; latency: base 40 µs alone
    e = entry("dgx-h100", 8, V17, C.ALL_REDUCE, A.NVLS, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(370 * .75)
    assert e.latency_us == pytest.approx(40.0)
    assert e.enabled
    # several nodes: no NVLS in v2.17.1 (src/transport/nvls.cc returns when nNodes > 1)
    assert not entry("dgx-h100", 16, V17, C.ALL_REDUCE, A.NVLS, P.SIMPLE).enabled
    # no NVLS before 2.17, no NVLS Tree before 2.18
    t16, t17 = tune(get_topology("dgx-h100"), 16, V16), tune(get_topology("dgx-h100"), 16, V17)
    assert not any(a in (A.NVLS, A.NVLS_TREE) for (_, a, _) in t16.entries)
    assert not any(a == A.NVLS_TREE for (_, a, _) in t17.entries)


def test_ring_plateau_before_2_19():
    # v2.12.12 ncclTopoGetAlgoTime: Ring/Simple all-reduce across nodes pays 1.9 × its latency from
    # nRanks/16 × 64 KiB = 64 KiB on 16 ranks
    t = tune(get_topology("dgx-a100"), 16, V12)
    e = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)]
    for n, f in ((32768, 1.0), (65536, 1.9)):
        assert t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, n) * 1e6 == pytest.approx(
            e.latency_us * f + n / (1000 * e.bandwidth_GBps))


def test_nccl_algo_only_restricts_allreduce_before_2_17():
    # v2.12.12 tuning.cc: "Only disable algo for Allreduce since others only have one"
    tree_only = parse_list("Tree", Algorithm, "NCCL_ALGO")
    t = tune(get_topology("dgx-a100"), 16, V12, algo_enable=tree_only)
    assert t.choose(C.ALL_GATHER, 1 << 20)[0] == A.RING
    assert t.choose(C.ALL_REDUCE, 1 << 20)[0] == A.TREE
    assert not t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].enabled


def test_old_version_sweep_is_priced():
    # the bundled broadcast sweep states NCCL 2.9.6 (read off its 'NCCL version' line); 2 ranks on 2 hosts
    res = runner.invoke(app, ["check", str(DATA / "broadcast_perf-pre2022-NA-2ranks.txt"), "--topology",
                              "ethernet-100g", "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["op"], sweep["group_size"], sweep["nccl_version"]) == ("broadcast", 2, "2.9.6")
    assert [r["bytes"] for r in sweep["rows"]] == [8]
    assert sweep["rows"][0]["measured_s"] == pytest.approx(45.82e-6)
    assert sweep["rows"][0]["algorithm"] == "Ring" and sweep["rows"][0]["predicted_s"] > 0
    text = runner.invoke(app, ["check", str(DATA / "broadcast_perf-pre2022-NA-2ranks.txt"), "--topology",
                               "ethernet-100g"])
    assert text.exit_code == 0 and "NCCL 2.9.6 (tables of 2.9)" in text.stdout


def test_table_at_an_old_version_and_refusal():
    res = runner.invoke(app, ["table", "--topology", "dgx-a100", "--nccl-version", "2.12.12"])
    assert res.exit_code == 0, res.output
    assert "NCCL 2.12's own cost model (v2.12.12-1 tuning.cc)" in res.stdout
    res = runner.invoke(app, ["table", "--topology", "dgx-a100", "--nccl-version", "2.4.8"])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "NCCL 2.4.8 is not modelled" in res.stderr


def file_rows(name):
    """(size, out-of-place µs) counted from the file itself, not through zerocalc."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5])))
    return rows


@pytest.mark.parametrize(("name", "ranks", "version", "table"), [
    ("all_reduce_perf-16xA100-80GB-2nodes-nccl2.12.12.txt", 16, "2.12.12", "2.12"),
    ("all_reduce_perf-8xA100-80GB-nccl2.16.2.txt", 8, "2.16.2", "2.15"),
])
def test_old_version_a100_sweeps_within_issue_bounds(name, ranks, version, table):
    # A100-SXM4-80GB × 8 per host (the files' device lines) on the dgx-a100 preset, at the version the file's
    # 'NCCL version' line states: every size within 0.5-2×, the median size within 0.8-1.25× (issue 11)
    res = runner.invoke(app, ["check", str(DATA / name), "--topology", "dgx-a100", "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = file_rows(name)
    assert (sweep["group_size"], sweep["nccl_version"]) == (ranks, version)
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in rows])
    ratios = [r["ratio"] for r in sweep["rows"]]
    assert all(0.5 <= x <= 2.0 for x in ratios), ratios
    assert 0.8 <= ratios[(len(ratios) - 1) // 2] <= 1.25, ratios
    text = runner.invoke(app, ["check", str(DATA / name), "--topology", "dgx-a100"]).stdout
    assert f"NCCL {version} (tables of {table})" in text


def test_nvls_timing_correction_only_where_nvls_exists():
    # NVLS calls on Hopper are timed with the latest release's NVLS figures for releases whose NVLS model
    # NCCL 2.28.3 corrected (zerocalc.nccl.model.nvls_run_release): 2.17 has NVLS, 2.16 none to correct
    h100 = get_topology("dgx-h100")
    assert tune(h100, 8, V17).nvls_run is not None and nvls_corrected(V17, h100)
    assert tune(h100, 8, V16).nvls_run is None and not nvls_corrected(V16, h100)


def test_a_release_that_reads_no_plugin_latency_still_pays_the_wire():
    """NCCL 2.9 (tuning.cc before v2.12.12) reads no network plugin latency: on 4 p4d nodes it chooses
    Tree/LL with its own network hop, 4.4 + 2 × (7 × 0.52 × 1.8 + 2 × 5.0) = 37.5 µs. The call still
    crosses EFA, whose plugin reports 75 µs a hop (aws-ofi-nccl): timed as 2.12-2.17 count that figure,
    replacing the hop, 4.4 + 2 × (7 × 0.52 × 1.8 + 2 × 75) = 317.5 µs (NVIDIA/nccl issue 527 measures
    164-212 µs from 64 B to 16 KiB on 32 p4d ranks at NCCL 2.9.9)."""
    p4d = get_topology("aws-p4d")
    t = tune(p4d, 32, RELEASES["2.9"])
    a, p, _ = t.choose(Collective.ALL_REDUCE, 64)
    assert (a, p) == (Algorithm.TREE, Protocol.LL)
    told = t.entries[(Collective.ALL_REDUCE, a, p)].latency_us
    assert told == pytest.approx(4.4 + 2 * (7 * 0.52 * 1.8 + 2 * 5.0))
    wire = t.wire_run.entries[(Collective.ALL_REDUCE, a, p)].latency_us
    assert wire == pytest.approx(4.4 + 2 * (7 * 0.52 * 1.8 + 2 * 75.0))
    # and its 2 x 7 NVLink hops at the A100's measured 1.02 us, where 2.9 charges 0.52 x 1.8
    # (zerocalc.nccl.tune_model.AMPERE_LL_HOP_US)
    hops = 2 * 7 * (1.02 - 0.52 * 1.8)
    assert t.run_time_s(Collective.ALL_REDUCE, a, p, 64) * 1e6 == pytest.approx(wire + hops, rel=1e-3)
    # 2.12 reads it, so the choice and the time are one (no second run)
    assert tune(p4d, 32, RELEASES["2.12"]).wire_run is None
