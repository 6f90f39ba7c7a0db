"""PCIe boxes: NCCL's ring search through the PCI tree (switches, sockets, peer-to-peer or host memory),
checked against NCCL's own graph lines and the bundled public sweeps of PCIe GPUs."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.graph import machine
from zerocalc.nccl.pcie import PcieLayout, chain_channels, node_chain, search
from zerocalc.nccl.tables import Algorithm, release_for
from zerocalc.topology import PRESETS, topology_from_mapping

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
RTX2080TI = {op: DATA / f"{op}_perf-2xRTX2080Ti-pcie3-shm.txt"
             for op in ("all_reduce", "all_gather", "broadcast", "reduce", "alltoall")}
runner = CliRunner()
#: NCCL's intra-node speed array for sm80-sm89 (v2.19.4-v2.30.7 src/graph/search.cc speedArrayIntra)
SPEEDS = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)


def _rows(path):
    """(size, out-of-place µs) of each row, by a plain split of the file (no zerocalc code)."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit() and int(f[0]) > 0:
            out.append((int(f[0]), float(f[5])))
    return out


def _check(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *map(str, args)])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_the_search_finds_nccls_own_ring_on_8_rtx_4090():
    # NVIDIA/nccl-tests issue 307 (NCCL INFO lines of 8 GeForce RTX 4090): two Intel sockets joined by a
    # 10 GB/s SYS link, each with one PCIe switch of 4 GPUs on a 24 GB/s uplink, no P2P between them;
    # NCCL prints "Pattern 4, crossNic 0, nChannels 1, bw 5.000000/5.000000, type SYS/PIX".
    # By hand: switch 0's uplink carries, per channel, the three hops 0→1, 1→2, 2→3 through the CPU
    # (6/5 each: Intel PHB) and 3→4 across the sockets (SYS, no overhead): 4.6 × bw ≤ 24 → bw ≤ 5.2,
    # so 5 is the fastest speed of the array that fits, once; 4 and 3 (> 0.49 × 5) fit once too.
    lay = PcieLayout(gpus=8, per_socket=4, per_switch=4, p2p=False, intel=True, pci_GBps=24.0, smp_GBps=10.0)
    ring = search(lay, SPEEDS, 16)
    assert (ring.n_channels, ring.bw) == (1, 5.0)
    topo = replace(PRESETS["pcie-gen4"], gpu="NVIDIA GeForce RTX 4090", compute_capability=89, gpu_p2p=False)
    for version in ("2.19.4", "2.21.5", "2.26.2"):
        g = machine(topo, 8, release_for(version)[0]).graphs[Algorithm.RING]
        assert (g.n_channels, g.bw_intra) == (1, 5.0)


def test_peer_to_peer_keeps_a_switchs_traffic_off_its_uplink():
    # two GPUs of one switch, PCIe gen4 (24 GB/s), Intel: with P2P a hop crosses the two GPU links only,
    # 2 channels of 12 fill the GPU's 24 (NCCL stops there: totalBw); through the CPU both hops climb
    # the uplink at 6/5: 2.4 × bw ≤ 24 → one channel of 10 (2 × 5 ties it, and a tie keeps the first)
    lay = PcieLayout(gpus=2, per_socket=4, per_switch=4, p2p=True, intel=True, pci_GBps=24.0, smp_GBps=10.0)
    assert (search(lay, SPEEDS, 16).n_channels, search(lay, SPEEDS, 16).bw) == (2, 12.0)
    ring = search(replace(lay, p2p=False), SPEEDS, 16)
    assert (ring.n_channels, ring.bw, ring.chain_speedup) == (1, 10.0, 2.0)
    # AMD: no root-complex overhead, 2 × bw ≤ 24 → 12
    assert search(replace(lay, p2p=False, intel=False), SPEEDS, 16).bw == 12.0


def test_the_smp_link_is_nccls_figure_by_cpu_and_release():
    from zerocalc.nccl.pcie import smp_GBps

    # topo.h: SKL_QPI_BW 9.0 up to v2.17.1, 10.0 from v2.18.3; AMD_BW 16.0 from v2.19.4, LOC_BW before
    assert [smp_GBps("intel", e) for e in (17, 19)] == [9.0, 10.0]
    assert [smp_GBps("amd", e) for e in (17, 19)] == [5000.0, 16.0]
    # 8 data-center GPUs with P2P: the ring crosses the sockets once each way, the SMP link bounds it
    g17 = machine(PRESETS["pcie-gen4"], 8, release_for("2.17.1")[0]).graphs[Algorithm.RING]
    g21 = machine(PRESETS["pcie-gen4"], 8, release_for("2.21.5")[0]).graphs[Algorithm.RING]
    assert (g17.bw_intra, g21.bw_intra) == (9.0, 10.0)


