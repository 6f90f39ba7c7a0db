"""Two V100 PCIe GPUs of one Azure VM (``Standard_NC12s_v3``), one process driving both (``-g 2``) and one
process each (``-np 2``): the class of a pair of PCIe GPUs without NVLink, priced on the ``pcie-gen3`` preset
their device lines pick. Expected figures are read off the files; the band is issue 11's 0.5-2x at every
size."""

from dataclasses import replace

import pytest
from sweep_files import check_json, file_rows, median_size_ratio, old_layout_rows

from zerocalc.topology import PRESETS, topology_to_toml
from zerocalc.topology.devices import over_sockets

G2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-g2.txt"
NP2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-np2.txt"


@pytest.mark.parametrize(("name", "busbw_2g"), [(G2, 6.88), (NP2, 6.74)])
def test_two_v100_pcie_of_one_vm_within_the_every_size_band(name, busbw_2g):
    """29 rows, 8 B to 2 GiB, on 2 ranks of one host; every size within 0.5-2x of the file's time. At 2 GiB
    the pair moves 6.88 / 6.74 GB/s of bus bandwidth (the file), under the 12 GB/s of a PCIe 3.0 x16 link
    NCCL's search counts (``topo.cc``: 16 × 60 / 80); the model's ring goes through host memory
    (tests/test_nccl_pcie_transport.py)."""
    rows = file_rows(name)
    assert len(rows) == 29 and rows[0][0] == 8 and rows[-1][0] == 2147483648
    assert rows[-1][0] / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(busbw_2g, abs=0.01)  # all-reduce, n = 2
    sweep = check_json(name)
    assert sweep["group_size"] == 2 and sweep["topology"] == "pcie-gen3"
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert all(r["algorithm"] == "Ring" for r in sweep["rows"])


def test_a_pair_through_host_memory_says_its_rate_is_the_hosts():
    """Two GeForce RTX 4090 (no peer-to-peer: NCCL's SHM transport) of kalavai's pod: the note says the rate
    through host memory is the host's, which the file does not state (they move 3.85 GB/s at 2 GiB, the
    file's last row, where the links NCCL counts give 8); so does the V100 pair, each GPU on PCI bus 0 of
    its VM, past NCCL's P2P level on Intel (tests/test_nccl_pcie_transport.py); GPUs under one switch with
    peer-to-peer (the preset as given) get none."""
    k8s = check_json("all_reduce_perf-2xRTX4090-g2-k8s-kalavai.txt")
    assert any("host's rate" in n for n in k8s["notes"])
    assert any("host's rate" in n for n in check_json(G2)["notes"])
    assert not any("host's rate" in n for n in check_json(G2, "--topology", "pcie-gen3")["notes"])


A10G = "all_reduce_perf-2xA10G-g5-2nodes-socket-nccl2.11.4.txt"


def test_pcie_cards_of_two_hosts_over_tcp_sockets_are_priced_at_nccls_socket_nic():
    """Two AWS g5.2xlarge (one A10G each) joined by NCCL's socket transport (its INFO lines: ``NET/Socket``,
    ``via NET/Socket/0``), NCCL 2.11.4: priced on the pcie-gen4 box with one 10 Gb/s NIC a node, NCCL's own
    figure for a NIC that reports no speed, through host memory, and a note saying the rate is the hosts'.
    By hand at 128 MiB: 10 Gb/s = 1.25 GB/s, 2/3 of it through host memory (graph.py assumption 7) =
    0.833 GB/s, 134217728 B / 0.833 GB/s = 161 ms against the file's 183.6 ms (0.88); the file's large rows
    move 0.66-0.82 GB/s of bus bandwidth. Its small rows (173 µs at 8 B: the TCP stack and NCCL's proxy
    threads) are the hosts' latency, which NCCL's network hop does not price."""
    rows = old_layout_rows(A10G)
    assert len(rows) == 25 and rows[0][0] == 8 and rows[-1][0] == 134217728
    assert rows[-1][0] / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(0.731, abs=0.001)  # all-reduce, n = 2
    sweep = check_json(A10G, counted=old_layout_rows)
    assert sweep["group_size"] == 2 and sweep["topology"] == "pcie-gen4"
    assert "NCCL's socket transport" in sweep["topology_how"] and "10 Gb/s" in sweep["topology_how"]
    assert any("over TCP sockets the rate and latency are the hosts'" in n for n in sweep["notes"])
    big = [r for r in sweep["rows"] if r["bytes"] >= 2 << 20]
    assert len(big) == 7 and all(0.8 <= r["ratio"] <= 1.25 for r in big)
    assert big[-1]["predicted_s"] == pytest.approx(134217728 / (1.25e9 * 2 / 3), rel=0.06)


