"""``--nccl-env NCCL_X=V``: a variable the run set that its output does not show, priced as if the file's own
lines set it. Each bundled file's launch line is cut out by a plain split (no zerocalc reader) and its
``-x NCCL_X=V`` given back with ``--nccl-env``: the price is the original file's. The point-to-point
channels NCCL_NCHANNELS_PER_NET_PEER gives are derived from NCCL's source (v2.30.7 ``src/graph/paths.cc``);
tests/data/traces/README.md names each file's source."""

import json
import tomllib

import pytest
from sweep_files import DATA, runner

from zerocalc.cli import app
from zerocalc.nccl.env_given import nccl_int

BROADCAST = "broadcast_perf-pre2022-NA-2ranks.txt"  # line 4: mpirun -x NCCL_ALGO=Ring -x NCCL_PROTO=Simple
RTX_A2A = "alltoall_perf-16xRTX6000D-2nodes-p2p-disable-crlf-nccl2.30.3.txt"  # line 2: -x NCCL_BUFFSIZE ...
VULTR_A2A = "alltoall_perf-16xB200-vultr-2nodes-uint8-table-only.txt"
VULTR_SR = "sendrecv_perf-16xB200-vultr-2nodes-uint8-table-only.txt"
NVL72_AR = "all_reduce_perf-72xGB200-nvl72-1rack-nccl2.26.2.txt"


