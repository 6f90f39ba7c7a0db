"""Public nccl-tests sweeps of Ampere boxes, checked with the preset their device lines name: Microsoft
SuperBench's six tests on one node of 8 A100-SXM4-40GB (pre-2022 layout, one process driving the 8 GPUs)
and an all_reduce over two AWS p4d.24xlarge (NCCL 2.9.9, EFA); 8 V100 SXM2 of a DGX-1 cube-mesh; 2 and 4
GeForce RTX 4090 on PCIe. Expected figures are counted from the files (tests/data/traces/README.md names
their sources)."""

import pytest
from sweep_files import DATA, check_json


def counted_rows(name):
    """(size, out-of-place µs, in-place µs) of each row with data (size > 0), by a plain split of the file:
    a row starts with two integers (size, count) and ends with the out-of-place then in-place
    ``time algbw busbw error`` cells, whatever type/redop/root cells sit between (no zerocalc code)."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split("<stdout>:", 1)[-1].split()  # past an OpenMPI --tag-output tag
        if len(f) >= 11 and f[0].isdigit() and f[1].isdigit() and int(f[0]) > 0 and int(f[1]) > 0:
            rows.append((int(f[0]), float(f[-8]), float(f[-4])))
    return rows


def device_names(name):
    """The CUDA device names the file's ``Rank`` lines print (their last cell)."""
    lines = (line.split("<stdout>:", 1)[-1] for line in (DATA / name).read_text().splitlines())
    return {line.split("]")[-1].strip() for line in lines
            if line.startswith("#") and " Rank " in line and "device" in line}


def check(name, *args):
    return check_json(name, *args, counted=counted_rows)


def at_median_size(sweep):
    rows = sorted(sweep["rows"], key=lambda r: r["bytes"])
    return rows[(len(rows) - 1) // 2]


SUPERBENCH = "{}_perf-8xA100-SXM4-40GB-g8-superbench.txt"
# op: (rows with data, first size, its out-of-place µs, last out-of-place µs, sizes outside 0.5-2x)
# op: (rows with data, first size, its out-of-place µs, last out-of-place µs, median size, sizes outside
# 0.5-2x)
SUPERBENCH_FIGURES = {
    "all_reduce": (32, 4, 34.73, 63896.0, 128 << 10, set()),
    "all_gather": (29, 32, 35.03, 33646.0, 512 << 10, set()),
    "reduce_scatter": (29, 32, 35.06, 32464.0, 512 << 10, set()),
    "broadcast": (32, 4, 33.96, 36896.0, 128 << 10, set()),
    "reduce": (32, 4, 35.40, 37613.0, 128 << 10, set()),
}


@pytest.mark.parametrize("op", sorted(SUPERBENCH_FIGURES))
def test_superbench_a100_sweeps_priced_on_the_preset_their_devices_name(op):
    """microsoft/superbenchmark's nccl-tests logs (8 x A100-SXM4-40GB, one process driving the 8 GPUs,
    1 B-8 GiB; no NCCL version printed, but the table is in nccl-tests' layout before v2.13 (an ``error``
    column), so NCCL 2.12.12 prices them): dgx-a100 from the device lines, every size from 256 MiB up within
    0.8-1.25 of NCCL's model, every size within 0.5-2x and the median size within 0.8-1.25x. Under NCCL
    2.30.7 with a floor that ignores the channels launched, the all_gather's and reduce_scatter's median
    sizes were 0.60 and 0.59 and the broadcast's 1 MiB and the reduce's 512 KiB and 1 MiB 0.46-0.48x."""
    name = SUPERBENCH.format(op)
    n_rows, first, first_us, last_us, median, outside = SUPERBENCH_FIGURES[op]
    rows = counted_rows(name)
    assert (len(rows), rows[0][:2], rows[-1][0], rows[-1][1]) == (n_rows, (first, first_us), 8 << 30, last_us)
    assert device_names(name) == {"A100-SXM4-40GB"}
    sweep = check(name)
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, 8, "dgx-a100")
    assert sweep["gpus_per_thread"] == 8
    assert sweep["nccl_version"] == "2.12.12" and "nccl-tests layout" in sweep["nccl_version_how"]
    notes = " ".join(sweep["notes"])
    assert "states no NCCL version; its table is in nccl-tests' layout before v2.13" in notes
    assert {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0} == outside
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 256 << 20)
    row = at_median_size(sweep)
    assert row["bytes"] == median and 0.8 <= row["ratio"] <= 1.25


