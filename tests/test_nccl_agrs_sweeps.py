"""check on public all_gather / reduce_scatter sweeps: one H100 node, and ten H100 hosts running 1, 2 or 4
ranks each (the file's device lines), at the NCCL version the file states, on the preset given with
--topology."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.model import tune
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS
from zerocalc.topology.devices import nodes_of

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()

#: file, op, ranks, hosts (all from xxrjun/nccl-tests-cluster, NCCL 2.29.2 by its nccl-library line)
FILES = [
    ("all_gather_perf-8xH100-1node-nccl2.29.2.txt", "all_gather", 8, 1),
    ("reduce_scatter_perf-8xH100-1node-nccl2.29.2.txt", "reduce_scatter", 8, 1),
    ("all_gather_perf-10xH100-10nodes-1pernode-nccl2.29.2.txt", "all_gather", 10, 10),
    ("reduce_scatter_perf-10xH100-10nodes-1pernode-nccl2.29.2.txt", "reduce_scatter", 10, 10),
    ("all_gather_perf-20xH100-10nodes-2pernode-nccl2.29.2.txt", "all_gather", 20, 10),
    ("reduce_scatter_perf-20xH100-10nodes-2pernode-nccl2.29.2.txt", "reduce_scatter", 20, 10),
    ("all_gather_perf-40xH100-10nodes-4pernode-nccl2.29.2.txt", "all_gather", 40, 10),
    ("reduce_scatter_perf-40xH100-10nodes-4pernode-nccl2.29.2.txt", "reduce_scatter", 40, 10),
]


def file_rows(name):
    """(size, out-of-place µs) of each row, and the hosts of the '#  Rank' lines, counted from the file."""
    rows, hosts = [], {}
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5])))
        elif "Rank" in f and "on" in f:
            host = f[f.index("on") + 1]
            hosts[host] = hosts.get(host, 0) + 1
    return rows, hosts


def check(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


@pytest.mark.parametrize(("name", "op", "ranks", "n_hosts"), FILES)
def test_agrs_sweeps_within_bands_on_the_given_preset(name, op, ranks, n_hosts):
    rows, hosts = file_rows(name)
    assert len(hosts) == n_hosts and sum(hosts.values()) == ranks
    sweep = check(name, "--topology", "dgx-h100")
    assert (sweep["op"], sweep["group_size"]) == (op, ranks)
    assert (sweep["nccl_version"], sweep["nccl_version_how"]) == ("2.29.2", "stated by the file")
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in rows])
    ratios = [r["ratio"] for r in sweep["rows"]]
    assert all(0.5 <= x <= 2.0 for x in ratios), ratios
    median = sorted(sweep["rows"], key=lambda r: r["bytes"])[(len(rows) - 1) // 2]["ratio"]
    assert 0.8 <= median <= 1.25
    if n_hosts > 1:
        k = ranks // n_hosts
        gpus, nics, each = (("1 GPU", "1 NIC", "1 rank") if k == 1 else
                            (f"{k} GPUs", f"{k} NICs", f"{k} ranks"))  # one 400 Gb/s NIC per H100
        assert sweep["topology_how"] == (f"given (--topology); nodes of {gpus} and {nics}, as the file's "
                                         f"device lines list {each} on each of {n_hosts} hosts")
    else:
        assert sweep["topology_how"] == "given (--topology)"
    first = runner.invoke(app, ["check", str(DATA / name), "--topology", "dgx-h100"]).stdout.splitlines()[0]
    assert first.endswith("topology dgx-h100" + (sweep["topology_how"][len("given (--topology)"):].replace(
        "; ", ", ", 1) if n_hosts > 1 else ""))


def test_one_rank_per_host_is_a_ring_through_ten_nics():
    """The largest row of the 10-host run, derived from NCCL 2.29's ``tuning.cc`` (2.30's tables): 10 nodes
    of one H100 with its one 400 Gb/s NIC (50 GB/s). The ring graph: one channel at 48 GB/s (the fastest
    sm90 inter speed the NIC holds, ``search.cc``), doubled by ``ncclTopoDupChannels`` into 2 × 24 GB/s;
    Ring/Simple busBw = 2 × 24, × nRanks / nsteps = 10/9 for all-gather (nsteps = nRanks − 1). Latency:
    baseLat 8.4 µs, then nsteps − nInterSteps = 0 NVLink steps and nInterSteps = nNodes − 1 = 9 network
    steps of hwLat[NET][Tree][Simple] = 14 µs (with ppn = 1 the Tree network latency, IB's latencyInter 0)."""
    name = "all_gather_perf-10xH100-10nodes-1pernode-nccl2.29.2.txt"
    rows, _ = file_rows(name)
    size, measured_us = rows[-1]
    expected_us = 8.4 + 9 * 14.0 + size / (1000.0 * 2 * 24.0 * 10 / 9)
    sweep = check(name, "--topology", "dgx-h100")
    row = sweep["rows"][-1]
    assert (row["bytes"], row["algorithm"], row["protocol"]) == (size, "Ring", "Simple")
    assert row["predicted_s"] == pytest.approx(expected_us * 1e-6, rel=1e-9)
    assert row["ratio"] == pytest.approx(expected_us / measured_us)


def test_without_device_lines_the_given_preset_fills_whole_nodes(tmp_path):
    """The same 10-rank rows with the device lines left out: nothing says how the ranks sit, so they fill
    8-GPU nodes (a node and a quarter), as --topology priced every file before it read the lines: 3-8x too
    fast for this run of one GPU per host (its smallest size least, where the ring's 9 steps run at the
    network hop's latency, zerocalc.nccl.tune_model.ring_run_latency_us)."""
    name = "all_gather_perf-10xH100-10nodes-1pernode-nccl2.29.2.txt"
    path = tmp_path / name
    lines = (DATA / name).read_text().splitlines(True)
    path.write_text("".join(line for line in lines if " Rank " not in line))
    res = runner.invoke(app, ["check", str(path), "--format", "json", "--topology", "dgx-h100", "--n", "10"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology_how"] == "given (--topology)"
    assert all(r["ratio"] < 0.34 for r in sweep["rows"])
    assert sorted(r["ratio"] for r in sweep["rows"])[4] < 0.2


def _tuned(preset, per_node, ranks, version):
    topo, _ = nodes_of(PRESETS[preset], per_node)
    return tune(topo, ranks, release_for(version)[0])


def test_pat_all_gather_with_one_gpu_per_node_from_tuning_cc():
    """PAT (NCCL 2.23 on; 2.29.2 priced with 2.30's tables) on the 10 one-GPU nodes of the bundled 10-host
    sweeps, derived from ``tuning.cc``: latency = 8 (base) + log2i(nNodes) × interLat / 3.5 + nRanks × 2.8,
    with interLat the Tree network latency at ppn = 1 (14 µs): 8 + 3 × 4 + 28 = 48 µs; busBw = nChannels ×
    bwInter × .75 = 2 × 24 × .75 = 36 GB/s, not converted to an algorithm bandwidth (all-gather /
    reduce-scatter on any algorithm but Ring). At 1 MiB it beats Ring/LL: 6.6 + 9 × 5.0 µs and
    min(llMaxBw 20.4, 48 × .5) × 10/9."""
    t = _tuned("dgx-h100", 1, 10, "2.29.2")
    for coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        e = t.entries[(coll, A.PAT, P.SIMPLE)]
        assert (e.enabled, e.latency_us, e.bandwidth_GBps) == (True, pytest.approx(48.0), pytest.approx(36.0))
        ring_ll = t.entries[(coll, A.RING, P.LL)]
        assert ring_ll.latency_us == pytest.approx(51.6)
        assert ring_ll.bandwidth_GBps == pytest.approx(20.4 * 10 / 9)
        a, p, s = t.choose(coll, 1 << 20)
        assert (a, p) == (A.PAT, P.SIMPLE) and s == pytest.approx((48.0 + (1 << 20) / 36000.0) * 1e-6)
        # the bundled sweeps' sizes (32 MB and up) go to the ring: its 10/9 × 48 GB/s outruns PAT's 36
        assert t.choose(coll, 33554400)[0] == A.RING


def test_pat_only_with_one_gpu_per_node_and_from_nccl_2_23():
    """``ncclPatEnable``: PAT only when nNodes == nRanks (v2.23.4 on); NCCL 2.21 has no PAT at all."""
    two = _tuned("dgx-h100", 2, 20, "2.29.2").entries[(C.ALL_GATHER, A.PAT, P.SIMPLE)]
    assert not two.enabled and "one GPU per node" in two.why_disabled
    old = _tuned("dgx-h100", 1, 10, "2.21.5")
    assert (C.ALL_GATHER, A.PAT, P.SIMPLE) not in old.entries
    assert old.choose(C.ALL_GATHER, 1 << 20)[0] == A.RING


def test_nvls_all_gather_and_reduce_scatter_on_one_node_only():
    """NCCL 2.19-2.26 run NVLS all-gather / reduce-scatter on a single node only (``enqueue.cc``: "now we only
    support single-node NVLS allgather and reducescatter", v2.19.4, v2.21.5, v2.26.2), CollNet or not."""
    sharp = replace(PRESETS["dgx-h100"], in_network_reduction=("nvls", "sharp"))
    for version in ("2.19.3", "2.21.5", "2.26.2"):
        t = tune(sharp, 16, release_for(version)[0])
        assert t.machine.collnet
        for coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
            assert not t.entries[(coll, A.NVLS, P.SIMPLE)].enabled
        one = tune(sharp, 8, release_for(version)[0])
        assert one.entries[(C.ALL_GATHER, A.NVLS, P.SIMPLE)].enabled


def test_nvls_all_gather_from_nccl_2_19():
    """Before 2.19 NCCL runs an all-gather on int8 (``info.h``), which ``NCCL_NVLS_SUPPORTS`` leaves out: NCCL
    2.17 prices NVLS for all-gather in ``tuning.cc`` but never picks it; reduce-scatter on float it can."""
    t = _tuned("dgx-h100", 8, 8, "2.17.1")
    ag, rs = (t.entries[(c, A.NVLS, P.SIMPLE)] for c in (C.ALL_GATHER, C.REDUCE_SCATTER))
    assert not ag.enabled and "2.19" in ag.why_disabled
    assert rs.enabled
    assert all(a != A.NVLS for a, _, _ in t.times(C.ALL_GATHER, 1 << 24))
    assert _tuned("dgx-h100", 8, 8, "2.19.3").entries[(C.ALL_GATHER, A.NVLS, P.SIMPLE)].enabled
