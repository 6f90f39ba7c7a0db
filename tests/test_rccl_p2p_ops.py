"""RCCL's other point-to-point ops (zerocalc.nccl.rccl_p2p.p2p_op_us): rccl-tests' sendrecv_perf,
gather_perf, scatter_perf and hypercube_perf, grouped ncclSend / ncclRecv calls timed as their data moves.

Expected values by hand from RCCL's own figures: ROCm/rccl ``src/graph/tuning.cc`` (``baseLat`` 12 µs LL and
17 µs Simple; ``hwLat`` Ring hops: xGMI 0.8 µs LL / 2.1 µs Simple in models 5 and 6 and 3.6 µs Simple in
``tuning_model_0``, the network's Ring/Simple hop 19.8 µs in 2.20.5's model 5 where later models carry 320),
``src/graph/topo.h`` (an xGMI link 48 GB/s on gfx942 / gfx950, 36 GB/s on gfx90a), ``src/graph/paths.cc``
(``ncclTopoGetNchannels``: 4 channels a link on gfx94x, 2 on others; doubled on one node of gfx94x; no path
through a GPU), ``src/enqueue.cc`` (LL up to ``NCCL_P2P_LL_THRESHOLD`` 16 KiB, × the channels per peer after
the NCCL 2.23 merge), ``src/graph/rome_models.cc`` (``rome_model_73``'s link matrix of an MI250X node);
rccl-tests ``src/sendrecv.cu``, ``gather.cu``, ``scatter.cu``, ``hypercube.cu`` (what each rank sends); the
NICs from the presets (8 × 400 Gb/s a node on ``amd-mi355x``, 4 × 200 Gb/s on ``amd-mi250x``); OLCF's
Frontier node diagram (36 GB/s each way between the CPU and a GCD). The CLI check uses the bundled one-node
MI355X all-to-all sweep (tests/data/traces/README.md names its source) renamed, its rows counted by a plain
split.
"""

import json

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl.rccl import V2_21, V2_26, rccl_tune
from zerocalc.nccl.rccl_p2p import channels_per_peer, p2p_op_us, pair_GBps
from zerocalc.nccl.release import Protocol
from zerocalc.topology import PRESETS

runner = CliRunner()
A2A_1N = "alltoall_perf-8xMI355X-g8-docker-rccl2.27.7.txt"
GiB = 1 << 30


def test_sendrecv_on_one_mi300x_node_by_hand():
    t = rccl_tune(PRESETS["amd-mi300x"], 8, V2_21)
    # each rank sends the whole buffer to rank + 1 over the one 48 GB/s xGMI link between them
    us, proto, bound = p2p_op_us(t, "sendrecv", GiB)
    assert proto == Protocol.SIMPLE and not bound
    assert us == pytest.approx(17 + 2.1 + GiB / (1000 * 48.0))
    # 2.21.5: LL for a message of at most 16 KiB, LL's half of the link
    us, proto, _ = p2p_op_us(t, "sendrecv", 16384)
    assert proto == Protocol.LL and us == pytest.approx(12 + 0.8 + 16384 / (1000 * 24.0))
    assert p2p_op_us(t, "sendrecv", 16385)[1] == Protocol.SIMPLE


def test_ll_threshold_after_the_nccl_2_23_merge_counts_the_channels_per_peer():
    t = rccl_tune(PRESETS["amd-mi355x"], 8, V2_26)
    # gfx950, one node: 4 channels for its one link to each peer, doubled on one node
    assert channels_per_peer(t) == 8
    assert p2p_op_us(t, "sendrecv", 8 * 16384)[1] == Protocol.LL
    assert p2p_op_us(t, "sendrecv", 8 * 16384 + 1)[1] == Protocol.SIMPLE
    # 2 × 2 links a pair on 4 MI300A APUs: 4 × 2, doubled
    assert channels_per_peer(rccl_tune(PRESETS["amd-mi300a"], 4, V2_26)) == 16


def test_mi250x_pairs_follow_rome_model_73():
    t = rccl_tune(PRESETS["amd-mi250x"], 8, V2_21)
    assert pair_GBps(t, 0, 1) == 4 * 36.0  # two GCDs of one MI250X
    assert pair_GBps(t, 0, 6) == 2 * 36.0
    # GCDs 1 and 2 (and 3 and 4) share no link: RCCL's path crosses the host, 36 GB/s each way a GCD
    # (OLCF's Frontier node diagram)
    assert pair_GBps(t, 1, 2) == pair_GBps(t, 3, 4) == 36.0
    assert channels_per_peer(t) == 2  # 2 a link, the one-link peers asking fewest; no doubling on gfx90a
    # the ring's slowest hops (1 -> 2, 5 -> 6) set sendrecv's time; tuning_model_0's 3.6 µs Simple xGMI hop
    us, _, _ = p2p_op_us(t, "sendrecv", GiB)
    assert us == pytest.approx(17 + 3.6 + GiB / (1000 * 36.0))


