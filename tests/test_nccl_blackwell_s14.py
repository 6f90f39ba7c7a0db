"""Blackwell (sm100) HGX nodes: NVLS calls under NCCL 2.25-2.27 timed with the Blackwell NVLS figures NCCL
2.28.3 brought in (``nvlsEfficiency`` 0.74, ``tuning.cc`` v2.28.3-v2.30.7), while each release still chooses
with its own (:func:`zerocalc.nccl.model.nvls_run_release`).

Hand-derived figures: v2.26.2 ``tuning.cc`` prices NVLS with ``nChannels × bw × 5/6``; v2.30.7 with
``nChannels × min(bwIntra × 0.74 × (nCh-1)/nCh × 2, bwInter) × nRanks/nsteps`` (all-reduce: nsteps
2(n-1)) and an NVLink latency of 25 µs; the NVLS graph on one B200 / B300 node runs 8 channels at the first
speed of ``sm100SpeedArrayIntra`` (90 GB/s, ``search.cc``). Measured figures are read off the bundled files
by a plain split (tests/sweep_files.py)."""

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
    # the release's own choice figure: 8 channels x 90 GB/s x 5/6 = 600 GB/s algorithm bandwidth
    assert t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)].bandwidth_GBps == pytest.approx(8 * 90 * 5 / 6)
    # the run: min(90 x 0.74 x 7/8 x 2, 90) x 8 channels x 8/14 = 411.4 GB/s (bus bandwidth 720), 25 us
    run = t.run_time_s(C.ALL_REDUCE, A.NVLS, P.SIMPLE, GIB)
    assert run == pytest.approx(25e-6 + GIB / (min(90 * 0.74 * 7 / 8 * 2, 90) * 8 * 8 / 14 * 1e9), rel=1e-6)
    # other pairs keep the release's own time
    ring = (C.ALL_REDUCE, A.RING, P.SIMPLE, GIB)
    assert t.run_time_s(*ring) == t.time_s(*ring)


def test_releases_with_the_figures_and_hosts_across_nodes_keep_their_own():
    b200 = get_topology("dgx-b200")
    # 2.28 on already prices NVLS with nvlsEfficiency: nothing to correct
    assert tune(b200, 8, V28).nvls_run is None and tune(b200, 8, V30).nvls_run is None
    # two HGX nodes (NVLS Tree): the release's own figures
    assert tune(b200, 16, V26).nvls_run is None
    # the few-GPU Hopper and NVL72 cases are unchanged
    assert tune(get_topology("dgx-h100"), 8, V26).nvls_run is not None
    assert tune(get_topology("gb200-nvl72"), 8, V26).nvls_run is not None
    assert nvls_corrected(V26, b200) and not nvls_corrected(V28, b200)
    assert nvls_corrected_for(b200) == "Blackwell within one node"
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
    NVLS figure (8 x 90 x 5/6 = 600 GB/s algorithm bandwidth, 1 050 bus) and 2.28's (720 bus). Priced as
    2.26 or 2.27 would have run it, the row gets 2.28.9's time (within 0.8-1.25x), not 0.80x."""
    ((size, busbw),) = _busbw(B300)
    assert size == 8 * GIB and 830 <= busbw <= 845
    own = check_json(B300, "--topology", "dgx-b300")
    sweep = check_json(B300, "--topology", "dgx-b300", "--nccl-version", version)
    (row,), (own_row,) = sweep["rows"], own["rows"]
    assert (row["algorithm"], row["protocol"]) == ("NVLS", "Simple")
    assert row["predicted_s"] == pytest.approx(own_row["predicted_s"])
    assert 0.8 <= row["ratio"] <= 1.25
    # NCCL's own figure at this release would be 1 050 GB/s of bus bandwidth, faster than the run
    assert 8 * 90 * 5 / 6 * 14 / 8 > busbw * 1.2
    assert any("figures for Blackwell (nvlsEfficiency 0.74)" in n for n in sweep["notes"])
    assert not any("nvlsEfficiency" in n for n in own["notes"])
    assert file_rows(B300)[0][0] == size
