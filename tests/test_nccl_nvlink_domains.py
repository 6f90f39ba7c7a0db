"""Which hosts of a GB200 / GB300 run share one NVLink domain (NCCL's MNNVL clique): GKE node pools (one
domain a pool, Google Cloud's A4X Max NCCL page) and NCCL's own ``nNodes … localRanks … MNNVL`` INFO line
(``src/init.cc``). Expected figures are read off the file by a plain split (tests/sweep_files.py); the
bands are issue 11's."""

import json

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology.domains import gke_node_pools, nvlink_domains
from zerocalc.topology.presets import PRESETS

runner = CliRunner()
GB300 = "all_gather_perf-8xGB300-gcp-a4xmax-collapsed-nccl2.28.9.txt"


def _steady_sizes(name):
    """Sizes whose out-of-place and in-place times the file gives within 1.25× of each other."""
    return {s for s, t_out, t_in in file_rows(name) if max(t_out, t_in) / min(t_out, t_in) <= 1.25}


def test_gke_node_names_group_by_node_pool():
    hosts = [h for h, _ in device_lines(GB300)]
    pools = gke_node_pools(sorted(set(hosts)))
    assert pools is not None and len(pools) == 2  # a4xmax-2-1391c2ef and a4xmax-03878a77
    assert gke_node_pools(["gke-c-pool-1391c2ef-m9bm", "gke-c-pool-1391c2ef-d3lp"]) == {
        "c-pool-1391c2ef": ["gke-c-pool-1391c2ef-m9bm", "gke-c-pool-1391c2ef-d3lp"]}
    assert gke_node_pools(["instance20260116093132", "gke-c-pool-1391c2ef-m9bm"]) is None


def test_gb300_pods_in_two_node_pools_are_priced_across_domains_within_bands():
    """Google Cloud's A4X Max page ran its two pods in distinct node pools, distinct NVLink domains: each
    host a node of 4 GB300 and their four 800 Gb/s NICs. Every size the file shows steady is within 0.5-2x
    and the median size within 0.8-1.25x (the 256 and 512 KiB rows' two times are 2.5-2.8× apart)."""
    sweep = check_json(GB300)
    assert sweep["topology"] == "gb300-nvl72" and "2 node pools" in sweep["topology_how"]
    steady = _steady_sizes(GB300)
    assert len(steady) == len(file_rows(GB300)) - 2  # 256 and 512 KiB
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"] if r["bytes"] in steady)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def _variant(tmp_path, rename=None, info=None):
    """The GB300 file with its hosts renamed and an NCCL INFO line before its table."""
    text = (DATA / GB300).read_text()
    for old, new in (rename or {}).items():
        text = text.replace(old, new)
    if info:
        text = text.replace("# out-of-place", info + "\n# out-of-place", 1)
    path = tmp_path / GB300
    path.write_text(text)
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def _last_predicted(sweep):
    return max(sweep["rows"], key=lambda r: r["bytes"])["predicted_s"]


def test_one_node_pool_stays_one_domain_and_prices_faster(tmp_path):
    """Both hosts in one node pool: one NVLink domain of 8 GPUs, NVLink's bandwidth, not the NICs'."""
    across = check_json(GB300)
    one = _variant(tmp_path, {"a4xmax-03878a77-d3lp": "a4xmax-2-1391c2ef-d3lp"})
    assert "node pools" not in one["topology_how"]
    assert _last_predicted(one) < 0.7 * _last_predicted(across)


