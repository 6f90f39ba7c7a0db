"""The p2p and NVLS channel counts and the NVLS graph an NCCL INFO log states, priced where they differ from
the derived ones.

NCCL prints ``"%d coll channels, [%d collnet channels, ][%d nvls channels, ]%d p2p channels, %d p2p channels
per peer"`` once a communicator is set up (``src/graph/paths.cc`` v2.8-v2.16, ``src/init.cc`` v2.17-v2.30):
``comm->p2pnChannels`` and ``comm->p2pnChannelsPerPeer`` (``ncclTopoComputeP2pChannels``) and
``comm->nvlsChannels`` (``src/transport/nvls.cc``: 0 where the communicator has no NVLS support). The
bundled logs with INFO lines state the derived counts (or, the p4d log, none a p2p sweep reads), so these
tests edit copies of bundled sweeps; the expected times are derived by hand from NCCL's figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.p2p import p2p_comm
from zerocalc.nccl.tables import release_for
from zerocalc.topology import get_topology
from zerocalc.traces.nccl_info import info_facts

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
PAIR = DATA / "alltoall-sendrecv-16xH100-2nodes-nccl2.29.2.log"  # alltoall_perf, sendrecv_perf: 2 × 8 H100
IB = DATA / "all_reduce_perf-16xH100-2nodes-infiniband.txt"  # 16 H100, NVLS Tree from 4 MiB
P4D = DATA / "all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.9.9.log"
HOST = "cnode3-002:2239162:2239162 [0] NCCL INFO "
GiB = 1 << 30


def _p2p_line(p2p: int, per_peer: int) -> str:
    return f"{HOST}16 coll channels, 16 collnet channels, 16 nvls channels, {p2p} p2p channels, {per_peer} " \
           "p2p channels per peer\n"


def _edited(tmp_path: Path, src: Path, after: str, lines: str) -> Path:
    """A copy of ``src`` with ``lines`` after each line starting with ``after``."""
    out = []
    for line in src.read_text().splitlines(True):
        out.append(line)
        if line.startswith(after):
            out.append(lines)
    path = tmp_path / src.name
    path.write_text("".join(out))
    return path


def _check(path: Path, *args: str) -> list[dict]:
    res = CliRunner().invoke(app, ["check", str(path), *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def test_the_line_states_p2p_and_nvls_channels_in_each_form():
    assert info_facts("NCCL INFO 8 coll channels, 8 p2p channels, 1 p2p channels per peer") == [
        ("comm_channels", 8), ("p2p_channels", [8, 1])]
    assert info_facts("NCCL INFO 24 coll channels, 16 nvls channels, 32 p2p channels, 2 p2p channels per "
                      "peer") == [("comm_channels", 24), ("p2p_channels", [32, 2]), ("nvls_channels", 16)]
    assert info_facts(_p2p_line(2, 1)) == [("comm_channels", 16), ("p2p_channels", [2, 1]),
                                           ("nvls_channels", 16)]
    # the GRAPH lines of the NVLS graph (pattern 5) and CollNet Direct's (pattern 6, v2.22 on)
    assert info_facts("NCCL INFO Pattern 5, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, "
                      "sameChannels 0") == [("nvls_graph", [16, 40.0, 40.0])]
    assert info_facts("NCCL INFO Pattern 6, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PIX, "
                      "sameChannels 1") == [("collnet_direct_graph", [8, 24.0, 24.0])]


def test_a_derived_count_stated_moves_nothing(tmp_path):
    # the derived p2p setup of 16 H100 at NCCL 2.29.2 is 16 p2p channels, 4 per peer: stating it changes
    # nothing and says nothing
    comm = p2p_comm(get_topology("dgx-h100"), 16, release_for("2.29.2")[0], "2.29.2", 16)
    assert (comm.p2p_channels, comm.per_peer) == (16, 4)
    stock = _check(PAIR)
    told = _check(_edited(tmp_path, PAIR, "# Reducing maxBytes", _p2p_line(16, 4)))
    for a, b in zip(stock, told, strict=True):
        assert b["nccl_info"]["p2p_channels"][0] == [16, 4]
        assert [r["predicted_s"] for r in a["rows"]] == [r["predicted_s"] for r in b["rows"]]
        assert not [n for n in b["notes"] if "NCCL's p2p channels" in n]


def test_stated_p2p_channels_are_priced(tmp_path):
    """``2 p2p channels, 1 p2p channels per peer``: each message on one channel.

    sendrecv_perf: a rank's message to its peer on the other node goes on one channel of
    ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s (v2.29.2 ``src/graph/paths.cc``), slower than its share of
    the node's NICs and than the NVLink message on one channel (``ncclTopoNVLinkBw`` 20.6 GB/s on sm90), so
    4 GiB more take 4 GiB / 14 GB/s more. alltoall_perf: each rank sends ``size / 16`` to 8 peers over the
    network and 7 over NVLink, all on 2 channels: (8 / 14 + 7 / 20.6) × size / 16 / 2 GB/s-seconds."""
    sweeps = _check(_edited(tmp_path, PAIR, "# Reducing maxBytes", _p2p_line(2, 1)))
    a2a, sr = sweeps
    assert (a2a["op"], sr["op"]) == ("all_to_all", "sendrecv")
    for s in sweeps:
        assert any("NCCL's p2p channels (line" in n and "2 p2p channels, 1 per peer, not the derived 16 and 4"
                   in n for n in s["notes"]), s["notes"]
    t = {r["bytes"]: r["nccl_s"] for r in sr["rows"]}
    assert t[8 * GiB] - t[4 * GiB] == pytest.approx(4 * GiB / 14e9, rel=1e-9)
    t = {r["bytes"]: r["nccl_s"] for r in a2a["rows"]}
    assert t[8 * GiB] - t[4 * GiB] == pytest.approx((8 / 14e9 + 7 / 20.6e9) * 4 * GiB / 16 / 2, rel=1e-9)


def test_p2p_channels_per_network_peer_before_nccl_2_12():
    """v2.8-v2.11 ``ncclTopoGetNchannels`` asks one channel of a network peer
    (``NCCL_NCHANNELS_PER_NET_PEER``, 2, from v2.12.12): the bundled p4d log (NCCL 2.9.9, 2 × 8 A100)
    states ``8 p2p channels, 1 p2p channels per peer``, which is now derived; 2.19 asks 2."""
    p4d = get_topology("aws-p4d")
    comm = p2p_comm(p4d, 16, release_for("2.9.9")[0], "2.9.9", 8)
    assert (comm.p2p_channels, comm.per_peer) == (8, 1)
    line = next(x for x in P4D.read_text().splitlines() if "coll channels" in x)
    assert info_facts(line) == [("comm_channels", 8), ("p2p_channels", [8, 1])]
    assert p2p_comm(p4d, 16, release_for("2.19.3")[0], "2.19.3", 8).per_peer == 2


def _nvls_line(count: int) -> str:
    return f"h100-0:1:1 [0] NCCL INFO 16 coll channels, 16 collnet channels, {count} nvls channels, 16 p2p " \
           "channels, 2 p2p channels per peer\n"


def test_zero_nvls_channels_leave_nvls_out_as_nccl_nvls_enable_0_does(tmp_path):
    """``0 nvls channels``: the communicator has no NVLS support (``nvls.cc`` zeroes ``nvlsChannels`` with
    ``nvlsSupport``), the state ``NCCL_NVLS_ENABLE=0`` puts it in: the sizes NCCL's model gave NVLS Tree
    go to another algorithm, priced as the same file under ``NCCL_NVLS_ENABLE=0``."""
    (stock,) = _check(IB, "--topology", "dgx-h100")
    assert any(r["algorithm"] == "NVLSTree" for r in stock["rows"])
    (zero,) = _check(_edited(tmp_path, IB, "nccl-tests provisioning", _nvls_line(0)),
                     "--topology", "dgx-h100")
    assert zero["nccl_info"]["nvls_channels"][0] == 0
    assert not any(r["algorithm"] in ("NVLS", "NVLSTree") for r in zero["rows"])
    assert any("0 nvls channels (line 2)" in n and "no NVLS support" in n for n in zero["notes"])
    off = tmp_path / "off"
    off.mkdir()
    (env,) = _check(_edited(off, IB, "nccl-tests provisioning",
                            "h100-0:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"),
                    "--topology", "dgx-h100")
    assert [(r["algorithm"], r["protocol"], r["predicted_s"]) for r in zero["rows"]] == [
        (r["algorithm"], r["protocol"], r["predicted_s"]) for r in env["rows"]]
    # the derived count stated (16 on sm90): nothing moves, no note
    same = tmp_path / "same"
    same.mkdir()
    (told,) = _check(_edited(same, IB, "nccl-tests provisioning", _nvls_line(16)), "--topology", "dgx-h100")
    assert [r["predicted_s"] for r in told["rows"]] == [r["predicted_s"] for r in stock["rows"]]
    assert not [n for n in told["notes"] if "nvls channels" in n]


def test_nvls_channels_on_a_machine_without_nvls_are_said_not_priced(tmp_path):
    # the p4d log (A100: no NVLink SHARP) edited to state 16 nvls channels: nothing to price them on
    edited = tmp_path / P4D.name
    edited.write_text(P4D.read_text().replace("NCCL INFO 8 coll channels, 8 p2p",
                                              "NCCL INFO 8 coll channels, 16 nvls channels, 8 p2p"))
    (stock,) = _check(P4D)
    (s,) = _check(edited)
    assert [r["predicted_s"] for r in s["rows"]] == [r["predicted_s"] for r in stock["rows"]]
    assert any("16 nvls channels" in n and "not priced" in n for n in s["notes"]), s["notes"]


def test_the_nvls_graph_stated_is_priced(tmp_path):
    """The NVLS graph's GRAPH line (pattern 5) stating 4 channels of 48/48 GB/s where 8 of 40/48 are derived
    (one per GPU and NIC of the node, ``NCCL_MAX_NVLS_ARITY``; 9 × bwIntra on each GPU's 18 × 20.6 GB/s
    NVSwitch link, ``search.cc`` ncclTopoSearchTryNvls, v2.30.7). NVLS Tree's bus bandwidth per channel is
    ``min(bwIntra × nvlsEfficiency × (nCh - 1) / nCh × 2, 2 × bwInter on 2 nodes, perChMaxNVLSTreeBw)``
    (v2.30.7 ``src/graph/tuning.cc``): sm90's efficiency 0.85 gives 59.5 GB/s on 8 channels of 40 and 61.2 on
    4 of 48, 2 × 48 = 96, and the cap on 2 sm90 nodes is 57.7: the cap binds on both, so the bus bandwidth
    is ``nChannels × 57.7`` and 4 channels double the large sizes' slope (the latency cancels)."""
    args = ("--topology", "dgx-h100", "--nccl-algo", "NVLSTree", "--nccl-version", "2.30.7")
    (stock,) = _check(IB, *args)
    line = ("h100-0:1:1 [0] NCCL INFO Pattern 5, crossNic 0, nChannels 4, bw 48.000000/48.000000, "
            "type NVL/NET, sameChannels 0\n")
    (told,) = _check(_edited(tmp_path, IB, "nccl-tests provisioning", line), *args)
    assert told["nccl_info"]["nvls_graph"] == [[4, 48.0, 48.0], 2]
    assert any("NCCL's NVLS / NVLSTree graph (its GRAPH line, line 2) priced: 4 channels of 48/48 GB/s "
               "(intra/inter), not the derived 8 of 40/48" in n for n in told["notes"]), told["notes"]
    t = {r["bytes"]: r["nccl_s"] for r in told["rows"]}
    ref = {r["bytes"]: r["nccl_s"] for r in stock["rows"]}
    assert all(r["algorithm"] == "NVLSTree" for r in told["rows"] + stock["rows"])
    assert t[8 * GiB] - t[4 * GiB] == pytest.approx(2 * (ref[8 * GiB] - ref[4 * GiB]), rel=1e-9)
    # the derived graph stated: nothing moves, no note
    same = tmp_path / "same"
    same.mkdir()
    derived = line.replace("nChannels 4, bw 48.0", "nChannels 8, bw 40.0")
    (eq,) = _check(_edited(same, IB, "nccl-tests provisioning", derived), *args)
    assert [r["nccl_s"] for r in eq["rows"]] == [r["nccl_s"] for r in stock["rows"]]
    assert not [n for n in eq["notes"] if "graph (its GRAPH line" in n]


