"""NCCL's cost model (zerocalc.nccl) against hand derivations from NCCL's tuning.cc."""

import pytest

from zerocalc.errors import ConfigError, TraceFormatError
from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, parse_list, release_for, tune
from zerocalc.nccl.graph import intra_bw_GBps
from zerocalc.nccl.predict import version_from_text
from zerocalc.topology import get_topology, topology_from_mapping, topology_to_mapping

A, P, C = Algorithm, Protocol, Collective
V19, V21, V26, V30 = RELEASES["2.19"], RELEASES["2.21"], RELEASES["2.26"], RELEASES["2.30"]


def entry(topo, ranks, release, coll, algo, proto):
    return tune(get_topology(topo), ranks, release).entries[(coll, algo, proto)]


def test_ring_simple_allreduce_latency_two_nodes_by_hand():
    # v2.30.7 tuning.cc: base 8.4 + (nsteps - nInterSteps)·max(NVLink hop 3.4, 3 × net overhead 1.0 on Intel)
    # + nInterSteps·(net hop 14); nsteps = 2(16-1) = 30, nInterSteps = 2(nNodes-1) = 2
    e = entry("dgx-h100", 16, V30, C.ALL_REDUCE, A.RING, P.SIMPLE)
    assert e.latency_us == pytest.approx(8.4 + 28 * 3.4 + 2 * 14.0)
    # v2.19.4: nInterSteps = 2·nNodes = 4
    e = entry("dgx-h100", 16, V19, C.ALL_REDUCE, A.RING, P.SIMPLE)
    assert e.latency_us == pytest.approx(8.4 + 26 * 3.4 + 4 * 14.0)
    # AMD hosts (DGX A100): net overhead 2 µs × 3 for Simple = 6 µs > NVLink hop 3.4
    e = entry("dgx-a100", 16, V30, C.ALL_REDUCE, A.RING, P.SIMPLE)
    assert e.latency_us == pytest.approx(8.4 + 28 * 6.0 + 2 * 14.0)


def test_tree_ll_allreduce_latency_by_hand():
    # base 6.8 + 2·((ppn-1)·NVLink LL hop 0.6 + log2(nNodes)·net LL hop 5.0)
    e = entry("dgx-h100", 16, V30, C.ALL_REDUCE, A.TREE, P.LL)
    assert e.latency_us == pytest.approx(6.8 + 2 * (7 * 0.6 + 1 * 5.0))
    e = entry("dgx-h100", 32, V30, C.ALL_REDUCE, A.TREE, P.LL)
    assert e.latency_us == pytest.approx(6.8 + 2 * (7 * 0.6 + 2 * 5.0))