@pytest.mark.parametrize("mnnvl, split", [(0, True), (1, False)])
def test_nccl_info_mnnvl_flag_says_the_domains(tmp_path, mnnvl, split):
    """NCCL's ``comm … nRanks 8 nNodes N localRanks L localRank 0 MNNVL m`` line (src/init.cc): MNNVL 0 on
    2 nodes of 4 prices each host as its own node (as the two node pools do); MNNVL 1 on one node of 8
    keeps the one domain, whatever the host names."""
    hosts = {"gke-psch-ug-cluster-a4xmax-2-1391c2ef-m9bm": "tray-a",
             "gke-psch-ug-cluster-a4xmax-03878a77-d3lp": "tray-b"}
    nodes, local = (2, 4) if not mnnvl else (1, 8)
    line = (f"tray-a:299:299 [0] NCCL INFO comm 0x5a1 rank 0 nRanks 8 nNodes {nodes} localRanks {local} "
            f"localRank 0 MNNVL {mnnvl}")
    sweep = _variant(tmp_path, hosts, line)
    across = check_json(GB300)
    assert ("MNNVL 0" in sweep["topology_how"]) == split
    if split:
        assert _last_predicted(sweep) == pytest.approx(_last_predicted(across))
    else:
        assert _last_predicted(sweep) < 0.7 * _last_predicted(across)


def test_other_presets_and_silent_lines_are_left_alone():
    gb200, dgx = PRESETS["gb200-nvl72"], PRESETS["dgx-h100"]
    assert nvlink_domains(dgx, {"gke-c-a-1391c2ef-m9bm": 8, "gke-c-b-03878a77-d3lp": 8}, None) is None
    assert nvlink_domains(gb200, {"tray-a": 4, "tray-b": 4}, None) is None
    split, words = nvlink_domains(gb200, {"gke-c-a-1391c2ef-m9bm": 4, "gke-c-b-03878a77-d3lp": 4}, None)
    assert split.gpus_per_node == 4 and split.gpus_per_host is None and not split.mnnvl
    assert split.nics_per_node == 4 and "node pools" in words


@pytest.mark.parametrize("size, split", [(4, True), (8, False)])
def test_nccl_clique_line_says_the_domain(tmp_path, size, split):
    """NCCL's ``MNNVL 1 cliqueId %x cliqueSize %d cliqueRank %d`` line (src/init.cc v2.21-v2.24,
    src/mnnvl.cc v2.25-v2.30) without the comm line: a clique of 4 is each host its own domain (as the two
    node pools price), a clique of 8 the two hosts' one domain."""
    hosts = {"gke-psch-ug-cluster-a4xmax-2-1391c2ef-m9bm": "tray-a",
             "gke-psch-ug-cluster-a4xmax-03878a77-d3lp": "tray-b"}
    line = f"tray-a:299:299 [0] NCCL INFO MNNVL 1 cliqueId 7f3a cliqueSize {size} cliqueRank 0"
    sweep = _variant(tmp_path, hosts, line)
    across = check_json(GB300)
    assert f"cliqueSize {size}" in sweep["topology_how"]
    if split:
        assert _last_predicted(sweep) == pytest.approx(_last_predicted(across))
    else:
        assert _last_predicted(sweep) < 0.7 * _last_predicted(across)


@pytest.mark.parametrize("args", [["--n", "256", "--gpus-per-node", "2"],
                                  ["--n", "72", "--gpus-per-node", "8", "--tp", "4"]])
def test_nodes_smaller_than_a_host_are_priced_not_refused(args):
    """An NVL72 preset's hosts hold 4 GPUs (gpus_per_host); a node of 2 (--gpus-per-node 2, or a
    data-parallel group's 2 ranks of an 8-GPU node under tp = 4) is 2 GPUs of one host. NCCL's pricing gave
    the node 2 GPUs and kept the host's 4, and table stopped on its own check ("gpus_per_host: must be at
    most gpus_per_node (2), got 4"), which names no option the user gave."""
    res = runner.invoke(app, ["table", "--topology", "gb300-nvl72", "--schemes", "dp", *args])
    assert res.exit_code == 0, res.output
    assert PRESETS["gb300-nvl72"].gpus_per_host == 4
    topo = PRESETS["gb300-nvl72"].with_gpus_per_node(2)
    assert (topo.gpus_per_node, topo.gpus_per_host, topo.mnnvl) == (2, 2, False)
    assert PRESETS["gb300-nvl72"].with_gpus_per_node(72).gpus_per_host == 4  # the rack's own: hosts of 4
