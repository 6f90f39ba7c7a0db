"""The NCCL environment a sweep's own lines set (launch lines, NCCL INFO lines) is what `check` prices."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces.launch_env import settings_in
from zerocalc.traces.nccl_tests import parse

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
XE9680 = DATA / "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"
runner = CliRunner()


def run_check(*args):
    return runner.invoke(app, ["check", *map(str, args)])


@pytest.mark.parametrize("line,found", [
    # OpenMPI -x, quoted (nccl-tests README style launch lines)
    ('mpirun -np 16 -x NCCL_DEBUG=INFO -x NCCL_ALGO=Ring -x "NCCL_PROTO=^LL128" ./build/all_reduce_perf',
     [("NCCL_DEBUG", "INFO", 1), ("NCCL_ALGO", "Ring", 1), ("NCCL_PROTO", "^LL128", 1)]),
    # shell prefix and export; a use of the variable is not a setting
    ("export NCCL_ALGO=Tree; NCCL_PROTO=Simple ./all_reduce_perf -g 8 # ${NCCL_ALGO}",
     [("NCCL_ALGO", "Tree", 1), ("NCCL_PROTO", "Simple", 1)]),
    # MPICH / Intel MPI -genv NAME VALUE; a bare -x NAME passes a value on without stating it
    ("mpiexec -genv NCCL_ALGO Ring -x NCCL_PROTO -n 8 ./all_reduce_perf", [("NCCL_ALGO", "Ring", 2)]),
    # Slurm --export list: a value with commas ends where the next NAME= begins
    ("srun --export=ALL,NCCL_ALGO=NVLS,Ring,NCCL_MAX_NCHANNELS=4 ./all_reduce_perf",
     [("NCCL_ALGO", "NVLS,Ring", 1), ("NCCL_MAX_NCHANNELS", "4", 1)]),
    # NCCL's own lines: param.cc "%s set by environment to %lld." and tuning.cc's for NCCL_ALGO/NCCL_PROTO
    ("node1:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8.", [("NCCL_MAX_NCHANNELS", "8", 3)]),
    ("node1:1:2 [0] NCCL INFO NCCL_PROTO set by environment to ^LL128", [("NCCL_PROTO", "^LL128", 3)]),
    ("#  Rank  0 Group  0 Pid  29262 on bm-h100-01 device  0 [0000:19:00] NVIDIA H100 80GB HBM3", []),
    # aws-ofi-nccl putting a variable into NCCL's environment (its INFO format strings): platform-aws.c
    # v1.6-v1.15 (this line as aws-samples' EFA-on-EKS page shows it under NCCL 2.12.7), nccl_ofi_net.cpp and
    # nccl_ofi_environ.h from v1.16; its other lines state nothing
    ('[1,0]<stdout>:test-nccl-efa-worker-0:21:21 [0] NCCL INFO NET/OFI Setting NCCL_PROTO to "simple"',
     [("NCCL_PROTO", "simple", 3)]),
    ("h:1:2 [0] NCCL INFO NET/OFI Need to force simple protocol: byte delivery ordering not supported",
     [("NCCL_PROTO", "simple", 3)]),
    ("h:1:2 [0] NCCL INFO NET/OFI Adding NCCL_PROTO=simple to environment", [("NCCL_PROTO", "simple", 3)]),
    ("h:1:2 [0] NCCL INFO NET/OFI Disabling NVLS support due to NCCL version 21803",
     [("NCCL_NVLS_ENABLE", "0", 3)]),
    ("h:1:2 [0] NCCL INFO NET/OFI Skipping adding NCCL_PROTO to environment, already set", []),
    ("h:1:2 [0] NCCL INFO NET/OFI Setting NCCL_NVLSTREE_MAX_CHUNKSIZE to 512KiB", []),
])
def test_settings_in_a_line(line, found):
    assert settings_in(line) == found


def test_the_bundled_v100_broadcast_states_its_environment():
    # NVIDIA/nccl-tests issue 82: line 4 launches with -x NCCL_ALGO=Ring -x NCCL_PROTO=Simple and
    # NCCL_MIN/MAX_NCHANNELS=2 (read off the file)
    path = DATA / "broadcast_perf-pre2022-NA-2ranks.txt"
    line4 = path.read_text().splitlines()[3]
    assert "-x NCCL_ALGO=Ring" in line4 and "-x NCCL_MAX_NCHANNELS=2" in line4
    with open(path) as f:
        (run,) = parse(f, str(path)).meta["runs"]
    env = run["nccl_env"]
    assert env["NCCL_ALGO"] == ["Ring", 4] and env["NCCL_PROTO"] == ["Simple", 4]
    assert env["NCCL_MIN_NCHANNELS"] == ["2", 4] and env["NCCL_MAX_NCHANNELS"] == ["2", 4]


def _with_lines(tmp_path, *lines, name="all_reduce_perf.txt"):
    """The XE9680 sweep (NVIDIA/nccl-tests issue 309) with launch or INFO lines put before its table."""
    text = XE9680.read_text().splitlines(True)
    at = next(i for i, t in enumerate(text) if t.startswith("#  Rank  0"))
    path = tmp_path / name
    path.write_text("".join(text[:at] + [ln + "\n" for ln in lines] + text[at:]))
    return path


def _rows(res):
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_a_launch_line_restricts_what_nccl_chooses(tmp_path):
    """NCCL_ALGO=Ring on the launch line: every size is a Ring row, as NCCL restricted to Ring runs it;
    without it NCCL's own choice has Tree and NVLS Tree rows on this 2-node H100 machine."""
    free = _rows(run_check(XE9680, "--format", "json"))
    assert {r["algorithm"] for r in free["rows"]} >= {"Tree", "NVLSTree"}
    ring = _rows(run_check(_with_lines(tmp_path, "mpirun -np 16 -x NCCL_ALGO=Ring ./all_reduce_perf_mpi"),
                           "--format", "json"))
    assert {r["algorithm"] for r in ring["rows"]} == {"Ring"}
    assert any("NCCL_ALGO=Ring (line" in n for n in ring["notes"])
    simple = _rows(run_check(_with_lines(tmp_path, "NCCL INFO NCCL_PROTO set by environment to Simple"),
                             "--format", "json"))
    assert {r["protocol"] for r in simple["rows"]} == {"Simple"}
    # the EFA plugin's own line where the endpoint lacks ordered 128-byte delivery: Simple alone, likewise
    forced = _rows(run_check(_with_lines(tmp_path, 'NCCL INFO NET/OFI Setting NCCL_PROTO to "simple"'),
                             "--format", "json"))
    assert {r["protocol"] for r in forced["rows"]} == {"Simple"}
    assert any("NCCL_PROTO=simple (line" in n for n in forced["notes"])
    # the user's option wins over the file, and says so
    given = _rows(run_check(_with_lines(tmp_path, "-x NCCL_ALGO=Ring"), "--format", "json",
                            "--nccl-algo", "Tree"))
    assert {r["algorithm"] for r in given["rows"]} == {"Tree"}
    assert any("NCCL_ALGO=Ring replaced by --nccl-algo" in n for n in given["notes"])