def loop_channels(size, most):
    """NCCL's launch loop for Ring/LL on 8 ranks by hand (enqueue.cc): channels drop while the size is under
    channels x 512 threads x 8 x 8 (Ring/LL's threshold 8 x nRanks), i.e. one channel per 32 KiB, at least 1,
    at most the communicator's ``most``."""
    return max(1, min(most, size // (512 * 64)))


def test_host_time_per_channel_from_seven_g8_sweeps():
    """HOST_US_PER_CHANNEL against the files it comes from: the out-of-place times of the rows of 8 KiB and
    up that NCCL launches (Ring/LL) on fewer than all channels, against the channels less one, one common
    slope and one intercept per sweep (least squares), over the five SuperBench collectives (24 channels),
    the DGX-1 V100 all-reduce (12) and the 2.19.3 A100 all-reduce (24); each sweep alone 0.165-0.268 us per
    GPU and channel."""
    import numpy as np

    from zerocalc.validate.sweep import HOST_US_PER_CHANNEL

    sweeps = [(SUPERBENCH.format(op), 24) for op in SUPERBENCH_FIGURES]
    sweeps += [(V100, 12), ("all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt", 24)]
    a, y = [], []
    for i, (name, most) in enumerate(sweeps):
        for size, t, _ in counted_rows(name):
            if size >= 8 << 10 and loop_channels(size, most) < most:
                a.append([loop_channels(size, most) - 1] + [float(j == i) for j in range(len(sweeps))])
                y.append(t)
    assert len(y) == 6 * 7 + 6  # 8 KiB-512 KiB on the A100s, 8-256 KiB on the V100
    slope = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)[0][0]
    assert slope == pytest.approx(1.646, abs=0.001)  # µs per channel for 8 GPUs
    assert HOST_US_PER_CHANNEL == pytest.approx(slope / 8, abs=0.0005)


def test_superbench_floor_grows_with_the_channels_launched_by_hand():
    """The all_gather's 256 KiB row: NCCL launches Ring/LL on 8 of 24 channels (256 KiB / 32 KiB), so the
    thread's floor is 3.3 + 8 x 3.96 + 8 x 7 x 0.206 = 46.52 us; the file measures 46.45 us (1.00x; 0.75x
    under the one-channel floor). --nccl-version 2.30.7 prices it as NCCL 2.30, whose call is one work
    struct whatever its channels: the floor stays 3.3 + 8 x 3.96 = 34.98 us."""
    sweep = check(SUPERBENCH.format("all_gather"))
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 256 << 10]
    assert (row["algorithm"], row["protocol"], row["launch_channels"]) == ("Ring", "LL", 8)
    assert row["host_floor_s"] == pytest.approx((3.3 + 8 * 3.96 + 8 * 7 * 0.206) * 1e-6)
    assert row["host_bound"] and row["ratio"] == pytest.approx(46.516 / 46.45, rel=1e-3)
    assert any("8 × 0.206 µs per channel beyond the first" in n for n in sweep["notes"])
    new = check(SUPERBENCH.format("all_gather"), "--nccl-version", "2.30.7")
    assert new["nccl_version"] == "2.30.7" and new["nccl_version_how"] == "given (--nccl-version)"
    (row,) = [r for r in new["rows"] if r["bytes"] == 256 << 10]
    assert row["host_floor_s"] == pytest.approx((3.3 + 8 * 3.96) * 1e-6)
    assert not any("per channel beyond the first" in n for n in new["notes"])


def test_superbench_a100_large_all_gather_by_hand():
    # 8 GiB all_gather on 8 A100 at NCCL 2.12 (dgx-a100: 12 NVLinks of 22 GB/s each, SM80_NVLINK_WIDTH in
    # v2.12.12's topo.h, a bus bandwidth capped at 235 GB/s on sm80 in its tuning.cc): Ring/Simple at
    # 235 GB/s of bus bandwidth; an all-gather's bus bandwidth is the algorithm bandwidth × (n-1)/n
    # (nccl-tests doc/PERFORMANCE.md), so 8 GiB × 7/8 / 235 GB/s = 32.0 ms plus the 7 × 2.76 µs launch
    # stagger; the file measures 33,646 µs
    sweep = check(SUPERBENCH.format("all_gather"))
    big = sweep["rows"][-1]
    assert (big["bytes"], big["algorithm"], big["protocol"]) == (8 << 30, "Ring", "Simple")
    hand = (8 << 30) * 7 / 8 / 235e9 + 7 * 2.76e-6
    assert big["predicted_s"] == pytest.approx(hand, rel=0.005)
    assert big["ratio"] == pytest.approx(hand / 33646e-6, rel=0.005)


ALLTOALL = SUPERBENCH.format("alltoall")


