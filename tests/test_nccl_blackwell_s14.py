"""Blackwell (sm100) HGX nodes: NVLS calls under NCCL 2.25-2.27 timed with the Blackwell NVLS figures NCCL
2.28.3 brought in (``nvlsEfficiency`` 0.74, ``tuning.cc`` v2.28.3-v2.30.7), while each release still chooses
with its own (:func:`zerocalc.nccl.model.nvls_run_release`).

Hand-derived figures: v2.26.2 ``tuning.cc`` prices NVLS with ``nChannels × bw × 5/6``; v2.30.7 with
``nChannels × min(bwIntra × 0.74 × (nCh-1)/nCh × 2, bwInter) × nRanks/nsteps`` (all-reduce: nsteps
2(n-1)) and an NVLink latency of 25 µs. The NVLS graph on one node runs a channel per GPU, each taking
``bwIntra`` on every GPU's NVSwitch link and twice on its head's (``search.cc`` ``ncclTopoSearchTryNvls``):
on one B200 / B300 node 8 channels at 80 GB/s (9 × 80 ≤ 18 × 40.1 < 9 × 90, ``sm100SpeedArrayIntra``
90, 80, …), ``bwInter`` raised to 90. Measured figures are read off the bundled files by a plain split
(tests/sweep_files.py)."""

import pytest
from sweep_files import DATA, check_json, file_rows

from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, tune
from zerocalc.nccl.model import nvls_run_release
from zerocalc.nccl_pricing import nvls_corrected, nvls_corrected_for
from zerocalc.topology import get_topology

A, P, C = Algorithm, Protocol, Collective
V26, V27, V28, V30 = RELEASES["2.26"], RELEASES["2.27"], RELEASES["2.28"], RELEASES["2.30"]
GIB = 1 << 30


@pytest.mark.parametrize("preset", ["dgx-b200", "dgx-b300", "aws-p6-b200"])
@pytest.mark.parametrize("rel", [V26, V27], ids=["2.26", "2.27"])
def test_one_hgx_blackwell_node_times_nvls_with_the_corrected_figures(preset, rel):
    t = tune(get_topology(preset), 8, rel)
    assert nvls_run_release(rel, t.machine) is V30 and t.nvls_run is not None
    assert t.choose(C.ALL_REDUCE, GIB)[:2] == (A.NVLS, P.SIMPLE)
    # the release's own choice figure: 8 channels x min(bwIntra 80, bwInter 90) x 5/6 = 533 GB/s algbw
    assert t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)].bandwidth_GBps == pytest.approx(8 * 80 * 5 / 6)
    # the run: min(80 x 0.74 x 7/8 x 2, 90) x 8 channels x 8/14 = 411.4 GB/s (bus bandwidth 720), 25 us,
    # and the pipeline's fill: two loops of nvlsChannels x 8 heads x 64 KiB (calcCollChunking: 1 GiB is
    # below 64 concurrent chunks of 128 KiB), 32 channels under 2.26 (NVLS_NCHANNELS_SM100), 24 from 2.27
    # on one node (NVLS_NCHANNELS_SM100_NVL; src/transport/nvls.cc)
    bw = min(80 * 0.74 * 7 / 8 * 2, 90) * 8 * 8 / 14 * 1e9
    fill = 2 * (32 if rel is V26 else 24) * 8 * 65536 / bw
    run = t.run_time_s(C.ALL_REDUCE, A.NVLS, P.SIMPLE, GIB)
    assert run == pytest.approx(25e-6 + GIB / bw + fill, rel=1e-6)
    # other pairs keep the release's own time
    ring = (C.ALL_REDUCE, A.RING, P.SIMPLE, GIB)
    assert t.run_time_s(*ring) == t.time_s(*ring)


def test_releases_with_the_figures_and_hosts_across_nodes_keep_their_own():
    b200 = get_topology("dgx-b200")
    # 2.28 on already prices NVLS with nvlsEfficiency: nothing to correct
    assert tune(b200, 8, V28).nvls_run is None and tune(b200, 8, V30).nvls_run is None
    # two HGX nodes (NVLS Tree): 2.30's figures on the NVLS graph at the bwIntra the NVLink holds (80, where
    # NCCL's search stops at the NIC's 48), under every release; NCCL still chooses with its own graph
    for rel in (V26, V28, V30):
        t = tune(b200, 16, rel)
        assert t.nvls_run is not None and t.nvls_run.release is V30
        assert t.nvls_run.machine.graphs[A.NVLS_TREE].bw_intra == 80.0
        assert t.machine.graphs[A.NVLS_TREE].bw_intra == 48.0
    # the few-GPU Hopper and NVL72 cases are unchanged
    assert tune(get_topology("dgx-h100"), 8, V26).nvls_run is not None
    assert tune(get_topology("gb200-nvl72"), 8, V26).nvls_run is not None
    # (the table's note, where a call ran that way: one node at 2.25-2.27, across nodes at every release)
    assert nvls_corrected(V26, b200) and nvls_corrected(V28, b200)
    assert not nvls_corrected(V28, get_topology("gb200-nvl72"))
    assert nvls_corrected_for(b200).startswith("Blackwell HGX nodes")
    assert nvls_corrected_for(get_topology("gb200-nvl72")) == "GB200-NV72"
    assert nvls_corrected_for(get_topology("dgx-h100")) == "Hopper"