def _env_line(name: str, value: int) -> str:
    return f"{HOST}{name} set by environment to {value}.\n"


def test_nchannels_per_net_peer_set_prices_point_to_point(tmp_path):
    """``NCCL_NCHANNELS_PER_NET_PEER=1`` (v2.29.2 ``ncclTopoGetNchannels``: the config value in place of the
    NICs' count, and no halving to fit the peers in a batch): every peer's messages on one channel, so
    sendrecv_perf's network message moves at one channel's 14 GB/s, as with one p2p channel per peer
    stated; the note says the variable is priced."""
    per_net_peer = _env_line("NCCL_NCHANNELS_PER_NET_PEER", 1)
    (a2a, sr) = _check(_edited(tmp_path, PAIR, "# Reducing maxBytes", per_net_peer))
    for s in (a2a, sr):
        assert any("priced: NCCL_NCHANNELS_PER_NET_PEER=1" in n for n in s["notes"]), s["notes"]
        assert any("over 16 p2p channels, 1 per peer" in n for n in s["notes"]), s["notes"]
    t = {r["bytes"]: r["nccl_s"] for r in sr["rows"]}
    assert t[8 * GiB] - t[4 * GiB] == pytest.approx(4 * GiB / 14e9, rel=1e-9)


def test_max_p2p_nchannels_bounds_the_p2p_channels(tmp_path):
    """``NCCL_MAX_P2P_NCHANNELS=2``: ``p2pnChannels = min(comm->nChannels, 2)`` = 2; a network peer asks
    max(1 NIC, 50 GB/s / 14) = 4 channels, halved while 4 × ceil(16 peers / 8) exceeds 2: 1 per peer.
    alltoall_perf then spreads 8 network and 7 NVLink messages of size / 16 over 2 channels:
    (8 / 14 + 7 / 20.6) × size / 16 / 2."""
    (a2a, _) = _check(_edited(tmp_path, PAIR, "# Reducing maxBytes", _env_line("NCCL_MAX_P2P_NCHANNELS", 2)))
    assert any("over 2 p2p channels, 1 per peer" in n for n in a2a["notes"]), a2a["notes"]
    t = {r["bytes"]: r["nccl_s"] for r in a2a["rows"]}
    assert t[8 * GiB] - t[4 * GiB] == pytest.approx((8 / 14e9 + 7 / 20.6e9) * 4 * GiB / 16 / 2, rel=1e-9)


