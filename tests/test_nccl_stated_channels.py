"""The communicator's channel count an NCCL INFO log states (``"%d coll channels, ..."``), priced where it
differs from the one derived from the topology."""

import json
from pathlib import Path

from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.model import tune
from zerocalc.nccl.tables import release_for
from zerocalc.topology import get_topology
from zerocalc.traces.nccl_info import info_facts

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
P4D = DATA / "all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.9.9.log"
LINE = 470  # the file's first "coll channels" line (grep -n)


def test_the_line_in_each_releases_form():
    """The printf formats: ``src/graph/paths.cc`` v2.8-v2.16, ``src/init.cc`` v2.17-v2.21 (nvls) and
    v2.22-v2.30 (collnet, nvls); the first number is ``comm->nChannels`` in each."""
    forms = {
        "NCCL INFO 8 coll channels, 8 p2p channels, 1 p2p channels per peer": 8,
        "NCCL INFO 24 coll channels, 16 nvls channels, 32 p2p channels, 2 p2p channels per peer": 24,
        "h:25:66 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, "
        "2 p2p channels per peer": 16,
    }
    for line, count in forms.items():
        assert info_facts(line)[0] == ("comm_channels", count)  # then the p2p and nvls channels
    # a transport line names a channel but states no count of the communicator's
    assert info_facts("NCCL INFO Channel 00/0 : 13[5] -> 14[6] via P2P/CUMEM") == [("intra_p2p", True)]
    assert info_facts("NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC") == [("intra_p2p", True)]


def test_the_ring_lines_in_each_releases_form():
    """``ncclBuildRings`` (``src/graph/rings.cc``): ``"Channel %02d/%02d : "`` and ``" %d"`` per rank to
    v2.22, ``"Channel %02d/%02d :"`` and ``" %*d"`` from v2.23, cut to ``...`` at 128 characters; the
    second number is the final ``comm->nChannels``."""
    assert info_facts("h [0] NCCL INFO Channel 00/08 :    0   7   6   5   4   3   2   1   8  15") == [
        ("ring_channels", 8)]
    assert info_facts("NCCL INFO Channel 03/24 :  0  1  2  3  4  5  6  7  8  9 10 11") == [
        ("ring_channels", 24)]
    assert info_facts("NCCL INFO Channel 00/32 :   0   1   2   3  1...") == [("ring_channels", 32)]
    assert info_facts("NCCL INFO Channel 00/32 :   0   1   2   3 ...") == [("ring_channels", 32)]


