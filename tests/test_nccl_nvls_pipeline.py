"""NVLS Tree's pipeline fill (zerocalc.nccl.nvls_pipeline): NCCL's chunking by hand, and the Hopper sweeps
that show the fill."""

import pytest
from sweep_files import DATA, check_json, file_rows, runner
from test_nccl_sweeps_public_logs import counted as tagged_rows

from zerocalc.cli import app
from zerocalc.nccl.model import tune
from zerocalc.nccl.nvls_pipeline import (
    nvls_chunk_bytes,
    nvls_fill_us,
    nvls_tree_chunk_bytes,
    nvls_tree_fill_loops,
    nvls_tree_fill_us,
)
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS

KIB, MIB = 1 << 10, 1 << 20
R230, R226, R220 = (release_for(v)[0] for v in ("2.30.7", "2.26.2", "2.20.3"))


@pytest.mark.parametrize("n_bytes, nodes, chunk", [
    # calcCollChunking (enqueue.cc v2.21.5-v2.30.7), 16 channels x 8 heads = 128 concurrent chunks, from
    # NCCL_NVLS_CHUNKSIZE 128 KiB: below 16 x 128 x 128 KiB = 256 MiB nothing to halve (128 KiB is not
    # above 128 KiB); below 4 x 128 x 128 KiB = 64 MiB -> 64 KiB; below 1 x 128 x 64 KiB = 8 MiB -> 32 KiB
    (1 << 30, 2, 128 * KIB), (64 * MIB, 2, 128 * KIB), (64 * MIB - 1, 2, 64 * KIB), (8 * MIB, 2, 64 * KIB),
    (8 * MIB - 1, 2, 32 * KIB), (1 * MIB, 2, 32 * KIB),
    # from 4 nodes NCCL_NVLSTREE_MAX_CHUNKSIZE's default caps it at 64 KiB first
    (1 << 30, 4, 64 * KIB), (16 * MIB, 8, 64 * KIB), (4 * MIB, 8, 32 * KIB),
])
def test_chunk_follows_calc_coll_chunking(n_bytes, nodes, chunk):
    assert nvls_tree_chunk_bytes(R230, n_bytes, 16, 8, nodes) == chunk


def test_chunk_before_2_21_starts_from_the_simple_step():
    # v2.20.3: chunkSize = stepSize = NCCL_BUFFSIZE (4 MiB) / NCCL_STEPS (8) = 512 KiB; below
    # 32 x 128 x 512 KiB = 2 GiB -> 256 KiB, below 16 x 128 x 256 KiB = 512 MiB -> 128 KiB
    assert nvls_tree_chunk_bytes(R220, 4 << 30, 16, 8, 2) == 512 * KIB
    assert nvls_tree_chunk_bytes(R220, 1 << 30, 16, 8, 2) == 256 * KIB
    assert nvls_tree_chunk_bytes(R220, 256 * MIB, 16, 8, 2) == 128 * KIB
    assert nvls_tree_chunk_bytes(R220, 1 << 30, 16, 8, 2, buffsize=8 * MIB) == 256 * KIB


def test_fill_loops_and_time_by_hand():
    # one loop a loop up to two (the first up, the last down); 8 nodes: 2 x 3 hops, 4 between, 1/16 each
    assert nvls_tree_fill_loops(1, 16, 8) == 0
    assert nvls_tree_fill_loops(2, 16, 0.25) == nvls_tree_fill_loops(2, 16, 1) == 1
    assert nvls_tree_fill_loops(2, 16, 2) == nvls_tree_fill_loops(2, 16, 64) == 2
    assert nvls_tree_fill_loops(8, 16, 4) == pytest.approx(2 + 4 / 16)
    # 16 MiB on 2 nodes, 16 x 8 heads of 64 KiB: two loops of 8 MiB; two more at 250 GB/s = 67.1 us
    assert nvls_tree_fill_us(R230, 16 * MIB, 250.0, 16, 8, 2) == pytest.approx(2 * 8 * MIB / 250e3)
    # 8 MiB: one loop of 8 MiB, one more
    assert nvls_tree_fill_us(R230, 8 * MIB, 250.0, 16, 8, 2) == pytest.approx(8 * MIB / 250e3)
    # 1 MiB: the whole call is less than a loop (128 x 32 KiB = 4 MiB), once more
    assert nvls_tree_fill_us(R230, 1 * MIB, 250.0, 16, 8, 2) == pytest.approx(1 * MIB / 250e3)
    assert nvls_tree_fill_us(R230, 16 * MIB, 250.0, 16, 8, 1) == 0.0


