"""aws-ofi-nccl's tuner plugin: its v1.9 cost model and its regions (v1.10 on), derived by hand from the
plugin's own sources (tag v1.9.2-aws ``include/nccl_ofi_tuner.h``, ``src/tuner/nccl_ofi_model.c``,
``nccl_ofi_tuner.c``; tags v1.10.0-aws to v1.21.1 ``src/tuner/nccl_ofi_tuner.c``, ``nccl_ofi_regions.c``
/ ``.cpp``) and checked against the plugin's own decisions (its unit test's golden file), and the
bundled p5 sweeps checked under it."""

import json
import math

import pytest
from sweep_files import DATA
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl import Algorithm as A
from zerocalc.nccl import Collective as C
from zerocalc.nccl import Protocol as P
from zerocalc.nccl.ofi_regions import extend_region, is_inside, region_choice, regions_for
from zerocalc.nccl.ofi_tuner import model_costs_us, ofi_choice, ofi_tuner, parse_ofi_version, platform_of
from zerocalc.traces.nccl_info import info_facts
from zerocalc.validate.sweep_info import ofi_tuner_stated

runner = CliRunner()
TUNER_FILE = DATA / "all_reduce_perf-16xH100-p5-info-tuner-nccl2.20.3.log.gz"
SRUN_FILE = DATA / "all_reduce_perf-16xH100-p5-2nodes-srun.txt"
MiB, GiB = 1 << 20, 1 << 30
V110, V112 = (1, 10, 0), (1, 12, 1)

# nccl_ofi_tuner.h (v1.9.2-aws), restated: 12.5 GiB/s per rail in bytes/µs, 4 rails, 8 channels
RAIL = 12.5 * 1024 ** 3 * 1e-6
RING_BW, TREE_BW = RAIL * 4 * 8, RAIL * 4 * 8 / 2


def v19():
    return ofi_tuner("1.9.2-aws")


def v110():
    return ofi_tuner("1.10.0-aws")


def test_model_costs_on_4_nodes_by_hand():
    # 32 ranks on 4 nodes, 8 bytes: nccl_ofi_tuner_compute_cost with net_lat 20 µs (+3 for Simple)
    costs = model_costs_us(C.ALL_REDUCE, 8, 4, 32, nvls_support=True)
    tree_ll = 2 * 7 * 0.6 + 2 * 2 * 20 + 8 / (TREE_BW * 0.5)  # 2(n/nodes-1) NVLink + 2 log2(nodes) net
    ring_simple = 2 * 4 * 23 + (62 - 8) * 3.4 + 8 / RING_BW  # 2·nodes network steps of 2(n-1)
    nvls_tree = 2 * (23 + 2 * 23) + 8 / (min(20 * 1024 ** 3 * 1e-6, RAIL * 4 / 2) * 8)
    assert costs[(A.TREE, P.LL)] == pytest.approx(tree_ll, rel=1e-12)
    assert costs[(A.RING, P.SIMPLE)] == pytest.approx(ring_simple, rel=1e-12)
    assert costs[(A.NVLS_TREE, P.SIMPLE)] == pytest.approx(nvls_tree, rel=1e-12)
    assert list(costs) == [(A.TREE, P.LL), (A.TREE, P.LL128), (A.TREE, P.SIMPLE), (A.RING, P.LL),
                           (A.RING, P.LL128), (A.RING, P.SIMPLE), (A.NVLS_TREE, P.SIMPLE)]
    assert (A.NVLS_TREE, P.SIMPLE) not in model_costs_us(C.ALL_REDUCE, 8, 4, 32, nvls_support=False)
    assert model_costs_us(C.ALL_GATHER, 8, 4, 32, nvls_support=True) == {}