def test_p2p_variables_are_unpriced_in_a_collective_sweep(tmp_path):
    (stock,) = _check(IB, "--topology", "dgx-h100")
    per_net_peer = _env_line("NCCL_NCHANNELS_PER_NET_PEER", 1)
    (s,) = _check(_edited(tmp_path, IB, "nccl-tests provisioning", per_net_peer), "--topology", "dgx-h100")
    assert any("NCCL_NCHANNELS_PER_NET_PEER=1, which NCCL's cost model does not price" in n
               for n in s["notes"])
    assert [r["predicted_s"] for r in s["rows"]] == [r["predicted_s"] for r in stock["rows"]]


def test_the_p2p_step_stated_or_set():
    """``comm->p2pChunkSize`` (``computeBuffSizes``, v2.29.2 ``src/init.cc``): ``NCCL_P2P_NET_CHUNKSIZE``
    across nodes (128 KiB by default), at most ``NCCL_BUFFSIZE / 8``. A 1 MiB network message of 16 ranks on
    2 nodes (4 channels per peer, ``nChannelsMin`` 1: 4 × 16 > 16 halved twice) starts on
    ``min(1, ceil(1 MiB / minPart))`` = 1 channel and doubles while a part exceeds ``maxPart``
    (``addP2pToPlan``): with the 128 KiB step (parts 64-128 KiB) up to the 4 channels per peer, with a
    1 MiB step (parts 512 KiB-1 MiB) it stays on 1."""
    from zerocalc.nccl.p2p import message_channels

    h100, rel = get_topology("dgx-h100"), release_for("2.29.2")[0]
    comm = p2p_comm(h100, 16, rel, "2.29.2", 16)
    assert (comm.chunk_bytes, message_channels(comm, 1 << 20, "net")) == (1 << 17, 4)
    big = p2p_comm(h100, 16, rel, "2.29.2", 16, net_chunk=1 << 20)
    assert (big.chunk_bytes, message_channels(big, 1 << 20, "net")) == (1 << 20, 1)
    assert p2p_comm(h100, 16, rel, "2.29.2", 16, net_chunk=1 << 20, buffsize=4 << 20).chunk_bytes == 1 << 19
    assert p2p_comm(h100, 8, rel, "2.29.2", 16, net_chunk=1 << 20).chunk_bytes == 1 << 19  # one node: NVL's
    assert info_facts("h:1:1 [0] NCCL INFO P2P Chunksize set to 524288") == [("p2p_chunk_bytes", 524288)]


