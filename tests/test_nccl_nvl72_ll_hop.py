"""The Ring/LL hop in a multi-node NVLink domain of Blackwell GPUs (GB200 / GB300 NVL72), against the files
it is measured from: two all-gathers of 8 GB200 on 2 GCP A4X hosts (no version stated, priced at NCCL
2.30.7) and OCI's GB300 all-reduces at NCCL 2.28.7 on 2 hosts (8 GPUs) and on one host (4 GPUs)
(tests/data/traces/README.md names their sources). Measured times are counted from the files by a plain
split; NCCL's figures are its own: base latency 6.6 µs and 0.6 µs a hop (``baseLat`` / ``hwLat[NVLINK]
[RING][LL]``, ``src/graph/tuning.cc`` v2.28.7 and v2.30.7 alike), and its LL rate
``min(llMaxBw, nChannels · bwIntra · 0.5) · nRanks / nsteps`` (the same file: ``busBw * .5`` for Ring/LL,
``llMaxBws`` 282 GB/s on one Blackwell node, ``ratio = nRanks / nsteps``)."""

import statistics

import pytest
from sweep_files import check_json, file_rows

A4X_IMEX = "all_gather_perf-8xGB200-gcp-a4x-2nodes-imex-collapsed.txt"
A4X_DEFAULT = "all_gather_perf-8xGB200-gcp-a4x-gke-default-jobset-collapsed.txt"
OCI_2_HOSTS = "all_reduce_perf-8xGB300-oci-2nodes-1rack-16sizes-nccl2.28.7.txt"
OCI_1_HOST = "all_reduce_perf-4xGB300-oci-1node-16sizes-nccl2.28.7.txt"
#: file → (options its source gives, ranks, NCCL's steps: n − 1 for an all-gather, 2 (n − 1) for an
#: all-reduce, the Ring/LL sizes whose bytes take at most half NCCL's latency at its LL rate)
SWEEPS = {
    A4X_IMEX: (("--topology", "gb200-nvl72"), 8, 7, [1 << k for k in range(10, 21)]),
    A4X_DEFAULT: (("--topology", "gb200-nvl72"), 8, 7, [1 << k for k in range(10, 21)]),
    OCI_2_HOSTS: (("--nccl-version", "2.28.7"), 8, 14, [512 << 10, 1 << 20]),
    OCI_1_HOST: (("--nccl-version", "2.28.7"), 4, 6, [512 << 10]),
}
BASE_US, TABLE_HOP_US = 6.6, 0.6