def test_model_switch_points_on_4_nodes_by_hand():
    # Tree/LL (88.4 µs, TREE_BW/2) against Tree/LL128 (2·7·1.25 + 80 = 97.5 µs, TREE_BW·0.9375)
    ll_to_ll128 = (97.5 - 88.4) / (1 / (TREE_BW * 0.5) - 1 / (TREE_BW * 0.9375))
    # Tree/LL128 against Ring/LL128 (8·20 + 54·1.9 = 262.6 µs, RING_BW·0.9375)
    tree_to_ring = (262.6 - 97.5) / (1 / (TREE_BW * 0.9375) - 1 / (RING_BW * 0.9375))
    # Ring/LL128 against Ring/Simple (8·23 + 54·3.4 = 367.6 µs, RING_BW)
    ll128_to_simple = (367.6 - 262.6) / (1 / (RING_BW * 0.9375) - 1 / RING_BW)
    assert 2.0e6 < ll_to_ll128 < 2.2e6 and 6.6e7 < tree_to_ring < 6.7e7 and 6.7e8 < ll128_to_simple < 6.8e8

    def pick(n):
        return ofi_choice(v19(), C.ALL_REDUCE, n, 4, 32, nvls_support=True)

    assert pick(int(ll_to_ll128) - 1000) == (A.TREE, P.LL)
    assert pick(int(ll_to_ll128) + 1000) == (A.TREE, P.LL128)
    assert pick(int(tree_to_ring) - 1000) == (A.TREE, P.LL128)
    assert pick(int(tree_to_ring) + 1000) == (A.RING, P.LL128)
    assert pick(int(ll128_to_simple) - 1000) == (A.RING, P.LL128)
    assert pick(int(ll128_to_simple) + 1000) == (A.RING, P.SIMPLE)


def test_model_leaves_two_nodes_and_other_collectives_to_nccl():
    for n in (8, 256 * 1024, 64 * MiB, 16 * GiB):
        assert ofi_choice(v19(), C.ALL_REDUCE, n, 2, 16, nvls_support=True) is None  # "num_nodes <= 2"
        assert ofi_choice(v19(), C.ALL_REDUCE, n, 1, 8, nvls_support=True) is None
    assert ofi_choice(v19(), C.ALL_GATHER, 1 << 20, 4, 32, nvls_support=True) is None


def test_model_nvls_tree_override_on_16_nodes():
    # 16 nodes × 128 ranks with NVLS: NVLS Tree/Simple for 3 GiB < bytes ≤ 5 GiB, else the model
    assert ofi_choice(v19(), C.ALL_REDUCE, 4 * GiB, 16, 128, True) == (A.NVLS_TREE, P.SIMPLE)
    assert ofi_choice(v19(), C.ALL_REDUCE, 5 * GiB, 16, 128, True) == (A.NVLS_TREE, P.SIMPLE)
    # at 3 GiB the model: Ring/Simple (2·16·23 + 222·3.4 µs, RING_BW) beats NVLS Tree/Simple (its bw is lower)
    assert ofi_choice(v19(), C.ALL_REDUCE, 3 * GiB, 16, 128, True) == (A.RING, P.SIMPLE)
    assert ofi_choice(v19(), C.ALL_REDUCE, 4 * GiB, 16, 128, False) == (A.RING, P.SIMPLE)


def test_region_geometry():
    square = ((0, 0), (10, 0), (10, 10), (0, 10))
    assert is_inside((5, 5), square) == 1
    assert is_inside((10, 5), square) == 0 and is_inside((0, 0), square) == 0
    assert is_inside((11, 5), square) == -1 and is_inside((5, -1), square) == -1
    # extend_region: a vertical line goes to the top; a sloped one to the farther of its points at
    # x = 100 GiB and at y = 1024² ranks: this gentle slope reaches 1024² ranks far right of 100 GiB
    assert extend_region((402653184, 2048), (402653184, 4096)) == (402653184, 1024.0 * 1024)
    x, y = extend_region((8053063680, 160), (9663676416, 192))
    slope = (192 - 160) / (9663676416 - 8053063680)
    assert y == 1024 ** 2 and x == pytest.approx(8053063680 + (1024 ** 2 - 160) / slope)
    assert x > 100 * GiB
    # a steep one reaches 1024² ranks left of 100 GiB: the point at x = 100 GiB, far above, is farther
    x, y = extend_region((0, 0), (1, 1))
    assert (x, y) == (100 * GiB, 100 * GiB)