def test_superbench_a100_alltoall_blank_redop_cells_read_under_its_header():
    """nccl-tests up to v2.11 print alltoall's redop cell blank under a redop header (common.cu prints
    ``%6s`` of ``""``): each row is read, its cells in their columns. 8 GiB is within 0.8-1.25 of the p2p
    model; up to 2 MiB the run pays a fixed ~87 µs, the one thread issuing 8 x 2 x 8 sends and receives
    per call: priced at the thread's floor of 3.3 + 8 x 3.96 µs plus 0.43 µs for each of the 120 tasks
    beyond a collective's one per GPU, 34.98 + 51.6 = 86.58 µs by hand, so every size is within 0.5-2x."""
    rows = counted_rows(ALLTOALL)
    assert (len(rows), rows[0], rows[-1][0]) == (29, (32, 89.00, 85.13), 8 << 30)
    sweep = check(ALLTOALL)
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == ("all_to_all", 8, "dgx-a100")
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    small = [r for r in sweep["rows"] if r["bytes"] <= 2 << 20]
    assert len(small) == 17 and all(r["host_bound"] for r in small)
    assert all(r["predicted_s"] == pytest.approx(86.58e-6, rel=1e-9) for r in small)
    assert 0.8 <= at_median_size(sweep)["ratio"] <= 1.25
    assert 0.8 <= sweep["rows"][-1]["ratio"] <= 1.25


def test_host_time_per_p2p_task_from_two_hosts_alltoall_floors():
    """P2P_HOST_US_PER_TASK against the files it comes from: each host's -g alltoall floor (median
    out-of-place time from 1 B to 4 KiB) over its own collectives' floor, against the tasks beyond one per
    GPU (nccl-tests alltoall.cu: a send and a receive to every rank, itself included, per GPU), least
    squares through the origin."""
    from statistics import median

    from zerocalc.validate.sweep import P2P_HOST_US_PER_TASK

    def floor(names):
        return median(t for name in names for s, t, _ in counted_rows(name) if s <= 4096)

    a100 = [SUPERBENCH.format(op) for op in SUPERBENCH_FIGURES]
    rtx = [f"{op}_perf-2xRTX2080Ti-pcie3-shm.txt"
           for op in ("all_gather", "all_reduce", "broadcast", "reduce")]
    excess_a100 = floor([ALLTOALL]) - floor(a100)  # 87.015 - 34.94
    excess_rtx = floor(["alltoall_perf-2xRTX2080Ti-pcie3-shm.txt"]) - floor(rtx)  # 13.0 - 11.33
    assert (excess_a100, excess_rtx) == pytest.approx((52.075, 1.67), abs=1e-6)
    extra = (8 * 2 * 8 - 8, 2 * 2 * 2 - 2)
    slope = (excess_a100 * extra[0] + excess_rtx * extra[1]) / (extra[0] ** 2 + extra[1] ** 2)
    assert P2P_HOST_US_PER_TASK == pytest.approx(slope, abs=0.005)  # 0.434
    # each host alone: 0.434 and 0.278 µs a task
    assert excess_a100 / extra[0] == pytest.approx(0.434, abs=0.001)
    assert excess_rtx / extra[1] == pytest.approx(0.278, abs=0.001)


def test_p2p_tasks_per_call_as_nccl_tests_issues_them():
    from zerocalc.nccl.p2p import P2pOp
    from zerocalc.validate.sweep import p2p_host_floor_s, p2p_tasks

    # alltoall.cu: per GPU a send and a receive to each of the n ranks; sendrecv.cu: one of each;
    # gather.cu / scatter.cu: one per GPU, and n more on the root's; hypercube.cu: 2 per dimension
    assert p2p_tasks(P2pOp.ALL_TO_ALL, 8, 8) == 128
    assert p2p_tasks(P2pOp.SENDRECV, 8, 8) == 16
    assert p2p_tasks(P2pOp.GATHER, 8, 8) == p2p_tasks(P2pOp.SCATTER, 8, 8) == 16
    assert p2p_tasks(P2pOp.HYPERCUBE, 8, 8) == 8 * 2 * 3
    assert p2p_tasks(P2pOp.ALL_TO_ALL, 16, 4) == 4 * 32
    # the floor: 3.3 µs a call, G x 3.96 µs and 0.43 µs for each task beyond one per GPU; none for one GPU
    # a thread, under -a (aggregated calls) or -G (CUDA graphs)
    assert p2p_host_floor_s(P2pOp.ALL_TO_ALL, 2, 2) == pytest.approx((3.3 + 2 * 3.96 + 6 * 0.43) * 1e-6)
    assert p2p_host_floor_s(P2pOp.SENDRECV, 8, 8) == pytest.approx((3.3 + 8 * 3.96 + 8 * 0.43) * 1e-6)
    assert p2p_host_floor_s(P2pOp.ALL_TO_ALL, 8, 1) is None
    assert p2p_host_floor_s(P2pOp.ALL_TO_ALL, 8, 8, agg_iters=4) is None
    assert p2p_host_floor_s(P2pOp.ALL_TO_ALL, 8, 8, graph=1) is None


