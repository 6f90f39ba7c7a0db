"""GCP A3 High (a3-highgpu-8g, GPUDirect-TCPX): the gcp-a3-high preset against its sources, and the public
all-gather run bundled for it."""

from sweep_files import check_json, file_rows

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
    (env,) = topo.nccl_env
    assert (env.algo, env.proto, env.min_nchannels, env.max_nchannels) == ("Ring", "Simple", None, None)
    assert env.min_version == "2.19"


def test_the_dstack_a3_high_all_gather():
    """dstack's A3 High example: 2 × a3-highgpu-8g, all_gather_perf 8 MiB-8 GiB through the plugin image's
    run-allgather.sh (NCCL_ALGO=Ring, NCCL_PROTO=Simple, NCCL_MIN/MAX_NCHANNELS=8: google/
    nccl-plugin-gpudirecttcpx scripts/run-nccl.sh). Ring/Simple on 8 channels as the script sets; every size
    in 0.5-2x but the 8 MiB one: 784.9 µs over the ring's 15 steps is 52 µs a step of 64 KiB a channel,
    the plugin's per-request exchange (each receive posted is sent to the sender on the control socket,
    net_tcpx.cc kRecvSync) that the plugin reports to NCCL as no latency."""
    sweep = check_json(NAME, "--topology", "gcp-a3-high")
    assert sweep["group_size"] == 16
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert set(rows) == {s for s, _, _ in file_rows(NAME)}
    assert all((r["algorithm"], r["protocol"], r["launch_channels"]) == ("Ring", "Simple", 8)
               for r in rows.values())
    outside = {s for s, r in rows.items() if not 0.5 <= r["ratio"] <= 2.0}
    assert outside == {8 << 20}
    step_us = dict((s, o) for s, o, _ in file_rows(NAME))[8 << 20] / 15
    assert 50 < step_us < 55