def test_regions_on_16_ranks_8_per_node():
    # v1.10.0: Tree/LL128 holds y = 16 from 0 to 31457280 bytes on its edge; the NVLS Tree "line" above
    t = v110()
    assert ofi_choice(t, C.ALL_REDUCE, 8, 2, 16, True) == (A.TREE, P.LL128)
    assert ofi_choice(t, C.ALL_REDUCE, 31457280, 2, 16, True) == (A.TREE, P.LL128)
    assert ofi_choice(t, C.ALL_REDUCE, 31457281, 2, 16, True) == (A.NVLS_TREE, P.SIMPLE)
    assert ofi_choice(t, C.ALL_REDUCE, 16 * GiB, 2, 16, True) == (A.NVLS_TREE, P.SIMPLE)
    assert ofi_choice(t, C.ALL_REDUCE, 32 * MiB, 2, 16, False) is None  # no other region reaches y = 16
    assert ofi_choice(t, C.REDUCE_SCATTER, 8, 2, 16, True) is None


def test_regions_on_32_ranks_8_per_node():
    # y = 32: Tree/LL128 to its vertex (37748736, 32); Ring/LL128 to its edge (1 GiB, 17)-(2 GiB, 64), at
    # x = 1 GiB·(1 + 15/47); Ring/Simple from its vertex (1.5 GiB, 32); between the two, no region
    t = v110()
    ring_ll128_edge = GiB * (1 + 15 / 47)
    assert region_choice(V110, C.ALL_REDUCE, 37748736, 4, 32, True) == (A.TREE, P.LL128)
    assert region_choice(V110, C.ALL_REDUCE, 37748737 + 1000, 4, 32, True) == (A.RING, P.LL128)
    assert ofi_choice(t, C.ALL_REDUCE, int(ring_ll128_edge) - 1000, 4, 32, True) == (A.RING, P.LL128)
    assert ofi_choice(t, C.ALL_REDUCE, int(ring_ll128_edge) + 1000, 4, 32, True) is None
    assert ofi_choice(t, C.ALL_REDUCE, 1610612736 - 1000, 4, 32, True) is None
    assert ofi_choice(t, C.ALL_REDUCE, 1610612736 + 1000, 4, 32, True) == (A.RING, P.SIMPLE)


DECISIONS = DATA.parent.parent / "aws-ofi-nccl" / "current_tuner_decisions.csv"
NAMES = {"tree": A.TREE, "ring": A.RING, "nvlstree": A.NVLS_TREE, "ll": P.LL, "ll128": P.LL128,
         "simple": P.SIMPLE}


@pytest.mark.parametrize("version", [V110, V112])
def test_regions_match_the_plugins_own_decisions(version):
    # the plugin's own answers (its unit test's golden file, v1.10.0-v1.13.2): every one of 176 points
    lines = DECISIONS.read_text().splitlines()
    assert lines[0] == "nodes,ranks,size,channels,algorithm,protocol" and len(lines) == 177
    for line in lines[1:]:
        nodes, ranks, size, channels, algo, proto = line.split(",")
        want = None if algo == "none" else (NAMES[algo], NAMES[proto])
        n_bytes = int(size.removesuffix("MiB")) * MiB
        assert region_choice(version, C.ALL_REDUCE, n_bytes, int(nodes), int(ranks), True) == want, line
        assert channels == "0"
        if version == V112:  # v1.13's p5 tuner through the cost-table entry, every pair priced by NCCL
            got = ofi_choice(_on("1.13.2-aws", "p5"), C.ALL_REDUCE, n_bytes, int(nodes), int(ranks), True,
                             tuner_api=3, usable=lambda a, p: True)
            assert got == want, line