B300 = "all_reduce_perf-8xB300-oci-1node-g8-nccl2.28.9.txt"


def _busbw(name):
    """(size, busbw GB/s) of each row, cells 0 and 7 of a plain split."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            out.append((int(f[0]), float(f[7])))
    return out


@pytest.mark.parametrize("version", ["2.26.2", "2.27.7"])
def test_oci_b300_node_under_earlier_releases_is_priced_as_under_its_own(version):
    """OCI's 8 x B300 node (NCCL 2.28.9) runs 8 GiB at a bus bandwidth of 835 GB/s: between 2.26/2.27's own
    NVLS figure (8 x 80 x 5/6 = 533 GB/s algorithm bandwidth, 933 bus) and 2.28's (720 bus). Priced as
    2.26 or 2.27 would have run it, the row gets 2.28.9's figures (within 0.8-1.25x)."""
    ((size, busbw),) = _busbw(B300)
    assert size == 8 * GIB and 830 <= busbw <= 845
    own = check_json(B300, "--topology", "dgx-b300")
    sweep = check_json(B300, "--topology", "dgx-b300", "--nccl-version", version)
    (row,), (own_row,) = sweep["rows"], own["rows"]
    assert (row["algorithm"], row["protocol"]) == ("NVLS", "Simple")
    # the same figures; the pipeline's fill follows each release's nvlsChannels on one node (32 under
    # 2.26, 24 from 2.27: two loops of 32 or 24 x 8 heads x 128 KiB, 64 or 48 MiB, at 411.4 GB/s)
    fill = {"2.26.2": 64, "2.27.7": 48}[version] * (1 << 20) / 411.43e9
    assert row["predicted_s"] - own_row["predicted_s"] == pytest.approx(fill - 48 * (1 << 20) / 411.43e9,
                                                                         abs=1e-7)
    assert 0.8 <= row["ratio"] <= 1.25
    # NCCL's own figure at this release would be 933 GB/s of bus bandwidth, 2.28's 720: the run between
    assert 8 * 80 * 5 / 6 * 14 / 8 > busbw > 8 * 90 * 8 / 14 * 14 / 8
    assert any("figures for Blackwell (nvlsEfficiency 0.74)" in n for n in sweep["notes"])
    assert not any("nvlsEfficiency" in n for n in own["notes"])
    assert file_rows(B300)[0][0] == size


@pytest.mark.parametrize("preset, ranks, rel, graph", [
    # 8 H100: 9 x 40 <= 18 x 20.6 < 9 x 50; NCCL 2.19.4 prints "nChannels 8, bw 40.000000/60.000000"
    # (NVIDIA/nccl issue 1197, one node of 8 H100 with 18 x 20.0 = 360 GB/s links)
    ("dgx-h100", 8, RELEASES["2.19"], (8, 40.0, 60.0)),
    ("dgx-h100", 8, V30, (8, 40.0, 60.0)),
    # 8 B200: 9 x 80 = 720 <= 18 x 40.0 (2.26) / 40.1 (2.27.7 on) < 9 x 90; bwInter up to 2 x 80, at most 90
    ("dgx-b200", 8, V26, (8, 80.0, 90.0)),
    ("dgx-b200", 8, V30, (8, 80.0, 90.0)),
    # 4 GPUs: 5 x 90 fits, the fastest speed
    ("dgx-b200", 4, V30, (4, 90.0, 90.0)),
    # 16 GPUs of one NVL72 domain (one node from 2.20.3): 17 x 45 = 765 > 721.8 >= 17 x 40; bwInter 80
    ("gb200-nvl72", 16, V30, (16, 40.0, 80.0)),
    # 32 and more: NCCL_MAX_NVLS_ARITY 32 channels, 33 x 24 > 721.8 >= 33 x 20
    ("gb200-nvl72", 72, V30, (32, 20.0, 40.0)),
])
def test_one_node_nvls_graph_fits_channels_plus_one_copies_on_each_link(preset, ranks, rel, graph):
    g = tune(get_topology(preset), ranks, rel).machine.graphs[A.NVLS]
    assert (g.n_channels, g.bw_intra, g.bw_inter) == graph
