"""The communicator's channels (zerocalc.nccl.channels) against ncclTopoPostset (src/graph/connect.cc) of
each modelled release, and the two terms of NCCL's model that read them (src/graph/tuning.cc)."""

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, tune
from zerocalc.nccl.channels import comm_channels
from zerocalc.nccl.graph import Graph, Machine
from zerocalc.topology import get_topology, topology_from_mapping, topology_to_mapping, topology_to_toml

A, P, C = Algorithm, Protocol, Collective
V19, V21, V26, V30 = RELEASES["2.19"], RELEASES["2.21"], RELEASES["2.26"], RELEASES["2.30"]


def machine(ring_channels, bw_intra, *, cc=90, nodes=2, ppn=8, collnet=False, collnet_intra=None):
    g = Graph(ring_channels, bw_intra, bw_intra, True)
    cn = Graph(ring_channels, collnet_intra or bw_intra, bw_intra, True)
    graphs = {A.RING: g, A.TREE: g, A.PAT: g, A.COLLNET_DIRECT: cn, A.COLLNET_CHAIN: cn}
    return Machine(n_ranks=nodes * ppn, n_nodes=nodes, compute_capability=cc, cpu_vendor="intel", nvls=False,
                   collnet=collnet, nvswitch=True, ll128_path_ok=True, graphs=graphs)


def n(m, release, **kw):
    return comm_channels(m, release, **kw).n_channels


def test_graph_channels_are_doubled_then_min_and_max_apply():
    # connect.cc: nChannels = min(MAXCHANNELS, 2·nChannels); then min(NCCL_MAX_NCHANNELS, ·), then copied up
    # to NCCL_MIN_NCHANNELS; MAXCHANNELS 32 at v2.21.5 (device.h)
    m = machine(8, 24.0)
    assert n(m, V21) == 16
    assert n(m, V21, min_channels=4) == 16  # GCP's TCPXO profile: no effect on its 8-NIC ring graph
    assert n(m, V21, min_channels=24) == 24
    assert n(m, V21, max_channels=4) == 4
    assert n(m, V21, min_channels=99) == 32  # ncclMinNchannels caps at MAXCHANNELS
    assert n(m, V21, max_channels=0) == 1  # ncclMaxNchannels: below 1 reads as 1
    assert n(machine(24, 24.0), V21) == 32
    assert n(machine(24, 24.0), V26) == 48  # MAXCHANNELS 64 from v2.26


def test_four_compute_channels_per_search_channel_as_each_release_gates_it():
    # "Use 4 compute channels per search channel to reach peak BW on <8 PPN": several nodes, ring
    # bwIntra > 45; v2.19.4: minCompCap == 90 and 2n <= MAXCHANNELS; v2.21.5: == 90 and n < 16;
    # v2.26.2/v2.30.7: >= 90 and n < 16
    assert n(machine(4, 48.0), V19) == 16 and n(machine(4, 48.0), V21) == 16
    assert n(machine(8, 48.0), V19) == 32 and n(machine(8, 48.0), V21) == 16
    assert n(machine(4, 40.0), V21) == 8  # bwIntra 40 ≤ 45
    assert n(machine(4, 48.0, nodes=1), V21) == 8  # one node
    assert n(machine(4, 48.0, cc=100), V21) == 8 and n(machine(4, 48.0, cc=100), V26) == 16
    assert n(machine(4, 48.0, cc=100), V30) == 16


def test_collnet_adds_half_and_nvls_raises_the_count_at_2_21_and_2_26_only():
    # CollNet graph with bwIntra > bwInter on more than one GPU per node: n + n/2
    assert n(machine(8, 24.0, collnet=True, collnet_intra=48.0), V21) == 24
    assert n(machine(8, 24.0, collnet=True), V21) == 16  # bwIntra == bwInter
    # v2.21.5 / v2.26.2: comm->nChannels raised to nvlsChannels (NCCL_NVLS_NCHANNELS 16; v2.26.2: 32 on
    # sm100), collChannels left as it was; v2.19.4 and v2.30.7 have no such step
    m = machine(4, 24.0)
    got = comm_channels(m, V21, nvls=True)
    assert (got.n_channels, got.coll_channels) == (16, 8)
    assert n(machine(4, 24.0, cc=100), V26, nvls=True) == 32
    assert n(m, V19, nvls=True) == 8 and n(m, V30, nvls=True) == 8


