"""A TCP network's flows a connection spreads its messages over (zerocalc.nccl.tcp_flows): the messages of a
ring step, the share of the rate they get, where the model charges it, and the topology fields carrying it."""

import pytest

from zerocalc.errors import ConfigError
from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, tune
from zerocalc.nccl.tcp_flows import ring_flow_scale, ring_messages, ring_slices, ring_step_flows
from zerocalc.topology import get_topology, topology_from_mapping, topology_to_mapping

A, P, C = Algorithm, Protocol, Collective
V19, V21 = RELEASES["2.19"], RELEASES["2.21"]
MIB = 1 << 20


def test_a_chunk_within_the_slice_floor_is_one_message():
    """prims_simple.h: a slice is at least NCCL_BUFFSIZE / 8 steps × 2 steps / 32; a Ring/Simple chunk goes in
    2 slices. 16 channels × 16 ranks: 16 MiB is 64 KiB a chunk, one slice under an 8 MiB buffer (64 KiB
    floor), two under NCCL's 4 MiB (32 KiB floor); 32 MiB (128 KiB) two either way."""
    assert ring_messages(16 * MIB, 16, 16, 8 * MIB) == 1
    assert ring_messages(16 * MIB + 256, 16, 16, 8 * MIB) == 2
    assert ring_messages(32 * MIB, 16, 16, 8 * MIB) == 2
    assert ring_messages(16 * MIB, 16, 16, None) == 2
    assert ring_messages(8 * MIB, 16, 16, None) == 1
    assert ring_messages(1 << 10, 1, 16, 8 * MIB) == 1


def test_the_share_is_the_flows_a_step_uses():
    """One message a step rides one of TCPXO's two flows: half the connection's rate; two ride both."""
    args = (C.ALL_REDUCE, A.RING, P.SIMPLE)
    assert ring_flow_scale(2, 8 * MIB, *args, 16 * MIB, 16, 16, 2, 40.0, 12.0) == pytest.approx(0.5)
    assert ring_flow_scale(2, 8 * MIB, *args, 32 * MIB, 16, 16, 2, 40.0, 12.0) == 1.0
    # NVLink faster than half the network: the network's share binds; slower, the ring's own intra-node hop
    assert ring_flow_scale(2, 8 * MIB, *args, 16 * MIB, 16, 16, 2, 9.0, 12.0) == pytest.approx(6 / 9)
    assert ring_flow_scale(4, 8 * MIB, *args, 16 * MIB, 16, 16, 2, 40.0, 12.0) == pytest.approx(0.25)


@pytest.mark.parametrize(("flows", "coll", "algo", "proto", "nodes"), [
    (None, C.ALL_REDUCE, A.RING, P.SIMPLE, 2),  # a network whose message has its connection's rate
    (1, C.ALL_REDUCE, A.RING, P.SIMPLE, 2),
    (2, C.ALL_REDUCE, A.RING, P.SIMPLE, 1),  # one node: no network
    (2, C.ALL_REDUCE, A.TREE, P.SIMPLE, 2),  # Tree keeps NCCL_STEPS messages in flight
    (2, C.ALL_REDUCE, A.RING, P.LL128, 2),
    (2, C.BROADCAST, A.RING, P.SIMPLE, 2),
])
def test_left_as_nccl_prices_it(flows, coll, algo, proto, nodes):
    assert ring_flow_scale(flows, 8 * MIB, coll, algo, proto, 16 * MIB, 16, 16, nodes, 40.0, 12.0) == 1.0


def test_a3_mega_runs_its_small_ring_steps_on_one_flow_and_chooses_as_nccl():
    """gcp-a3-mega carries TCPXO's 2 flows and its profile's 8 MiB buffer: a 16 MiB Ring/Simple all-reduce on
    16 ranks runs its bandwidth at half NCCL's, a 32 MiB one at NCCL's; NCCL's own estimate, which it chooses
    with, is unchanged; without the flows the run time is NCCL's."""
    topo = get_topology("gcp-a3-mega")
    assert (topo.net_flows, topo.nccl_buffsize) == (2, 8 * MIB)
    t = tune(topo, 16, V21)
    plain = tune(topo.__class__(**{**topo.__dict__, "net_flows": None}), 16, V21)
    own = t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 16 * MIB)
    assert own == plain.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 16 * MIB)
    # the cost of the 15th to 16th MiB (both one message a step): twice NCCL's
    slope = [x.run_time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 16 * MIB)
             - x.run_time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 15 * MIB) for x in (t, plain)]
    assert slope[0] == pytest.approx(2 * slope[1], rel=1e-6)
    big = [x.run_time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, 32 * MIB) for x in (t, plain)]
    assert big[0] == pytest.approx(big[1])
    assert t.choose(C.ALL_REDUCE, 16 * MIB) == plain.choose(C.ALL_REDUCE, 16 * MIB)
    # one node of it has no network
    one = tune(topo, 8, V21)
    assert one.machine.net_flows is None


def test_the_fields_go_through_toml_and_are_checked():
    topo = get_topology("gcp-a3-mega")
    data = topology_to_mapping(topo)
    assert data["net_flows"] == 2 and data["nccl_buffsize"] == 8 * MIB
    assert topology_from_mapping(data).net_flows == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="net_flows"):
            topology_from_mapping({**data, "net_flows": bad})

    with pytest.raises(ConfigError, match="net_flow_piece"):
        topology_from_mapping({**data, "net_flow_piece": 0})
    high = topology_to_mapping(get_topology("gcp-a3-high"))
    assert high["net_flow_piece"] == 512 << 10
    assert topology_from_mapping(high).net_flow_piece == 512 << 10


def test_tcpx_cuts_each_message_into_pieces_one_flow_each():
    """google/nccl-plugin-gpudirecttcpx net_tcpx.cc: a request goes in pieces of at most
    NCCL_DYNAMIC_CHUNK_SIZE (512 KiB in GCP's configs) on the sockets with room (MAX_TASKS = 6 each). Under
    NCCL's 4 MiB buffer (GCP's configs), 8 channels × 16 ranks: 8 MiB is a 64 KiB chunk, two slices of
    32 KiB (2 flows); 128 MiB a 1 MiB chunk, two of 512 KiB (2 flows); 256 MiB the 2 MiB chunk ceiling
    (NCCL_BUFFSIZE / 8 × 4), two slices of 1 MiB, two pieces each (4 flows)."""
    piece = 512 << 10
    assert ring_slices(8 * MIB, 8, 16, None) == [32 << 10, 32 << 10]
    assert ring_slices(2 * MIB, 8, 16, None) == [16 << 10]  # within the 32 KiB floor: one message
    assert ring_slices(3 * (16 << 10) * 128, 8, 16, None) == [32 << 10, 16 << 10]  # 48 KiB: the floor first
    assert [ring_step_flows(s * MIB, 8, 16, None, piece) for s in (2, 8, 128, 256, 8192)] == [1, 2, 2, 4, 4]
    # unset: each message whole on one flow (TCPXO)
    assert ring_step_flows(256 * MIB, 8, 16, None, None) == 2
    args = (C.ALL_GATHER, A.RING, P.SIMPLE)
    assert ring_flow_scale(4, None, *args, 128 * MIB, 8, 16, 2, 40.0, 12.0, piece) == pytest.approx(0.5)
    assert ring_flow_scale(4, None, *args, 256 * MIB, 8, 16, 2, 40.0, 12.0, piece) == 1.0
    assert ring_flow_scale(4, None, *args, 256 * MIB, 8, 16, 2, 40.0, 12.0) == pytest.approx(0.5)