def test_ring_bandwidth_from_nics_by_hand():
    # 8 NICs of 400 Gb/s = 50 GB/s behind PCIe 5 x16 (48 GB/s in NCCL's topo.cc) → the sm90 speed 48 per
    # channel, one channel per NIC: bus bandwidth 8 × 48 = 384 GB/s, algorithm bandwidth × nRanks/nsteps
    e = entry("dgx-h100", 16, V30, C.ALL_REDUCE, A.RING, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(384 * 16 / 30)
    # DGX A100: HDR 25 GB/s, PCIe 4 x16 24 GB/s → speed 24 × 8 channels = 192 GB/s bus bandwidth
    e = entry("dgx-a100", 16, V30, C.ALL_GATHER, A.RING, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(192 * 16 / 15)


def test_nvls_single_node_h100_bus_bandwidth():
    # NVLS graph: 8 channels, bwIntra 40 (each channel takes bwIntra on every GPU's 18 × 20.6 = 370.8 GB/s
    # NVSwitch link, twice on its head's: (8 + 1) × 50 > 370.8 ≥ 9 × 40, search.cc ncclTopoSearchTryNvls; NCCL
    # 2.19.4 prints "nChannels 8, bw 40.000000/60.000000" on 8 H100, NVIDIA/nccl issue 1197), bwInter raised
    # to 60; v2.30.7: min(40·0.85·7/8·2, 60) · 8 = 476 GB/s bus bandwidth; NVIDIA/nccl-tests issue 290:
    # "476GB/s looks to be in the expected range for H100" with NVLink SHARP on one node
    e = entry("dgx-h100", 8, V30, C.ALL_REDUCE, A.NVLS, P.SIMPLE)
    assert e.bandwidth_GBps * 14 / 8 == pytest.approx(476)
    assert e.latency_us == pytest.approx(25.0)  # NVLS: NVLink hop only


def test_nvls_tree_bandwidth_before_nvls_efficiency():
    # v2.26.2: NVLS Tree bw = min(bwIntra, bwInter) on ≤ 2 nodes = 48 (one 400 Gb/s NIC per GPU behind
    # PCIe 5: 48 GB/s per channel), 8 channels, × 5/6 bus → algorithm; v2.30.7 instead
    # min(48·0.74·7/8·2, 2·48, perChMaxNVLSTreeBw 96) · 8 × 16/30 on Blackwell
    e = entry("dgx-b200", 16, V26, C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(8 * 48 * 5 / 6)
    e = entry("dgx-b200", 16, V30, C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(8 * 48 * 0.74 * 7 / 8 * 2 * 16 / 30, rel=1e-6)


def test_nvls_calls_on_hopper_before_2_28_are_timed_with_the_corrected_figures():
    """NCCL 2.28.3 corrected its NVLS / NVLS Tree prediction ("Update tuning data for H100"): 2.19-2.26 still
    choose with their own figures, but a call takes what the hardware takes. On 8 H100 the maintainers put
    NVLS all-reduce at ~480 GB/s bus bandwidth, algbw ~275 GB/s (NVIDIA/nccl-tests issues 212 and 290)."""
    from zerocalc.nccl.model import nvls_run_release

    topo = get_topology("dgx-h100")
    for rel in (V19, V21, V26):
        t = tune(topo, 8, rel)
        assert nvls_run_release(rel, t.machine) is V30
        a, p, _ = t.choose(C.ALL_REDUCE, 1 << 30)
        assert (a, p) == (A.NVLS, P.SIMPLE)
        # the release's own NVLS bandwidth: min(bwIntra 40, bwInter 60) x 8 ch x 5/6 = 266.7 GB/s algbw
        assert t.time_s(C.ALL_REDUCE, a, p, 1 << 30) == pytest.approx(
            t.entries[(C.ALL_REDUCE, a, p)].latency_us * 1e-6 + (1 << 30) / (8 * 40 * 5 / 6 * 1e9), rel=1e-6)
        # the run: v2.30.7's min(40 x 0.85 x 7/8 x 2, 60) x 8 ch x 8/14 = 272 GB/s (busBw 476) and 25 us, plus
        # the pipeline's fill (zerocalc.nccl.nvls_pipeline): two loops of 16 ch x 8 heads x 128 KiB = 16 MiB
        # (1 GiB is not below 64 x 128 x 128 KiB, so no smaller chunk)
        bw = 8 * min(40 * 0.85 * 7 / 8 * 2, 60) * 8 / 14 * 1e9
        run = t.run_time_s(C.ALL_REDUCE, a, p, 1 << 30)
        assert run == pytest.approx(25e-6 + ((1 << 30) + 2 * (16 << 20)) / bw, rel=1e-6)
        peak = t.run_time_s(C.ALL_REDUCE, a, p, 1 << 34)
        assert peak == pytest.approx(25e-6 + ((1 << 34) + 2 * (16 << 20)) / bw, rel=1e-6)
        assert (1 << 34) / peak / 1e9 == pytest.approx(275, rel=0.02)
        # pairs other than NVLS / NVLS Tree are the release's own
        ring = (C.ALL_REDUCE, A.RING, P.SIMPLE, 1 << 30)
        assert t.run_time_s(*ring) == t.time_s(*ring)
    # 2 nodes (v2.26.2 on an HGX H100 pair): NVLS Tree timed with v2.30.7's min(48 x 0.85 x 7/8 x 2, 2 x 48,
    # perChMaxNVLSTreeBw 57.7) x 8 ch x 16/30 and latency NVLink hop 25 + 2 x log2(2) x net hop 20.9 us, plus
    # the pipeline's fill at 2.26.2's chunking: two loops of 16 ch x 8 heads x 128 KiB (nvls_pipeline)
    t = tune(topo, 16, V26)
    run = t.run_time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, 1 << 34)
    fill, bw = 2 * (16 << 20), 57.7 * 8 * 16 / 30 * 1e9
    assert run == pytest.approx((25 + 2 * 20.9) * 1e-6 + ((1 << 34) + fill) / bw, rel=1e-6)
    # not at releases with the fix (across HGX Blackwell nodes the NVLink's graph: test_nccl_blackwell_s14)
    assert tune(topo, 16, V30).nvls_run is None
    # nor where NVLS is off: the release's own tuning, no second one
    assert tune(get_topology("dgx-a100"), 8, V26).nvls_run is None


def test_algorithms_the_topology_cannot_run_are_disabled():
    t = tune(get_topology("dgx-a100"), 8, V30)
    assert not t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)].enabled  # no NVSwitch 3 on A100
    t = tune(get_topology("dgx-h100"), 8, V30)
    assert t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)].enabled
    assert not t.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)].enabled  # single node
    t = tune(get_topology("dgx-h100"), 16, V30)
    assert not t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)].enabled  # across nodes needs CollNet
    assert not t.entries[(C.ALL_REDUCE, A.COLLNET_DIRECT, P.SIMPLE)].enabled  # no SHARP
    assert (C.ALL_REDUCE, A.PAT, P.SIMPLE) not in t.entries  # PAT: all-gather / reduce-scatter only
    assert (C.ALL_GATHER, A.PAT, P.SIMPLE) not in tune(get_topology("dgx-h100"), 16, V19).entries  # 2.19
    pcie = tune(get_topology("pcie-gen4"), 8, V30)
    assert not pcie.entries[(C.ALL_REDUCE, A.RING, P.LL128)].enabled  # LL128 needs NVLink


