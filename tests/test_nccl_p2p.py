"""nccl-tests' point-to-point ops (alltoall, sendrecv, gather, scatter, hypercube): recognition, the p2p
time model (zerocalc.nccl.p2p) by hand, and check / fit on public sweeps (CLI)."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl.model import tune
from zerocalc.nccl.p2p import P2pOp, message_channels, op_time, p2p_comm, protocol
from zerocalc.nccl.tables import Protocol, release_for
from zerocalc.topology import get_topology
from zerocalc.traces.nccl_tests import parse
from zerocalc.validate.sweep import sweep_op

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
PAIR = "alltoall-sendrecv-16xH100-2nodes-nccl2.29.2.log"
ONE_NODE = "five-tests-8xH100-1node-nccl2.29.2.log"
TEN_NODES = "five-tests-80xH100-10nodes-nccl2.29.2.log"
runner = CliRunner()


def runs_in_file(name):
    """Per ``# Collective test starting`` run: (test, [(size, count, out-of-place µs)]), counted from the
    file itself."""
    runs = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("# Collective test starting:"):
            runs.append((line.split()[-1], []))
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            runs[-1][1].append((int(f[0]), int(f[1]), float(f[5])))
    return runs


def check_json(*args):
    res = runner.invoke(app, ["check", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


# -- recognition ------------------------------------------------------------------------------------------

def test_rows_of_the_pair_file_are_counted_from_it():
    with open(DATA / PAIR) as fh:
        res = parse(fh, PAIR)
    file_runs = runs_in_file(PAIR)
    assert [t for t, _ in file_runs] == ["alltoall_perf", "sendrecv_perf"]
    assert [r["test"] for r in res.meta["runs"]] == ["alltoall_perf", "sendrecv_perf"]
    for i, (_, rows) in enumerate(file_runs):
        got = [r for r in res.rows if r["run"] == i]
        assert [(r["size_bytes"], r["count"]) for r in got] == [(s, c) for s, c, _ in rows]
        assert [r["duration_s"] for r in got] == pytest.approx([t * 1e-6 for _, _, t in rows])
    a2a = [r for r in res.rows if r["run"] == 0]
    # alltoall: count per peer, size = count x 8 bytes (double) x 16 ranks; each rank sends count to each
    assert {r["op"] for r in a2a} == {"all_to_all"} and {r["nccl_test"] for r in a2a} == {"alltoall"}
    assert a2a[0]["in_nelems"] == 33554432 * 16 and a2a[0]["group_size"] == 16
    sr = [r for r in res.rows if r["run"] == 1]
    assert {sweep_op(r) for r in sr} == {"sendrecv"} and sr[0]["in_nelems"] == 536870912


#: A bundled table each test prints (alltoall's and sendrecv's in-place check N/A, gather's and scatter's
#: redop none and a root): a command line naming one test above another's table gives way to the table.
TABLE_OF = {"alltoall": "alltoall_perf-2xRTX2080Ti-pcie3-shm.txt",
            "sendrecv": "sendrecv_perf-8xA100-g8-block.txt",
            "gather": "gather_perf-2xA100-PCIe-2nodes-roce-stepbytes-nccl2.16.5.txt",
            "scatter": "gather_perf-2xA100-PCIe-2nodes-roce-stepbytes-nccl2.16.5.txt"}


@pytest.mark.parametrize(("test", "expected"), [
    ("alltoall", "all_to_all"), ("sendrecv", "sendrecv"), ("gather", "gather"), ("scatter", "scatter"),
    ("hypercube", "hypercube"), ("alltoallv", "alltoallv")])
@pytest.mark.parametrize("form", ["file name", "file name joined by _", "_perf_mpi command line"])
def test_every_op_is_read_from_the_file_or_its_name(tmp_path, test, expected, form):
    """The op of a real all_reduce output whose op was renamed, as a user's copy would be: the file name
    (alone or joined to other words by underscores) or an ``<op>_perf_mpi`` command line above it."""
    src = (DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt").read_text()
    if form == "file name":
        path = tmp_path / f"{test}_perf-16xH100.txt"
        path.write_text(src)
    elif form == "file name joined by _":
        path = tmp_path / f"nccl_{test}_perf_2nodes.log"
        path.write_text(src)
    else:  # a command line of the file's own names its test only above a table that test prints
        table = (DATA / TABLE_OF.get(test, "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt")).read_text()
        path = tmp_path / "run.log"
        path.write_text(f"mpirun -np 16 /opt/nccl-tests/build/{test}_perf_mpi -b 8 -e 16G -f 2\n"
                        + "".join(ln for ln in table.splitlines(True) if "_perf" not in ln))
    with open(path) as fh:
        res = parse(fh, str(path))
    assert {sweep_op(r) for r in res.rows} == {expected}
    assert res.meta["test"] == f"{test}_perf"


def test_a_name_inside_a_word_is_not_an_op(tmp_path):
    path = tmp_path / "myalltoall_perfx.txt"
    shutil.copy(DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", path)
    res = runner.invoke(app, ["check", str(path)])
    # not alltoall: the name is no <test>_perf word, and the table itself tells all_reduce
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"{path}: all_reduce on 16 ranks")
    assert "note: the file names no test (no <op>_perf): all_reduce told by its table" in res.stdout


def test_a_known_op_without_a_price_is_refused_in_one_line(tmp_path):
    path = tmp_path / "alltoallv_perf.txt"
    shutil.copy(DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", path)
    res = runner.invoke(app, ["check", str(path)])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "alltoallv_perf sends an uneven count" in res.stderr


def test_hypercube_needs_a_power_of_two(tmp_path):
    """The file's rows under hypercube_perf with --n 12: rank ^ 2^k is no rank for 12."""
    path = tmp_path / "hypercube_perf.txt"
    shutil.copy(DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", path)
    res = runner.invoke(app, ["check", str(path), "--n", "12"])
    assert res.exit_code == 2 and "not a power of two" in res.stderr


# -- the model by hand ------------------------------------------------------------------------------------

def comm(n, version, preset="dgx-h100", **kw):
    topo = get_topology(preset)
    rel, _ = release_for(version)
    return p2p_comm(topo, n, rel, version, tune(topo, n, rel).comm_channels, **kw)


def test_alltoall_4GiB_on_two_dgx_h100_by_hand():
    """alltoall_perf, 16 ranks on 2 DGX H100 nodes, NCCL 2.29.2, size 4 GiB (the pair file's first row).

    Each rank sends m = 4 GiB / 16 = 256 MiB to each of 15 peers: 7 over NVLink, 8 through the network.
    Its share of the node's NICs: 8 NICs x min(400 Gb/s / 8 = 50, PCIe 5.0 x16 as NCCL counts it = 48)
    GB/s / 8 ranks = 48 GB/s, so the network bytes 8 x 256 MiB = 2 GiB take 2147483648 / 48e9 s =
    44739.2 us. The other bounds are lower: 7 x 256 MiB over NVLink (18 links x 20.6 GB/s = 370.8 GB/s)
    5068.7 us; one message on its 4 channels (2.29: ceil(48 / 14) = 4 network channels per peer, not
    halved as 4 x ceil(16 / 8) = 8 <= 16 p2p channels) at 14 GB/s each 4793.5 us. Latency (Simple):
    NCCL 2.30's Ring base 8.4 us + one network hop 14 us (the 15 messages fit 16 channels in one wave)
    + 8 network messages x 1 us (Intel host) x 3. The pipeline's fill: one step of the communicator's
    p2pChunkSize (128 KiB across nodes) at a channel's rate, the slower of a network channel's 14 GB/s
    (131072 / 14e9 s = 9.4 us) and an NVLink channel's 20.6 (6.4 us): 44795.0 us."""
    c = comm(16, "2.29.2")
    assert (c.p2p_channels, c.per_peer) == (16, 4)
    m = 4 * 2**30 // 16
    assert message_channels(c, m) == 4 and protocol(c, m) == Protocol.SIMPLE
    t = op_time(c, P2pOp.ALL_TO_ALL, 4 * 2**30)
    assert t.transfer_us == pytest.approx(2147483648 / 48e9 * 1e6 + 131072 / 14e9 * 1e6)
    assert t.latency_us == pytest.approx(8.4 + 14.0 + 8 * 3)
    assert t.time_s * 1e6 == pytest.approx(44795.0, abs=0.1)


def test_sendrecv_on_one_node_doubles_its_channels_with_size():
    """sendrecv, 8 ranks on one DGX H100, NCCL 2.29.2: p2pnChannels = 32 (24 channels rounded up), 32 per
    peer (2 x 18 NVLink links, capped), 4 when each of 8 ranks starts (32 / 8); parts of 512 KiB / 8 =
    64 KiB to 32 x 512 KiB = 16 MiB: 32 MiB stays on 4 channels (8 MiB parts), 128 MiB takes 8 (16 MiB
    parts), 512 MiB 32. Each channel at one NVLink link (20.6 GB/s): 32 MiB in 33554432 / (4 x 20.6e9)
    s = 407.2 us, one 512 KiB step more for the pipeline's fill (524288 / 20.6e9 s = 25.5 us), + 8.4 + 3.4
    us (Ring/Simple base and NVLink hop)."""
    c = comm(8, "2.29.2")
    assert (c.p2p_channels, c.per_peer) == (32, 32)
    assert [message_channels(c, 2**k) for k in (25, 26, 27, 28, 29)] == [4, 4, 8, 16, 32]
    t = op_time(c, P2pOp.SENDRECV, 2**25)
    assert t.time_s * 1e6 == pytest.approx((33554432 / 4 + 524288) / 20.6e9 * 1e6 + 8.4 + 3.4)


def test_network_channels_per_peer_follow_the_release():
    """Channels per network peer on 16 and 80 ranks: 2 up to 2.20; 2.21-2.28 2 halved while 2 x nRanks >
    4 x p2pnChannels (16 ranks: 32 <= 64, 80: 160 > 64 -> 1); 2.29 ceil(48 / 14) = 4 halved while
    4 x ceil(nRanks / 8) > 16 (80 ranks -> 1); 2.30 halves by maxP2pPeers instead (sendrecv_perf: 2)."""
    assert comm(16, "2.19.4").per_peer == 2 and comm(80, "2.19.4").per_peer == 2
    assert comm(16, "2.26.2").per_peer == 2 and comm(80, "2.26.2").per_peer == 1
    assert comm(16, "2.29.2").per_peer == 4 and comm(80, "2.29.2").per_peer == 1
    assert comm(80, "2.30.7").per_peer == 1 and comm(80, "2.30.7", max_peers=2).per_peer == 4


def test_small_messages_use_ll_at_half_bandwidth():
    c = comm(8, "2.29.2")
    assert protocol(c, 32 * 16384) == Protocol.LL and protocol(c, 32 * 16384 + 1) == Protocol.SIMPLE
    assert op_time(c, P2pOp.ALL_TO_ALL, 8).latency_us == pytest.approx(6.6 + 0.6)  # Ring/LL base + hop


def test_gather_scatter_and_hypercube_are_priced():
    c = comm(16, "2.29.2")
    size = 2**32
    assert op_time(c, P2pOp.GATHER, size).time_s == pytest.approx(op_time(c, P2pOp.ALL_TO_ALL, size).time_s)
    assert op_time(c, P2pOp.SCATTER, size).time_s < op_time(c, P2pOp.GATHER, size).time_s  # PXN
    # hypercube: exchanges of 1, 2, 4 blocks (size / 16) over NVLink, then 8 over the network, one after
    # another: the last alone is 8 x 256 MiB / 48 GB/s (4 channels x 14 GB/s above the NIC share); each
    # with one 128 KiB step of fill at its channel's rate (20.6 GB/s NVLink, 14 network)
    hc = op_time(c, P2pOp.HYPERCUBE, size)
    net = (8 * size // 16 / 48e9 + 131072 / 14e9) * 1e6
    nvl = sum((k * size // 16 / 4 + 131072) / 20.6e9 * 1e6 for k in (1, 2, 4))  # 4 channels per NVLink peer
    assert hc.transfer_us == pytest.approx(net + nvl)
    with pytest.raises(ConfigError):
        op_time(comm(12, "2.29.2"), P2pOp.HYPERCUBE, size)


# -- check and fit on public sweeps ----------------------------------------------------------------------

@pytest.mark.parametrize("name", [PAIR, ONE_NODE, TEN_NODES])
def test_check_prices_the_p2p_sweeps_within_the_issue_bands(name):
    """Every alltoall / sendrecv sweep of the files, on the preset their device lines give (dgx-h100) at the
    NCCL they state (2.29.2): 0.5-2x at every size, 0.8-1.25x at the median size; rows named P2P."""
    sweeps = [s for s in check_json(str(DATA / name)) if s["op"] in ("all_to_all", "sendrecv")]
    file_runs = {t: rows for t, rows in runs_in_file(name)}
    assert len(sweeps) == 2
    for s in sweeps:
        test = "alltoall_perf" if s["op"] == "all_to_all" else "sendrecv_perf"
        assert s["topology"] == "dgx-h100" and s["nccl_version"] == "2.29.2"
        assert [r["bytes"] for r in s["rows"]] == [size for size, _, _ in file_runs[test]]
        measured = [t * 1e-6 for _, _, t in file_runs[test]]
        assert [r["measured_s"] for r in s["rows"]] == pytest.approx(measured)
        assert {(r["algorithm"], r["protocol"]) for r in s["rows"]} == {("P2P", "Simple")}
        ratios = [r["ratio"] for r in s["rows"]]
        assert all(0.5 <= x <= 2 for x in ratios), (name, s["op"], ratios)
        mid = sorted(s["rows"], key=lambda r: r["bytes"])[(len(s["rows"]) - 1) // 2]
        assert 0.8 <= mid["ratio"] <= 1.25, (name, s["op"], mid)


def test_check_prices_the_a100_sendrecv_block():
    """8 A100 (one process, -g 8) sendrecv, 128 MiB-1 GiB, no NCCL version printed: every size within
    0.5-2x; the GPUs move 195 GB/s where NCCL counts 12 links x 20 GB/s = 240 for their NVLink, so the
    model stays 0.72-0.82x (its median size 0.81x, one 512 KiB step of fill included)."""
    name = "sendrecv_perf-8xA100-g8-block.txt"
    (s,) = check_json(str(DATA / name), "--topology", "dgx-a100", "--n", "8")
    rows = [ln.split() for ln in (DATA / name).read_text().splitlines()]
    file_rows = [(int(f[0]), float(f[5]) * 1e-6) for f in rows if len(f) >= 13 and f[0].isdigit()]
    assert [r["bytes"] for r in s["rows"]] == [b for b, _ in file_rows]
    assert [r["measured_s"] for r in s["rows"]] == pytest.approx([t for _, t in file_rows])
    ratios = [r["ratio"] for r in s["rows"]]
    assert all(0.5 <= x <= 2 for x in ratios) and 0.7 <= min(ratios) and max(ratios) <= 0.85


def test_fit_out_calibrates_a_p2p_sweep(tmp_path):
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / TEN_NODES), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "sendrecv on 80 ranks (10 nodes × 8 ranks), P2P/Simple" in res.stdout  # the hosts the file lists
    for s in check_json(str(DATA / TEN_NODES), "--topology", str(out)):
        if s["op"] in ("all_to_all", "sendrecv"):
            assert all(r["calibrated"] for r in s["rows"])
            mid = sorted(s["rows"], key=lambda r: r["bytes"])[(len(s["rows"]) - 1) // 2]
            assert 0.9 <= mid["ratio"] <= 1.1


def test_channel_bounds_and_the_wire_latency_reach_the_p2p_model():
    """NCCL_MAX_NCHANNELS=4 caps comm->nChannels, which p2pnChannels starts from (paths.cc); on aws-p5 the
    network hop is the EFA wire's 20 µs (the preset's net_wire_latency_us), not the 75 µs the plugin
    reports to NCCL's tuner."""
    from zerocalc.validate.sweep import compare_sweep

    with open(DATA / PAIR) as fh:
        rows = [r for r in parse(fh, PAIR).rows if r["run"] == 0]
    cmp = compare_sweep(rows, get_topology("dgx-h100"), op="all_to_all", group_size=16, nccl_version="2.29.2",
                        channels=(None, 4))
    assert any("over 4 p2p channels" in n for n in cmp.notes)
    assert comm(16, "2.29.2", "aws-p5").net_latency_us == 20.0
    assert comm(16, "2.29.2", "dgx-h100").net_latency_us == 0.0


def test_op_and_ranks_given_keep_a_p2p_rows_test(tmp_path):
    """complete() (check/fit --op/--ranks) re-derives a gather row's element counts from its own test."""
    from zerocalc.traces.nccl_tests import complete
    from zerocalc.traces.reader import read_traces

    path = tmp_path / "gather_perf.txt"
    shutil.copy(DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt", path)
    table = complete(read_traces([str(path)]).table, ranks=16)
    assert set(table["nccl_test"].astype(str)) == {"gather"}
    first = table.iloc[0]
    assert (first["in_nelems"], first["out_nelems"]) == (2, 2 * 16)  # count 2 per rank, 16 gathered


def test_older_releases_split_messages_their_way():
    """NCCL 2.19.4's scheduleP2pTasksToPlan halves the most channels a message takes on one node while
    nChannelsMax x nRanks > 4 x p2pnChannels (32 x 8 > 128 -> 16): a 4 GiB sendrecv on 8 H100 runs on 16
    channels x 20 GB/s (2.19's NVLink figure) = 320 GB/s, under the 18 x 20 = 360 GB/s of NVLink:
    4294967296 / 320e9 s, one 512 KiB step of fill at 20 GB/s (26.2 us), + 8.4 + 3.4 us. 2.19 and 2.21
    choose LL per chunk of at most 16 KiB."""
    c = comm(8, "2.19.4")
    assert message_channels(c, 2**32) == 16
    want = (2**32 / 320e9 + 524288 / 20e9) * 1e6 + 8.4 + 3.4
    assert op_time(c, P2pOp.SENDRECV, 2**32).time_s * 1e6 == pytest.approx(want)
    assert protocol(c, 16384) == Protocol.LL and protocol(c, 16385) == Protocol.SIMPLE
    assert protocol(comm(8, "2.26.2"), 32 * 16384) == Protocol.LL


def test_a_release_before_the_p2p_chunk_sizes_is_said():
    """NCCL_P2P_NET_CHUNKSIZE first appears in v2.14.3's src/init.cc: a 2.12 run is priced with a note."""
    (a2a, _) = check_json(str(DATA / PAIR), "--nccl-version", "2.12.12")
    assert any("predates the per-transport p2p chunk sizes of 2.14" in n for n in a2a["notes"])
    (a2a, _) = check_json(str(DATA / PAIR), "--nccl-version", "2.14.3")
    assert not any("predates" in n for n in a2a["notes"])


def test_network_messages_go_simple_whatever_their_size():
    """No LL buffers on p2p network connections by default (NCCL_ALLOC_P2P_NET_LL_BUFFERS=0): an 8-byte
    sendrecv across 2 DGX H100 nodes (NCCL 2.29.2) pays Ring/Simple's base 8.4 us, one network hop
    14 us and one network post x 3 (1 us on an Intel host): 25.4 us, plus 8 B over 4 channels."""
    c = comm(16, "2.29.2")
    assert protocol(c, 8, "net") == Protocol.SIMPLE and protocol(c, 8, "nvl") == Protocol.LL
    t = op_time(c, P2pOp.SENDRECV, 8)
    assert t.protocol == Protocol.SIMPLE and t.latency_us == pytest.approx(8.4 + 14 + 3)


def test_table_prices_zeropp_all_to_all_as_check_prices_alltoall_perf(tmp_path):
    """ZeRO++'s qgZ all-to-all in `table` is the same grouped send/receive `check` prices for an
    alltoall_perf row: the intra-node phase (Ψ int4 elements per rank, Ψ/2 bytes, on the G = 8 ranks
    of one DGX H100, NCCL 2.30) takes the time of a one-node alltoall_perf row of that size."""
    from zerocalc.nccl import RELEASES
    from zerocalc.nccl.steps import scheme_phases
    from zerocalc.topology import get_topology
    from zerocalc.validate.sweep import compare_sweep

    topo = get_topology("dgx-h100")
    psi = 7.5e9
    phases = scheme_phases("zeropp", psi=psi, n=16, gpus_per_node=8, comm_bytes=2.0, topology=topo,
                           release=RELEASES["2.30"], nccl_version="2.30.7")
    intra = next(p for p in phases if p.collective == "all_to_all" and p.group == "intra")
    assert (intra.algorithm, intra.ranks, intra.bytes_per_call) == ("P2P", 8, psi / 2)
    row = {"size_bytes": int(psi / 2), "duration_s": 1.0}
    (priced,) = compare_sweep([row], topo, op="all_to_all", group_size=8, nccl_version="2.30.7").rows
    assert intra.time_s == pytest.approx(intra.calls * priced["predicted_s"], rel=1e-12)