def test_regions_by_shape():
    # 2 ranks per node, 4 ranks: Tree/LL128 to (1314816, 4), Ring/LL128 to (19736576, 4), NVLS Tree after
    assert region_choice(V110, C.ALL_REDUCE, 1314816 - 1, 2, 4, True) == (A.TREE, P.LL128)
    assert region_choice(V110, C.ALL_REDUCE, 10 * MiB, 2, 4, True) == (A.RING, P.LL128)
    assert region_choice(V110, C.ALL_REDUCE, 50 * MiB, 2, 4, True) == (A.NVLS_TREE, P.SIMPLE)
    # 1 rank per node, 2 ranks: Ring/LL128 to (4736000, 2), then NVLS Tree
    assert region_choice(V110, C.ALL_REDUCE, 4 * MiB, 2, 2, True) == (A.RING, P.LL128)
    assert region_choice(V110, C.ALL_REDUCE, 8 * MiB, 2, 2, True) == (A.NVLS_TREE, P.SIMPLE)
    assert regions_for(V110, C.ALL_REDUCE, 4, 16) == ()  # 4 ranks per node: no regions, NCCL's choice
    assert region_choice(V110, C.ALL_REDUCE, 8, 4, 16, True) is None


def test_regions_of_v1_12():
    # 1 rank per node: the third all-reduce region names Ring/Simple (NVLS Tree/Simple to v1.11.1)
    assert region_choice(V110, C.ALL_REDUCE, 8 * MiB, 2, 2, True) == (A.NVLS_TREE, P.SIMPLE)
    assert region_choice(V112, C.ALL_REDUCE, 8 * MiB, 2, 2, True) == (A.RING, P.SIMPLE)
    assert region_choice(V112, C.ALL_REDUCE, 8, 2, 16, True) == (A.TREE, P.LL128)  # 8 per node: as v1.10
    # all-gather, 1 rank per node: Ring/Simple right of the line (4 MiB, 2)-(8 GiB, 2048); none before v1.12
    at_10 = 4194304 + (10 - 2) / (2048 - 2) * (8589934592 - 4194304)
    assert region_choice(V112, C.ALL_GATHER, int(at_10) + 1000, 10, 10, True) == (A.RING, P.SIMPLE)
    assert region_choice(V112, C.ALL_GATHER, int(at_10) - 1000, 10, 10, True) is None
    assert region_choice(V110, C.ALL_GATHER, int(at_10) + 1000, 10, 10, True) is None
    # reduce-scatter: the line (8 MiB, 2)-(4 GiB, 1024)
    at_10 = 8388608 + (10 - 2) / (1024 - 2) * (4294967296 - 8388608)
    assert region_choice(V112, C.REDUCE_SCATTER, int(at_10) + 1000, 10, 10, True) == (A.RING, P.SIMPLE)
    assert region_choice(V112, C.REDUCE_SCATTER, int(at_10) - 1000, 10, 10, True) is None
    assert region_choice(V112, C.ALL_GATHER, 16 * GiB, 2, 16, True) is None  # 8 per node: none


def test_v1_12_cost_table_entry_skips_ignored_pairs():
    # through ncclTunerPlugin_v3 a region whose pair NCCL ignores is passed over for the next one
    no_tree_ll128 = lambda a, p: (a, p) != (A.TREE, P.LL128)  # noqa: E731
    assert region_choice(V112, C.ALL_REDUCE, 8, 4, 32, True, no_tree_ll128) is None
    assert region_choice(V112, C.ALL_REDUCE, 8, 4, 32, True) == (A.TREE, P.LL128)
    t = ofi_tuner("1.12.0-aws")
    assert ofi_choice(t, C.ALL_REDUCE, 8, 4, 32, True, tuner_api=3, usable=no_tree_ll128) is None
    assert ofi_choice(t, C.ALL_REDUCE, 8, 4, 32, True, tuner_api=2, usable=no_tree_ll128) == (A.TREE, P.LL128)
    # v1.10-v1.11 have no v3 entry: NCCL 2.22's v2 wrapper gets the pair (and ignores it itself)
    got = ofi_choice(v110(), C.ALL_REDUCE, 8, 4, 32, True, tuner_api=3, usable=no_tree_ll128)
    assert got == (A.TREE, P.LL128)