def test_a_blank_redop_is_restored_only_where_the_row_has_a_number_in_its_place():
    from zerocalc.traces.nccl_tests_rows import parse_header, parse_row

    header = ("#       size         count    type   redop     time   algbw   busbw  error     time   algbw"
              "   busbw  error")
    layout = parse_header(header, 14)
    row = parse_row("          32             1   float            89.00    0.00    0.00    N/A    85.13"
                    "    0.00    0.00    N/A", layout=layout)
    assert (row["size_bytes"], row["redop"], row["oop_time_us"], row["ip_time_us"]) == (32, None, 89.0, 85.13)
    # a row short of a time cell is still refused, not read with shifted columns
    with pytest.raises(ValueError, match="cells"):
        parse_row("          32             1   float            89.00    0.00    0.00    N/A    0.00"
                  "    0.00    N/A", layout=layout)
    # a named cell under redop is the operation, as before
    assert parse_row("  64  16  float  sum  35.2  0.00  0.00  N/A  34.0  0.00  0.00  N/A",
                     layout=layout)["redop"] == "sum"


P4D = "all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.9.9.log"


def test_p4d_two_node_all_reduce_at_the_nccl_and_algorithm_it_ran_with():
    """Two AWS p4d.24xlarge (16 A100-SXM4-40GB, 4 x 100 Gb/s EFA each), NCCL 2.9.9 (its own line), every
    line tagged by OpenMPI: aws-p4d from the device lines and the plugin's lines. The repository's job for
    this test sets NCCL_ALGO=RING (examples/nccl-efa-tests.yaml, Feb-Jun 2021), and the log agrees: at
    4 GiB it runs at 0.92 of NCCL's Ring price and 0.53 of its Tree's (its default choice: 2-node trees
    priced at the intra-node speed, search.cc pass 2). With Ring: median size 0.84x, 256 MiB up within
    0.8-1.25x, every size within 0.5-2x, 2-16 MiB (Ring/LL128) the nearest the floor (0.54-0.60x; 0.46-0.49x
    before EFA's rendezvous past 8 KiB, zerocalc.nccl.ofi_efa)."""
    rows = counted_rows(P4D)
    assert (len(rows), rows[0], rows[-1]) == (30, (8, 179.1, 176.3), (4 << 30, 183834.0, 184216.0))
    assert device_names(P4D) == {"A100-SXM4-40GB"}
    default = check(P4D)
    assert (default["group_size"], default["topology"], default["nccl_version"]) == (16, "aws-p4d", "2.9.9")
    assert "AWS EFA" in default["topology_how"]
    big = default["rows"][-1]
    assert (big["algorithm"], big["protocol"]) == ("Tree", "Simple") and 0.5 <= big["ratio"] <= 0.55
    sweep = check(P4D, "--nccl-algo", "Ring")
    assert {r["algorithm"] for r in sweep["rows"]} == {"Ring"}
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert all(r["ratio"] < 0.8 for r in sweep["rows"] if 2 << 20 <= r["bytes"] <= 16 << 20)
    assert at_median_size(sweep)["bytes"] == 128 << 10 and 0.8 <= at_median_size(sweep)["ratio"] <= 1.25
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 256 << 20)
    # hand check, 4 GiB: Ring/Simple over NCCL's ring graph of 4 channels x 12 GB/s (one per 100 Gb/s EFA
    # NIC; nNodes <= 2 prices the graph's intra speed, which a ring graph keeps equal to its inter one),
    # algorithm bandwidth = busBw x nRanks / (2 (nRanks - 1)) = 48 x 16 / 30 GB/s (tuning.cc v2.9.9)
    hand = (4 << 30) / (4 * 12e9 * 16 / 30)
    assert sweep["rows"][-1]["predicted_s"] == pytest.approx(hand, rel=0.01)


V100 = "all_reduce_perf-8xV100-SXM2-16GB-dgx1-g8.txt"