def test_choice_is_the_least_time_and_restrictions_apply():
    t = tune(get_topology("dgx-h100"), 16, V30)
    for n in (8, 1 << 20, 1 << 30):
        a, p, s = t.choose(C.ALL_REDUCE, n)
        assert s == min(x[2] for x in t.times(C.ALL_REDUCE, n))
    assert t.choose(C.ALL_REDUCE, 8)[:2] == (A.TREE, P.LL)
    algo, proto = parse_list("ring", Algorithm, "NCCL_ALGO"), parse_list("^LL,LL128", Protocol, "NCCL_PROTO")
    r = tune(get_topology("dgx-h100"), 16, V30, algo_enable=algo, proto_enable=proto)
    assert r.choose(C.ALL_REDUCE, 8)[:2] == (A.RING, P.SIMPLE)
    nvls_only = parse_list("NVLS", Algorithm, "NCCL_ALGO")
    with pytest.raises(ConfigError, match="NVLS/Simple: no NVLink SHARP"):
        tune(get_topology("dgx-a100"), 8, V30, algo_enable=nvls_only).choose(C.ALL_REDUCE, 1 << 20)


def test_parse_list_grammar_of_tuning_cc():
    # the examples in v2.30.7 tuning.cc's comment above parseList
    got = parse_list("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", Algorithm, "NCCL_ALGO")
    assert got[C.ALL_GATHER] == {A.RING, A.COLLNET_DIRECT}
    assert got[C.ALL_REDUCE] == {A.TREE, A.COLLNET_DIRECT}
    assert got[C.BROADCAST] == {A.RING}
    got = parse_list("^LL128;allreduce:LL128", Protocol, "NCCL_PROTO")
    assert got[C.ALL_GATHER] == {P.LL, P.SIMPLE} and got[C.ALL_REDUCE] == {P.LL128}
    for bad in ("ring;tree", "warp", "allreduces:ring", ""):
        with pytest.raises(ConfigError, match="NCCL_ALGO"):
            parse_list(bad, Algorithm, "NCCL_ALGO")