def _check(path: Path) -> dict:
    res = CliRunner().invoke(app, ["check", str(path), "--nccl-algo", "Ring", "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def _slope_s(sweep: dict) -> float:
    """NCCL's time of the 4 GiB row less the 2 GiB row's: 2 GiB over the algorithm bandwidth."""
    t = {r["bytes"]: r["nccl_s"] for r in sweep["rows"]}
    return t[2**32] - t[2**31]


def test_bundled_log_states_the_derived_count_and_nothing_moves():
    """The p4d log (NCCL 2.9.9) states 8 coll channels: the graph's 4 doubled, as derived; no note, and the
    Ring/Simple all-reduce runs at 4 channels × 12 GB/s (two nodes: bwIntra) × 16 / 30 = 25.6 GB/s."""
    sweep = _check(P4D)
    assert sweep["nccl_info"]["comm_channels"] == [8, LINE]
    assert sweep["nccl_info"]["ring_channels"] == [8, 133]  # rank 0's "Channel 00/08 :" line (grep -n)
    assert not [n for n in sweep["notes"] if "communicator's channels" in n]
    assert abs(_slope_s(sweep) - 2**31 / 25.6e9) < 1e-9


def test_an_edited_count_is_priced(tmp_path):
    """The same log with ``4 coll channels``: comm->nChannels 4 is the graph's 2 doubled (``src/init.cc``),
    so NCCL 2.9.9's Ring/Simple bus bandwidth is 2 × 12 GB/s (``tuning.cc``: nChannels × bw, under the
    235 GB/s Ampere cap) and the all-reduce's 24 × 16 / (2 · 15) = 12.8 GB/s: 2 GiB more take
    2^31 / 12.8e9 s more."""
    edited = tmp_path / P4D.name
    edited.write_text(P4D.read_text().replace("NCCL INFO 8 coll channels", "NCCL INFO 4 coll channels"))
    sweep = _check(edited)
    assert sweep["nccl_info"]["comm_channels"] == [4, LINE]
    assert abs(_slope_s(sweep) - 2**31 / 12.8e9) < 1e-9
    (note,) = [n for n in sweep["notes"] if "communicator's channels" in n]
    assert f"4 (line {LINE})" in note and "not the 8 derived" in note
    assert all(r["algorithm"] == "Ring" and r["protocol"] == "Simple" for r in sweep["rows"][-2:])


def test_a_count_no_graph_gives_is_not_priced(tmp_path):
    """An odd count is no doubled graph count (two nodes of A100: no CollNet, no sm90 step): the derived
    count stays and a note says the line was not priced."""
    t = tune(get_topology("aws-p4d"), 16, release_for("2.9.9")[0], stated_channels=7)
    assert t.stated_channels is None and t.comm_channels == 8
    edited = tmp_path / P4D.name
    edited.write_text(P4D.read_text().replace("NCCL INFO 8 coll channels", "NCCL INFO 7 coll channels"))
    sweep = _check(edited)
    assert abs(_slope_s(sweep) - 2**31 / 25.6e9) < 1e-9
    assert any("not priced" in n and f"channels, 7 (line {LINE})" in n for n in sweep["notes"])


def test_a_bound_hides_the_graph_count():
    """Under NCCL_MAX_NCHANNELS=4 the stated 4 is the cap's, which any graph of 2 channels or more gives:
    the derived graph's 4 channels stand (the cap prices the call, as without the line)."""
    t = tune(get_topology("aws-p4d"), 16, release_for("2.9.9")[0], max_channels=4, stated_channels=4)
    assert t.stated_channels is None and t.comm_channels == 4 and t.channels.uncapped == 8


def test_graph_lines_in_each_releases_form():
    """``ncclTopoPrintGraph`` (``src/graph/search.cc``): ``speed`` to v2.18, ``bw`` from v2.19, intra before
    inter; pattern 4 is the ring, 1-3 the trees, 5 (NVLS) and 6 (CollNet Direct) not read."""
    from zerocalc.traces.nccl_info import InfoFacts

    facts = InfoFacts()
    for i, line in enumerate([
            "h [0] NCCL INFO Pattern 4, crossNic 0, nChannels 16, bw 20.000000/10.000000, type NVL/PIX, "
            "sameChannels 1",
            "h [0] NCCL INFO Pattern 5, crossNic 0, nChannels 16, bw 3.000000/3.000000, type NVL/PIX, "
            "sameChannels 0",
            "h [0] NCCL INFO Pattern 1, crossNic 0, nChannels 4, speed 12.000000/6.000000, type NVL/NET, "
            "sameChannels 0",
            "h [0] NCCL INFO Pattern 3, crossNic 0, nChannels 1, bw 2.000000/2.000000, type NVL/NET, "
            "sameChannels 0"], start=1):
        facts.add(line, i)
    d = facts.as_dict()
    assert d["ring_graph"] == [[16, 20.0, 10.0], 1]
    assert d["tree_graph"] == [[4, 12.0, 6.0], 3]  # the first tree line: init.cc prints CollNet's after


def test_a_stated_graph_is_priced(tmp_path):
    """The p4d log with the 2.9.9 GRAPH line of a ring of 4 channels at 6 GB/s each (the derived ring: 4 at
    12): NCCL 2.9.9's Ring/Simple bus bandwidth is 4 × 6 = 24 GB/s on two nodes (bwIntra), the all-reduce's
    24 × 16 / 30 = 12.8 GB/s; the count still gives the stated 8 coll channels (4 doubled)."""
    text = P4D.read_text().splitlines(keepends=True)
    prefix = text[LINE - 1].split("NCCL INFO")[0]
    graph = (prefix + "NCCL INFO Pattern 4, crossNic 0, nChannels 4, speed 6.000000/6.000000, type NVL/NET, "
             "sameChannels 0\n")
    edited = tmp_path / P4D.name
    edited.write_text("".join(text[:LINE - 1] + [graph] + text[LINE - 1:]))
    sweep = _check(edited)
    assert sweep["nccl_info"]["ring_graph"] == [[4, 6.0, 6.0], LINE]
    assert abs(_slope_s(sweep) - 2**31 / 12.8e9) < 1e-9
    (note,) = [n for n in sweep["notes"] if "GRAPH line" in n]
    assert f"line {LINE}" in note and "Ring" in note
    assert not [n for n in sweep["notes"] if "communicator's channels" in n]


def test_the_ring_lines_count_where_the_count_line_is_absent(tmp_path):
    """Without the ``coll channels`` line, the ring lines' ``/04`` (rank 0's, the first at line 133) is
    comm->nChannels: priced as the edited count line is (2^31 / 12.8e9 s per 2 GiB)."""
    text = [ln.replace("/08 :", "/04 :") for ln in P4D.read_text().splitlines(keepends=True)
            if "coll channels" not in ln]
    edited = tmp_path / P4D.name
    edited.write_text("".join(text))
    sweep = _check(edited)
    assert "comm_channels" not in sweep["nccl_info"]
    assert sweep["nccl_info"]["ring_channels"] == [4, 133]
    assert abs(_slope_s(sweep) - 2**31 / 12.8e9) < 1e-9
    assert any("channels, 4 (line 133)" in n for n in sweep["notes"])