def test_dgx1_v100_sweep_priced_on_the_cube_mesh_preset_its_devices_name():
    """konnase/konnase.github.io's 2019 note: 8 Tesla V100-SXM2-16GB on one host, their nvidia-smi topo -m
    the DGX-1 hybrid cube-mesh, one process driving the 8 GPUs, 8 B-128 MiB; no NCCL version printed, the
    table in nccl-tests' layout before v2.13 (NCCL 2.12.12 prices it). dgx-1-v100 from the device lines:
    every size within 0.5-2x, 8 MiB up within 0.8-1.25x; up to 128 KiB the run pays ~48.5 µs a call, above
    the -g 8 launch floor of A100-era runs (0.62x: the median size; 0.70x under NCCL 2.30's latencies)."""
    rows = counted_rows(V100)
    assert (len(rows), rows[0], rows[-1]) == (25, (8, 48.46, 48.17), (128 << 20, 1818.8, 1821.9))
    assert device_names(V100) == {"Tesla V100-SXM2-16GB"}
    sweep = check(V100)
    assert (sweep["topology"], sweep["group_size"], sweep["gpus_per_thread"]) == ("dgx-1-v100", 8, 8)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 8 << 20)
    assert 0.6 <= at_median_size(sweep)["ratio"] < 0.8
    # hand check of the bandwidth: NCCL 2.12's ring over 6 channels of 22 GB/s (SM70_NVLINK_WIDTH, v2.12.12
    # topo.h; the cube-mesh's rings, zerocalc.topology.presets), algorithm bandwidth = 132 GB/s x 8 / 14
    # (tuning.cc, ring all-reduce), so 64 MiB more take 64 MiB / 75.4 GB/s = 0.890 ms more
    by = {r["bytes"]: r for r in sweep["rows"]}
    assert (by[128 << 20]["algorithm"], by[128 << 20]["protocol"]) == ("Ring", "Simple")
    slope = by[128 << 20]["predicted_s"] - by[64 << 20]["predicted_s"]
    assert slope == pytest.approx((64 << 20) / (132e9 * 8 / 14), rel=0.01)


def test_a_blank_redop_row_broken_by_nccls_lines_is_put_back_together():
    # the SuperBench alltoall with its 32 B row broken after `size count type` by an NCCL INFO line (as a
    # -g run's NCCL output lands inside rows): read whole, its times in their columns
    import io

    from zerocalc.traces.nccl_tests import parse

    text = (DATA / ALLTOALL).read_text()
    row = ("          32             1   float            89.00    0.00    0.00    N/A    85.13    0.00"
           "    0.00    N/A\n")
    assert row in text
    broken = ("          32             1   float  host:1:2 [0] NCCL INFO Launch mode Parallel\n"
              "            89.00    0.00    0.00    N/A    85.13    0.00    0.00    N/A\n")
    res = parse(io.StringIO(text.replace(row, broken)), "f")
    assert not res.skipped
    (r,) = [r for r in res.rows if r["size_bytes"] == 32]
    assert r["redop"] is None
    assert (r["duration_s"], r["inplace_duration_s"]) == pytest.approx((89.0e-6, 85.13e-6))
    assert r["source_line"] == text.splitlines().index(row.rstrip("\n")) + 1


# file: (ranks, first row, last row, sizes within 0.5-2x: all up to this size, or every size when None)
RTX4090 = {
    "all_reduce_perf-4xRTX4090-g4-docker-kalavai.txt":
        (4, (8, 18.90, 19.54), (2 << 30, 1246110.0, 1246603.0), None),
    "all_reduce_perf-2xRTX4090-g2-docker-kalavai.txt":
        (2, (8, 8.97, 8.83), (2 << 30, 957746.0, 962086.0), 16 << 10),
    "all_reduce_perf-2xRTX4090-g2-k8s-kalavai.txt":
        (2, (8, 10.98, 10.36), (2 << 30, 557166.0, 554637.0), 1 << 20),
}


@pytest.mark.parametrize("name", sorted(RTX4090))
def test_rtx_4090_sweeps_priced_on_the_pcie_gen4_box_without_peer_to_peer(name):
    """kalavai-net/kalavai-client's GeForce RTX 4090 runs (one process driving 2 or 4 GPUs, 8 B-2 GiB, NGC
    PyTorch 24.01 container): pcie-gen4 with the card's name and no PCIe peer-to-peer (GeForce: NCCL's SHM
    through host memory). The 4-GPU run is within 0.5-2x at every size (0.56x at 2 GiB, median size
    0.74x); the 2-GPU runs move 2.2 GB/s (GPUs 0x1a, 0x1b) and 3.9 GB/s (0x1a, 0xb2) where the model, which
    takes a run's GPUs under one switch, prices about 8: within the band only up to 16 KiB and 1 MiB."""
    ranks, first, last, up_to = RTX4090[name]
    rows = counted_rows(name)
    assert (len(rows), rows[0], rows[-1]) == (29, first, last)
    assert device_names(name) == {"NVIDIA GeForce RTX 4090"}
    sweep = check(name)
    assert (sweep["topology"], sweep["group_size"], sweep["gpus_per_thread"]) == ("pcie-gen4", ranks, ranks)
    assert "no PCIe peer-to-peer between GeForce cards" in sweep["topology_how"]
    inside = {r["bytes"] for r in sweep["rows"] if 0.5 <= r["ratio"] <= 2.0}
    assert inside == {s for s, _, _ in rows if up_to is None or s <= up_to}