@pytest.mark.parametrize("op", sorted(RTX2080TI))
def test_rtx_2080_ti_sweeps_within_the_band_at_every_size(op):
    # AutoDL's two RTX 2080 Ti on one PCIe 3.0 switch, no P2P (nvidia-smi topo: PIX, -p2p: NS): each
    # size's prediction within 0.5-2x of the time the file states (sizes and times counted from it)
    sweep = _check(RTX2080TI[op])
    assert sweep["topology"] == "pcie-gen3"
    assert "no PCIe peer-to-peer between GeForce" in sweep["topology_how"]
    rows = _rows(RTX2080TI[op])
    assert [r["bytes"] for r in sweep["rows"]] == [b for b, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t / 1e6 for _, t in rows])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]), [r["ratio"] for r in sweep["rows"]]


def test_a_large_rtx_2080_ti_row_by_hand():
    # 1 GiB all_reduce on 2 RTX 2080 Ti (pcie-gen3: 12 GB/s a GPU link and uplink, Intel, no P2P), NCCL
    # 2.30.7 (the file states none): the uplink carries both hops at 6/5: 2.4 × bw ≤ 12 → 1 channel of 5
    # GB/s (the sm75 array's 5.0). Ring/Simple: algbw = 5 GB/s × nRanks / nsteps (2 / 2); latency 8.4 µs
    # + 2 steps × 5.7 µs (PCI); -g 2 adds one launch delay, 2.76 µs. Through host memory each of the 2
    # channels runs send, recvReduceCopySend, recv: 3 primitives for NCCL's 2 steps, the first and last one
    # way only; the other channel fills half of that idle step: the bandwidth term × (1 + 1 / (2 × 2)).
    size = 1073741824
    by_hand = (8.4 + 2 * 5.7 + 2.76) * 1e-6 + size / 5e9 * 1.25
    row = next(r for r in _check(RTX2080TI["all_reduce"])["rows"] if r["bytes"] == size)
    assert (row["algorithm"], row["protocol"]) == ("Ring", "Simple")
    assert row["predicted_s"] == pytest.approx(by_hand, rel=1e-3)
    # the file's own time (counted from it: 268588 µs) within 1%
    assert row["predicted_s"] == pytest.approx(dict(_rows(RTX2080TI["all_reduce"]))[size] / 1e6, rel=0.01)
    # a broadcast is a chain from the root: only 0 → 1 climbs the uplink, at twice NCCL's figure
    row = next(r for r in _check(RTX2080TI["broadcast"])["rows"] if r["bytes"] == size)
    assert row["predicted_s"] == pytest.approx(size / 10e9, rel=2e-3)


def test_an_all_gather_through_host_memory_idles_a_direction_by_hand():
    # 64 MiB all_gather on the two 2080 Ti (no P2P: NCCL's SHM transport), Ring/Simple on 2 channels. NCCL
    # prices algbw = 5 GB/s × nRanks / nsteps = 5 × 2 / 1 = 10 GB/s: one step of full duplex. Each channel's
    # kernel runs directSend (GPU → host only) then directRecv (host → GPU only): 2 primitives, each one way,
    # for NCCL's 1 step; the other channel fills half the idle direction: × (1 + 1 / (2 × 1)) = 1.5.
    # Latency: 8.4 µs base + 1 step × 5.7 µs (PCI) + 2.76 µs (-g 2's launch).
    size = 67108864
    row = next(r for r in _check(RTX2080TI["all_gather"])["rows"] if r["bytes"] == size)
    assert (row["algorithm"], row["protocol"], row["launch_channels"]) == ("Ring", "Simple", 2)
    by_hand = (8.4 + 5.7 + 2.76) * 1e-6 + size / 10e9 * 1.5
    assert row["predicted_s"] == pytest.approx(by_hand, rel=1e-3)
    # against the file's own row (10390 µs, counted from it): within 5%, where NCCL's figure alone is 0.65x
    measured = dict(_rows(RTX2080TI["all_gather"]))[size] / 1e6
    assert 0.95 <= row["predicted_s"] / measured <= 1.05
    assert (8.4 + 5.7 + 2.76) * 1e-6 + size / 10e9 < 0.7 * measured