def test_the_ring_plateau_starts_where_the_communicator_channels_say():
    # tuning.cc ncclTopoGetAlgoTime: Ring/Simple all-reduce across nodes, latency × 1.4 (sm80+) once
    # nBytes / (comm->nChannels · nRanks) >= 64. GCP A3 Mega, 16 ranks: 8 ring channels doubled = 16, so the
    # step is at 64 · 16 · 16 = 16 KiB (at 8 KiB with the graph's 8 channels)
    t = tune(get_topology("gcp-a3-mega"), 16, V21)
    assert t.comm_channels == 16
    lat = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].latency_us
    bw = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].bandwidth_GBps
    for size, factor in ((8192, 1.0), (16383, 1.0), (16384, 1.4)):
        assert t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, size) == pytest.approx(
            (lat * factor + size / (1000 * bw)) / 1e6, rel=1e-12)
    # NCCL_MAX_NCHANNELS=8 brings it back to 8 KiB (with NCCL_NVLS_ENABLE=0, as GCP's profile sets: with NVLS
    # v2.21.5 raises comm->nChannels to its 16 NVLS channels again)
    t8 = tune(get_topology("gcp-a3-mega"), 16, V21, max_channels=8, nvls_enable=False)
    assert t8.comm_channels == 8
    assert tune(get_topology("gcp-a3-mega"), 16, V21, max_channels=8).comm_channels == 16
    expected = (lat * 1.4 + 8192 / (1000 * bw)) / 1e6
    assert t8.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 8192) == pytest.approx(expected)


def test_channel_counts_in_a_topology_toml_round_trip_and_bad_ones_are_named():
    topo = get_topology("gcp-a3-mega")
    (env21,) = [e for e in topo.nccl_env if e.min_version == "2.21"]
    assert env21.min_nchannels == 4  # GCP's release notes, every TCPXO release since Jun 2024
    back = topology_from_mapping(topology_to_mapping(topo))
    assert back.nccl_env == topo.nccl_env
    assert "NCCL_MIN_NCHANNELS = 4" in topology_to_toml(topo)
    data = topology_to_mapping(topo)
    for bad in (-1, "4", 2.5, True):
        data["nccl_env"] = [{"min_version": "2.21", "max_version": "2.21", "NCCL_MIN_NCHANNELS": bad}]
        with pytest.raises(ConfigError, match="NCCL_MIN_NCHANNELS must be a whole number"):
            topology_from_mapping(data)
    data["nccl_env"] = [{"min_version": "2.21", "max_version": "2.21", "NCCL_MAX_NCHANNELS": 0}]
    with pytest.raises(ConfigError, match="NCCL_MAX_NCHANNELS must be a whole number ≥ 1"):
        topology_from_mapping(data)


def test_a_call_runs_the_ring_plateau_on_the_share_of_channels_it_launches():
    # NCCL's estimate (share 1, what it chooses with) steps by its whole 0.4 of the latency at 16 KiB; a call
    # launched on a share of the communicator's channels steps by that share of it (zerocalc.nccl.model
    # ring_plateau)
    t = tune(get_topology("gcp-a3-mega"), 16, V21)
    lat = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].latency_us
    for share in (1 / 16, 0.5, 1.0):
        jump = (t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 16384, share=share)
                - t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 16383, share=share)) * 1e6
        assert jump == pytest.approx(0.4 * lat * share, rel=1e-3)
    # one node: no plateau at any share
    one = tune(get_topology("gcp-a3-mega"), 8, V21)
    assert one.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 1 << 20, share=0.5) == pytest.approx(
        one.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, (1 << 20) - 1, share=0.5), rel=1e-3)


def test_check_reads_the_profile_channels_from_a_topology_file(tmp_path):
    """A profile's NCCL_MAX_NCHANNELS=8 moves the bundled TCPXO sweep's 8 KiB row (131.6 µs in the file) onto
    the ring plateau (NCCL's × 1.4 from 64 bytes per channel and rank of its 8 channels), which the call runs
    on the one channel NCCL launches (zerocalc.nccl.launch: 8192 < 2 × 512 threads × 64), 1 of its 8: the
    latency of the 4 KiB row × (1 + 0.4 / 8), plus its bytes on that channel: 1 of the 16 channels the ring
    graph's 8 of 24 GB/s were doubled to, i.e. half a graph channel, × 16 / 30 for a 16-rank ring, and half
    of that: each ring step is one message, on one of the connection's two TCPXO flows
    (zerocalc.nccl.tcp_flows)."""
    data = topology_to_mapping(get_topology("gcp-a3-mega"))
    data["nccl_env"][0]["NCCL_MAX_NCHANNELS"] = 8
    path = tmp_path / "a3.toml"
    path.write_text(topology_to_toml(topology_from_mapping(data)))
    res = CliRunner().invoke(app, ["check", "tests/data/traces/nccl-tests/all_reduce_perf-16xH100-2nodes.txt",
                                   "--topology", str(path), "--nccl-version", "2.21.5", "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert rows[8192]["measured_s"] == pytest.approx(131.6e-6)
    t = tune(get_topology("gcp-a3-mega"), 16, V21)
    lat = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].latency_us
    assert rows[8192]["launch_channels"] == 1
    bw = 0.5 * 24e9 * 16 / 30 / 2
    assert rows[8192]["predicted_s"] == pytest.approx(lat * (1 + 0.4 / 8) * 1e-6 + 8192 / bw, rel=1e-3)
    assert rows[8192]["nccl_all_channels_s"] > lat * 1.4e-6  # NCCL's own estimate: the whole plateau
    assert rows[4096]["predicted_s"] == pytest.approx(lat * 1e-6 + 4096 / bw, rel=1e-3)