def test_hopper_run_time_adds_the_fill_to_nccls_time():
    # 2 DGX H100, NCCL 2.30.7: NVLS Tree latency 25 + 2 x 20.9 = 66.8 us, bandwidth
    # min(40 x 0.85 x 7/8 x 2, 2 x 48, 57.7) = 57.7 GB/s per channel x 8 channels x 16/30 (tuning.cc)
    t = tune(PRESETS["dgx-h100"], 16, R230)
    bw = 57.7 * 8 * 16 / 30
    e = t.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)]
    assert e.latency_us == pytest.approx(66.8) and e.bandwidth_GBps == pytest.approx(bw)
    n = 32 * MIB  # chunk 64 KiB, loop 16 x 8 x 64 KiB = 8 MiB, four of them: two more
    hand = 66.8 + n / (1000 * bw) + 2 * 8 * MIB / (1000 * bw)
    assert t.run_time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) * 1e6 == pytest.approx(hand)
    # NCCL chooses with its own time, which has no fill
    assert t.time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) * 1e6 == pytest.approx(66.8 + n / (1000 * bw))
    # Blackwell pays it too (2 DGX B200, NCCL 2.26.2), timed with 2.30.7's figures on the NVLS graph at the
    # bwIntra each B200's NVSwitch link holds, (8 + 1) x 80 <= 18 x 40.1 (search.cc; NCCL's own search stops
    # at the NIC's 48): min(80 x 0.74 x 7/8 x 2, 2 x 48, 96) = 96 GB/s per channel x 8 x 16/30, latency
    # 66.8 us; 2.26's chunking: 32 nvlsChannels (sm100) x 8 heads x 64 KiB = 16 MiB loops, two of them more;
    # treeCorrectionFactor (in 2.30's x86 estimate from 2.29.2) taken back out
    b = tune(PRESETS["dgx-b200"], 16, R226)
    bw_b = 96 * 8 * 16 / 30
    hand_b = 66.8 + n / (1000 * bw_b) + 2 * 16 * MIB / (1000 * bw_b)
    assert b.run_time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) * 1e6 == pytest.approx(hand_b)
    # NCCL 2.26 chooses with its own: min(bwIntra 48, bwInter 48) x 8 channels x 5/6, latency 25 + 2 x 14
    assert b.time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) * 1e6 == pytest.approx(53 + n / (1000 * 320))


def _rows(name, *args):
    return {r["bytes"]: r for r in check_json(name, *args)["rows"]}


def test_two_dgx_h100_nodes_counted_from_the_file():
    # all_reduce_perf-16xH100-2nodes-infiniband.txt (NCCL 2.30.7), out-of-place time column as printed:
    # 8 MiB 154.5 us, 32 MiB 274.2 us, 128 MiB 759.6 us; NVLS Tree at each, priced with the fill
    name = "all_reduce_perf-16xH100-2nodes-infiniband.txt"
    measured = {8 * MIB: 154.5, 32 * MIB: 274.2, 128 * MIB: 759.6}
    counted = {size: oop for size, oop, _ in file_rows(name)}
    for n, us in measured.items():
        assert counted[n] == pytest.approx(us, abs=0.1)
    rows = _rows(name, "--topology", "dgx-h100", "--n", "16")
    bw = 57.7 * 8 * 16 / 30
    # 8 MiB: one loop of 8 MiB (chunk 64 KiB), one more; 32 MiB: four, two more; 128 MiB: eight of 16 MiB
    for n, more in ((8 * MIB, 8 * MIB), (32 * MIB, 16 * MIB), (128 * MIB, 32 * MIB)):
        r = rows[n]
        assert r["algorithm"] == "NVLSTree"
        hand = 66.8 + n / (1000 * bw) + more / (1000 * bw)
        assert r["predicted_s"] * 1e6 == pytest.approx(hand, rel=1e-6)
        assert 0.85 <= r["ratio"] <= 1.1  # 0.87, 0.99, 0.99 (0.71, 0.95, 0.89 with treeCorrectionFactor)
    assert all(0.85 <= r["ratio"] <= 1.1 for r in rows.values() if r["algorithm"] == "NVLSTree")


