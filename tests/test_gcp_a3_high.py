"""GCP A3 High (a3-highgpu-8g, GPUDirect-TCPX): the gcp-a3-high preset against its sources, and the public
all-gather run bundled for it."""

import statistics

import pytest
from sweep_files import check_json, file_rows

from zerocalc.nccl.model import tune
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import get_topology

NAME = "all_gather_perf-16xH100-a3high.txt"


def test_the_preset_states_its_sources_figures():
    """dstackai/dstack examples/clusters/a3high/README.md: 8 H100 and 1,000 Gb/s a VM, four data NICs of
    its five (GKE's NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4; eth0 is the host's);
    google/nccl-plugin-gpudirecttcpx net_tcpx.cc: props->latency = 0, a request cut into
    NCCL_DYNAMIC_CHUNK_SIZE pieces over NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS sockets; GCP's
    gpudirect-tcpx release notes: 524288, 4 × 1, NCCL_BUFFSIZE=4194304, NCCL_ALGO=Ring, NCCL_PROTO=Simple."""
    topo = get_topology("gcp-a3-high")
    assert (topo.gpus_per_node, topo.nics_per_node, topo.nic_Gbps) == (8, 4, 200.0)
    assert topo.inter.bw_Bps == 4 * 200 / 8 * 1e9
    assert topo.net_latency_us == 0.0
    assert (topo.net_flows, topo.net_flow_piece, topo.nccl_buffsize) == (4 * 1, 524288, 4194304)
    # the wire: a TCP message one way between two GCE VMs, half the median of the nine netperf TCP_RR round
    # trips gist BenTheElder/8ad343913fbe876e219a prints whole (µs)
    assert topo.net_wire_latency_us == statistics.median([90, 91, 92, 92, 99, 100, 105, 109, 115]) / 2
    (env,) = topo.nccl_env
    assert (env.algo, env.proto, env.min_nchannels, env.max_nchannels) == ("Ring", "Simple", None, None)
    assert env.min_version == "2.19"


def test_the_dstack_a3_high_all_gather():
    """dstack's A3 High example: 2 × a3-highgpu-8g, all_gather_perf 8 MiB-8 GiB through the plugin image's
    run-allgather.sh (NCCL_ALGO=Ring, NCCL_PROTO=Simple, NCCL_MIN/MAX_NCHANNELS=8: google/
    nccl-plugin-gpudirecttcpx scripts/run-nccl.sh). Ring/Simple on 8 channels as the script sets; every size
    in 0.5-2x: the 8 MiB row's 784.9 µs over the ring's 15 steps is 52 µs a step, the wire's one-way TCP
    trip each step now pays (under the plugin's receiver sync); 0.49x when each step took NCCL's 14 µs hop."""
    sweep = check_json(NAME, "--topology", "gcp-a3-high")
    assert sweep["group_size"] == 16
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert set(rows) == {s for s, _, _ in file_rows(NAME)}
    assert all((r["algorithm"], r["protocol"], r["launch_channels"]) == ("Ring", "Simple", 8)
               for r in rows.values())
    assert all(0.5 <= r["ratio"] <= 2.0 for r in rows.values())
    step_us = dict((s, o) for s, o, _ in file_rows(NAME))[8 << 20] / 15
    assert 50 < step_us < 55


@pytest.mark.parametrize("version", ["2.19.3", "2.30.7"])
def test_every_ring_step_waits_on_the_tcp_trip(version):
    """By hand (NCCL's v2.19 and v2.30 tables: Ring/Simple base 8.4 µs, network hop 14 µs, NVLink hop 3.4):
    16 ranks on 2 A3 High VMs, an all-gather's 15 steps each at max(3.4, 14, 49.5) = 49.5 µs, the TCP trip:
    8.4 + 15 × 49.5 = 750.9 µs; at 1 GiB (chunks of 2 MiB, every flow used) the rest is NCCL's bandwidth.
    NCCL still chooses with the 0 µs the plugin reports."""
    rel = release_for(version)[0]
    assert (rel.base_lat_us[A.RING][2], rel.hw_lat_us[2][A.RING][2], rel.hw_lat_us[0][A.RING][2]) == \
        (8.4, 14.0, 3.4)
    t = tune(get_topology("gcp-a3-high"), 16, rel)
    bw = t.entries[(C.ALL_GATHER, A.RING, P.SIMPLE)].bandwidth_GBps
    assert t.run_time_s(C.ALL_GATHER, A.RING, P.SIMPLE, 1 << 30) == pytest.approx(
        (8.4 + 15 * 49.5 + (1 << 30) / (1000 * bw)) / 1e6)
    # LL keeps the table's pace (eight steps in flight a connection, not two chunks)
    ll = t.run_time_s(C.ALL_GATHER, A.RING, P.LL, 1 << 20)
    assert ll is not None and ll < (15 * 49.5) / 1e6