def test_host_time_per_channel_only_before_nccl_2_22_in_the_default_launch_mode():
    """host_channels_s by hand: G x (channels - 1) x 0.206 us before NCCL 2.22 (era 21 and below), nothing
    from 2.22 (the call's work one struct in the kernel's arguments), for one GPU a thread, under -a
    (aggregated calls) or -G (CUDA graphs), or where the channels are not known (a calibrated call)."""
    from zerocalc.validate.sweep import host_channels_s

    assert host_channels_s(8, 24, 12) == pytest.approx(8 * 23 * 0.206e-6)
    assert host_channels_s(4, 16, 21) == pytest.approx(4 * 15 * 0.206e-6)
    assert host_channels_s(8, 1, 19) == 0.0
    assert host_channels_s(8, 24, 22) == host_channels_s(8, 24, 30) == 0.0
    assert host_channels_s(1, 24, 12) == host_channels_s(None, 24, 12) == 0.0
    assert host_channels_s(8, 24, 12, agg_iters=4) == host_channels_s(8, 24, 12, graph=1) == 0.0
    assert host_channels_s(8, None, 12) == 0.0


# One-node A100 sweeps and the sizes NCCL runs on Ring/LL128 at the release each is priced with (bus
# bandwidth NCCL gives Ring/LL128 there, GB/s: min(12 channels x 20 x 0.92, 12 x 20) in tuning.cc v2.19-v2.30;
# v2.12's Ampere bus cap 235 x 0.92)
LL128_SWEEPS = {
    "all_reduce_perf-8xA100-SXM4-40GB-oci.txt": ((4, 8, 16), 220.8),
    "all_reduce_perf-8xA100-SXM4-80GB-g8-thanos.txt": ((4, 8, 16), 220.8),
    "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt": ((4, 8, 16), 220.8),
    "all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt": ((2, 4, 8, 16), 220.8),
    SUPERBENCH.format("all_reduce"): ((2, 4, 8, 16), 235 * 0.92),
    SUPERBENCH.format("all_gather"): ((4, 8, 16), 235 * 0.92),
    SUPERBENCH.format("reduce_scatter"): ((4, 8, 16), 235 * 0.92),
}


def test_ampere_ll128_run_share_from_seven_one_node_sweeps():
    """AMPERE_LL128_RUN_SHARE against the files it comes from: for each pair of consecutive sizes NCCL runs on
    Ring/LL128 (2-16 MiB), the measured marginal bus bandwidth (size step x 2 (n-1)/n for all-reduce, (n-1)/n
    for all-gather and reduce-scatter, over the out-of-place time step, counted from the file) over NCCL's
    Ring/LL128 bus bandwidth at that release (by hand, above): 16 pairs, median 0.679."""
    import statistics

    from zerocalc.nccl.tune_model import AMPERE_LL128_RUN_SHARE

    shares = []
    for name, (mib, bus) in LL128_SWEEPS.items():
        sweep = check(name)
        ll128 = {r["bytes"] for r in sweep["rows"] if (r["algorithm"], r["protocol"]) == ("Ring", "LL128")}
        assert ll128 == {m << 20 for m in mib}, name
        factor = 2 * 7 / 8 if "all_reduce" in name else 7 / 8
        times = {size: t for size, t, _ in counted_rows(name)}
        for lo, hi in zip(mib, mib[1:], strict=False):
            step = ((hi - lo) << 20) * factor / ((times[hi << 20] - times[lo << 20]) * 1e-6) / 1e9
            shares.append(step / bus)
    assert len(shares) == 16
    assert statistics.median(shares) == pytest.approx(0.679, abs=0.001)
    assert AMPERE_LL128_RUN_SHARE == pytest.approx(statistics.median(shares), abs=0.005)