@pytest.mark.parametrize("name, lo, hi", [
    ("all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", 0.95, 1.15),  # 1.00-1.10 (0.82-1.06 before)
    ("all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt", 0.65, 1.15),  # 0.69-1.13 (0.66-0.97)
    ("all_reduce_perf-64xH100-8nodes-ib.txt", 0.8, 0.95),  # 0.82-0.91 (0.74-0.96)
])
def test_other_hopper_clusters_stay_in_band(name, lo, hi):
    nvls = [r for r in _rows(name).values() if r["algorithm"] == "NVLSTree" and not r["unsteady"]]
    assert nvls and all(lo <= r["ratio"] <= hi for r in nvls), name


@pytest.mark.parametrize("n_bytes, chunk", [
    # one-node NVLS (calcCollChunking, enqueue.cc v2.19.3-v2.30.7), 16 channels x 8 heads = 128 concurrent
    # chunks from 128 KiB: below 64 x 128 x 128 KiB = 1 GiB -> 64 KiB, below 8 x 128 x 64 KiB = 64 MiB
    # -> 32 KiB, below 2 x 128 x 32 KiB = 8 MiB -> 16 KiB
    (1 << 30, 128 * KIB), ((1 << 30) - 1, 64 * KIB), (64 * MIB, 64 * KIB), (64 * MIB - 1, 32 * KIB),
    (8 * MIB, 32 * KIB), (8 * MIB - 1, 16 * KIB), (2 * MIB, 16 * KIB),
])
def test_one_node_nvls_chunk_follows_calc_coll_chunking(n_bytes, chunk):
    assert nvls_chunk_bytes(n_bytes, 16, 8) == chunk


def test_one_node_nvls_fill_by_hand():
    # 2 MiB: one loop of 128 x 16 KiB = 2 MiB, one more; 16 MiB: four loops of 4 MiB, two more
    assert nvls_fill_us(2 * MIB, 272.0, 16, 8) == pytest.approx(2 * MIB / 272e3)
    assert nvls_fill_us(16 * MIB, 272.0, 16, 8) == pytest.approx(2 * 4 * MIB / 272e3)
    # 1 MiB: half a loop, the call once more
    assert nvls_fill_us(1 * MIB, 272.0, 16, 8) == pytest.approx(1 * MIB / 272e3)


def test_one_p5_node_counted_from_the_file():
    # all_reduce_perf-8xH100-p5-aws-batch-tagged.txt (8 H100 of an AWS p5, a process a GPU, NCCL 2.30.7):
    # NVLS at 2 MiB-16 GiB; NCCL's time (25 us + n / 272 GB/s) is 0.66-0.87x of the measured 2-128 MiB,
    # the fill brings them to 0.90-1.03x
    name = "all_reduce_perf-8xH100-p5-aws-batch-tagged.txt"
    # the rows carry mpirun's "[1,0]<stdout>:" tag: counted with a plain split past it
    counted = {size: oop for size, oop, _ in tagged_rows(name)}
    assert counted[8 * MIB] == pytest.approx(84.3, abs=0.1)
    rows = {r["bytes"]: r for r in check_json(name, "--topology", "aws-p5", counted=tagged_rows)["rows"]}
    bw = 8 * min(40 * 0.85 * 7 / 8 * 2, 60) * 8 / 14
    r = rows[8 * MIB]  # two loops of 128 x 32 KiB = 4 MiB: two more
    assert r["algorithm"] == "NVLS"
    assert r["predicted_s"] * 1e6 == pytest.approx(25 + 8 * MIB / (1000 * bw) + 2 * 4 * MIB / (1000 * bw))
    assert r["ratio"] == pytest.approx(r["predicted_s"] / (counted[8 * MIB] * 1e-6))
    nvls = [r for r in rows.values() if r["algorithm"] == "NVLS"]
    assert all(0.85 <= r["ratio"] <= 1.1 for r in nvls)  # 0.66-1.02 with NCCL's time alone