def test_a_channel_bound_on_the_launch_line_prices_that_many_channels(tmp_path):
    """Ring/Simple under NCCL_MAX_NCHANNELS=c runs on c channels (connect.cc caps collChannels):
    time = latency + bytes / (c × per-channel bandwidth) in NCCL's form, so at one size
    T(1) - T(2) = 2 (T(2) - T(4)) whatever the latency and bandwidth."""
    t = {}
    for c in (1, 2, 4):
        launch = f"mpirun -x NCCL_ALGO=Ring -x NCCL_PROTO=Simple -x NCCL_MAX_NCHANNELS={c}"
        path = _with_lines(tmp_path, launch)
        rows = _rows(run_check(path, "--format", "json"))["rows"]
        t[c] = next(r["predicted_s"] for r in rows if r["bytes"] == 1 << 30)
    assert t[1] > t[2] > t[4]
    assert t[1] - t[2] == pytest.approx(2 * (t[2] - t[4]), rel=1e-9)


@pytest.mark.parametrize("line,words", [
    ("mpirun -x NCCL_ALGO=Rung ./all_reduce_perf", ["NCCL_ALGO=Rung", "unknown name 'rung'"]),
    ("mpirun -x NCCL_MAX_NCHANNELS=many ./all_reduce_perf", ["NCCL_MAX_NCHANNELS=many", "whole number"]),
])
def test_a_value_nccl_would_not_take_is_one_line_naming_the_file_and_line(tmp_path, line, words):
    path = _with_lines(tmp_path, line)
    res = run_check(path, "--format", "json")
    assert res.exit_code == 2, res.output
    (msg,) = res.stderr.strip().splitlines()
    lineno = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t == line)
    assert f"{path}:{lineno}" in msg
    for w in words:
        assert w in msg, msg


def test_a_table_of_several_dtypes_is_one_sweep_per_series(tmp_path):
    """nccl-tests -d all prints every type's rows in one table, one series after another: each series is
    a sweep of its own (JSON ``series``), so one type's sizes do not shift another's median; a table of
    one series keeps no ``series`` field."""
    text = XE9680.read_text().splitlines()
    rows = [ln for ln in text if ln.strip()[:1].isdigit() and " float " in ln]
    half = [ln.replace(" float ", "  half ") for ln in rows[:6]]
    at = text.index(rows[-1]) + 1
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("\n".join(text[:at] + half + text[at:]) + "\n")
    res = run_check(path, "--format", "json")
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    assert [(s["series"], len(s["rows"])) for s in sweeps] == [("fp32 sum", len(rows)), ("fp16 sum", 6)]
    assert "all_reduce (fp16 sum) on 16 ranks" in run_check(path).stdout
    (one,) = json.loads(run_check(XE9680, "--format", "json").stdout)["sweeps"]
    assert "series" not in one and len(one["rows"]) == len(rows)