@pytest.mark.parametrize(("text", "kind"), [("1.9.0-aws", "model"), ("1.9.2-aws", "model"),
                                            ("v1.9.1", "model"), ("1.10.0-aws", "regions"),
                                            ("1.11.1-aws", "regions"), ("1.12.1-aws", "regions")])
def test_releases_modelled(text, kind):
    assert ofi_tuner(text).kind == kind


@pytest.mark.parametrize(("text", "needle"), [("1.8.1-aws", "ships no tuner plugin"),
                                              ("1.22.0", "not modelled"), ("one.two", "X.Y.Z")])
def test_releases_refused(text, needle):
    with pytest.raises(ConfigError, match=needle):
        ofi_tuner(text)
    assert parse_ofi_version("1.9.2-aws") == (1, 9, 2)


def test_info_line_states_the_release_and_platform():
    line = "[1,0]<stdout>:host:25:69 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.9.2-aws"
    assert info_facts(line) == [("ofi_version", "1.9.2-aws")]
    line = ("host:37:65 [7] NCCL INFO NET/OFI Running on p5en.48xlarge platform, Setting NCCL_TOPO_FILE "
            "environment variable to /opt/aws-ofi-nccl/share/aws-ofi-nccl/xml/p5en.48xl-topo.xml")
    assert info_facts(line) == [("ec2_platform", "p5en.48xlarge")]
    # the instance type the plugin read wins over the topology's for its tuner
    info = {"tuner_plugin": ["nccl_ofi_tuner", 40], "ofi_version": ["1.14.0", 12],
            "ec2_platform": ["p5en.48xlarge", 20]}
    t, notes = ofi_tuner_stated(None, info, {}, "2.23.4", True, False, "p5", 4)
    assert t is None and "p5en regions are not modelled" in notes[0]