def launch_channels(size, ranks):
    """NCCL's launch loop for Ring/LL by hand (enqueue.cc): one channel per 512 threads × 8 B × nRanks
    bytes, at least 1, at most the communicator's 32."""
    return min(32, max(1, size // (4096 * ranks)))


def ll_bytes_us(size, ranks, steps):
    """The bytes' time at NCCL's LL rate on the channels launched: the ring graph's 16 channels of 45 GB/s
    (bwIntra) spread over the communicator's 32, 22.5 GB/s a channel, × 0.5 for LL, capped at llMaxBw
    282 GB/s, × nRanks / nsteps."""
    bw = min(282.0, launch_channels(size, ranks) * 22.5 * 0.5) * ranks / steps
    return size / (bw * 1e3)


def hops_us(name):
    """(measured − base − bytes at NCCL's LL rate) / nsteps for each of the file's sizes of :data:`SWEEPS`."""
    _, ranks, steps, sizes = SWEEPS[name]
    measured = {size: t for size, t, _ in file_rows(name)}
    return [(measured[s] - BASE_US - ll_bytes_us(s, ranks, steps)) / steps for s in sizes]


def test_the_sizes_are_ring_ll_whose_bytes_take_at_most_half_the_latency():
    """Every size listed is one check prices on Ring/LL, on the channels the hand loop launches, and its
    bytes take at most half NCCL's latency; the next size up either is not Ring/LL or takes more."""
    for name, (args, ranks, steps, sizes) in SWEEPS.items():
        rows = {r["bytes"]: r for r in check_json(name, *args)["rows"]}
        latency = BASE_US + steps * TABLE_HOP_US
        for s in sizes:
            assert (rows[s]["algorithm"], rows[s]["protocol"]) == ("Ring", "LL")
            assert rows[s]["launch_channels"] == launch_channels(s, ranks)
            assert ll_bytes_us(s, ranks, steps) <= latency / 2
        assert ll_bytes_us(2 * sizes[-1], ranks, steps) > latency / 2


def test_nvl72_ll_hop_from_four_sweeps():
    """NVL72_LL_HOP_US against the files: each file's median hop 2.13 (A4X, IMEX pods), 1.73 (A4X,
    default JobSet), 1.27 (OCI, 2 hosts), 1.42 µs (OCI, one host); 1.64 their mean, each within 0.77-1.30x
    of it, where NCCL's table charges 0.6. The hosts a ring crosses add nothing: OCI's 2-host ring is the
    faster."""
    from zerocalc.nccl.tune_model import NVL72_LL_HOP_US

    medians = [statistics.median(hops_us(name)) for name in SWEEPS]
    assert medians == pytest.approx([2.133, 1.733, 1.269, 1.424], abs=0.001)
    assert NVL72_LL_HOP_US == pytest.approx(statistics.mean(medians), abs=0.005)
    assert all(0.77 <= m / NVL72_LL_HOP_US <= 1.31 for m in medians)
    assert all(1.2 <= h <= 2.3 for name in SWEEPS for h in hops_us(name))


def test_nvl72_ll_hop_by_hand():
    """1 KiB of the A4X all-gathers at 6.6 + 7 × 1.64 + 1024 B / 12.86 GB/s = 18.16 µs (measured 21.20 and
    19.60; NCCL's own 6.6 + 7 × 0.6 + 0.08 = 10.88); 512 KiB of OCI's one-host all-reduce at 6.6 + 6 × 1.64
    + 524288 B / 188 GB/s = 19.23 µs (measured 17.93). NCCL still chooses Ring/LL with its own figure, and
    check says what the rows are timed with."""
    for name, size, hops, own in ((A4X_IMEX, 1024, 7, 10.88), (A4X_DEFAULT, 1024, 7, 10.88),
                                  (OCI_1_HOST, 512 << 10, 6, None)):
        args, ranks, steps, _ = SWEEPS[name]
        sweep = check_json(name, *args)
        (row,) = [r for r in sweep["rows"] if r["bytes"] == size]
        hand = BASE_US + hops * 1.64 + ll_bytes_us(size, ranks, steps)
        assert row["predicted_s"] == pytest.approx(hand * 1e-6, abs=0.01e-6)
        assert (row["algorithm"], row["protocol"]) == ("Ring", "LL")
        assert any("Ring/LL calls timed with 1.64 µs a hop" in n for n in sweep["notes"])
        if own is not None:
            nccl = BASE_US + hops * TABLE_HOP_US + ll_bytes_us(size, ranks, steps)
            assert nccl == pytest.approx(own, abs=0.01)
    assert hand == pytest.approx(19.23, abs=0.01)


@pytest.mark.parametrize("topology, ranks, version", [
    ("gb200-nvl72", 8, "2.30.7"), ("gb300-nvl72", 8, "2.28.7"), ("gb300-nvl72", 4, "2.28.7")])
def test_nccl_chooses_with_its_own_hop(topology, ranks, version):
    """NCCL's cost table keeps the 0.6 µs hop (what it chooses with); the run is timed with 1.64."""
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import Algorithm, Collective, Protocol, release_for
    from zerocalc.topology.presets import get_topology

    t = tune(get_topology(topology), ranks, release_for(version)[0])
    coll = Collective.ALL_GATHER
    ring_ll = (coll, Algorithm.RING, Protocol.LL)
    steps = ranks - 1
    own = BASE_US + steps * TABLE_HOP_US + 1024 / (282.0 * ranks / steps * 1e3)  # all 32 channels
    assert t.time_s(*ring_ll, 1024) == pytest.approx(own * 1e-6, abs=0.01e-6)
    run = t.run_time_s(*ring_ll, 1024, share=1 / 32)  # launched on one channel
    hand = BASE_US + steps * 1.64 + ll_bytes_us(1024, ranks, steps)
    assert run == pytest.approx(hand * 1e-6, abs=0.01e-6)
    assert t.choose(coll, 1024)[:2] == ring_ll[1:]


@pytest.mark.parametrize("topology, ranks, version", [
    ("dgx-b200", 8, "2.30.7"), ("dgx-b300", 8, "2.28.9"), ("dgx-h100", 8, "2.30.7"), ("aws-p5", 8, "2.30.7")])
def test_hgx_blackwell_and_hopper_nodes_keep_nccls_hop(topology, ranks, version):
    """NVSwitch in the host (HGX B200 / B300, H100): Ring/LL runs with NCCL's own latency (no bundled
    one-node sweep of theirs runs Ring/LL; one node of 8 H100 measures NCCL's own, AMPERE_LL_HOP_US)."""
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import Algorithm, Collective, Protocol, release_for
    from zerocalc.nccl.tune_model import nvl72_ll_latency_us
    from zerocalc.topology.presets import get_topology

    t = tune(get_topology(topology), ranks, release_for(version)[0])
    for coll in (Collective.ALL_GATHER, Collective.ALL_REDUCE):
        assert nvl72_ll_latency_us(t.release, t.machine, coll, Protocol.LL) is None
        ring_ll = (coll, Algorithm.RING, Protocol.LL)
        assert t.run_time_s(*ring_ll, 1024) == pytest.approx(t.time_s(*ring_ll, 1024), rel=1e-9)


def test_a4x_max_cross_domain_run_keeps_the_network_hop():
    """The A4X Max page's run over two node pools is two NVLink domains (two nodes to NCCL): no NVL72 hop."""
    sweep = check_json("all_gather_perf-8xGB300-gcp-a4xmax-collapsed-nccl2.28.9.txt")
    assert not any("µs a hop" in n for n in sweep["notes"])