L40S_SOCKET = "all_reduce_perf-2xL40S-2pods-socket-nccl2.27.3.txt"
L40S_ROCE = "all_reduce_perf-4xL40S-2pods-roce-g2-nccl2.27.3.txt"


def test_l40s_pods_over_sockets_and_roce_are_priced_not_refused():
    """Two OpenShift pods on two hosts of L40S and ConnectX-7 NICs (schmaustech/nvidia-tools-image), NCCL
    2.27.3: one GPU a pod with ``NCCL_IB_DISABLE=1`` (the socket transport over the pods' SR-IOV interface)
    and two a pod over RoCE. Both are priced on the pcie-gen4 box their device lines pick. The socket run
    moves 8.11 GB/s of bus bandwidth at 8 GiB (the file), 6.5 × the 10 Gb/s NCCL gives a NIC that reports
    no speed, which is what the model assumes without a stated rate: its large rows are priced about 10 ×
    too slow, and the note says the rate is the hosts'. Its small rows (12-15 µs up to 8 KiB) are within
    0.5-2x of NCCL's network hop up to 1 KiB."""
    rows = file_rows(L40S_SOCKET)
    assert len(rows) == 31 and rows[0][0] == 8 and rows[-1][0] == 8589934592
    assert rows[-1][0] / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(8.11, abs=0.01)  # all-reduce, n = 2
    sweep = check_json(L40S_SOCKET)
    assert sweep["group_size"] == 2 and sweep["topology"] == "pcie-gen4"
    assert any("over TCP sockets the rate and latency are the hosts'" in n for n in sweep["notes"])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"] if r["bytes"] <= 1024)
    roce = check_json(L40S_ROCE)
    assert roce["group_size"] == 4 and roce["topology"] == "pcie-gen4"
    assert not any("TCP sockets" in n for n in roce["notes"])


def test_l40s_pods_of_two_sockets_over_roce_run_at_the_smp_links_figure():
    """The RoCE run, two L40S a pod on buses ``61:00`` and ``e1:00`` (the halves of the bus range: two
    sockets, as the device lines are read): each node's part of NCCL's ring, NET → GPU 0 → GPU 1 → NET,
    crosses the SMP link, NCCL's 10 GB/s on Intel from 2.18 (``topo.h`` ``SKL_QPI_BW``), which one channel
    fills. By hand at 8 GiB: all-reduce bus bandwidth 10 GB/s on 4 ranks, 8589934592 B × 2 × 3/4 / 10 GB/s
    = 1.288 s against the file's 1.338 s (its bus bandwidth 9.63 GB/s); before, the ring was priced at the
    GPU's 24 GB/s PCIe link (0.40x). Every size within 0.5-2x and the median size within 0.8-1.25x."""
    rows = file_rows(L40S_ROCE)
    assert len(rows) == 31 and rows[-1][0] == 8589934592
    assert rows[-1][0] * 1.5 / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(9.63, abs=0.01)  # 2(n-1)/n
    sweep = check_json(L40S_ROCE)
    assert sweep["rows"][-1]["predicted_s"] == pytest.approx(8589934592 * 1.5 / 10e9, rel=0.01)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_a_topology_given_for_a_socket_run_gets_no_assumed_nic_note(tmp_path):
    """With the hosts' NIC given (a TOML of the A10G pair's box at 10 Gb/s, as a user who knows the link
    writes it) the price is theirs, not an assumption: no note claims NCCL's default speed."""
    toml = tmp_path / "g5.toml"
    toml.write_text(topology_to_toml(replace(over_sockets(PRESETS["pcie-gen4"]), name="g5-pair")))
    sweep = check_json(A10G, "--topology", str(toml), counted=old_layout_rows)
    assert sweep["topology"] == "g5-pair"
    assert not any("over TCP sockets the rate and latency are the hosts'" in n for n in sweep["notes"])