def test_parse_list_before_2_24_is_one_list_that_skips_unknown_names():
    # v2.23.4 tuning.cc parseList(str, elems, nelems, list): split on ',' only, '^' first, strcasecmp
    # against each name, no match skipped in silence; per-collective entries arrived in v2.24.3
    from zerocalc.nccl.env import skipped_names

    got = parse_list("allreduce:tree,ring", Algorithm, "NCCL_ALGO", "2.23.4")
    assert all(got[c] == {A.RING} for c in C)  # 'allreduce:tree' is one unknown name
    assert skipped_names("allreduce:tree,ring", Algorithm, "2.23.4") == ["allreduce:tree"]
    assert parse_list("^LL128,warp", Protocol, "NCCL_PROTO", "2.18.6")[C.ALL_GATHER] == {P.LL, P.SIMPLE}
    with pytest.raises(ConfigError, match="NCCL 2.18.6 reads 'allreduce:ring' as one list"):
        parse_list("allreduce:ring", Algorithm, "NCCL_ALGO", "2.18.6")  # nothing enabled: NCCL fails
    # from 2.24 the same text is per collective, and nothing is skipped
    assert parse_list("allreduce:tree,ring", Algorithm, "NCCL_ALGO", "2.24.3")[C.ALL_GATHER] == set(A)
    assert skipped_names("allreduce:tree,ring", Algorithm, "2.24.3") == []


def test_a_files_own_nccl_algo_under_an_old_release_skips_unknown_names_with_a_note():
    from zerocalc.nccl.env import settings

    env = settings(get_topology("dgx-h100"), "2.18.6", None, None, stated={"NCCL_ALGO": ("Ring,bogus", 12)},
                   where="run.txt")
    assert all(env.algo_enable[c] == {A.RING} for c in C)  # v2.18.6 parseList: 'bogus' matches nothing
    assert any("NCCL 2.18.6 skips 'bogus'" in t for t in env.notes)
    # 2.24 on refuses it (parseList: "Unrecognized element token"), naming the file's line
    with pytest.raises(TraceFormatError, match="run.txt:12: NCCL_ALGO=Ring,bogus: unknown name"):
        settings(get_topology("dgx-h100"), "2.26.2", None, None, stated={"NCCL_ALGO": ("Ring,bogus", 12)},
                 where="run.txt")


def test_table_under_an_old_release_prices_its_reading_of_nccl_algo():
    from typer.testing import CliRunner

    from zerocalc.cli import app

    args = ["table", "--topology", "dgx-h100", "--n", "16", "--schemes", "dp",
            "--nccl-algo", "allreduce:ring"]
    r = CliRunner().invoke(app, [*args, "--nccl-version", "2.24.3"])
    assert r.exit_code == 0 and "AR Ring/" in r.stdout
    r = CliRunner().invoke(app, [*args, "--nccl-version", "2.23.4"])  # before, priced as 2.24's Ring
    assert r.exit_code == 2 and "NCCL 2.23.4 reads 'allreduce:ring' as one list" in r.stderr


@pytest.mark.parametrize(("text", "version"), [
    ("# nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602", "2.26.2"),
    ("# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21805", "2.18.5"),
    ("host:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.2", "2.19.3"),
    ("# nThread 1 nGpus 1 minBytes 8", None),
])
def test_version_from_text(text, version):
    assert version_from_text([text]) == version