def test_the_host_memory_slowdown_by_hand():
    # slowdown = 1 + 1 / (channels · (P − 1)), P the primitives of a loop: all-gather and reduce-scatter N,
    # all-reduce 2N − 1; a broadcast or reduce (a chain) and p2p none
    from zerocalc.nccl.pcie import host_staged_slowdown
    from zerocalc.nccl.tables import Collective as C

    assert host_staged_slowdown(C.ALL_GATHER, 2, 2) == pytest.approx(1.5)
    assert host_staged_slowdown(C.REDUCE_SCATTER, 2, 1) == pytest.approx(2.0)
    assert host_staged_slowdown(C.ALL_REDUCE, 2, 2) == pytest.approx(1.25)
    assert host_staged_slowdown(C.ALL_GATHER, 8, 2) == pytest.approx(1 + 1 / 14)
    assert host_staged_slowdown(C.ALL_REDUCE, 8, 4) == pytest.approx(1 + 1 / 56)
    assert host_staged_slowdown(C.BROADCAST, 2, 2) == host_staged_slowdown(C.REDUCE, 8, 1) == 1.0


def test_an_alltoall_shares_the_switch_uplink_by_hand():
    # 1 GiB alltoall on the two 2080 Ti: each rank sends size / 2 to the other at once; both messages
    # climb the switch's 12 GB/s uplink through the CPU at 6/5 (Intel PHB): 2.4 per byte → 5 GB/s each
    # (the GPU's own link would allow 12). The latency (µs) is small beside 107 ms.
    size = 1073741824
    row = next(r for r in _check(RTX2080TI["alltoall"])["rows"] if r["bytes"] == size)
    assert row["algorithm"] == "P2P"
    assert row["predicted_s"] == pytest.approx(size / 2 / 5e9, rel=1e-3)


def test_a_file_that_disables_p2p_is_priced_through_the_cpu(tmp_path):
    # two A100 PCIe of one switch: P2P gives 2 channels × 12 GB/s; NCCL_P2P_DISABLE=1 on the launch line
    # sends both hops through the CPU (1 channel × 10, see above), NCCL_P2P_LEVEL=LOC alike
    text = RTX2080TI["all_reduce"].read_text().replace("NVIDIA GeForce RTX 2080 Ti", "NVIDIA A100-PCIE-40GB")
    plain, off, loc = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    plain.write_text(text)
    off.write_text(text.replace("./build/", "NCCL_P2P_DISABLE=1 ./build/", 1))
    loc.write_text(text.replace("./build/", "NCCL_P2P_LEVEL=LOC ./build/", 1))
    size = 1073741824
    t = {p: next(r for r in _check(p)["rows"] if r["bytes"] == size)["predicted_s"]
         for p in (plain, off, loc)}
    # with P2P the receive reads the GPU's own memory: NCCL's figure; through host memory (2 channels of 5)
    # the all-reduce's first send and last receive idle a direction: × (1 + 1 / (2 × 2))
    assert t[plain] == pytest.approx(size / 24e9, rel=1e-3)
    assert t[off] == pytest.approx(size / 10e9 * 1.25, rel=1e-3) == t[loc]
    sweep = _check(off)
    assert "NCCL_P2P_DISABLE=1 (line 1)" in sweep["topology_how"]
    assert not any("NCCL_P2P_DISABLE" in n and "does not price" in n for n in sweep["notes"])


def _two_socket_node(name: str, gpus: int, cc: int, intra_GBps: float) -> dict:
    """A PCIe-only node of two Intel sockets, every GPU on its own root port, one 100 Gb/s NIC."""
    return {"name": name, "gpus_per_node": gpus, "compute_capability": cc, "nvlink_gen": 0,
            "nvlinks_per_gpu": 0, "nvswitch_gen": 0, "pcie_gen": 4, "nics_per_node": 1, "nic_Gbps": 100,
            "cpu_vendor": "intel", "in_network_reduction": [], "cpu_sockets": 2, "gpus_per_pcie_switch": 1,
            "intra": {"alpha_us": 5.7, "bw_GBps": intra_GBps}, "inter": {"alpha_us": 14, "bw_GBps": 12.5}}


