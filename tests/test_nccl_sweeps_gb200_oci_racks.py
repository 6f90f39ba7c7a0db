"""check on OCI's GB200 NVL72 sweeps across racks (oracle-quickstart/oci-gpu-quickstarts, nvidia/GB200/
README-GB200.md; tests/data/traces/README.md): all-reduce on 32 hosts of two racks and 48 hosts of three,
NCCL 2.27.3 (their version lines), NVLS enabled as the guide's job sets it; all-to-all on 16 hosts of one
rack, 32 of two and 48 of three; 4 and 8 GiB rows, no device lines (``--topology gb200-nvl72``, ``--n``).

Expected figures are read off the files by a plain split (tests/sweep_files.py): the rows, the version
line, busbw/algbw (nccl-tests' factors: 2(n-1)/n for all-reduce, (n-1)/n for all-to-all); the bands are
issue 11's."""

import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio

from zerocalc.nccl.graph import nvls_net_speeds

#: file → (ranks, the collective, every size within 0.5-2x, the median size within 0.8-1.25x)
SWEEPS = {
    "all_reduce_perf-128xGB200-oci-32nodes-2racks-nccl2.27.3.txt": (128, "all_reduce", True, True),
    # NVLS Tree over three domains, with its pipeline's fill (zerocalc.nccl.nvls_pipeline): 0.82-0.85x
    "all_reduce_perf-192xGB200-oci-48nodes-3racks-nccl2.27.3.txt": (192, "all_reduce", True, True),
    # one rack's NVLink: 0.79-0.87x, the 4 GiB row under 0.8 (its in-place time is 9% below)
    "alltoall_perf-64xGB200-oci-16nodes-1rack.txt": (64, "all_to_all", True, False),
    "alltoall_perf-128xGB200-oci-32nodes-2racks.txt": (128, "all_to_all", True, True),
    "alltoall_perf-192xGB200-oci-48nodes-3racks.txt": (192, "all_to_all", True, True),
}


def _ranks_counted(name, op):
    """The ranks nccl-tests' bus-bandwidth factor gives on every row (algbw, busbw: cells 6, 7; two
    decimals each): the whole n whose factor matches them all."""
    rows = [line.split() for line in (DATA / name).read_text().splitlines()
            if line.split() and line.split()[0].isdigit()]
    fits = []
    for n in range(2, 1025):
        factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
        if all(float(f[7]) == pytest.approx(float(f[6]) * factor, abs=0.02) for f in rows):
            fits.append(n)
    return fits