def sweeps(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def priced(doc):
    return [[(r["bytes"], r["predicted_s"], r["algorithm"], r["protocol"]) for r in s["rows"]] for s in doc]


def cut_launch_line(name, lineno, tmp_path):
    """The file without its line ``lineno`` (bytes kept: CRLF files stay CRLF), and the ``-x NCCL_X=V`` of
    that line, by a plain split (the shell's escaped commas as the shell passes them)."""
    raw = (DATA / name).read_bytes().splitlines(keepends=True)
    words = raw[lineno - 1].decode().split()
    env = [w.replace("\\,", ",") for i, w in enumerate(words)
           if i and words[i - 1] == "-x" and w.startswith("NCCL_") and "=" in w]
    cut = tmp_path / name
    cut.write_bytes(b"".join(raw[:lineno - 1] + raw[lineno:]))
    return cut, env


@pytest.mark.parametrize(("name", "lineno", "args"), [(BROADCAST, 4, ()), (RTX_A2A, 2, ())])
def test_given_environment_prices_as_the_files_own_line(tmp_path, name, lineno, args):
    """A collective (NCCL_ALGO, NCCL_PROTO, channel bounds: NCCL's model) and a point-to-point sweep
    (NCCL_BUFFSIZE: the p2p step; NCCL_P2P_DISABLE on a PCIe box: the path) cut of their launch line
    price otherwise; given back with --nccl-env, as the original file."""
    cut, env = cut_launch_line(name, lineno, tmp_path)
    assert env and all(e.startswith("NCCL_") for e in env)
    original = sweeps(DATA / name, *args)
    assert priced(sweeps(cut, *args)) != priced(original)
    given = sweeps(cut, *args, *[x for e in env for x in ("--nccl-env", e)])
    assert priced(given) == priced(original)
    notes = " ".join(given[0]["notes"])
    assert "NCCL environment --nccl-env sets, priced:" in notes
    assert "NCCL environment the file sets" not in notes


def test_given_environment_over_the_files_and_empty_unsets(tmp_path):
    """--nccl-env is stronger than the file's lines; NCCL_X= unsets what a line sets (NCCL reads an empty
    variable as unset): the file with its four modelled variables unset prices as the file cut of them."""
    cut, env = cut_launch_line(BROADCAST, 4, tmp_path)
    modelled = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
    assert {e.split("=")[0] for e in env} >= set(modelled)
    unset = sweeps(DATA / BROADCAST, *[x for k in modelled for x in ("--nccl-env", f"{k}=")])
    assert priced(unset) == priced(sweeps(cut))
    assert any("the file's NCCL_ALGO=Ring (line 4) unset by --nccl-env NCCL_ALGO=" in n
               for n in unset[0]["notes"])
    ll = sweeps(DATA / BROADCAST, "--nccl-env", "NCCL_PROTO=LL")
    assert {r["protocol"] for r in ll[0]["rows"]} == {"LL"}  # broadcast runs Ring alone; the file says Ring
    assert any("the file's NCCL_PROTO=Simple (line 4) replaced by --nccl-env NCCL_PROTO=LL" in n
               for n in ll[0]["notes"])


def per_peer(sweep):
    (note,) = [n for n in sweep["notes"] if "per peer" in n]
    return int(note.split(" per peer")[0].split()[-1])


def test_channels_per_net_peer_sets_the_p2p_channels():
    """NCCL 2.30.7 (src/graph/paths.cc ncclTopoGetNchannels): a network peer asks for
    comm->config.nChannelsPerNetPeer channels, which NCCL_NCHANNELS_PER_NET_PEER sets (src/init.cc), an NVLink
    peer 2 · max(1, path bw / NVLink bw), at least 2; p2pnChannelsPerPeer is the least ask rounded up to a
    power of two, not halved to fit the peers in a batch when the variable is set
    (ncclTopoComputeP2pChannels).
    On two nodes of 8 B200, 1 and 2 are then the channels of each peer; the one peer of sendrecv moves over
    them, so its largest size takes longer on 1 than on 2."""
    args = ("--topology", "dgx-b200", "--n", "16")
    for name in (VULTR_A2A, VULTR_SR):
        one, two = (sweeps(DATA / name, *args, "--nccl-env", f"NCCL_NCHANNELS_PER_NET_PEER={v}")[0]
                    for v in (1, 2))
        assert (per_peer(one), per_peer(two)) == (1, 2)
        assert "NCCL environment --nccl-env sets, priced: NCCL_NCHANNELS_PER_NET_PEER=1" in one["notes"]
    assert one["rows"][-1]["predicted_s"] > two["rows"][-1]["predicted_s"]


def test_fit_out_takes_the_given_environment(tmp_path):
    """fit --out under --nccl-env NCCL_ALGO=... calibrates what --nccl-algo with the same list does."""
    algo = "^NVLS,NVLSTree"
    tomls = []
    for i, opt in enumerate((["--nccl-env", f"NCCL_ALGO={algo}"], ["--nccl-algo", algo])):
        out = tmp_path / f"c{i}.toml"
        res = runner.invoke(app, ["fit", str(DATA / NVL72_AR), "--out", str(out), "--topology", "gb200-nvl72",
                                  *opt])
        assert res.exit_code == 0, res.output
        tomls.append(tomllib.loads(out.read_text())["nccl_calibration"])
    assert tomls[0] == tomls[1] and "NVLS" not in {c["algorithm"] for c in tomls[0]}


@pytest.mark.parametrize(("value", "needle"), [
    ("NCCL_ALGO", "give NCCL_NAME=VALUE"),
    ("=Ring", "empty variable name"),
    ("ALGO=Ring", "not an NCCL variable"),
    ("nccl_algo=Ring", "not an NCCL variable"),
    ("NCCL_MIN_NCHANNELS=four", "whole number"),
    ("NCCL_MIN_NCHANNELS=4x", "whole number"),
    ("NCCL_NCHANNELS_PER_NET_PEER=9223372036854775808", "within 64 bits"),
    ("NCCL_ALGO=Ring,Torus", "unknown name 'torus'"),
    ("NCCL_PROTO=LL;Simple", "must have a prefix"),
    ("NCCL_THREAD_THRESHOLDS=8 8 64 8 8 64 8", "up to six"),
])
def test_bad_given_environment_is_one_line_exit_2(value, needle):
    res = runner.invoke(app, ["check", str(DATA / BROADCAST), "--nccl-env", value])
    assert res.exit_code == 2 and "--nccl-env" in res.stderr and needle in res.stderr, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_given_algo_beside_nccl_algo_and_outside_sweeps_are_refused(tmp_path):
    both = runner.invoke(app, ["check", str(DATA / BROADCAST), "--nccl-algo", "Ring",
                               "--nccl-env", "NCCL_ALGO=Tree"])
    assert both.exit_code == 2 and "NCCL_ALGO given twice" in both.stderr
    shell = runner.invoke(app, ["check", str(DATA / BROADCAST), "--nccl-env", "NCCL_PROTO=LL"],
                          env={"NCCL_PROTO": "Simple"})
    assert shell.exit_code == 2 and "the shell's NCCL_PROTO" in shell.stderr
    log = DATA.parent / "nccl-debug" / "ddp-allreduce-128ranks-L4-ray.txt"
    trace = runner.invoke(app, ["check", str(log), "--nccl-env", "NCCL_ALGO=Ring"])
    assert trace.exit_code == 2 and "--nccl-env" in trace.stderr and "give a sweep" in trace.stderr
    fit = runner.invoke(app, ["fit", str(DATA / BROADCAST), "--nccl-env", "NCCL_ALGO=Ring"])
    assert fit.exit_code == 2 and "give --out" in fit.stderr
    for res in (both, shell, trace, fit):
        assert len(res.stderr.strip().splitlines()) == 1


def test_unread_and_unpriced_given_variables_are_said():
    sweep = sweeps(DATA / BROADCAST, "--nccl-env", "NCCL_IB_QPS_PER_CONNECTION=4",
                   "--nccl-env", "NCCL_SHM_DISABLE=1")[0]
    assert ("--nccl-env also sets NCCL_SHM_DISABLE=1, NCCL_IB_QPS_PER_CONNECTION=4, which NCCL's cost model "
            "does not price") in sweep["notes"]


@pytest.mark.parametrize(("text", "value"), [
    # C's strtoll with base 0 (ISO C 7.22.1.4), as NCCL's ncclLoadParam calls it (src/misc/param.cc v2.30.7)
    ("16", 16), ("0x10", 16), ("0X1f", 31), ("010", 8), ("0", 0), ("-1", -1), ("+2", 2), (" 4", 4),
    ("9223372036854775807", 2 ** 63 - 1), ("-9223372036854775808", -(2 ** 63)),
    ("9223372036854775808", None), ("08", None), ("0x", None), ("4k", None), ("", None), ("1.5", None),
])
def test_nccl_int_reads_as_strtoll_base_0(text, value):
    assert nccl_int(text) == value


@pytest.mark.parametrize("written", ["0x2", "02", "+2"])
def test_a_files_own_whole_number_reads_as_ncclLoadParam_reads_it(tmp_path, written):
    """NCCL reads a variable's whole number with strtoll base 0 (src/misc/param.cc ncclLoadParam, v2.30.7):
    the broadcast's launch line written with NCCL_MAX_NCHANNELS=0x2 (or 02, +2) prices as its =2."""
    raw = (DATA / BROADCAST).read_text()
    assert raw.count("-x NCCL_MAX_NCHANNELS=2 ") == 1
    edited = tmp_path / BROADCAST
    edited.write_text(raw.replace("-x NCCL_MAX_NCHANNELS=2 ", f"-x NCCL_MAX_NCHANNELS={written} "))
    assert priced(sweeps(edited)) == priced(sweeps(DATA / BROADCAST))


def test_a_files_value_ncclLoadParam_would_not_read_is_refused_naming_its_line(tmp_path):
    raw = (DATA / BROADCAST).read_text()
    edited = tmp_path / BROADCAST
    edited.write_text(raw.replace("-x NCCL_MAX_NCHANNELS=2 ", "-x NCCL_MAX_NCHANNELS=2x "))
    res = runner.invoke(app, ["check", str(edited)])
    assert res.exit_code == 2
    assert res.output.strip() == (f"error: {edited}:4: NCCL_MAX_NCHANNELS=2x: NCCL reads a whole number here "
                                  "(strtoll base 0: 4, 0x4, 04; within 64 bits)")