def test_four_a100_pcie_on_two_sockets_of_root_ports_give_one_10_gbps_channel():
    # two Intel sockets of 2 GPUs, each GPU on its own root port (nvidia-smi topo -m: SYS between all four).
    # By hand: hops 0→1, 2→3 through a CPU (6/5 on the GPU links: ≤ 20) and 1→2, 3→0 across the sockets
    # (10 GB/s SMP link): one channel of 10 GB/s.
    toml = _two_socket_node("a100-pcie-vm", gpus=4, cc=80, intra_GBps=31.5)
    g = machine(topology_from_mapping(toml), 4, release_for("2.30.7")[0]).graphs[Algorithm.RING]
    assert (g.n_channels, g.bw_intra) == (1, 10.0)


def test_two_nodes_of_two_pcie_gpus_on_two_sockets_give_the_smp_links_channel():
    # The node of the previous test with 2 GPUs a node and two nodes: NCCL's ring NET → GPU 0 → GPU 1 → NET
    # (search.cc "Search Patterns") crosses the sockets once, GPU 0 → GPU 1 through the SMP link (10 GB/s,
    # SKL_QPI_BW, topo.h from 2.18), which one channel of 10 fills; the NIC (100 Gb/s = 12.5 GB/s) and the
    # GPUs' 24 GB/s links would hold 12. By hand: one channel of 10 GB/s; two of 5 when the speed is 5.
    toml = _two_socket_node("pcie-2s", gpus=2, cc=89, intra_GBps=24)
    g = machine(topology_from_mapping(toml), 4, release_for("2.27.3")[0]).graphs[Algorithm.RING]
    assert (g.n_channels, g.bw_intra, g.bw_inter) == (1, 10.0, 10.0)
    lay = PcieLayout(gpus=2, per_socket=1, per_switch=1, p2p=True, intel=True, pci_GBps=24.0, smp_GBps=10.0)
    assert node_chain(lay) == [(0, 1)]
    assert (chain_channels(lay, 10.0, 16), chain_channels(lay, 5.0, 16)) == (1, 2)
    # under one switch with peer-to-peer the chain stays off the CPU: the NIC's 12 GB/s sets the speed
    one_switch = {**toml, "cpu_sockets": 1, "gpus_per_pcie_switch": 2}
    g = machine(topology_from_mapping(one_switch), 4, release_for("2.27.3")[0]).graphs[Algorithm.RING]
    assert g.bw_inter == 12.0