def _check(name):
    ranks, op, _, _ = SWEEPS[name]
    # the guide's all-to-all blocks print no version; its all-reduce blocks print 2.27.3, and its 2-host
    # commands of both collectives load the same HPC-X (2.21.2) and its NCCL network plugin
    return check_json(name, "--topology", "gb200-nvl72", "--n", str(ranks), "--nccl-version", "2.27.3")


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_oci_gb200_rack_sweeps_read_as_counted_and_priced(name):
    ranks, op, wide, narrow = SWEEPS[name]
    assert ranks in _ranks_counted(name, op)
    assert [s for s, _, _ in file_rows(name)] == [4294967296, 8589934592]
    if op == "all_reduce":
        assert "NCCL version 2.27.3+cuda12.8" in (DATA / name).read_text()
    sweep = _check(name)
    assert sweep["op"] == op and sweep["group_size"] == ranks
    if ranks > 72:  # more than one NVL72 domain holds: racks of 16 trays, NCCL's cliques
        assert "spread evenly over" in sweep["topology_how"] and "16 hosts × 4 GPUs" in sweep["topology_how"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"]) == wide
    assert (0.8 <= median_size_ratio(sweep) <= 1.25) == narrow


def test_nvls_tree_over_racks_is_chosen_and_timed_with_the_corrected_figures():
    """NCCL 2.27.3 chooses NVLS Tree at both sizes on two and three racks (the measured bus bandwidth rises
    smoothly, 753 → 800 and 703 → 749 GB/s, no switch between them), which its NVLS graph's second search
    pass allows (bwInter raised to 2 x bwIntra: ``nvls_net_speeds``), and the calls are timed with the
    figures NCCL 2.28.3 took from GB200-NV72 data (``nvls_run_release``), noted."""
    for name in ("all_reduce_perf-128xGB200-oci-32nodes-2racks-nccl2.27.3.txt",
                 "all_reduce_perf-192xGB200-oci-48nodes-3racks-nccl2.27.3.txt"):
        sweep = _check(name)
        assert [r["algorithm"] for r in sweep["rows"]] == ["NVLSTree", "NVLSTree"]
        assert any("figures for GB200-NV72, which NCCL 2.28.3 corrected" in n for n in sweep["notes"])


def test_nvls_graph_across_nvl72_domains_follows_nccls_search():
    """NCCL's NVLS search with NICs (src/graph/search.cc, v2.29.2): sm100SpeedArrayInter; 32 heads (one
    NIC and its GPU each) load each GPU's NVSwitch link (18 x SM100_NVLINK_BW 40.1 = 721.8 GB/s, topo.h)
    with 33 x bwIntra: 22 needs 726, so 20; pass 2 raises bwInter while below 2 x 20 and within a head's
    NIC (400 Gb/s behind PCIe Gen5 x16: 48): 22, 24, 30, 40. Eight heads: 48 fits both; 96 exceeds the NIC."""
    speeds = (96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
              0.24, 0.12)
    assert nvls_net_speeds(speeds, 18 * 40.1, 32, 48.0) == (20.0, 40.0)
    assert nvls_net_speeds(speeds, 18 * 40.1, 8, 48.0) == (48.0, 48.0)


def test_all_to_all_across_racks_moves_at_the_nics_rate():
    """All-to-all over two and three racks of GB200 (InfiniBand, one 400 Gb/s NIC a GPU as the guide's
    command names four HCAs a host): the share of each rank's data bound for other racks, 64 of 128 and
    128 of 192 peers, crosses at 45 and 42 GB/s a GPU at 8 GiB (read off the rows), 0.84-0.90 of the NIC;
    priced within 0.8-1.25x. (OCI's GB300 two-rack all-to-all, over RoCE, crosses at 24 GB/s a GPU of
    800 Gb/s: a quarter, which the model leaves as measured.)"""
    for name, ranks in (("alltoall_perf-128xGB200-oci-32nodes-2racks.txt", 128),
                        ("alltoall_perf-192xGB200-oci-48nodes-3racks.txt", 192)):
        (size, t_us, _), = [r for r in file_rows(name) if r[0] == 8589934592]
        crossing = size * (ranks - 64) / ranks / (t_us * 1e-6) / 1e9
        assert 40 <= crossing <= 46
        sweep = _check(name)
        assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"])


def test_nvls_tree_across_racks_pays_its_pipelines_fill():
    """Hand check of 2 and 3 racks at 4 and 8 GiB (NCCL 2.27.3, timed with 2.30's GB200-NV72 figures): the
    NVLS graph's 32 heads at bwIntra 20, bwInter 40 (above); per channel min(20 x 0.74 x 31/32 x 2
    (nvlsEfficiency, "AllReduce pipelines two operations"), 40 x 2 on 2 nodes or 40 on more, 96 / 80
    (perChMaxNVLSTreeBws N2 / N4)) (tuning.cc v2.30.7), 32 channels, x nRanks / 2(nRanks - 1); latency
    25 + 2 x 20.9 us a level of the tree (NVLink NVLS, network NVLS Tree hwLat), ceil(log2 nNodes) levels
    (trees.cc); plus the fill of calcCollChunking's loops, 32 nvlsChannels (NVLS_NCHANNELS_SM100 across
    nodes, nvls.cc) x 32 heads x 128 KiB (NCCL_NVLS_CHUNKSIZE, under 4 nodes): two loops and, for each
    network hop between the first and the last (2 ceil(log2 nNodes) in all), 1/32 of one. Every call is
    at least 32 loops."""
    for name, ranks, nodes in (("all_reduce_perf-128xGB200-oci-32nodes-2racks-nccl2.27.3.txt", 128, 2),
                               ("all_reduce_perf-192xGB200-oci-48nodes-3racks-nccl2.27.3.txt", 192, 3)):
        per_channel = min(20 * 0.74 * 31 / 32 * 2, 40 * (2 if nodes == 2 else 1), 96 if nodes == 2 else 80)
        bw = 32 * per_channel * ranks / (2 * (ranks - 1)) * 1e9
        levels = (nodes - 1).bit_length()
        loop = 32 * 32 * 131072
        fill = (2 + (2 * levels - 2) / 32) * loop / bw
        sweep = _check(name)
        assert any("pipeline's fill on Blackwell" in n for n in sweep["notes"])
        for r in sweep["rows"]:
            assert r["bytes"] >= 32 * loop
            hand = (25 + 2 * levels * 20.9) * 1e-6 + r["bytes"] / bw + fill
            assert r["predicted_s"] == pytest.approx(hand, rel=1e-9)


def test_the_fill_is_priced_on_hopper_and_blackwell_nvls():
    """Hopper and Blackwell alike: NVLS Tree across nodes (NVL72 racks, HGX nodes) and NVLS in one NVLink
    domain (one host, or a rack NCCL joins into one node) pay the fill; NVLS across nodes (with CollNet), the
    other collectives and Ampere do not."""
    from zerocalc.nccl.nvls_pipeline import fill_priced
    from zerocalc.nccl.release import Algorithm as A
    from zerocalc.nccl.release import Collective as C
    for cc in (90, 100, 103):
        assert fill_priced(C.ALL_REDUCE, A.NVLS_TREE, 2, cc) and fill_priced(C.ALL_REDUCE, A.NVLS_TREE, 3, cc)
        assert fill_priced(C.ALL_REDUCE, A.NVLS, 1, cc)
        assert not fill_priced(C.ALL_REDUCE, A.NVLS, 2, cc)
        assert not fill_priced(C.REDUCE_SCATTER, A.NVLS_TREE, 2, cc)
        assert not fill_priced(C.ALL_GATHER, A.NVLS, 1, cc)
    assert not fill_priced(C.ALL_REDUCE, A.RING, 1, 100)
    assert not fill_priced(C.ALL_REDUCE, A.NVLS, 1, 80)