def test_ampere_ll128_runs_at_its_share_by_hand():
    """8 MiB of the thanos host's mpirun all-reduce (8 processes, no launch terms): NCCL runs Ring/LL128 on
    all 24 channels; its latency 14 + 14 x 1.9 = 40.6 us (tuning.cc baseLat, NVLink hwLat of Ring/LL128),
    its bus bandwidth 220.8 GB/s, algorithm bandwidth x 8 / 14, the bytes' time at 0.68 of it. NCCL chooses
    with its own figure: the choice at 8 MiB stays Ring/LL128. The DGX-1 V100 (sm70) keeps NCCL's own
    figure: its 4 MiB Ring/LL128 on 6 graph channels of 22 GB/s, bus min(132 x 0.92, 6 x 20) = 120 GB/s,
    latency 10 + 14 x 1.9 = 36.6 us (v2.12.12 tuning.cc baseLat, NVLink hwLat)."""
    sweep = check("all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt")
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 8 << 20]
    assert (row["algorithm"], row["protocol"], row["launch_channels"]) == ("Ring", "LL128", 24)
    hand = 40.6e-6 + (8 << 20) / (220.8e9 * 8 / 14) / 0.68
    assert row["predicted_s"] == pytest.approx(hand, rel=1e-6)
    times = {size: t for size, t, _ in counted_rows("all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt")}
    assert row["ratio"] == pytest.approx(hand / (times[8 << 20] * 1e-6), rel=1e-6)  # 1.06; 0.82 at NCCL's
    assert any("Ring/LL128 calls timed at 0.68 of NCCL's LL128 bandwidth" in n for n in sweep["notes"])
    v100 = check(V100)
    (row,) = [r for r in v100["rows"] if r["bytes"] == 4 << 20]
    assert (row["algorithm"], row["protocol"]) == ("Ring", "LL128")
    assert row["nccl_s"] == pytest.approx(36.6e-6 + (4 << 20) / (120e9 * 8 / 14), rel=1e-6)
    assert not any("Ring/LL128 calls timed at" in n for n in v100["notes"])


# The two one-node A100 all-reduces of one process per GPU (no launch terms) and NCCL's Ring/LL latency at
# the release each is priced with (tuning.cc: baseLat, hwLat[NVLINK][RING][LL]): v2.8.4-v2.17.1 3.6 and
# 0.47 us, v2.18.1-v2.30.7 6.6 and 0.6 us
LL_HOP_SWEEPS = {
    "all_reduce_perf-8xA100-SXM4-40GB-abci-1node-nccl2.8.4.txt": (("--nccl-version", "2.8.4"), 3.6, 0.47),
    "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt": ((), 6.6, 0.6),
}


def test_ampere_ll_hop_from_two_one_process_per_gpu_sweeps():
    """AMPERE_LL_HOP_US against the files it comes from: the median out-of-place time of each file's sizes
    up to 256 B (counted from the file: 17.3 and 21.55 us), less NCCL's base latency, over the 14 hops of
    an 8-rank ring all-reduce: 0.98 us a hop at NCCL 2.8.4 (ABCI) and 1.07 at 2.30.7 (thanos), 1.02 their
    mean, where the tables charge 0.47 and 0.6; one channel of Ring/LL at every such size."""
    import statistics

    from zerocalc.nccl.tune_model import AMPERE_LL_HOP_US

    hops = []
    for name, (args, base, _) in LL_HOP_SWEEPS.items():
        small = [t for size, t, _ in counted_rows(name) if size <= 256]
        hops.append((statistics.median(small) - base) / 14)
        sweep = check(name, *args)
        assert {(r["algorithm"], r["protocol"], r["launch_channels"]) for r in sweep["rows"]
                if r["bytes"] <= 256} == {("Ring", "LL", 1)}
    assert hops == pytest.approx([0.978, 1.066], abs=0.001)
    assert AMPERE_LL_HOP_US == pytest.approx(statistics.mean(hops), abs=0.005)


def test_ampere_ll_hop_by_hand():
    """8 B of each file priced with 14 hops at 1.02 us: 3.6 + 14 x 1.02 = 17.88 us at NCCL 2.8.4 (measured
    17.0, ratio 1.05; NCCL's own 10.18, 0.60), 6.6 + 14 x 1.02 = 20.88 us at 2.30.7 (measured 20.3; NCCL's own
    15.0), the bytes' time below 0.01 us. Ring/LL stays NCCL's choice. The p5 node of 8 H100 (one process per
    GPU, 2.30.7) keeps NCCL's 6.6 + 14 x 0.6 = 15.0 us (its sizes up to 256 B measured at a median of 15.0
    us), and the DGX-1's V100s (sm70)
    NCCL's own 3.6 + 14 x 0.47 = 10.18 us at 2.12.12."""
    import statistics

    for name, (args, base, _) in LL_HOP_SWEEPS.items():
        sweep = check(name, *args)
        (row,) = [r for r in sweep["rows"] if r["bytes"] == 8]
        assert (row["algorithm"], row["protocol"]) == ("Ring", "LL")
        assert row["predicted_s"] == pytest.approx((base + 14 * 1.02) * 1e-6, abs=0.01e-6)
        assert any("Ring/LL calls timed with 1.02 µs a hop" in n for n in sweep["notes"])
    from zerocalc.nccl.model import tune
    from zerocalc.nccl.tables import Algorithm, Collective, Protocol, release_for
    from zerocalc.topology.presets import get_topology

    for version, own in (("2.8.4", 3.6 + 14 * 0.47), ("2.30.7", 6.6 + 14 * 0.6)):
        t = tune(get_topology("dgx-a100"), 8, release_for(version)[0])
        ring_ll = (Collective.ALL_REDUCE, Algorithm.RING, Protocol.LL)
        assert t.time_s(*ring_ll, 8) == pytest.approx(own * 1e-6, abs=0.01e-6)  # what NCCL chooses with
        assert t.choose(Collective.ALL_REDUCE, 8)[:2] == ring_ll[1:]
    p5 = check("all_reduce_perf-8xH100-p5-aws-batch-tagged.txt", "--topology", "aws-p5")
    (row,) = [r for r in p5["rows"] if r["bytes"] == 8]
    assert (row["algorithm"], row["protocol"]) == ("Ring", "LL")
    assert row["predicted_s"] == pytest.approx(15.0e-6, abs=0.01e-6)
    p5_rows = counted_rows("all_reduce_perf-8xH100-p5-aws-batch-tagged.txt")
    small = [t for size, t, _ in p5_rows if size <= 256]
    assert statistics.median(small) == pytest.approx(15.0, abs=0.1)  # measured: NCCL's own hop holds
    assert not any("µs a hop" in n for n in p5["notes"])
    v100 = check(V100)
    (row,) = [r for r in v100["rows"] if r["bytes"] == 8]
    assert row["nccl_s"] == pytest.approx(10.18e-6, abs=0.01e-6)
    assert not any("µs a hop" in n for n in v100["notes"])