@pytest.mark.parametrize("key,value,words", [
    ("gpu_p2p", '"no"', "gpu_p2p must be true or false"),
    ("cpu_sockets", "0", "cpu_sockets must be a whole number ≥ 1"),
    ("gpus_per_pcie_switch", "1.5", "gpus_per_pcie_switch must be a whole number ≥ 1"),
    ("smp_GBps", "0", "smp_GBps must be a positive number"),
    ("p2p_level", '"NODE"', "p2p_level: must be one of PIX, PXB, PHB, SYS"),
])
def test_bad_layout_fields_are_one_line_exit_2(tmp_path, key, value, words):
    base = "\n".join(f"{k} = {v}" for k, v in [
        ("gpus_per_node", 8), ("compute_capability", 80), ("nvlink_gen", 0), ("nvlinks_per_gpu", 0),
        ("nvswitch_gen", 0), ("pcie_gen", 4), ("nics_per_node", 1), ("nic_Gbps", 100),
        ("cpu_vendor", '"intel"'), ("in_network_reduction", "[]"), (key, value)])
    path = tmp_path / "box.toml"
    path.write_text(base + "\n[intra]\nalpha_us = 5.7\nbw_GBps = 31.5\n"
                    "[inter]\nalpha_us = 14\nbw_GBps = 12.5\n")
    res = runner.invoke(app, ["check", str(RTX2080TI["all_reduce"]), "--topology", str(path)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    (line,) = res.stderr.strip().splitlines()
    assert words in line and "box.toml" in line, line


def test_layout_fields_round_trip_through_toml():
    from zerocalc.topology import topology_to_mapping

    t = replace(PRESETS["pcie-gen4"], gpu_p2p=False, smp_GBps=22.0, p2p_level="PHB")
    back = topology_from_mapping(topology_to_mapping(t))
    assert (back.cpu_sockets, back.gpus_per_pcie_switch, back.gpu_p2p, back.smp_GBps) == (2, 4, False, 22.0)
    assert back.p2p_level == "PHB"


#: NCCL INFO lines as RTX 4090 owners posted them: through host memory on NVIDIA's driver
#: (tinygrad/open-gpu-kernel-modules issue 45), peer-to-peer on tinygrad's patched one (issue 17).
SHM_LINE = ("i-56butc28zq2jtjaluzq7va7p6:9822:9938 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via "
            "SHM/direct/direct")
P2P_LINE = ("myles-System-Product-Name:11800:11831 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/direct "
            "pointer")


def test_nccls_transport_lines_say_whether_the_gpus_use_p2p(tmp_path):
    # the 2080 Ti sweep with a P2P channel line: one switch, peer-to-peer, PCIe gen3: the hops stay under
    # the switch, one channel of 12 GB/s fills the GPU's link (NCCL stops there); an A100 PCIe pair with
    # an SHM line goes through the CPU: 2.4 × bw ≤ 24 → 10 GB/s, its 2 channels' first send and last
    # receive idling a direction: × (1 + 1 / (2 × 2)) (all-reduce on 2 ranks: 3 primitives, 2 steps)
    text = RTX2080TI["all_reduce"].read_text()
    head, table = text.split("#                                                              out-of-place", 1)
    table = "#                                                              out-of-place" + table
    geforce_p2p, a100_shm = tmp_path / "a.txt", tmp_path / "b.txt"
    geforce_p2p.write_text(head + P2P_LINE + "\n" + table)
    a100_shm.write_text((head + SHM_LINE + "\n" + table).replace("NVIDIA GeForce RTX 2080 Ti",
                                                                   "NVIDIA A100-PCIE-40GB"))
    size = 1073741824
    # line 8: the inserted INFO line, after the command, nThread, '#', 'Using devices', 2 ranks and '#'
    for path, bw, words in [(geforce_p2p, 12e9, "via P2P (line 8)"),
                            (a100_shm, 10e9 / 1.25, "via SHM (line 8)")]:
        sweep = _check(path)
        assert words in sweep["topology_how"], sweep["topology_how"]
        row = next(r for r in sweep["rows"] if r["bytes"] == size)
        assert row["predicted_s"] == pytest.approx(size / bw, rel=1e-3)


def test_when_nccls_search_finds_no_ring_the_fallback_runs_at_its_links_rate():
    # four GeForce RTX 5090 (compute capability 12.0: NCCL takes the sm100 arrays, slowest speed 19 GB/s)
    # under one PCIe 5.0 switch without P2P: the uplink carries the four hops through an Intel CPU at
    # 6/5 each, 4.8 × bw ≤ 48 → 10 GB/s, below every speed of the array: NCCL falls back to one channel
    # at 0.1 GB/s ("Could not find a path for pattern 4, falling back to simple order", search.cc), which
    # it tunes with; the ring runs at the uplink's 10 GB/s.
    topo = replace(PRESETS["pcie-gen5"], gpu="NVIDIA GeForce RTX 5090", compute_capability=120, gpu_p2p=False)
    rel = release_for("2.26.2")[0]
    g = machine(topo, 4, rel).graphs[Algorithm.RING]
    assert (g.n_channels, g.bw_intra) == (1, 0.1)
    assert g.bw_intra * g.run_scale == pytest.approx(10.0)
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import Collective, Protocol

    t = tune(topo, 4, rel)
    size = 1 << 30
    # Ring/Simple all-reduce: algbw = busbw × nRanks / nsteps = 10 × 4 / 6; through host memory on the
    # communicator's 2 channels (the graph's 1 doubled), 2N − 1 = 7 primitives for 6 steps:
    # × (1 + 1 / (2 × 6))
    run = t.run_time_s(Collective.ALL_REDUCE, Algorithm.RING, Protocol.SIMPLE, size)
    assert t.channels.coll_channels == 2
    assert run == pytest.approx(size / (10e9 * 4 / 6) * (1 + 1 / 12), rel=1e-3)
    assert t.time_s(Collective.ALL_REDUCE, Algorithm.RING, Protocol.SIMPLE, size) > 50 * run