def _check(*args):
    res = runner.invoke(app, ["check", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"][0]


def test_p5_tuner_file_two_nodes_left_to_nccl():
    # the file: NCCL 2.20.3 loads 'nccl_ofi_tuner' of aws-ofi-nccl 1.9.2-aws on 2 nodes × 8 H100, whose
    # get_coll_info returns at once for 2 nodes or fewer: every row is NCCL's own choice
    s = _check(TUNER_FILE)
    assert all(r["ofi_tuner"] is False for r in s["rows"]) and len(s["rows"]) == 32
    assert any("aws-ofi-nccl 1.9.2-aws" in n and "2 nodes or fewer" in n for n in s["notes"])
    assert any("tuner plugin on p5.48xlarge (line 83)" in n for n in s["notes"])
    assert s["nccl_info"]["ec2_platform"] == ["p5.48xlarge", 83]


def test_p5_tuner_file_under_v1_10_regions():
    # --ofi-tuner 1.10.0: by the regions, Tree/LL128 up to 30 MiB, NVLS Tree/Simple above
    base = _check(TUNER_FILE)
    s = _check(TUNER_FILE, "--ofi-tuner", "1.10.0-aws")
    assert [r["bytes"] for r in s["rows"]] == [r["bytes"] for r in base["rows"]]
    for r in s["rows"]:
        want = ("Tree", "LL128") if r["bytes"] <= 31457280 else ("NVLSTree", "Simple")
        assert (r["algorithm"], r["protocol"]) == want and r["ofi_tuner"] is True
    # where NCCL's own choice is the same pair, the time is the same
    for a, b in zip(base["rows"], s["rows"], strict=True):
        if (a["algorithm"], a["protocol"]) == (b["algorithm"], b["protocol"]):
            assert math.isclose(a["predicted_s"], b["predicted_s"], rel_tol=1e-12)


def test_srun_file_without_info_lines_says_so():
    s = _check(SRUN_FILE, "--topology", "aws-p5", "--nccl-version", "2.20.3")
    assert "ofi_tuner" not in s["rows"][0]
    assert any("no NCCL INFO lines" in n and "NCCL_TUNER_PLUGIN" in n for n in s["notes"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--ofi-tuner", "1.9.2", "--nccl-version", "2.20.3", "--nccl-algo", "Ring"], "refuses to load"),
    (["--ofi-tuner", "1.9.2", "--nccl-version", "2.18.3"], "no tuner plugin API"),
    (["--ofi-tuner", "1.22.0"], "not modelled"),
    (["--ofi-tuner", "1.9.2", "--nccl-tuner", "x.csv"], "not both"),
])
def test_cli_refusals(args, needle):
    res = runner.invoke(app, ["check", str(SRUN_FILE), "--topology", "aws-p5", *args])
    assert res.exit_code == 2
    assert needle in res.stderr and "--ofi-tuner" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_api_v3_ignores_a_pair_nccl_algo_leaves_out():
    # NCCL 2.22 wraps the v2 plugin: NVLS Tree left out by NCCL_ALGO is ignored, NCCL's own choice runs
    s = _check(TUNER_FILE, "--ofi-tuner", "1.10.0", "--nccl-version", "2.22.3", "--nccl-algo", "Tree,Ring")
    big = [r for r in s["rows"] if r["bytes"] > 31457280]
    assert big and all(r["algorithm"] in ("Tree", "Ring") and r["ofi_tuner"] is False for r in big)
    small = [r for r in s["rows"] if r["bytes"] <= 31457280]
    assert all((r["algorithm"], r["protocol"], r["ofi_tuner"]) == ("Tree", "LL128", True) for r in small)


def _on(text, platform):
    from dataclasses import replace

    return replace(ofi_tuner(text), platform=platform)


def test_platform_releases_coverage():
    # v1.14.0 on: both tuners return at once on 2 nodes or fewer ("num_nodes <= 2"), on any platform
    for text in ("1.14.0", "1.16.3", "1.19.0", "1.21.1"):
        for plat in ("p5", "p5en", "p4de", None):
            assert _on(text, plat).coverage(2, plat is not None)[0] is False
    # v1.13: no such rule; p5/p5e use v1.12's regions there
    assert _on("1.13.2-aws", "p5").coverage(2) == (True, "")
    assert ofi_choice(_on("1.13.0-aws", "p5e"), C.ALL_REDUCE, 8, 2, 16, True) == (A.TREE, P.LL128)
    assert ofi_choice(_on("1.14.0", "p5"), C.ALL_REDUCE, 8, 2, 16, True) is None
    # more nodes: p5/p5e regions to v1.18; p5en, p6 and the log2 regions of v1.19 on are not modelled;
    # a platform the release does not know falls back to NCCL
    assert _on("1.18.0", "p5").coverage(4) == (True, "")
    assert ofi_choice(_on("1.18.0", "p5"), C.ALL_REDUCE, 8, 4, 32, True) == (A.TREE, P.LL128)
    assert _on("1.19.0", "p5").coverage(4) == (True, "")
    assert _on("1.14.0", "p5en").coverage(4)[0] is None
    assert _on("1.16.0", "p6-b200").coverage(4)[0] is None
    assert _on("1.15.0", "p6-b200").coverage(4)[0] is False
    assert _on("1.14.0", "p4de").coverage(4)[0] is False
    assert _on("1.14.0", None).coverage(4, platform_known=False)[0] is None
    assert [platform_of(n) for n in ("aws-p5", "aws-p5e", "aws-p5en", "aws-p4de", "dgx-h100")] == [
        "p5", "p5e", "p5en", "p4de", None]


def test_file_stated_release_not_modelled_is_a_note():
    info = {"tuner_plugin": ["nccl_ofi_tuner", 40], "ofi_version": ["1.19.0", 12]}
    t, notes = ofi_tuner_stated(None, info, {}, "2.23.4", True, False, "p5", 4)
    assert t is not None and t.platform == "p5"
    t, notes = ofi_tuner_stated(None, info, {}, "2.23.4", True, False, "p5en", 4)
    assert t is None and "p5en regions are not modelled" in notes[0]
    assert "NCCL's own choice priced" in notes[0]
    t, notes = ofi_tuner_stated(None, info, {}, "2.23.4", True, False, "p5", 2)
    assert t.kind == "platform" and t.platform == "p5"
    t, notes = ofi_tuner_stated(None, {"tuner_plugin": ["nccl_ofi_tuner", 40]}, {}, "2.23.4", True, False,
                                "p5", 4)
    assert t is None and "does not say which aws-ofi-nccl release" in notes[0]
    # NCCL_TUNER_PLUGIN naming the library, on an NCCL before 2.19: no tuner API to load it with
    env = {"NCCL_TUNER_PLUGIN": ["/opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so", 3]}
    t, notes = ofi_tuner_stated(None, {"ofi_version": ["1.9.2-aws", 9]}, env, "2.18.3", True, False, "p5", 4)
    assert t is None and "loads no tuner plugin" in notes[0]
    t, _ = ofi_tuner_stated(None, {"ofi_version": ["1.9.2-aws", 9]}, env, "2.20.3", True, False, "p5", 4)
    assert t.kind == "model"


def test_p5en_regions_refused_when_asked_for():
    f = DATA / "all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt"
    res = runner.invoke(app, ["check", str(f), "--topology", "aws-p5en", "--ofi-tuner", "1.14.0"])
    assert res.exit_code == 2 and "p5en regions are not modelled" in res.stderr


def test_extension_to_the_nearer_edge_from_v1_13_2():
    # extend_region's test flipped in v1.13.2 (projected_zy < z.y): the line (7.5 GiB, 160)-(9 GiB, 192)
    # now stops at x = 100 GiB, y = 160 + 32/1.5 GiB × (100 GiB - 7.5 GiB) ≈ 2133 ranks
    x, y = extend_region((8053063680, 160), (9663676416, 192), nearest=True)
    slope = 32 / (9663676416 - 8053063680)
    assert x == 100 * GiB and y == pytest.approx(160 + slope * (100 * GiB - 8053063680))
    # so 8-per-node's last NVLS Tree region no longer reaches (90 GiB, 300000 ranks): that edge from
    # (100 GiB, 2133) to (384 MiB, 1024²) passes x ≈ 76.7 GB there
    assert region_choice((1, 13, 1), C.ALL_REDUCE, 90 * GiB, 37500, 300000, True) == (A.NVLS_TREE, P.SIMPLE)
    assert region_choice((1, 13, 2), C.ALL_REDUCE, 90 * GiB, 37500, 300000, True) is None


def test_log2_space_from_v1_19():
    # Tree/LL128's edge (30 MiB, 16)-(36 MiB, 32) at 24 ranks: 33 MiB in bytes and ranks, but
    # 2^(log2 30Mi + (log2 24 - 4)(log2 36Mi - log2 30Mi)) ≈ 35.0e6 bytes in log2 space
    linear = 31457280 + (24 - 16) / (32 - 16) * (37748736 - 31457280)
    in_log2 = 2 ** (math.log2(31457280) + (math.log2(24) - 4) * (math.log2(37748736) - math.log2(31457280)))
    between = int((linear + in_log2) / 2)
    assert region_choice((1, 18, 0), C.ALL_REDUCE, between, 3, 24, True) == (A.RING, P.LL128)
    assert region_choice((1, 19, 0), C.ALL_REDUCE, between, 3, 24, True) == (A.TREE, P.LL128)
    assert ofi_choice(_on("1.21.1", "p5"), C.ALL_REDUCE, between, 3, 24, True, tuner_api=3,
                      usable=lambda a, p: True) == (A.TREE, P.LL128)
    # a vertex at 0 bytes reads as 1e-6 (transform_log2): 8 bytes on 4 nodes stays Tree/LL128
    assert region_choice((1, 19, 0), C.ALL_REDUCE, 8, 4, 32, True) == (A.TREE, P.LL128)