TREE_LL_PAIRS = {  # two nodes of 8 A100, one process a GPU: NCCL's Tree/LL at its smallest sizes
    "all_reduce_perf-16xA100-SXM4-40GB-sophia-2nodes-nccl2.22.3.txt": ("--nccl-version", "2.22.3"),
    "all_reduce_perf-16xA100-SXM4-40GB-oci-oke-roce-2nodes.txt": (),
    "all_reduce_perf-16xA100-SXM4-40GB-oci-bm-gpu4-2nodes-ol7.txt": (),
}


@pytest.mark.parametrize("name", sorted(TREE_LL_PAIRS))
def test_ampere_tree_ll_chain_hops_by_hand(name):
    """A Tree/LL all-reduce over two nodes of 8 A100 at v2.18 on: NCCL's 6.8 + 2 x (7 x 0.6 + 5.0) = 25.2 us
    (tuning.cc: base, the chain's 7 NVLink hops and one network hop, up and down), its 14 NVLink hops timed
    at the A100's 1.02 us instead: 31.08 us. The measured sizes up to 512 B (counted from the files: 35-41 us)
    are 0.62-0.72x of NCCL's figure and 0.76-0.89x of this one."""
    sweep = check(name, *TREE_LL_PAIRS[name])
    counted = {size: t for size, t, _ in counted_rows(name) if size <= 512}
    assert counted and all(34.5 <= t <= 41 for t in counted.values())
    rows = [r for r in sweep["rows"] if r["bytes"] in counted]
    assert {(r["algorithm"], r["protocol"]) for r in rows} == {("Tree", "LL")}
    for r in rows:
        assert r["predicted_s"] * 1e6 == pytest.approx(6.8 + 2 * (7 * 1.02 + 5.0), abs=0.35)  # + the bytes
        assert 0.75 <= r["ratio"] <= 0.91
    assert any("Tree/LL calls timed with 1.02 µs for each NVLink hop" in n for n in sweep["notes"])


def test_tree_ll_chain_hops_keep_ncclss_table_off_ampere():
    """Two nodes of 8 H100 keep NCCL's 25.2 us (the measured hop is an A100's), as does one A100 node (no
    chain across nodes); NCCL chooses with its own figure either way."""
    from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, tune
    from zerocalc.nccl.tune_model import ampere_tree_ll_hops_us
    from zerocalc.topology import get_topology

    for preset, hops in (("dgx-a100", 2 * 7 * (1.02 - 0.6)), ("dgx-h100", None), ("aws-p4d", 2 * 7 * 0.42)):
        t = tune(get_topology(preset), 16, RELEASES["2.22"])
        got = ampere_tree_ll_hops_us(t.release, t.machine, Collective.ALL_REDUCE, Algorithm.TREE, Protocol.LL)
        assert got == (pytest.approx(hops) if hops is not None else None)
        if preset != "aws-p4d":  # (EFA's plugin latency in its network hop)
            own = t.entries[(Collective.ALL_REDUCE, Algorithm.TREE, Protocol.LL)].latency_us
            assert own == pytest.approx(25.2)
    one = tune(get_topology("dgx-a100"), 8, RELEASES["2.22"])
    assert ampere_tree_ll_hops_us(one.release, one.machine, Collective.ALL_REDUCE, Algorithm.TREE,
                                  Protocol.LL) is None