def test_gb300_rack_counted_from_the_file():
    # all_reduce_perf-64xGB300-oci-16nodes-1rack-16sizes-nccl2.28.7.txt (64 GB300 of one NVL72 rack, one node
    # to NCCL, v2.28.7): NVLS at every size, 24 nvlsChannels (NVLS_NCHANNELS_SM100_NVL, nvls.cc) x 32 heads
    # (NCCL_MAX_NVLS_ARITY); calcCollChunking's chunk 16 KiB below 2 x 768 x 32 KiB = 48 MiB: 12 MiB loops
    name = "all_reduce_perf-64xGB300-oci-16nodes-1rack-16sizes-nccl2.28.7.txt"
    rows = {r["bytes"]: r for r in check_json(name)["rows"]}
    assert {r["algorithm"] for r in rows.values()} == {"NVLS"}
    # NCCL's rate from the two largest calls, which both carry two loops of 768 x 128 KiB
    hi, top = rows[8 << 30], rows[16 << 30]
    bw = (top["bytes"] - hi["bytes"]) / (top["predicted_s"] - hi["predicted_s"])
    loop = 768 * 16 * KIB
    for size, loops in ((4 * MIB, 1), (8 * MIB, 1), (32 * MIB, 2)):  # a part of a loop: the call once more
        fill = loops * min(size, loop) / bw
        assert rows[size]["predicted_s"] == pytest.approx(25e-6 + size / bw + fill, rel=1e-6)
    # measured 95-219 us at 8-32 MiB: NCCL's time alone 0.41-0.45x, with the fill 0.64-0.69x
    counted = {size: oop for size, oop, _ in file_rows(name)}
    assert counted[32 * MIB] == pytest.approx(218.8)
    assert all(0.6 <= rows[s]["ratio"] <= 0.7 for s in (8 * MIB, 16 * MIB, 32 * MIB))


@pytest.mark.parametrize("name, args, says", [
    # two DGX H100 nodes: NVLS Tree rows (the file's 4 MiB-17 GiB), Hopper: the note names NVLS Tree
    ("all_reduce_perf-16xH100-2nodes-infiniband.txt", ("--topology", "dgx-h100", "--n", "16"),
     "NVLS Tree calls"),
    # one p5 node, a process a GPU: NVLS rows from 2 MiB: the note names NVLS
    ("all_reduce_perf-8xH100-p5-aws-batch-tagged.txt", ("--topology", "aws-p5"), "NVLS calls"),
    # two DGX B200 nodes: NVLS Tree rows from 1 MiB, Blackwell
    ("all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt", ("--topology", "dgx-b200", "--n", "16"),
     "NVLS Tree calls"),
    # 64 GB300 of one NVL72 rack: NVLS rows, Blackwell
    ("all_reduce_perf-64xGB300-oci-16nodes-1rack-16sizes-nccl2.28.7.txt", (), "NVLS calls"),
    # eight A100 (no NVLS at all): no note
    ("all_reduce_perf-8xA100-SXM4-40GB-oci.txt", (), None),
])
def test_check_says_where_the_fill_is_priced(name, args, says):
    res = runner.invoke(app, ["check", str(DATA / name), *args])
    assert res.exit_code == 0, res.output
    notes = [line for line in res.output.splitlines() if "pipeline's fill" in line]
    if says is None:
        assert notes == []
    else:
        assert len(notes) == 1
        where = "on Blackwell" if "B200" in name or "GB300" in name else "on Hopper"
        assert notes[0].startswith(f"note: {says} timed with their pipeline's fill {where}")
        assert "NCCL chooses without it" in notes[0]


def test_nvls_tree_through_host_memory_runs_at_the_relays_share():
    """Without GPUDirect RDMA a network path runs at HOST_RELAY_SHARE (2/3, NVIDIA/nccl issue 412; graph.py
    assumption 7), also for NVLS Tree calls timed with a later release's figures: 2 DGX B200 at 1 GiB, 2.26.2
    and 2.30.7 alike, 66.8 us + (1 GiB + two 32 MiB loops of 32 x 8 x 128 KiB) at 96 x 8 x 16/30 x 2/3 GB/s;
    2 DGX H100 under 2.26.2 (2.30's figures, 57.7 x 8 x 16/30; two 16 MiB loops of 16 x 8 x 128 KiB)."""
    from dataclasses import replace
    n = 1 << 30
    for preset, rel, bw, loop in (("dgx-b200", R226, 96.0, 32 * MIB), ("dgx-b200", R230, 96.0, 32 * MIB),
                                  ("dgx-h100", R226, 57.7, 16 * MIB)):
        t = tune(replace(PRESETS[preset], gpudirect_rdma=False), 16, rel)
        rate = bw * 8 * 16 / 30 * 2 / 3 * 1e9
        hand = 66.8e-6 + (n + 2 * loop) / rate
        assert t.run_time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) == pytest.approx(hand, rel=1e-9), preset