def test_gather_and_scatter_across_two_mi355x_nodes_by_hand():
    t = rccl_tune(PRESETS["amd-mi355x"], 16, V2_26)
    m = GiB / 16
    for op in ("gather", "scatter"):
        us, proto, bound = p2p_op_us(t, op, GiB, 8)
        # the root's 8 peers on the other node over its own 400 Gb/s NIC (RCCL: no PXN); its 7 node peers
        # over their own links (m / 48 GB/s) take less; one Ring/Simple network step (19.8 µs)
        assert proto == Protocol.SIMPLE and bound
        assert us == pytest.approx(17 + 19.8 + 8 * m / (1000 * 50.0))


def test_two_mi250x_nodes_share_a_nic_between_two_gcds():
    """4 Slingshot-11 NICs of 200 Gb/s for 8 GCDs (the preset): a rank alone on the network has its own NIC,
    25 GB/s; every rank at once, half of one. tuning_model_3's Ring/Simple network hop 19.8 µs."""
    t = rccl_tune(PRESETS["amd-mi250x"], 16, V2_21)
    us, _, bound = p2p_op_us(t, "sendrecv", GiB, 4)  # ranks 7 -> 8 and 15 -> 0 cross, each on its NIC
    assert bound and us == pytest.approx(17 + 19.8 + GiB / (1000 * 25.0))
    us, _, bound = p2p_op_us(t, "gather", GiB, 4)  # the root takes 8 blocks of 1/16 on its own NIC
    assert bound and us == pytest.approx(17 + 19.8 + 8 * (GiB / 16) / (1000 * 25.0))
    # hypercube's last group (mask 8): all 8 GCDs of a node at once, 4 × 25 GB/s over 8
    block = GiB // 16
    us, _, _ = p2p_op_us(t, "hypercube", GiB, 4, merged=True)
    assert us == pytest.approx(17 + 19.8 + 8 * block / (1000 * 12.5))


def test_gather_on_one_node_by_hand():
    t = rccl_tune(PRESETS["amd-mi300x"], 8, V2_21)
    # 7 peers' blocks of 1/8 each on its own 48 GB/s link, at once
    us, proto, _ = p2p_op_us(t, "gather", GiB)
    assert proto == Protocol.SIMPLE and us == pytest.approx(17 + 2.1 + GiB / 8 / (1000 * 48.0))


def test_hypercube_by_hand():
    t = rccl_tune(PRESETS["amd-mi355x"], 16, V2_26)
    block = GiB // 16
    # masks 1, 2, 4 on the node (48 GB/s link, an xGMI Ring/Simple step 17 + 2.1), then 8 across nodes: every
    # rank of a node at once, each on its share of 8 × 400 Gb/s (one NIC's 50 GB/s)
    local = sum(17 + 2.1 + block * k / (1000 * 48.0) for k in (1, 2, 4))
    across = 17 + 19.8 + block * 8 / (1000 * 50.0)
    us, _, bound = p2p_op_us(t, "hypercube", GiB, 8)
    assert bound and us == pytest.approx(local + across)
    # one thread driving the GPUs (-g 8): rccl-tests' own group around the call merges the three exchanges,
    # 1, 2 and 4 blocks to three peers at once, each on its own 48 GB/s link: one step, the 4 blocks' time
    one = rccl_tune(PRESETS["amd-mi355x"], 8, V2_26)
    us, _, _ = p2p_op_us(one, "hypercube", GiB, 8, merged=True)
    assert us == pytest.approx(17 + 2.1 + 4 * (GiB // 8) / (1000 * 48.0))
    assert p2p_op_us(one, "hypercube", GiB, 8)[0] == pytest.approx(
        sum(17 + 2.1 + (GiB // 8) * k / (1000 * 48.0) for k in (1, 2, 4)))
    with pytest.raises(ConfigError, match="power of two"):
        p2p_op_us(rccl_tune(PRESETS["amd-mi355x"], 12, V2_26), "hypercube", GiB, 8)


@pytest.mark.parametrize("op", ["sendrecv", "gather", "scatter", "hypercube"])
def test_the_cli_prices_each_op_on_an_mi355x_node(tmp_path, op):
    """The bundled one-node MI355X all-to-all sweep (-g 8) renamed: every row priced as the op's groups (the
    thread's own group merging hypercube's) plus the thread's launch stagger (7 × 3.74 µs), measured times
    those of the file's rows above 0 B."""
    path = tmp_path / f"{op}_perf-8xMI355X.txt"
    path.write_text((DATA / A2A_1N).read_text().replace("alltoall_perf", f"{op}_perf"))
    res = runner.invoke(app, ["check", str(path), "--topology", "amd-mi355x", "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["op"] == op and sweep["group_size"] == 8 and sweep["library"] == "RCCL"
    rows = [r for r in file_rows(A2A_1N) if r[0] > 0]  # rccl-tests prints 0 B rows, no time priced
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([m * 1e-6 for _, m, _ in rows])
    t = rccl_tune(PRESETS["amd-mi355x"], 8, V2_26, ranks_per_process=8)
    for r in sweep["rows"]:
        us, proto, _ = p2p_op_us(t, op, r["bytes"], 8, merged=True)
        assert r["algorithm"] == "P2P" and r["protocol"] == proto.value
        assert r["predicted_s"] == pytest.approx(us * 1e-6 + 7 * 3.74e-6)
    assert any(f"src/{op}.cu" in n for n in sweep["notes"])