#: skypilot-org/skypilot ``examples/gcp_gpu_direct_tcpx/README.md``, "Performance Benchmark Results": busbw
#: (GB/s) of ``all_reduce_perf`` with GPUDirect-TCPX on 2 × a3-highgpu-8g, 16 ranks (``gpu_direct_tcpx.yaml``:
#: NCCL_ALGO=Ring, NCCL_PROTO=Simple, NCCL_MIN/MAX_NCHANNELS=8, NCCL_BUFFSIZE=8388608, the TCPX plugin
#: image's NCCL), size in KiB → busbw; the time is size × 2 (n − 1) / n / busbw
SKYPILOT_ALL_REDUCE = {16: 0.04, 32: 0.09, 64: 0.11, 128: 0.19, 256: 0.35, 512: 0.65, 1024: 1.33, 2048: 2.43,
                       4096: 4.8, 8192: 9.21, 16384: 17.16, 32768: 30.08, 65536: 45.31, 131072: 61.58,
                       262144: 67.82, 524288: 67.09, 1048576: 66.2, 2097152: 65.72}


def _skypilot_tuning():
    from dataclasses import replace

    from zerocalc.nccl.env import parse_list
    topo = replace(get_topology("gcp-a3-high"), nccl_buffsize=8 << 20)
    return tune(topo, 16, release_for("2.19.3")[0], algo_enable=parse_list("Ring", A, "NCCL_ALGO"),
                proto_enable=parse_list("Simple", P, "NCCL_PROTO"), min_channels=8, max_channels=8)


def test_all_reduce_steps_wait_on_the_tcp_trip_on_the_channels_they_run():
    """By hand (v2.19 tables): a Ring/Simple all-reduce's 30 steps each at the table's 14 µs hop plus the
    wire's 35.5 µs beyond it on the channels the call launches (NCCL's launch loop: ceil(bytes / (512 threads
    × 64)) of 8): 1 MiB on all 8, 8.4 + 30 × 49.5 = 1493.4 µs; 128 KiB on 4, 8.4 + 30 × (14 + 35.5 / 2) =
    960.9 µs, the floor under NCCL's own plateau-scaled estimate; then the bandwidth term."""
    from zerocalc.nccl.predict import predict
    t = _skypilot_tuning()
    for size, floor_us, launched in ((1 << 20, 1493.4, 8), (128 << 10, 960.9, 4)):
        pr = predict(t, C.ALL_REDUCE, size)
        assert (pr.algorithm, pr.protocol, pr.launch.channels) == (A.RING, P.SIMPLE, launched)
        bw_s = t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, size, share=launched / 8, latency_us=0.0,
                        bw_scale=t.capped_scale(A.RING))
        assert pr.time_s >= floor_us / 1e6 and pr.time_s == pytest.approx(floor_us / 1e6 + bw_s, rel=0.05)


def test_the_skypilot_a3_high_all_reduce_within_the_bands():
    """The table's times (counted from its busbw) against the price of each size: every size within 0.5-2x
    and the median size within 0.8-1.25x (0.53-0.58x from 128 KiB to 2 MiB before the steps paid the trip)."""
    from zerocalc.nccl.predict import predict
    t = _skypilot_tuning()
    ratios = []
    for kib, busbw in SKYPILOT_ALL_REDUCE.items():
        size = kib << 10
        measured_s = size * 2 * 15 / 16 / (busbw * 1e9)
        ratios.append(predict(t, C.ALL_REDUCE, size).time_s / measured_s)
    assert all(0.5 <= r <= 2.0 for r in ratios), ratios
    assert 0.8 <= ratios[(len(ratios) - 1) // 2] <= 1.25, ratios