def test_release_for_versions():
    assert release_for("2.19.3") == (V19, None)
    assert release_for("v2.30.7-1") == (V30, None)
    assert release_for("2.26.2+cuda12.8") == (V26, None)
    rel, note = release_for("2.31.0")
    assert rel is V30 and "2.31.0" in note and "tables of NCCL 2.30" in note
    assert release_for("2.21.5") == (V21, None)
    # the lines between (2.18, 2.20, 2.22-2.25, 2.27-2.29): tests/test_nccl_new_releases.py
    for bad in ("2.4.6", "1.3.4", "3.0.0", "latest", "2.x"):
        with pytest.raises(ConfigError, match="--nccl-version"):
            release_for(bad)


def test_2_21_differs_from_2_19_where_its_tuning_cc_does():
    """v2.21.5 tuning.cc against v2.19.4: NVLS NVLink hop 25 µs (was 23), Hopper one-node LL cap 141 GB/s
    (was 87.7), Ring LL at bus × 0.5 (was × 1/4 for all-reduce); topo.h: 20.6 GB/s per sm90 NVLink
    (was 20.0)."""
    h100 = get_topology("dgx-h100")
    t19, t21 = tune(h100, 8, V19), tune(h100, 8, V21)
    ar = Collective.ALL_REDUCE
    assert t19.entries[(ar, Algorithm.NVLS, Protocol.SIMPLE)].latency_us == pytest.approx(23.0)
    assert t21.entries[(ar, Algorithm.NVLS, Protocol.SIMPLE)].latency_us == pytest.approx(25.0)
    for t, cap, f in ((t19, 87.7, 1 / 4), (t21, 141.0, 1 / 2)):
        g = t.machine.graphs[Algorithm.RING]
        bus = min(cap, g.n_channels * g.bw_intra * f)
        assert t.entries[(ar, Algorithm.RING, Protocol.LL)].bandwidth_GBps == pytest.approx(bus * 8 / 14)
    assert intra_bw_GBps(h100, V21) == pytest.approx(18 * 20.6)
    assert intra_bw_GBps(h100, V19) == pytest.approx(360)
    # Tree/Simple keeps 2.19's 28 µs per hop (not 2.23's 4 µs): 2 × 7 NVLink hops on one node
    assert t21.entries[(ar, Algorithm.TREE, Protocol.SIMPLE)].latency_us == pytest.approx(2 * 7 * 28.0)


def test_2_30_tables_are_those_of_its_sources():
    """Every value of the 2.30 table (derived in code from 2.26's), as in v2.30.7 tuning.cc, search.cc
    and topo.h."""
    sm90_intra = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
    sm90_inter = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
                  0.24, 0.12)
    assert (V30.name, V30.tag, V30.algorithms) == ("2.30", "v2.30.7-1", tuple(Algorithm))
    assert V30.base_lat_us == {A.TREE: (6.8, 14.0, 8.4), A.RING: (6.6, 14.0, 8.4),
                               A.COLLNET_DIRECT: (0, 0, 0), A.COLLNET_CHAIN: (0, 0, 0),
                               A.NVLS: (0, 0, 0), A.NVLS_TREE: (0, 0, 0), A.PAT: (8.0, 8.0, 8.0)}
    assert V30.hw_lat_us == (
        {A.TREE: (.6, 1.25, 4.0), A.RING: (.6, 1.9, 3.4), A.COLLNET_DIRECT: (0, 0, 3.7),
         A.COLLNET_CHAIN: (0, 0, 2.8), A.NVLS: (0, 0, 25), A.NVLS_TREE: (0, 0, 25), A.PAT: (0, 0, 4.0)},
        {A.TREE: (1.0, 1.9, 4.0), A.RING: (1.0, 2.5, 5.7), A.COLLNET_DIRECT: (0, 0, 3.7),
         A.COLLNET_CHAIN: (0, 0, 2.8), A.NVLS: (0, 0, 0), A.NVLS_TREE: (0, 0, 0), A.PAT: (0, 0, 4.0)},
        {A.TREE: (5.0, 8.5, 14), A.RING: (2.7, 4.0, 14.0), A.COLLNET_DIRECT: (0, 0, 31),
         A.COLLNET_CHAIN: (0, 0, 30), A.NVLS: (0, 0, 18), A.NVLS_TREE: (0, 0, 20.9), A.PAT: (0, 0, 14)})
    assert V30.ll_max_bws == ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
                              (282.0, 90.0, 70.0))
    assert V30.per_ch_max_ring_ll128_bws == ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                                             (40.0, 40.0, 40.0))
    assert V30.per_ch_max_tree_ll128_bws == ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                                             (55.6, 31.67, 20.0))
    assert V30.per_ch_max_tree_bws == ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                                       (70.0, 42.8, 24.0))
    assert V30.per_ch_max_nvls_tree_bws == ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                                            (0.0, 96.0, 80.0))
    assert V30.nvls_efficiency == (0.0, 0.0, 0.85, 0.74)
    assert V30.tree_correction == (
        (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0,
         1.0),
        (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0,
         1.0),
        (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9))
    assert V30.nvlink_bw_per_link == {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}
    assert V30.speed_intra == {
        0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0), 90: sm90_intra,
        100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}
    assert V30.speed_inter == {
        0: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
            0.24, 0.12),
        90: sm90_inter,
        100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
              2.4, 1.2, 0.24, 0.12)}
    assert (V30.max_channels, V30.max_nvls_arity, V30.nvls_efficiency_model, V30.era) == (64, 32, True, 30)