def test_the_p2p_step_line_and_variables_reach_check(tmp_path):
    # the bundled pair's 4-16 GiB messages run on every channel per peer whatever the step: only the
    # pipeline's fill moves, one step of 1 MiB in place of 128 KiB at a network channel's 14 GB/s (65.5 us
    # more a row), and the notes say what was priced
    (a2a, _) = _check(PAIR)
    told = _edited(tmp_path, PAIR, "# Reducing maxBytes", f"{HOST}P2P Chunksize set to 1048576\n"
                   + _env_line("NCCL_P2P_NET_CHUNKSIZE", 1048576))
    (s, _) = _check(told)
    assert s["nccl_info"]["p2p_chunk_bytes"][0] == 1048576
    assert not [n for n in s["notes"] if "NCCL's p2p step" in n]  # the variable already derives it
    assert any("priced: NCCL_P2P_NET_CHUNKSIZE=1048576" in n for n in s["notes"]), s["notes"]
    more = (1048576 - 131072) / 14e9
    base = [r["predicted_s"] + more for r in a2a["rows"]]
    assert [r["predicted_s"] for r in s["rows"]] == pytest.approx(base)
    line_only = tmp_path / "line"
    line_only.mkdir()
    (s, _) = _check(_edited(line_only, PAIR, "# Reducing maxBytes", f"{HOST}P2P Chunksize set to 1048576\n"))
    assert any("NCCL's p2p step (line 24: \"P2P Chunksize set to 1048576\") priced: 1048576 bytes, not the "
               "derived 131072" in n for n in s["notes"]), s["notes"]