def test_old_toml_missing_a_field_is_named():
    old = topology_from_mapping({"name": "lab", "gpus_per_node": 8, "intra": {"alpha_us": 3, "bw_GBps": 300},
                                 "inter": {"alpha_us": 14, "bw_GBps": 200}})
    with pytest.raises(ConfigError, match="not give compute_capability, .*, in_network_reduction, which"):
        tune(old, 16, V30)  # every key it lacks, in one line
    partial = topology_from_mapping({"name": "lab", "gpus_per_node": 8, "in_network_reduction": [],
                                     "compute_capability": 80, "intra": {"alpha_us": 3, "bw_GBps": 300},
                                     "inter": {"alpha_us": 14, "bw_GBps": 200}})
    with pytest.raises(ConfigError, match="does not give nvlink_gen"):
        tune(partial, 16, V30)


def test_formulas_give_the_hand_derived_numbers():
    from zerocalc.nccl.formula import L0, B, c, f, formulas, l_inter, l_intra, m, n, p

    ring = formulas("all_reduce")["Ring"]
    # DGX H100, 16 ranks on 2 nodes, Ring/Simple (v2.30.7): 8.4 + 28·3.4 + 2·14 µs, bus bw 8 × 48 GB/s
    values = {L0: 8.4, l_intra: 3.4, l_inter: 14.0, c: 8, B: 48.0, f: 1, p: 16, m: 2}
    assert float(ring.subs({**values, n: 0})) == pytest.approx(8.4 + 28 * 3.4 + 2 * 14.0)
    assert float(ring.subs({**values, n: 1e9}) - ring.subs({**values, n: 0})) == pytest.approx(
        1e9 / (1000 * 384 * 16 / 30))
    assert set(formulas("all_gather")) == {"Ring"} and formulas("broadcast") == {}


# tuning.cc: v2.19.4 / v2.21.5 switch (minCompCap) {70, 80, 90}; v2.26.2 {70, 80, 90, 100, 120}; v2.30.7 >= 70
@pytest.mark.parametrize(("cc", "release", "on"), [
    (86, V21, False), (86, V26, False), (86, V30, True), (100, V21, False), (100, V26, True),
    (120, V26, True), (90, V19, True), (60, V30, False),
])
def test_ll128_by_default_only_on_the_gpus_each_release_lists(cc, release, on):
    data = topology_to_mapping(get_topology("dgx-h100"))
    data["compute_capability"] = cc  # NVLink and NIC paths unchanged: only the GPU decides here
    t = tune(topology_from_mapping(data), 8, release)
    assert t.entries[(C.ALL_REDUCE, A.RING, P.LL128)].enabled is on
